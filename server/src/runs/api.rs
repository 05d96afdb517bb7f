//! Runs' routes: the preflight, the launch, the run lists and cancel (`run`, `runs` in the CLI).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::runs::{Preflight, RunDetail, RunRequest};
use domain::{ApiErrorBody, ErrorCode};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::http::ids::{id as parse_id, optional, IdPath, IdPaths};
use crate::http::{ApiError, ApiJson, ApiQuery};
use crate::identity::{Caller, User};
use crate::runs::service::{Launched, RunList};
use crate::AppState;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PreflightParams {
    /// The collection (`env-…`).
    #[param(required = true, pattern = r"^env-[0-9a-f]+$")]
    environment_id: Option<String>,
}

#[utoipa::path(get, path = "/api/challenges/{id}/runs/preflight", tag = "runs", params(("id" = String, Path), PreflightParams),
    responses((status = 200, description = "every check, in order; nothing is reserved", body = Preflight),
        (status = 400, description = "INVALID_QUERY", body = ApiErrorBody),
        (status = 404, description = "CHALLENGE_NOT_FOUND or ENVIRONMENT_NOT_FOUND", body = ApiErrorBody)),
    security((), ("hf_token" = [])))]
pub async fn preflight(
    State(s): State<AppState>,
    Caller(me): Caller,
    IdPath(id): IdPath<domain::ids::ChallengeId>,
    ApiQuery(p): ApiQuery<PreflightParams>,
) -> Result<Json<Preflight>, ApiError> {
    let env = p
        .environment_id
        .filter(|e| !e.is_empty())
        .ok_or_else(|| ApiError::new(ErrorCode::InvalidQuery, "`environment_id` is required (env-…)"))?;
    Ok(Json(crate::runs::service::preflight(&s, &id, &parse_id(&env)?, me.as_ref()).await?))
}

#[utoipa::path(post, path = "/api/challenges/{id}/runs", tag = "runs", params(("id" = String, Path)), request_body = RunRequest,
    responses((status = 201, description = "launched: the HF job exists", body = Launched),
        (status = 200, description = "the same request again: the stored run (`existing: true`)", body = Launched),
        (status = 401, description = "AUTH_REQUIRED or INVALID_TOKEN", body = ApiErrorBody),
        (status = 403, description = "NOT_AUTHOR_OR_EDITOR or AGENT_NOT_OWNED", body = ApiErrorBody),
        (status = 404, description = "CHALLENGE_NOT_FOUND, ENVIRONMENT_NOT_FOUND or AGENT_NOT_FOUND", body = ApiErrorBody),
        (status = 409, description = "CHALLENGE_NOT_OPEN, ANOTHER_RUN_ACTIVE, CAP_EXCEEDED or REQUEST_ID_REUSED: nothing was stored", body = ApiErrorBody),
        (status = 422, description = "NO_ELIGIBLE_TASKS, HELDOUT_NAME_COLLISION or INVALID_RUN_REQUEST", body = ApiErrorBody),
        (status = 429, description = "DAILY_RUN_LIMIT, with retry_after_s", body = ApiErrorBody),
        (status = 502, description = "LAUNCH_FAILED: `launched: false`, the run failed and its reservation is released", body = ApiErrorBody),
        (status = 503, description = "LAUNCH_UNKNOWN: `launched: \"unknown\"`, `retry_with_same_request_id: true`", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn launch(
    State(s): State<AppState>,
    User(me): User,
    IdPath(id): IdPath<domain::ids::ChallengeId>,
    ApiJson(req): ApiJson<RunRequest>,
) -> Result<(StatusCode, Json<Launched>), ApiError> {
    let launched = crate::runs::service::launch(&s, &id, &me, req).await?;
    let status = if launched.existing { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, Json(launched)))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only this collection's runs.
    environment_id: Option<String>,
}

#[utoipa::path(get, path = "/api/challenges/{id}/runs", tag = "runs", params(("id" = String, Path), ListParams),
    responses((status = 200, description = "every run request, newest first", body = RunList),
        (status = 404, description = "CHALLENGE_NOT_FOUND", body = ApiErrorBody)))]
pub async fn list(
    State(s): State<AppState>,
    IdPath(id): IdPath<domain::ids::ChallengeId>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<RunList>, ApiError> {
    Ok(Json(crate::runs::service::list(&s, &id, optional(p.environment_id.as_deref())?.as_ref()).await?))
}

#[utoipa::path(get, path = "/api/challenges/{id}/runs/{run_id}", tag = "runs",
    params(("id" = String, Path), ("run_id" = String, Path)),
    responses((status = 200, body = RunDetail), (status = 404, description = "RUN_NOT_FOUND", body = ApiErrorBody)))]
pub async fn get(
    State(s): State<AppState>,
    IdPaths(id, run_id): IdPaths<domain::ids::ChallengeId, domain::ids::RunId>,
) -> Result<Json<RunDetail>, ApiError> {
    Ok(Json(crate::runs::service::detail(&s, Some(&id), &run_id).await?))
}

#[utoipa::path(post, path = "/api/challenges/{id}/runs/{run_id}/cancel", tag = "runs",
    params(("id" = String, Path), ("run_id" = String, Path)),
    responses((status = 200, description = "canceled: the HF job too, the reservation settled up to its last log line or released", body = RunDetail),
        (status = 401, body = ApiErrorBody), (status = 403, description = "FORBIDDEN: an editor, or the author while queued", body = ApiErrorBody),
        (status = 404, description = "RUN_NOT_FOUND", body = ApiErrorBody), (status = 409, description = "RUN_NOT_CANCELABLE: it has ended", body = ApiErrorBody),
        (status = 503, description = "HUB_UNAVAILABLE: HF did not answer the cancel; nothing changed", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn cancel(
    State(s): State<AppState>,
    User(me): User,
    IdPaths(id, run_id): IdPaths<domain::ids::ChallengeId, domain::ids::RunId>,
) -> Result<Json<RunDetail>, ApiError> {
    Ok(Json(crate::runs::service::cancel(&s, &id, &run_id, &me).await?))
}
