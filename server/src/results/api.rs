//! Results' routes: collect a scored run, read and review its result, and the leaderboard.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::ApiErrorBody;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::http::ids::{IdPath, IdPaths};
use crate::http::{ApiError, ApiJson, ApiQuery};
use crate::identity::User;
use crate::AppState;

#[utoipa::path(post, path = "/api/challenges/{id}/runs/{run_id}/result", tag = "results",
    params(("id" = String, Path), ("run_id" = String, Path)),
    responses((status = 201, description = "collected: a pending result", body = domain::results::ResultView),
        (status = 200, description = "collected before: the stored result (`existing: true`)", body = domain::results::ResultView),
        (status = 401, body = ApiErrorBody), (status = 403, description = "NOT_AUTHOR_OR_EDITOR", body = ApiErrorBody),
        (status = 404, description = "RUN_NOT_FOUND", body = ApiErrorBody),
        (status = 409, description = "RUN_NOT_SCORED or HELDOUT_UNKNOWN", body = ApiErrorBody),
        (status = 422, description = "RESULT_FILES_MISSING, RESULT_UNREADABLE, RESULT_INCOMPLETE or RESULT_MISMATCH (naming the first difference), or TRAINING_RECORDS_INVALID (GRPO ran but its jobs/grpo-train/ records do not account for the run's train tasks exactly)", body = ApiErrorBody),
        (status = 503, description = "HUB_UNAVAILABLE", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn collect(
    State(s): State<AppState>,
    User(me): User,
    IdPaths(id, run_id): IdPaths<domain::ids::ChallengeId, domain::ids::RunId>,
) -> Result<(StatusCode, Json<domain::results::ResultView>), ApiError> {
    let r = crate::results::service::collect(&s, &id, &run_id, &me).await?;
    Ok((if r.existing { StatusCode::OK } else { StatusCode::CREATED }, Json(r)))
}

#[utoipa::path(get, path = "/api/challenges/{id}/runs/{run_id}/result", tag = "results",
    params(("id" = String, Path), ("run_id" = String, Path)),
    responses((status = 200, body = domain::results::ResultView), (status = 404, description = "RESULT_NOT_FOUND", body = ApiErrorBody)))]
pub async fn result(
    State(s): State<AppState>,
    IdPaths(id, run_id): IdPaths<domain::ids::ChallengeId, domain::ids::RunId>,
) -> Result<Json<domain::results::ResultView>, ApiError> {
    Ok(Json(crate::results::service::get(&s, &id, &run_id).await?))
}

#[utoipa::path(post, path = "/api/challenges/{id}/runs/{run_id}/result/review", tag = "results",
    params(("id" = String, Path), ("run_id" = String, Path)), request_body = domain::results::Review,
    responses((status = 200, description = "reviewed: final", body = domain::results::ResultView),
        (status = 401, body = ApiErrorBody), (status = 403, description = "FORBIDDEN: editors only", body = ApiErrorBody),
        (status = 404, description = "RESULT_NOT_FOUND", body = ApiErrorBody),
        (status = 409, description = "REVIEW_EXISTS: reviews are final, whatever the second says", body = ApiErrorBody),
        (status = 422, description = "INVALID_REVIEW: a note of at least 20 characters", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn review(
    State(s): State<AppState>,
    User(me): User,
    IdPaths(id, run_id): IdPaths<domain::ids::ChallengeId, domain::ids::RunId>,
    ApiJson(r): ApiJson<domain::results::Review>,
) -> Result<Json<domain::results::ResultView>, ApiError> {
    Ok(Json(crate::results::service::review(&s, &id, &run_id, &me, r).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BoardParams {
    /// Rank by the change on this benchmark alone.
    benchmark: Option<String>,
}

#[utoipa::path(get, path = "/api/challenges/{id}/leaderboard", tag = "results", params(("id" = String, Path), BoardParams),
    responses((status = 200, description = "collections ranked on the mean Δ of their accepted runs", body = domain::views::Leaderboard),
        (status = 404, description = "CHALLENGE_NOT_FOUND, or BENCHMARK_NOT_SCORED naming the benchmarks it scores", body = ApiErrorBody)))]
pub async fn leaderboard(
    State(s): State<AppState>,
    IdPath(id): IdPath<domain::ids::ChallengeId>,
    ApiQuery(p): ApiQuery<BoardParams>,
) -> Result<axum::response::Response, ApiError> {
    let board =
        crate::results::service::leaderboard(&s, &id, p.benchmark.as_deref().filter(|b| !b.is_empty()))
            .await?;
    Ok(axum::response::IntoResponse::into_response(board))
}
