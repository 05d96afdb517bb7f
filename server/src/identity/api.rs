//! `GET /api/whoami`: who the caller is, and their agents.

use axum::extract::State;
use axum::Json;
use domain::agents::AgentRecord;
use domain::ApiErrorBody;
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::ApiError;
use crate::identity::caller::Via;
use crate::identity::User;
use crate::AppState;

/// `GET /api/whoami`, registered here so that the identity module itself names no handler.
pub const FEATURE: crate::features::Feature = crate::features::Feature {
    router,
    passes: &[
        // Hourly at the default 5 s tick: both only delete what expired.
        Pass::new("expired sessions", 720, |s| logged(expired_sessions(s))),
        Pass::new("sign-in hand-offs", 720, |s| logged(crate::identity::oauth::purge_handoffs(s))),
    ],
};

async fn expired_sessions(s: &AppState) -> anyhow::Result<()> {
    match &s.sessions {
        Some(store) => store.delete_expired_now().await.map_err(|e| anyhow::anyhow!("{e}")),
        None => Ok(()),
    }
}

use crate::features::{logged, Pass};

fn router() -> utoipa_axum::router::OpenApiRouter<AppState> {
    utoipa_axum::router::OpenApiRouter::new().routes(utoipa_axum::routes!(whoami))
}

#[derive(Serialize, ToSchema)]
pub struct WhoamiView {
    /// The HF user name.
    pub name: String,
    pub fullname: String,
    /// A BenchFlow editor: the editor organization with the write or admin role.
    pub editor: bool,
    /// `token` (Authorization header) or `session` (signed in in a browser).
    #[schema(value_type = String)]
    pub via: Via,
    pub agents: Vec<AgentRecord>,
}

#[utoipa::path(get, path = "/api/whoami", tag = "identity",
    responses((status = 200, body = WhoamiView), (status = 401, description = "AUTH_REQUIRED or INVALID_TOKEN", body = ApiErrorBody),
        (status = 503, description = "HUB_UNAVAILABLE", body = ApiErrorBody)))]
pub async fn whoami(State(s): State<AppState>, User(me): User) -> Result<Json<WhoamiView>, ApiError> {
    let agents = crate::agents::service::owned_by(&s, Some(&me.id)).await?;
    Ok(Json(WhoamiView { name: me.name, fullname: me.fullname, editor: me.editor, via: me.via, agents }))
}
