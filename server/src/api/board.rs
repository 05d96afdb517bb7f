//! The board: listing (public) and posting (an HF identity, idempotent by `request_id`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::board::{
    Message, MessagePage, NewPost, PostError, PostRequest, DEFAULT_PAGE, MAX_PAGE, POST_LIMITS,
};
use domain::{ApiErrorBody, ErrorCode};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::changes::Topic;
use crate::http::ApiQuery;
use crate::http::{ApiError, ApiJson};
use crate::identity::User;
use crate::repo::board::{Filter, Inserted, Stamp};
use crate::{clock, repo, service, AppState};
use axum::response::{IntoResponse, Response};

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
        Some(id) => Some(repo::board::seq_of(&s.db, id).await?.ok_or_else(|| {
            ApiError::new(ErrorCode::NotFound, format!("no message `{id}`: `before` takes a message's id"))
        })?),
        None => None,
    };
    let nonempty = |v: Option<String>| v.filter(|s| !s.is_empty());
    let filter = Filter {
        agent: nonempty(p.agent),
        author: nonempty(p.author),
        text: nonempty(p.q),
        since_epoch,
        before_seq,
        limit,
    };
    Ok(service::board::list(&s, filter).await?.into_response())
}

#[derive(Serialize, ToSchema)]
pub struct PostView {
    pub message: Message,
    /// True when this request_id was posted before and the stored message is returned.
    pub existing: bool,
}

fn same_or_conflict(stored: Message, post: &NewPost) -> Result<(StatusCode, Json<PostView>), ApiError> {
    if post.repeats(&stored) {
        Ok((StatusCode::OK, Json(PostView { message: stored, existing: true })))
    } else {
        Err(ApiError::new(
            ErrorCode::RequestIdReused,
            format!(
                "request_id `{}` already posted message {} with other content; retry with the original body, or use a new request_id for a new message",
                post.request_id.as_str(),
                stored.id
            ),
        ))
    }
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
    let post = NewPost::parse(req).map_err(|e| match e {
        PostError::AgentId(e) => ApiError::new(ErrorCode::InvalidAgentId, e.to_string()),
        other => ApiError::new(ErrorCode::InvalidPost, other.to_string()),
    })?;
    if let Some(agent) = &post.agent_id {
        let record = repo::agents::get(&s.db, agent.as_str()).await?.ok_or_else(|| {
            ApiError::new(ErrorCode::AgentNotFound, format!("no agent `{agent}`: register it first"))
        })?;
        if record.owner_id != me.id {
            return Err(ApiError::new(
                ErrorCode::AgentNotOwned,
                format!("agent `{agent}` belongs to another HF user; post as your own agent or with agent_id null"),
            ));
        }
    }
    // A repeat is answered before the rate limit, so a retry never costs a slot.
    if let Some(stored) = repo::board::by_request(&s.db, &me.id, post.request_id.as_str()).await? {
        return same_or_conflict(stored, &post);
    }
    let missing = repo::board::missing_refs(&s.db, &post.refs).await?;
    if !missing.is_empty() {
        return Err(ApiError::new(
            ErrorCode::UnknownRefs,
            format!("refs name messages that do not exist: {}", missing.join(", ")),
        ));
    }
    let now = clock::now();
    let poster = post.agent_id.as_ref().map(|a| a.as_str()).unwrap_or(&me.name);
    let stamp = Stamp {
        id: domain::board::message_id(&clock::compact(now), poster, &crate::identity::random_hex(4)),
        created_at: clock::rfc3339(now),
        created_epoch: now.unix_timestamp(),
    };
    match repo::board::insert_limited(&s.db, &me.id, &me.name, &post, &stamp, &POST_LIMITS).await? {
        Inserted::Stored(message) => {
            s.changes.bump(Topic::Board);
            Ok((StatusCode::CREATED, Json(PostView { message, existing: false })))
        }
        Inserted::Limited(wait) => Err(ApiError::new(
            ErrorCode::RateLimited,
            format!("too many posts from {}; wait {wait} s", me.name),
        )
        .retry_after(wait as u64)),
        // Another request with this request_id won the race: judge against what it stored.
        Inserted::Exists => {
            let stored = repo::board::by_request(&s.db, &me.id, post.request_id.as_str())
                .await?
                .ok_or_else(|| ApiError::internal("a conflicting post vanished"))?;
            same_or_conflict(stored, &post)
        }
    }
}
