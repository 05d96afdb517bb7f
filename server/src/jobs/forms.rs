//! The jobs page's controls as plain forms, which need no script: OpenEnv intake, releasing a
//! stalled cleanup and hiding a board message. Each is the API's change for the signed-in editor
//! whose form carries the session's CSRF token; then back to the page, which says what happened
//! (`?KEY=done`, or `?KEY_error=CODE&why=…`, at the control's anchor).

use axum::extract::{Request, State};
use axum::response::Redirect;
use domain::openenv::controls::IntakeChange;
use domain::ErrorCode;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::http::ids::id as parse_id;
use crate::http::ApiError;
use crate::identity::Identity;
use crate::AppState;

/// The largest form body read.
const MAX_FORM_BYTES: usize = 4096;

/// Every control's form carries the session's CSRF token.
trait Form: DeserializeOwned {
    fn csrf(&self) -> &str;
}

/// The form, and the editor who sent it (the API checks the role).
async fn read<F: Form>(s: &AppState, request: Request) -> Result<(Identity, F), ApiError> {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
        .await
        .map_err(|_| ApiError::new(ErrorCode::PayloadTooLarge, "the form is over 4 KB"))?;
    let form: F = serde_urlencoded::from_bytes(&bytes)
        .map_err(|e| ApiError::new(ErrorCode::InvalidJson, format!("not the page's form: {e}")))?;
    let me = crate::identity::session_caller(&parts, s, Some(form.csrf()))
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::AuthRequired, "sign in as a BenchFlow editor"))?;
    Ok((me, form))
}

/// Back to the page with the outcome in the query, at the control.
fn back(key: &str, anchor: &str, outcome: Result<(), ApiError>) -> Redirect {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    match outcome {
        Ok(()) => query.append_pair(key, "done"),
        Err(e) => {
            let body = e.into_body();
            let why: String = body.message.chars().take(300).collect();
            query.append_pair(&format!("{key}_error"), body.code.as_str()).append_pair("why", &why)
        }
    };
    Redirect::to(&format!("/arena/jobs?{}#{anchor}", query.finish()))
}

fn reason(text: String) -> Option<String> {
    Some(text).filter(|r| !r.trim().is_empty())
}

#[derive(Deserialize)]
pub struct IntakeForm {
    open: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    csrf: String,
}

impl Form for IntakeForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// `POST /arena/jobs/intake`: `open`, `reason`.
pub async fn intake(State(s): State<AppState>, request: Request) -> Redirect {
    let outcome = async {
        let (me, form) = read::<IntakeForm>(&s, request).await?;
        let change = IntakeChange { open: form.open == "true", reason: reason(form.reason) };
        crate::openenv::intake::change(&s, &me, &change).await.map(|_| ())
    };
    back("intake", "intake", outcome.await)
}

/// A run and the reason the editor gives.
#[derive(Deserialize)]
pub struct ReasonForm {
    id: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    csrf: String,
}

impl Form for ReasonForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// `POST /arena/jobs/release`: `id` (an OpenEnv run in cleanup), `reason`.
pub async fn release(State(s): State<AppState>, request: Request) -> Redirect {
    let outcome = async {
        let (me, form) = read::<ReasonForm>(&s, request).await?;
        let id = parse_id(&form.id)?;
        crate::openenv::runs::cleanup::release(&s, &me, &id, &form.reason).await.map(|_| ())
    };
    back("release", "openenv-runs", outcome.await)
}

/// `POST /arena/jobs/hide`: `id` (a board message), `reason`.
pub async fn hide(State(s): State<AppState>, request: Request) -> Redirect {
    let outcome = async {
        let (me, form) = read::<ReasonForm>(&s, request).await?;
        let id = crate::http::ids::id(&form.id)?;
        crate::board::service::hide(&s, &me, &id, &form.reason).await.map(|_| ())
    };
    back("hide", "board-messages", outcome.await)
}
