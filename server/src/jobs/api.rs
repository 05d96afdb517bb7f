//! Jobs and spend: the reservation ledger and the HF jobs view (`jobs`, `budget` in the CLI).

use axum::extract::State;
use axum::Json;
use domain::views::{BudgetView, Reservation};
use domain::{ApiErrorBody, ErrorCode};
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::ApiError;
use crate::identity::User;
use crate::AppState;

#[derive(Serialize, ToSchema)]
pub struct Ledger {
    /// What the launch guard enforces.
    pub budget: BudgetView,
    pub note: String,
    pub reservations: Vec<Reservation>,
}

#[utoipa::path(get, path = "/api/arena/jobs", tag = "arena",
    responses((status = 200, description = "the reservation ledger: a reservation per launched run", body = Ledger)))]
pub async fn ledger(State(s): State<AppState>) -> Result<Json<Ledger>, ApiError> {
    let budget = crate::catalog::service::budget(&s).await?.value.as_ref().clone();
    Ok(Json(Ledger {
        budget,
        note: "Committed spend is the ledger until HF's recorded job spend is read back; the larger of the two, \
               plus live reservations, is what the launch guard enforces."
            .into(),
        reservations: crate::jobs::service::reservations(&s).await?,
    }))
}

#[utoipa::path(get, path = "/api/jobs", tag = "arena",
    responses((status = 200, description = "every pipeline job in the arena's HF namespace, priced; the budget the launch guard enforces; the relays a deploy would cut", body = domain::views::JobsView),
        (status = 401, body = ApiErrorBody), (status = 403, description = "FORBIDDEN: BenchFlow editors only", body = ApiErrorBody),
        (status = 503, description = "HUB_UNAVAILABLE", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn hf_jobs(
    State(s): State<AppState>,
    User(me): User,
) -> Result<Json<domain::views::JobsView>, ApiError> {
    if !me.editor {
        return Err(ApiError::new(ErrorCode::Forbidden, "the jobs view is for BenchFlow editors"));
    }
    Ok(Json(crate::jobs::service::list(&s).await?))
}
