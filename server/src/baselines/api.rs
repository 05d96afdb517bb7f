//! The base model's baseline: an editor's measurement run, its collect, and the public read.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::results::{BaselineAnswer, BaselineMeasurement};
use domain::runs::BaselineRequest;
use domain::ApiErrorBody;

use crate::http::ids::{IdPath, IdPaths};
use crate::http::{ApiError, ApiJson};
use crate::identity::User;
use crate::runs::service::Launched;
use crate::AppState;

#[utoipa::path(post, path = "/api/challenges/{id}/baseline", tag = "results", params(("id" = String, Path)), request_body = BaselineRequest,
    responses((status = 201, description = "launched: a run of purpose `baseline` (the base model alone on the held-out suite), charged to the cap", body = Launched),
        (status = 200, description = "the same request again: the stored run (`existing: true`)", body = Launched),
        (status = 401, description = "AUTH_REQUIRED or INVALID_TOKEN", body = ApiErrorBody),
        (status = 403, description = "FORBIDDEN: BenchFlow editors only", body = ApiErrorBody),
        (status = 404, description = "CHALLENGE_NOT_FOUND", body = ApiErrorBody),
        (status = 409, description = "CHALLENGE_NOT_OPEN, ANOTHER_RUN_ACTIVE, CAP_EXCEEDED or REQUEST_ID_REUSED: nothing was stored", body = ApiErrorBody),
        (status = 422, description = "INVALID_RUN_REQUEST", body = ApiErrorBody),
        (status = 502, description = "LAUNCH_FAILED", body = ApiErrorBody),
        (status = 503, description = "LAUNCH_UNKNOWN: send the same request again", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn launch(
    State(s): State<AppState>,
    User(me): User,
    IdPath(id): IdPath<domain::ids::ChallengeId>,
    ApiJson(req): ApiJson<BaselineRequest>,
) -> Result<(StatusCode, Json<Launched>), ApiError> {
    let launched = crate::runs::service::launch_baseline(&s, &id, &me, req).await?;
    Ok((if launched.existing { StatusCode::OK } else { StatusCode::CREATED }, Json(launched)))
}

#[utoipa::path(get, path = "/api/challenges/{id}/baseline", tag = "results", params(("id" = String, Path)),
    responses((status = 200, description = "the challenge's baseline (the latest measurement, else the configured one) and every measurement collected", body = BaselineAnswer),
        (status = 404, description = "CHALLENGE_NOT_FOUND", body = ApiErrorBody)))]
pub async fn get(
    State(s): State<AppState>,
    IdPath(id): IdPath<domain::ids::ChallengeId>,
) -> Result<Json<BaselineAnswer>, ApiError> {
    Ok(Json(crate::baselines::service::get(&s, &id).await?))
}

#[utoipa::path(post, path = "/api/challenges/{id}/baseline/{run_id}/collect", tag = "results",
    params(("id" = String, Path), ("run_id" = String, Path)),
    responses((status = 201, description = "collected: the challenge's baseline is now this measurement", body = BaselineMeasurement),
        (status = 200, description = "collected before: the stored measurement (`existing: true`)", body = BaselineMeasurement),
        (status = 401, body = ApiErrorBody), (status = 403, description = "FORBIDDEN: editors only", body = ApiErrorBody),
        (status = 404, description = "RUN_NOT_FOUND", body = ApiErrorBody),
        (status = 409, description = "RUN_NOT_SCORED, WRONG_RUN_PURPOSE or HELDOUT_UNKNOWN", body = ApiErrorBody),
        (status = 422, description = "RESULT_FILES_MISSING, RESULT_UNREADABLE, RESULT_INCOMPLETE or RESULT_MISMATCH (naming the first difference)", body = ApiErrorBody),
        (status = 503, description = "HUB_UNAVAILABLE", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn collect(
    State(s): State<AppState>,
    User(me): User,
    IdPaths(id, run_id): IdPaths<domain::ids::ChallengeId, domain::ids::RunId>,
) -> Result<(StatusCode, Json<BaselineMeasurement>), ApiError> {
    let m = crate::baselines::service::collect(&s, &id, &run_id, &me).await?;
    Ok((if m.existing { StatusCode::OK } else { StatusCode::CREATED }, Json(m)))
}
