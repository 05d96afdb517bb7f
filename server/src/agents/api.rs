//! Agent registration.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::agents::RegisterAgentRequest;
use domain::ApiErrorBody;

use super::service::{self, RegistrationView};
use crate::http::{ApiError, ApiJson};
use crate::identity::User;
use crate::AppState;

#[utoipa::path(post, path = "/api/agents", tag = "identity", request_body = RegisterAgentRequest,
    responses((status = 201, body = RegistrationView), (status = 200, description = "the same registration again", body = RegistrationView),
        (status = 409, description = "AGENT_REGISTERED_BY_ANOTHER, AGENT_IMMUTABLE, or ACCOUNT_LIMIT_REACHED (20 agents per account)", body = ApiErrorBody),
        (status = 422, description = "INVALID_AGENT_ID or INVALID_REGISTRATION", body = ApiErrorBody)))]
pub async fn register_agent(
    State(s): State<AppState>,
    User(me): User,
    ApiJson(req): ApiJson<RegisterAgentRequest>,
) -> Result<(StatusCode, Json<RegistrationView>), ApiError> {
    let view = service::register(&s, &me, req).await?;
    Ok((if view.existing { StatusCode::OK } else { StatusCode::CREATED }, Json(view)))
}
