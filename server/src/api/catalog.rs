//! Public reads: challenges, benchmarks, the formula, tracks, the budget and the version.

use axum::extract::{Path, State};
use axum::Json;
use domain::views::*;
use domain::{catalog, ApiErrorBody, ErrorCode};

use super::ApiError;
use crate::{repo, AppState};

#[utoipa::path(get, path = "/api/challenges", tag = "challenges",
    responses((status = 200, description = "Open challenges first, then planned", body = ChallengeList)))]
pub async fn list_challenges(State(s): State<AppState>) -> Result<Json<ChallengeList>, ApiError> {
    let live = repo::budget::live_state(&s.db, &s.registry).await?;
    Ok(Json(catalog::challenge_list(&s.registry, &live)))
}

#[utoipa::path(get, path = "/api/challenges/{id}", tag = "challenges",
    params(("id" = String, Path, description = "Challenge id, e.g. openenv-9b")),
    responses((status = 200, body = ChallengeView), (status = 404, description = "CHALLENGE_NOT_FOUND", body = ApiErrorBody)))]
pub async fn get_challenge(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ChallengeView>, ApiError> {
    let challenge = s.registry.challenge(&id).ok_or_else(|| {
        ApiError::new(
            ErrorCode::ChallengeNotFound,
            format!("no challenge `{id}`; GET /api/challenges lists them"),
        )
    })?;
    let live = repo::budget::live_state(&s.db, &s.registry).await?;
    Ok(Json(catalog::challenge_view(&s.registry, challenge, &live)))
}

#[utoipa::path(get, path = "/api/benchmarks", tag = "benchmarks", responses((status = 200, body = BenchmarkList)))]
pub async fn list_benchmarks(State(s): State<AppState>) -> Json<BenchmarkList> {
    Json(catalog::benchmark_list(&s.registry))
}

#[utoipa::path(get, path = "/api/benchmarks/{id}", tag = "benchmarks",
    params(("id" = String, Path, description = "Benchmark (suite) id")),
    responses((status = 200, body = BenchmarkDetail), (status = 404, description = "BENCHMARK_NOT_FOUND", body = ApiErrorBody)))]
pub async fn get_benchmark(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<BenchmarkDetail>, ApiError> {
    catalog::benchmark_detail(&s.registry, &id).map(Json).ok_or_else(|| {
        ApiError::new(
            ErrorCode::BenchmarkNotFound,
            format!("no benchmark `{id}`; GET /api/benchmarks lists them"),
        )
    })
}

#[utoipa::path(get, path = "/api/formula", tag = "challenges",
    responses((status = 200, description = "The registries behind the challenges, every challenge, and the submitted collections", body = Formula)))]
pub async fn formula(State(s): State<AppState>) -> Result<Json<Formula>, ApiError> {
    let live = repo::budget::live_state(&s.db, &s.registry).await?;
    let collections = repo::environments::list(&s.db, None, false, 500)
        .await?
        .into_iter()
        .map(|e| domain::views::CollectionRef { id: e.environment_id, title: e.title })
        .collect();
    Ok(Json(catalog::formula(&s.registry, &live, collections)))
}

#[utoipa::path(get, path = "/api/v2/challenges", tag = "challenges",
    responses((status = 200, description = "Submission tracks, under their older name", body = TrackList)))]
pub async fn tracks() -> Json<TrackList> {
    Json(catalog::tracks())
}

#[utoipa::path(get, path = "/api/arena/budget", tag = "arena", responses((status = 200, body = BudgetView)))]
pub async fn budget(State(s): State<AppState>) -> Result<Json<BudgetView>, ApiError> {
    Ok(Json(repo::budget::live_state(&s.db, &s.registry).await?.budget))
}

#[utoipa::path(get, path = "/api/version", tag = "arena", responses((status = 200, body = VersionView)))]
pub async fn version(State(s): State<AppState>) -> Json<VersionView> {
    Json(s.build.view())
}
