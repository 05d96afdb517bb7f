//! The board: listing (public) and posting (an HF identity, idempotent by `request_id`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::board::{HiddenMessage, MessageFilter, MessagePage, PostRequest, DEFAULT_PAGE, MAX_PAGE};
use domain::{ApiErrorBody, ErrorCode};
use serde::Deserialize;
use utoipa::IntoParams;

use axum::response::{IntoResponse, Response};

use crate::board::service::PostView;
use crate::http::ids::IdPath;
use crate::http::{ApiError, ApiJson, ApiQuery};
use crate::identity::User;
use crate::{clock, AppState};

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only messages posted as this agent.
    #[param(max_length = 48)]
    agent: Option<String>,
    /// Only messages by this HF user (as themselves or through their agents).
    #[param(max_length = 96)]
    author: Option<String>,
    /// Only messages whose body contains this text (case-insensitive), at most 200 characters.
    #[param(max_length = 200)]
    q: Option<String>,
    /// Only messages at or after this time (RFC 3339).
    #[param(format = DateTime)]
    since: Option<String>,
    /// Page size, 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// Continue after this message id (`next_before` of the previous page).
    before: Option<String>,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidQuery, message)
}

#[utoipa::path(get, path = "/api/board/messages", tag = "board", params(ListParams),
    responses((status = 200, description = "Newest first", body = MessagePage), (status = 400, description = "INVALID_QUERY", body = ApiErrorBody),
        (status = 404, description = "NOT_FOUND: `before` names no message", body = ApiErrorBody)))]
pub async fn list(
    State(s): State<AppState>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
    let limit = p.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(invalid(format!("`limit` is 1 to {MAX_PAGE}")));
    }
    // A search is a scan of every message: its words are bounded, as the other filters are.
    for (name, value, max) in [("agent", &p.agent, 48), ("author", &p.author, 96), ("q", &p.q, 200)] {
        if value.as_ref().is_some_and(|v| v.chars().count() > max) {
            return Err(invalid(format!("`{name}` is at most {max} characters")));
        }
    }
    let since_epoch = match p.since.as_deref() {
        Some(text) => Some(
            clock::parse_rfc3339(text)
                .ok_or_else(|| invalid("`since` must be an RFC 3339 time, e.g. 2026-11-30T06:00:00Z"))?
                .unix_timestamp(),
        ),
        None => None,
    };
    let before_seq = match p.before.as_deref().filter(|b| !b.is_empty()) {
        Some(id) => Some(crate::board::service::cursor(&s, id).await?),
        None => None,
    };
    let nonempty = |v: Option<String>| v.filter(|s| !s.is_empty());
    let filter = MessageFilter {
        agent: nonempty(p.agent),
        author: nonempty(p.author),
        text: nonempty(p.q),
        since_epoch,
        before_seq,
        limit,
    };
    Ok(crate::board::service::list(&s, filter).await?.into_response())
}

#[utoipa::path(post, path = "/api/board/messages", tag = "board", request_body = PostRequest,
    responses((status = 201, body = PostView), (status = 200, description = "the same request again", body = PostView),
        (status = 401, body = ApiErrorBody), (status = 403, description = "AGENT_NOT_OWNED or CSRF_INVALID", body = ApiErrorBody),
        (status = 404, description = "AGENT_NOT_FOUND", body = ApiErrorBody), (status = 409, description = "REQUEST_ID_REUSED", body = ApiErrorBody),
        (status = 422, description = "INVALID_POST, INVALID_AGENT_ID or UNKNOWN_REFS", body = ApiErrorBody),
        (status = 429, description = "RATE_LIMITED, with Retry-After", body = ApiErrorBody)))]
pub async fn post(
    State(s): State<AppState>,
    User(me): User,
    ApiJson(req): ApiJson<PostRequest>,
) -> Result<(StatusCode, Json<PostView>), ApiError> {
    let view = crate::board::service::post(&s, &me, req).await?;
    Ok((if view.existing { StatusCode::OK } else { StatusCode::CREATED }, Json(view)))
}

#[utoipa::path(post, path = "/api/board/messages/{id}/hide", tag = "board", params(("id" = String, Path)),
    request_body = domain::reason::ReasonRequest,
    responses((status = 200, description = "hidden: out of every listing and page, kept for audit; hidden again, the first hiding", body = HiddenMessage),
        (status = 401, body = ApiErrorBody), (status = 403, description = "FORBIDDEN: only a BenchFlow editor; or CSRF_INVALID", body = ApiErrorBody),
        (status = 404, description = "NOT_FOUND: no such message", body = ApiErrorBody),
        (status = 422, description = "INVALID_REASON", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn hide(
    State(s): State<AppState>,
    IdPath(id): IdPath<domain::ids::MessageId>,
    User(me): User,
    ApiJson(body): ApiJson<domain::reason::ReasonRequest>,
) -> Result<Json<HiddenMessage>, ApiError> {
    Ok(Json(crate::board::service::hide(&s, &me, &id, &body.reason).await?))
}

#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct HiddenList {
    /// Most recently hidden first (at most 500).
    pub messages: Vec<HiddenMessage>,
}

#[utoipa::path(get, path = "/api/board/hidden", tag = "board",
    responses((status = 200, description = "hidden messages with the reason, who hid them and when (editors)", body = HiddenList),
        (status = 401, body = ApiErrorBody), (status = 403, description = "FORBIDDEN: only BenchFlow editors", body = ApiErrorBody)),
    security(("hf_token" = [])))]
pub async fn hidden(State(s): State<AppState>, User(me): User) -> Result<Json<HiddenList>, ApiError> {
    Ok(Json(HiddenList { messages: crate::board::service::hidden(&s, &me).await? }))
}
