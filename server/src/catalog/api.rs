//! Public reads: challenges, benchmarks, the formula, tracks, the budget and the version.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use domain::views::*;
use domain::{catalog, ApiErrorBody};

use serde::Deserialize;
use utoipa::IntoParams;

use super::service::DiscoverView;
use crate::http::ids::IdPath;
use crate::http::{ApiError, ApiQuery};
use crate::identity::Caller;
use crate::AppState;

#[utoipa::path(get, path = "/api/challenges", tag = "challenges",
    responses((status = 200, description = "Open challenges first, then planned", body = ChallengeList)))]
pub async fn list_challenges(State(s): State<AppState>) -> Result<Response, ApiError> {
    Ok(axum::response::IntoResponse::into_response(crate::catalog::service::challenges(&s).await?))
}

#[utoipa::path(get, path = "/api/challenges/{id}", tag = "challenges",
    params(("id" = String, Path, description = "Challenge id, e.g. openenv-9b")),
    responses((status = 200, body = ChallengeView), (status = 404, description = "CHALLENGE_NOT_FOUND", body = ApiErrorBody)))]
pub async fn get_challenge(
    State(s): State<AppState>,
    IdPath(id): IdPath<domain::ids::ChallengeId>,
) -> Result<Json<ChallengeView>, ApiError> {
    Ok(Json(crate::catalog::service::challenge(&s, &id).await?))
}

#[utoipa::path(get, path = "/api/benchmarks", tag = "benchmarks", responses((status = 200, body = BenchmarkList)))]
pub async fn list_benchmarks(State(s): State<AppState>) -> Response {
    axum::response::IntoResponse::into_response(crate::catalog::service::benchmarks(&s))
}

#[utoipa::path(get, path = "/api/benchmarks/{id}", tag = "benchmarks",
    params(("id" = String, Path, description = "Benchmark (suite) id")),
    responses((status = 200, body = BenchmarkDetail), (status = 404, description = "BENCHMARK_NOT_FOUND", body = ApiErrorBody)))]
pub async fn get_benchmark(
    State(s): State<AppState>,
    IdPath(id): IdPath<domain::ids::SuiteId>,
) -> Result<Json<BenchmarkDetail>, ApiError> {
    Ok(Json(crate::catalog::service::benchmark(&s, &id).await?))
}

#[utoipa::path(get, path = "/api/formula", tag = "challenges",
    responses((status = 200, description = "The registries behind the challenges, every challenge, and the submitted collections", body = Formula)))]
pub async fn formula(State(s): State<AppState>) -> Result<Json<Formula>, ApiError> {
    Ok(Json(crate::catalog::service::formula(&s).await?))
}

#[utoipa::path(get, path = "/api/v2/challenges", tag = "challenges",
    responses((status = 200, description = "Submission tracks, under their older name", body = TrackList)))]
pub async fn tracks() -> Json<TrackList> {
    Json(catalog::tracks())
}

#[utoipa::path(get, path = "/api/arena/budget", tag = "arena", responses((status = 200, body = BudgetView)))]
pub async fn budget(State(s): State<AppState>) -> Result<Response, ApiError> {
    Ok(axum::response::IntoResponse::into_response(crate::catalog::service::budget(&s).await?))
}

/// The build fingerprint. The backups' health is public; their repository, errors and the runs
/// they found again are for editors (`backup_details`).
#[utoipa::path(get, path = "/api/version", tag = "arena", responses((status = 200, body = VersionView)))]
pub async fn version(State(s): State<AppState>, caller: Caller) -> Json<VersionView> {
    let mut view = s.build.view();
    view.heldout_unchecked = crate::jobs::service::heldout_unchecked(&s);
    let backup = s.backups.as_ref().map(|b| b.view());
    view.backup = backup.as_ref().map(BackupView::health);
    if caller.0.is_some_and(|c| c.editor) {
        view.backup_details = backup;
    }
    Json(view)
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DiscoverParams {
    /// Continue after this agent id (`agents_next_after` of the previous page).
    #[param(max_length = 48)]
    after: Option<String>,
}

#[utoipa::path(get, path = "/api/discover", tag = "identity", params(DiscoverParams),
    responses((status = 200, body = DiscoverView), (status = 400, description = "INVALID_QUERY", body = ApiErrorBody)))]
pub async fn discover(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(p): ApiQuery<DiscoverParams>,
) -> Result<Json<DiscoverView>, ApiError> {
    let after = p.after.filter(|a| !a.is_empty());
    Ok(Json(crate::catalog::service::discover(&s, after.as_deref(), caller.0.map(|c| c.name)).await?))
}
