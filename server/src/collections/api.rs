//! Collections' routes: validate (identity, stores nothing), submit (validates again, pins the
//! commit, registers an `env-…` record, idempotently), list, one record, its submissions-app view,
//! the gate catalogue, and the stateless check that the served `check_task.py` and
//! `validation_gates.py` call (no identity, stores nothing).

use axum::extract::{FromRequest, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use domain::collection::record::{EnvironmentRecord, PostTrain};
use domain::collection::report::Report;
use domain::collection::request::EnvironmentRequest;
use domain::gates::Severity;
use domain::ApiErrorBody;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::submit::{self, CheckRequest, SubmissionView, Submitted, ValidationFailed, ValidationView};
use crate::http::ids::IdPath;
use crate::http::{ApiError, ApiJson, ApiQuery};
use crate::identity::User;
use crate::AppState;
use domain::collection::record::EnvironmentList;

#[utoipa::path(post, path = "/api/environments/validate", tag = "environments", request_body = EnvironmentRequest,
    responses((status = 200, description = "the checks; `valid` false when the structure is unsound or a blocking gate fired", body = ValidationView),
        (status = 401, description = "AUTH_REQUIRED or INVALID_TOKEN", body = ApiErrorBody),
        (status = 404, description = "REPO_NOT_FOUND, REVISION_NOT_FOUND, CHALLENGE_NOT_FOUND or AGENT_NOT_FOUND", body = ApiErrorBody),
        (status = 403, description = "REPO_PRIVATE, REPO_GATED or AGENT_NOT_OWNED", body = ApiErrorBody),
        (status = 422, description = "INVALID_ENVIRONMENT", body = ApiErrorBody),
        (status = 502, description = "SOURCE_UNAVAILABLE", body = ApiErrorBody),
        (status = 429, description = "RATE_LIMITED: the account's validations this hour are used up, with Retry-After", body = ApiErrorBody),
        (status = 503, description = "GITHUB_RATE_LIMITED, with Retry-After", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn validate(
    State(s): State<AppState>,
    User(me): User,
    ApiJson(req): ApiJson<EnvironmentRequest>,
) -> Result<Json<ValidationView>, ApiError> {
    Ok(Json(submit::validate(&s, &me, &req).await?))
}

#[utoipa::path(post, path = "/api/environments", tag = "environments", request_body = EnvironmentRequest,
    responses((status = 201, body = SubmissionView), (status = 200, description = "already submitted: `existing: true`", body = SubmissionView),
        (status = 422, description = "VALIDATION_FAILED (with the validation) or INVALID_ENVIRONMENT", body = ValidationFailed),
        (status = 401, description = "AUTH_REQUIRED or INVALID_TOKEN", body = ApiErrorBody),
        (status = 404, description = "CHALLENGE_NOT_FOUND, REPO_NOT_FOUND or REVISION_NOT_FOUND", body = ApiErrorBody),
        (status = 429, description = "RATE_LIMITED: the account's validations this hour are used up, with Retry-After", body = ApiErrorBody),
        (status = 409, description = "ACCOUNT_LIMIT_REACHED: the account stores the most collections it may", body = ApiErrorBody),
        (status = 503, description = "GITHUB_RATE_LIMITED, with Retry-After", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn submit(
    State(s): State<AppState>,
    User(me): User,
    ApiJson(req): ApiJson<EnvironmentRequest>,
) -> Result<Response, ApiError> {
    Ok(match submit::submit(&s, &me, req).await? {
        Submitted::Stored { view, inserted } => {
            (if inserted { StatusCode::CREATED } else { StatusCode::OK }, Json(view)).into_response()
        }
        Submitted::Failed(body) => (StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response(),
    })
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Include records registered before static gates were stored.
    legacy: Option<bool>,
    /// Only collections submitted to this challenge.
    challenge: Option<String>,
    /// At most this many, newest first (1 to 500, default 100).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u32>,
}

#[utoipa::path(get, path = "/api/environments", tag = "environments", params(ListParams),
    responses((status = 200, body = EnvironmentList), (status = 400, description = "INVALID_QUERY", body = ApiErrorBody)))]
pub async fn list(
    State(s): State<AppState>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
    let list = crate::collections::service::list(
        &s,
        p.challenge.as_deref().filter(|c| !c.is_empty()),
        p.legacy.unwrap_or(false),
        p.limit.unwrap_or(100),
    )
    .await?;
    Ok(list.into_response())
}

#[derive(Serialize, ToSchema)]
pub struct EnvironmentView {
    pub environment: EnvironmentRecord,
    /// The validation stored at submission: tasks, identities, credit, findings and summary.
    pub validation: Report,
}

#[utoipa::path(get, path = "/api/environments/{id}", tag = "environments", params(("id" = String, Path)),
    responses((status = 200, body = EnvironmentView), (status = 404, description = "ENVIRONMENT_NOT_FOUND", body = ApiErrorBody)))]
pub async fn get(
    State(s): State<AppState>,
    IdPath(id): IdPath<domain::ids::EnvironmentId>,
) -> Result<Json<EnvironmentView>, ApiError> {
    let (environment, validation) = crate::collections::service::get(&s, &id).await?;
    Ok(Json(EnvironmentView { environment, validation }))
}

#[derive(Serialize, ToSchema)]
pub struct AppSubmissionView {
    pub environment: EnvironmentRecord,
    pub validation: Report,
    pub posttrain: PostTrain,
}

#[utoipa::path(get, path = "/api/app/submissions/{id}", tag = "environments", params(("id" = String, Path)),
    responses((status = 200, body = AppSubmissionView), (status = 404, description = "ENVIRONMENT_NOT_FOUND", body = ApiErrorBody)))]
pub async fn app_submission(
    State(s): State<AppState>,
    IdPath(id): IdPath<domain::ids::EnvironmentId>,
) -> Result<Json<AppSubmissionView>, ApiError> {
    let d = crate::collections::service::submission(&s, &id).await?;
    Ok(Json(AppSubmissionView {
        environment: d.environment,
        validation: d.validation,
        posttrain: d.posttrain,
    }))
}

#[derive(Serialize, ToSchema)]
pub struct GateView {
    pub code: String,
    pub severity: Severity,
    pub meaning: String,
}

#[derive(Serialize, ToSchema)]
pub struct GateCatalogue {
    pub version: String,
    pub gates: Vec<GateView>,
}

#[utoipa::path(get, path = "/api/gates", tag = "environments", responses((status = 200, body = GateCatalogue)))]
pub async fn gates() -> Json<GateCatalogue> {
    Json(GateCatalogue {
        version: domain::gates::GATES_VERSION.into(),
        gates: domain::gates::CATALOGUE
            .iter()
            .map(|(code, severity, meaning)| GateView {
                code: (*code).into(),
                severity: *severity,
                meaning: (*meaning).into(),
            })
            .collect(),
    })
}

/// The largest body `/api/check` accepts.
pub const CHECK_BODY_LIMIT: usize = 48 << 20;

#[utoipa::path(post, path = "/api/check", tag = "environments", request_body = CheckRequest,
    responses((status = 200, description = "the same checks as validation, on the uploaded files; compared with public benchmarks only", body = Report),
        (status = 404, description = "CHALLENGE_NOT_FOUND: `challenge_id` names no challenge", body = ApiErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ApiErrorBody), (status = 422, description = "INVALID_CHECK", body = ApiErrorBody),
        (status = 503, description = "CAPACITY_BUSY: more uploads are waiting than the arena queues; retry after `retry_after_s`", body = ApiErrorBody)))]
pub async fn check(
    State(s): State<AppState>,
    request: axum::extract::Request,
) -> Result<Json<Report>, ApiError> {
    // The turn comes before the body is read: uploads beyond the few decoded at once wait as
    // connections, not as buffered bodies, and past a short queue they are turned away.
    let _turn = s.sources.check_turn().await?;
    let ApiJson(req) = ApiJson::<CheckRequest>::from_request(request, &()).await?;
    Ok(Json(submit::check(&s, req).await?))
}
