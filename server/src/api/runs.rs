//! Runs: the preflight, the launch, and the run lists (`run`, `runs`, `jobs` in the CLI).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use domain::runs::{Preflight, RunDetail, RunRequest};
use domain::views::BudgetView;
use domain::{ApiErrorBody, ErrorCode};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::http::{ApiError, ApiJson, ApiQuery};
use crate::identity::{Caller, User};
use crate::repo::budget::Reservation;
use crate::service::runs::{Launched, RunList};
use crate::{repo, service, AppState};

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
    Path(id): Path<String>,
    Caller(me): Caller,
    ApiQuery(p): ApiQuery<PreflightParams>,
) -> Result<Json<Preflight>, ApiError> {
    let env = p
        .environment_id
        .filter(|e| !e.is_empty())
        .ok_or_else(|| ApiError::new(ErrorCode::InvalidQuery, "`environment_id` is required (env-…)"))?;
    Ok(Json(service::runs::preflight(&s, &id, &env, me.as_ref()).await?))
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
    Path(id): Path<String>,
    User(me): User,
    ApiJson(req): ApiJson<RunRequest>,
) -> Result<(StatusCode, Json<Launched>), ApiError> {
    let launched = service::runs::launch(&s, &id, &me, req).await?;
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
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<RunList>, ApiError> {
    Ok(Json(service::runs::list(&s, &id, p.environment_id.as_deref().filter(|e| !e.is_empty())).await?))
}

#[utoipa::path(get, path = "/api/challenges/{id}/runs/{run_id}", tag = "runs",
    params(("id" = String, Path), ("run_id" = String, Path)),
    responses((status = 200, body = RunDetail), (status = 404, description = "RUN_NOT_FOUND", body = ApiErrorBody)))]
pub async fn get(
    State(s): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
) -> Result<Json<RunDetail>, ApiError> {
    Ok(Json(service::runs::detail(&s, Some(&id), &run_id).await?))
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
    Path((id, run_id)): Path<(String, String)>,
    User(me): User,
) -> Result<Json<RunDetail>, ApiError> {
    Ok(Json(service::runs::cancel(&s, &id, &run_id, &me).await?))
}

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
    let budget = service::catalog::budget(&s).await?.value.as_ref().clone();
    Ok(Json(Ledger {
        budget,
        note: "Committed spend is the ledger until HF's recorded job spend is read back; the larger of the two, \
               plus live reservations, is what the launch guard enforces."
            .into(),
        reservations: repo::budget::reservations(&s.db).await?,
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
    Ok(Json(service::jobs::list(&s).await?))
}

#[utoipa::path(post, path = "/api/challenges/{id}/runs/{run_id}/result", tag = "results",
    params(("id" = String, Path), ("run_id" = String, Path)),
    responses((status = 201, description = "collected: a pending result", body = domain::results::ResultView),
        (status = 200, description = "collected before: the stored result (`existing: true`)", body = domain::results::ResultView),
        (status = 401, body = ApiErrorBody), (status = 403, description = "NOT_AUTHOR_OR_EDITOR", body = ApiErrorBody),
        (status = 404, description = "RUN_NOT_FOUND", body = ApiErrorBody),
        (status = 409, description = "RUN_NOT_SCORED or HELDOUT_UNKNOWN", body = ApiErrorBody),
        (status = 422, description = "RESULT_FILES_MISSING, RESULT_UNREADABLE, RESULT_INCOMPLETE or RESULT_MISMATCH (naming the first difference)", body = ApiErrorBody),
        (status = 503, description = "HUB_UNAVAILABLE", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn collect(
    State(s): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
    User(me): User,
) -> Result<(StatusCode, Json<domain::results::ResultView>), ApiError> {
    let r = service::results::collect(&s, &id, &run_id, &me).await?;
    Ok((if r.existing { StatusCode::OK } else { StatusCode::CREATED }, Json(r)))
}

#[utoipa::path(get, path = "/api/challenges/{id}/runs/{run_id}/result", tag = "results",
    params(("id" = String, Path), ("run_id" = String, Path)),
    responses((status = 200, body = domain::results::ResultView), (status = 404, description = "RESULT_NOT_FOUND", body = ApiErrorBody)))]
pub async fn result(
    State(s): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
) -> Result<Json<domain::results::ResultView>, ApiError> {
    Ok(Json(service::results::get(&s, &id, &run_id).await?))
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
    Path((id, run_id)): Path<(String, String)>,
    User(me): User,
    ApiJson(r): ApiJson<domain::results::Review>,
) -> Result<Json<domain::results::ResultView>, ApiError> {
    Ok(Json(service::results::review(&s, &id, &run_id, &me, r).await?))
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
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<BoardParams>,
) -> Result<axum::response::Response, ApiError> {
    let board =
        service::results::leaderboard(&s, &id, p.benchmark.as_deref().filter(|b| !b.is_empty())).await?;
    Ok(axum::response::IntoResponse::into_response(board))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PlanParams {
    /// Reruns of the oracle and no-op controls (default 8).
    controls_reruns: Option<u32>,
    /// Attempts of the difficulty band (default 4).
    band_attempts: Option<u32>,
    /// `require` or `allow` for tasks without a reference solution (default: the Space's policy, allow).
    no_oracle: Option<domain::gates::dynamic::NoOracle>,
}

#[utoipa::path(get, path = "/api/challenges/{id}/environments/{env_id}/gates/plan", tag = "gates",
    params(("id" = String, Path), ("env_id" = String, Path), PlanParams),
    responses((status = 200, description = "the plan: derived from the pinned commit and the challenge, the same bytes every time", body = domain::gates::dynamic::Plan),
        (status = 401, body = ApiErrorBody), (status = 403, description = "NOT_AUTHOR_OR_EDITOR", body = ApiErrorBody),
        (status = 404, description = "CHALLENGE_NOT_FOUND or ENVIRONMENT_NOT_FOUND", body = ApiErrorBody),
        (status = 422, description = "INVALID_POLICY", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn gate_plan(
    State(s): State<AppState>,
    Path((id, env)): Path<(String, String)>,
    User(me): User,
    ApiQuery(p): ApiQuery<PlanParams>,
) -> Result<Json<domain::gates::dynamic::Plan>, ApiError> {
    let d = domain::gates::dynamic::Policy::default();
    let policy = domain::gates::dynamic::Policy {
        controls_reruns: p.controls_reruns.unwrap_or(d.controls_reruns),
        band_attempts: p.band_attempts.unwrap_or(d.band_attempts),
        no_oracle: p.no_oracle.unwrap_or(d.no_oracle),
    };
    Ok(Json(service::gates::plan(&s, &id, &env, &me, policy).await?))
}

#[utoipa::path(get, path = "/api/challenges/{id}/environments/{env_id}/gates", tag = "gates",
    params(("id" = String, Path), ("env_id" = String, Path)),
    responses((status = 200, description = "the static summary stored at submission and the attached verdict (null until attached)", body = crate::service::gates::GatesView),
        (status = 404, body = ApiErrorBody)))]
pub async fn gates_get(
    State(s): State<AppState>,
    Path((id, env)): Path<(String, String)>,
) -> Result<Json<crate::service::gates::GatesView>, ApiError> {
    Ok(Json(service::gates::get(&s, &id, &env).await?))
}

#[utoipa::path(post, path = "/api/challenges/{id}/environments/{env_id}/gates", tag = "gates",
    params(("id" = String, Path), ("env_id" = String, Path)), request_body = domain::gates::dynamic::GateResults,
    responses((status = 200, description = "judged: a verdict per task", body = crate::service::gates::GatesView),
        (status = 401, body = ApiErrorBody), (status = 403, description = "FORBIDDEN: editors only", body = ApiErrorBody),
        (status = 409, description = "PLAN_CHANGED: made from another plan", body = ApiErrorBody),
        (status = 422, description = "INVALID_GATE_RESULTS or INVALID_POLICY", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn gates_attach(
    State(s): State<AppState>,
    Path((id, env)): Path<(String, String)>,
    User(me): User,
    ApiJson(results): ApiJson<domain::gates::dynamic::GateResults>,
) -> Result<Json<crate::service::gates::GatesView>, ApiError> {
    Ok(Json(service::gates::attach(&s, &id, &env, &me, results).await?))
}
