//! The dynamic gates' routes: a collection's plan, its attached results and the verdicts.

use axum::extract::State;
use axum::Json;
use domain::ApiErrorBody;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::http::ids::IdPaths;
use crate::http::{ApiError, ApiJson, ApiQuery};
use crate::identity::User;
use crate::AppState;

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
    User(me): User,
    IdPaths(id, env): IdPaths<domain::ids::ChallengeId, domain::ids::EnvironmentId>,
    ApiQuery(p): ApiQuery<PlanParams>,
) -> Result<Json<domain::gates::dynamic::Plan>, ApiError> {
    let d = domain::gates::dynamic::Policy::default();
    let policy = domain::gates::dynamic::Policy {
        controls_reruns: p.controls_reruns.unwrap_or(d.controls_reruns),
        band_attempts: p.band_attempts.unwrap_or(d.band_attempts),
        no_oracle: p.no_oracle.unwrap_or(d.no_oracle),
    };
    Ok(Json(crate::gates::service::plan(&s, &id, &env, &me, policy).await?))
}

#[utoipa::path(get, path = "/api/challenges/{id}/environments/{env_id}/gates", tag = "gates",
    params(("id" = String, Path), ("env_id" = String, Path)),
    responses((status = 200, description = "the static summary stored at submission and the attached verdict (null until attached)", body = crate::gates::service::GatesView),
        (status = 404, body = ApiErrorBody)))]
pub async fn gates_get(
    State(s): State<AppState>,
    IdPaths(id, env): IdPaths<domain::ids::ChallengeId, domain::ids::EnvironmentId>,
) -> Result<Json<crate::gates::service::GatesView>, ApiError> {
    Ok(Json(crate::gates::service::get(&s, &id, &env).await?))
}

#[utoipa::path(post, path = "/api/challenges/{id}/environments/{env_id}/gates", tag = "gates",
    params(("id" = String, Path), ("env_id" = String, Path)), request_body = domain::gates::dynamic::GateResults,
    responses((status = 200, description = "judged: a verdict per task", body = crate::gates::service::GatesView),
        (status = 401, body = ApiErrorBody), (status = 403, description = "FORBIDDEN: editors only", body = ApiErrorBody),
        (status = 404, description = "CHALLENGE_NOT_FOUND or ENVIRONMENT_NOT_FOUND", body = ApiErrorBody),
        (status = 409, description = "PLAN_CHANGED: made from another plan", body = ApiErrorBody),
        (status = 422, description = "INVALID_GATE_RESULTS or INVALID_POLICY", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn gates_attach(
    State(s): State<AppState>,
    User(me): User,
    IdPaths(id, env): IdPaths<domain::ids::ChallengeId, domain::ids::EnvironmentId>,
    ApiJson(results): ApiJson<domain::gates::dynamic::GateResults>,
) -> Result<Json<crate::gates::service::GatesView>, ApiError> {
    Ok(Json(crate::gates::service::attach(&s, &id, &env, &me, results).await?))
}
