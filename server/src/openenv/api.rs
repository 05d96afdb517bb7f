//! The OpenEnv track under `/api/openenv`: the cluster's status, submissions and their status, and
//! the training cluster's own connection (`/api/relay/cluster`, a WebSocket with its credential).

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use domain::openenv::SubmissionView;
use domain::{ApiErrorBody, ErrorCode};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::http::ids::IdPath;
use crate::http::{ApiError, ApiJson};
use crate::identity::{same_bytes, sha256_hex, User};
use crate::AppState;

#[derive(Serialize, ToSchema)]
pub struct OpenEnvStatus {
    /// Whether the training cluster is connected (any of its nodes); while it is not, every other
    /// route here answers 503.
    pub connected: bool,
    /// Whether new submissions are taken; while organizers pause intake, they are answered 503
    /// `CAPACITY_BUSY` with the reason, and everything else goes on.
    pub intake: domain::openenv::controls::Intake,
    /// The cluster's nodes and GPUs, and the queue of admitted submissions waiting for a GPU.
    pub cluster: domain::openenv::queue::ClusterCounts,
}

#[utoipa::path(get, path = "/api/openenv", tag = "openenv", responses((status = 200, body = OpenEnvStatus)))]
pub async fn status(State(s): State<AppState>) -> Result<Json<OpenEnvStatus>, ApiError> {
    let cluster = crate::openenv::queue::counts(&s).await?;
    Ok(Json(OpenEnvStatus {
        connected: cluster.nodes_connected > 0,
        intake: crate::openenv::intake::read(&s.db).await?,
        cluster,
    }))
}

#[utoipa::path(get, path = "/api/openenv/capacity", tag = "openenv",
    responses((status = 200, description = "every node, the queue, the last day's use and the alerts", body = domain::openenv::queue::CapacityView),
        (status = 401, body = ApiErrorBody),
        (status = 403, description = "FORBIDDEN: only a BenchFlow editor", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn capacity(
    State(s): State<AppState>,
    User(me): User,
) -> Result<Json<domain::openenv::queue::CapacityView>, ApiError> {
    if !me.editor {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "only a BenchFlow editor reads the cluster's capacity",
        ));
    }
    Ok(Json(crate::openenv::queue::capacity(&s).await?))
}

#[utoipa::path(post, path = "/api/openenv/intake", tag = "openenv", request_body = domain::openenv::controls::IntakeChange,
    responses((status = 200, description = "intake as it now is; sent again, the same (a pause keeps its `since`)", body = domain::openenv::controls::Intake),
        (status = 401, body = ApiErrorBody),
        (status = 403, description = "FORBIDDEN: only a BenchFlow editor", body = ApiErrorBody),
        (status = 422, description = "INVALID_REASON: pausing needs a reason of 1 to 500 characters; resuming takes none", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn intake(
    State(s): State<AppState>,
    User(me): User,
    ApiJson(change): ApiJson<domain::openenv::controls::IntakeChange>,
) -> Result<Json<domain::openenv::controls::Intake>, ApiError> {
    Ok(Json(crate::openenv::intake::change(&s, &me, &change).await?))
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BoardParams {
    /// `submission` (the default: a row per submission) or `account` (a row per HF account, its
    /// best result; in pages, the signed-in caller's row pinned as `me`).
    #[param(inline)]
    by: Option<BoardBy>,
    /// `by=account`: the next page's `next_cursor` (the same frozen snapshot).
    #[param(max_length = 80, pattern = r"^[0-9a-fA-F]{8,64}\.[0-9]{1,9}$")]
    cursor: Option<String>,
    /// `by=account`: rows a page, 1 to 100 (default 25).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u32>,
}

/// What a leaderboard row stands for.
#[derive(serde::Deserialize, ToSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BoardBy {
    Submission,
    Account,
}

/// What the leaderboard answers: by submission (the default) or a page by account. For the
/// document only: each is served as it is.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum BoardAnswer {
    Submissions(domain::openenv::evaluation::Leaderboard),
    Accounts(domain::openenv::by_account::AccountPage),
}

#[utoipa::path(get, path = "/api/openenv/leaderboard", tag = "openenv", params(BoardParams),
    responses((status = 200, description = "OpenEnv submissions ranked by the mean Δ of their runs on the held-out benchmark (public; answers while the cluster is away too); with `by=account`, a page of a row per account", body = BoardAnswer),
        (status = 400, description = "INVALID_QUERY: an unknown `by`, a bad `limit` or `cursor`", body = ApiErrorBody),
        (status = 404, description = "NOT_FOUND: the cursor's snapshot is gone (kept an hour): read the first page again", body = ApiErrorBody)))]
pub async fn leaderboard(
    State(s): State<AppState>,
    crate::identity::Caller(me): crate::identity::Caller,
    crate::http::ApiQuery(p): crate::http::ApiQuery<BoardParams>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    // `cursor` and `limit` page the board by account only, but a malformed one is refused
    // whichever board is asked for: a bad query is never answered as if it were fine.
    crate::openenv::standing::check_paging(p.limit, p.cursor.as_deref())?;
    match p.by.unwrap_or(BoardBy::Submission) {
        BoardBy::Submission => Ok(crate::openenv::runs::service::leaderboard(&s).await?.into_response()),
        BoardBy::Account => {
            let limit = p.limit.unwrap_or(domain::openenv::by_account::DEFAULT_PAGE);
            let page =
                crate::openenv::standing::by_account(&s, me.as_ref(), p.cursor.as_deref(), limit).await?;
            Ok(Json(page).into_response())
        }
    }
}

#[utoipa::path(get, path = "/api/openenv/quota", tag = "openenv",
    responses((status = 200, description = "your quota: the limit and window, the slots you hold, when the oldest frees, whether you are exempt (answers while the cluster is away too)", body = domain::openenv::quota::QuotaView),
        (status = 401, body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn quota(
    State(s): State<AppState>,
    User(me): User,
) -> Result<Json<domain::openenv::quota::QuotaView>, ApiError> {
    Ok(Json(crate::openenv::standing::quota(&s, &me).await?))
}

#[utoipa::path(post, path = "/api/openenv/submissions", tag = "openenv", request_body = domain::openenv::SubmissionRequest,
    responses((status = 202, description = "accepted: `state: validating`, each image pinned (`resolved`), the slot held; also the answer to the same request resent (`existing: true`)", body = SubmissionView),
        (status = 401, description = "AUTH_REQUIRED or INVALID_TOKEN", body = ApiErrorBody),
        (status = 409, description = "SUBMISSION_ID_REUSED: the id was used with another body", body = ApiErrorBody),
        (status = 422, description = "CONTRACT_INVALID, ENVIRONMENT_TOO_LARGE_FOR_SANDBOX, SCHEMA_INVALID, IMAGE_REFERENCE_INVALID, IMAGE_REGISTRY_UNSUPPORTED, SUBMISSION_FORMAT_RETIRED, IMAGE_LIMIT_EXCEEDED, IMAGE_INACCESSIBLE, IMAGE_PLATFORM_UNSUPPORTED, IMAGE_MANIFEST_UNSUPPORTED, IMAGE_SERVER_INVALID, IMAGE_COMPRESSED_SIZE_EXCEEDED or SUBMISSION_SIZE_EXCEEDED: nothing was stored", body = ApiErrorBody),
        (status = 429, description = "SUBMISSION_QUOTA_EXCEEDED or RATE_LIMITED (the account's schema checks: one at a time, a few waiting, a share a minute), with retry_after_s", body = ApiErrorBody),
        (status = 503, description = "OPENENV_DISCONNECTED, IMAGE_UNAVAILABLE, REGISTRY_RATE_LIMITED or CAPACITY_BUSY (the arena's sandboxes are busy, or organizers paused intake: the message gives their reason), with retry_after_s: nothing was stored, send the identical request again", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn submit(
    State(s): State<AppState>,
    User(me): User,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<SubmissionView>), ApiError> {
    Ok((StatusCode::ACCEPTED, Json(crate::openenv::service::submit(&s, &me, body).await?)))
}

#[utoipa::path(post, path = "/api/openenv/check", tag = "openenv", request_body = domain::openenv::SubmissionRequest,
    responses((status = 200, description = "passes the checks that need no registry; stores nothing, reads no image", body = crate::openenv::service::Checked),
        (status = 401, body = ApiErrorBody),
        (status = 422, description = "CONTRACT_INVALID, ENVIRONMENT_TOO_LARGE_FOR_SANDBOX, SCHEMA_INVALID, IMAGE_REFERENCE_INVALID, IMAGE_REGISTRY_UNSUPPORTED, SUBMISSION_FORMAT_RETIRED or IMAGE_LIMIT_EXCEEDED", body = ApiErrorBody),
        (status = 429, description = "RATE_LIMITED: the account's schema checks run one at a time, a few waiting, and a share a minute; with retry_after_s", body = ApiErrorBody),
        (status = 503, description = "OPENENV_DISCONNECTED, or CAPACITY_BUSY: every schema checker is busy; with retry_after_s", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn check(
    State(s): State<AppState>,
    User(me): User,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<crate::openenv::service::Checked>, ApiError> {
    Ok(Json(crate::openenv::service::check(&s, &me, &body).await?))
}

#[derive(Serialize, ToSchema)]
pub struct SubmissionList {
    pub submissions: Vec<SubmissionView>,
}

#[utoipa::path(get, path = "/api/openenv/submissions", tag = "openenv",
    responses((status = 200, description = "your submissions, newest first; every submission for a BenchFlow editor", body = SubmissionList),
        (status = 401, body = ApiErrorBody), (status = 503, description = "OPENENV_DISCONNECTED", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn list(State(s): State<AppState>, User(me): User) -> Result<Json<SubmissionList>, ApiError> {
    Ok(Json(SubmissionList { submissions: crate::openenv::service::list(&s, &me).await? }))
}

#[utoipa::path(get, path = "/api/openenv/submissions/{id}", tag = "openenv", params(("id" = String, Path)),
    responses((status = 200, body = SubmissionView),
        (status = 401, body = ApiErrorBody),
        (status = 404, description = "SUBMISSION_NOT_FOUND: not yours, or none", body = ApiErrorBody),
        (status = 503, description = "OPENENV_DISCONNECTED", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn get(
    State(s): State<AppState>,
    User(me): User,
    IdPath(id): IdPath<domain::ids::SubmissionId>,
) -> Result<Json<SubmissionView>, ApiError> {
    Ok(Json(crate::openenv::service::get(&s, &me, &id).await?))
}

#[utoipa::path(get, path = "/api/openenv/runs/{id}", tag = "openenv", params(("id" = String, Path)),
    responses((status = 200, description = "the run: its state (in words too), optimizer steps taken (`policy_version`), its failure, the mean reward of each step", body = domain::openenv::run::OpenEnvRunView),
        (status = 401, body = ApiErrorBody),
        (status = 404, description = "RUN_NOT_FOUND: not yours (editors see every run), or none", body = ApiErrorBody),
        (status = 503, description = "OPENENV_DISCONNECTED", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn run(
    State(s): State<AppState>,
    User(me): User,
    IdPath(id): IdPath<domain::ids::OpenEnvRunId>,
) -> Result<Json<domain::openenv::run::OpenEnvRunView>, ApiError> {
    crate::openenv::service::require_connected(&s).await?;
    Ok(Json(crate::openenv::runs::service::view(&s, &me, &id).await?))
}

#[utoipa::path(get, path = "/api/openenv/runs/{id}/events", tag = "openenv", params(("id" = String, Path)),
    responses((status = 200, description = "every event in order: `state`, `policy_version`, `at`, and for `rolling`/`updating` the step's rewards", body = domain::openenv::run::RunEvents),
        (status = 401, body = ApiErrorBody),
        (status = 404, description = "RUN_NOT_FOUND", body = ApiErrorBody),
        (status = 503, description = "OPENENV_DISCONNECTED", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn run_events(
    State(s): State<AppState>,
    User(me): User,
    IdPath(id): IdPath<domain::ids::OpenEnvRunId>,
) -> Result<Json<domain::openenv::run::RunEvents>, ApiError> {
    crate::openenv::service::require_connected(&s).await?;
    Ok(Json(crate::openenv::runs::service::events(&s, &me, &id).await?))
}

#[utoipa::path(post, path = "/api/openenv/runs/{id}/cancel", tag = "openenv", params(("id" = String, Path)),
    responses((status = 200, description = "the run, `cancelled` (or as it ended before); the cluster is told to stop it", body = domain::openenv::run::OpenEnvRunView),
        (status = 401, body = ApiErrorBody),
        (status = 403, description = "FORBIDDEN: only a BenchFlow editor stops a run", body = ApiErrorBody),
        (status = 404, description = "RUN_NOT_FOUND", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn cancel_run(
    State(s): State<AppState>,
    User(me): User,
    IdPath(id): IdPath<domain::ids::OpenEnvRunId>,
) -> Result<Json<domain::openenv::run::OpenEnvRunView>, ApiError> {
    crate::openenv::service::require_connected(&s).await?;
    Ok(Json(crate::openenv::runs::service::cancel(&s, &me, &id).await?))
}

#[utoipa::path(post, path = "/api/openenv/runs/{id}/release", tag = "openenv", params(("id" = String, Path)),
    request_body = domain::reason::ReasonRequest,
    responses((status = 200, description = "the run, ended as its trainer would have after cleanup (`completed` when it took a step), with `cleanup.released`; the arena canceled the sandboxes left. Sent again, the same", body = domain::openenv::run::OpenEnvRunView),
        (status = 401, body = ApiErrorBody),
        (status = 403, description = "FORBIDDEN: only a BenchFlow editor releases a cleanup", body = ApiErrorBody),
        (status = 404, description = "RUN_NOT_FOUND", body = ApiErrorBody),
        (status = 409, description = "RUN_NOT_RELEASABLE: not in `cleanup`, or not yet 900 s in it (`retry_after_s`)", body = ApiErrorBody),
        (status = 422, description = "INVALID_REASON", body = ApiErrorBody),
        (status = 503, description = "HUB_UNAVAILABLE: the run's sandboxes could not be listed; nothing was changed", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn release_run(
    State(s): State<AppState>,
    User(me): User,
    IdPath(id): IdPath<domain::ids::OpenEnvRunId>,
    ApiJson(body): ApiJson<domain::reason::ReasonRequest>,
) -> Result<Json<domain::openenv::run::OpenEnvRunView>, ApiError> {
    Ok(Json(crate::openenv::runs::cleanup::release(&s, &me, &id, &body.reason).await?))
}

const MAX_MESSAGE: usize = 64 * 1024;

/// `GET /api/relay/cluster`: the training cluster connects with its own credential.
pub async fn cluster(
    State(s): State<AppState>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let refused =
        || ApiError::new(ErrorCode::InvalidToken, "the training cluster connects with its own credential");
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(refused)?;
    let expected = s.openenv.cluster_secret_hash.clone().ok_or_else(refused)?;
    if !same_bytes(sha256_hex(given.trim()).as_bytes(), expected.as_bytes()) {
        return Err(refused());
    }
    Ok(ws.max_message_size(MAX_MESSAGE).on_upgrade(move |socket| serve_cluster(s, socket)))
}

async fn serve_cluster(s: AppState, mut socket: WebSocket) {
    // This connection's own name: an agent that reconnects before its old connection's close is
    // seen stays connected.
    let holder = s.lease_holder();
    tracing::info!("the training cluster connected");
    while let Some(Ok(frame)) = socket.recv().await {
        let text = match frame {
            Message::Text(t) => t.to_string(),
            Message::Close(_) => break,
            _ => continue,
        };
        for out in crate::openenv::runs::service::on_message(&s, &holder, &text).await {
            if socket.send(Message::Text(out.to_string().into())).await.is_err() {
                break;
            }
        }
    }
    crate::openenv::runs::service::cluster_gone(&s, &holder).await;
    tracing::info!("the training cluster disconnected");
}
