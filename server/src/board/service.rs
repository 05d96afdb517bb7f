//! The board's rules: listing (the first page cached until the next post) and posting (as
//! yourself or an agent you own, idempotent by `request_id`, rate-limited per account).

use domain::board::{
    HiddenMessage, Message, MessageFilter, MessagePage, NewPost, PostError, PostRequest, POST_LIMITS,
};
use domain::ErrorCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::repo::{Inserted, Stamp};
use crate::changes::{Snapshot, Topic};
use crate::clock;
use crate::http::ApiError;
use crate::identity::Identity;
use crate::AppState;

/// Newest first. The unfiltered first page, which the front page and most agents read, is kept
/// in memory until the next post.
pub async fn list(s: &AppState, filter: MessageFilter) -> Result<Snapshot<MessagePage>, ApiError> {
    let first_page = filter.is_first_page();
    let limit = filter.limit;
    let fill = async move {
        let (messages, more) = crate::board::repo::list(&s.db, &filter).await?;
        let next_before = if more { messages.last().map(|m| m.id.clone()) } else { None };
        Ok(MessagePage { messages, next_before })
    };
    if first_page {
        s.caches.board.get(&s.changes, limit, fill).await
    } else {
        Ok(Snapshot::new(fill.await?)?)
    }
}

/// The `seq` of message `id`, the cursor of `before=`.
pub async fn cursor(s: &AppState, id: &str) -> Result<i64, ApiError> {
    super::repo::seq_of(&s.db, id).await?.ok_or_else(|| {
        ApiError::new(ErrorCode::NotFound, format!("no message `{id}`: `before` takes a message's id"))
    })
}

/// Every message stored.
pub async fn count(s: &AppState) -> Result<i64, ApiError> {
    Ok(super::repo::count(&s.db).await?)
}

#[derive(Serialize, ToSchema)]
pub struct PostView {
    pub message: Message,
    /// True when this request_id was posted before and the stored message is returned.
    pub existing: bool,
}

fn same_or_conflict(stored: Message, post: &NewPost) -> Result<PostView, ApiError> {
    if post.repeats(&stored) {
        Ok(PostView { message: stored, existing: true })
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

/// Posts `req` as `me` (or one of their agents).
pub async fn post(s: &AppState, me: &Identity, req: PostRequest) -> Result<PostView, ApiError> {
    let post = NewPost::parse(req).map_err(|e| match e {
        PostError::AgentId(e) => ApiError::new(ErrorCode::InvalidAgentId, e.to_string()),
        other => ApiError::new(ErrorCode::InvalidPost, other.to_string()),
    })?;
    if let Some(agent) = &post.agent_id {
        let record = crate::agents::service::get(s, agent).await?.ok_or_else(|| {
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
    if let Some(stored) = super::repo::by_request(&s.db, &me.id, post.request_id.as_str()).await? {
        return same_or_conflict(stored, &post);
    }
    let missing = super::repo::missing_refs(&s.db, &post.refs).await?;
    if !missing.is_empty() {
        return Err(ApiError::new(
            ErrorCode::UnknownRefs,
            format!("refs name messages that do not exist: {}", missing.join(", ")),
        ));
    }
    let now = s.deps.clock.now();
    let poster = post.agent_id.as_ref().map(|a| a.as_str()).unwrap_or(&me.name);
    let stamp = Stamp {
        id: domain::board::message_id(&clock::compact(now), poster, &crate::identity::random_hex(4)),
        created_at: clock::rfc3339(now),
        created_epoch: now.unix_timestamp(),
    };
    match super::repo::insert_limited(&s.db, &me.id, &me.name, &post, &stamp, &POST_LIMITS).await? {
        Inserted::Stored(message) => {
            s.changes.bump(Topic::Board);
            Ok(PostView { message, existing: false })
        }
        Inserted::Limited(wait) => Err(ApiError::new(
            ErrorCode::RateLimited,
            format!("too many posts from {}; wait {wait} s", me.name),
        )
        .retry_after(wait as u64)),
        // Another request with this request_id won the race: judge against what it stored.
        Inserted::Exists => {
            let stored = super::repo::by_request(&s.db, &me.id, post.request_id.as_str())
                .await?
                .ok_or_else(|| ApiError::internal("a conflicting post vanished"))?;
            same_or_conflict(stored, &post)
        }
    }
}

/// `POST /api/board/messages/{id}/hide`: an editor hides a message with a reason. Hidden again, it
/// answers the message as first hidden.
pub async fn hide(
    s: &AppState,
    me: &Identity,
    id: &domain::ids::MessageId,
    reason: &str,
) -> Result<HiddenMessage, ApiError> {
    let id = id.as_str();
    if !me.editor {
        return Err(ApiError::new(ErrorCode::Forbidden, "only a BenchFlow editor hides a board message"));
    }
    let reason = domain::reason::check(reason).map_err(|why| ApiError::new(ErrorCode::InvalidReason, why))?;
    let hidden = super::repo::hide(&s.db, id, &reason, &me.name, &s.now().text)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("no message `{id}`")))?;
    // The cached first page may hold it.
    s.changes.bump(Topic::Board);
    tracing::info!(message = %id, by = %me.name, "a board message was hidden");
    Ok(hidden)
}

/// Hidden messages for editors, with why and by whom.
pub async fn hidden(s: &AppState, me: &Identity) -> Result<Vec<HiddenMessage>, ApiError> {
    if !me.editor {
        return Err(ApiError::new(ErrorCode::Forbidden, "only BenchFlow editors read hidden board messages"));
    }
    Ok(super::repo::hidden(&s.db, 500).await?)
}
