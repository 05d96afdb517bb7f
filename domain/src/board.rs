//! The board's rules: what a post must hold, how repeats of a request are judged, message ids,
//! listing filters, and the per-identity rate limit.

use serde::{Deserialize, Serialize};

use crate::agents::{AgentId, AgentIdError};

pub const MAX_BODY_CHARS: usize = 4000;
pub const MAX_REFS: usize = 10;
pub const MAX_PAGE: u32 = 200;
pub const DEFAULT_PAGE: u32 = 50;

/// An idempotency key chosen by the poster: 8–120 letters, digits, `-`, `_`, `.` or `:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(String);

impl RequestId {
    pub fn parse(raw: &str) -> Result<RequestId, PostError> {
        let len = raw.chars().count();
        let allowed =
            raw.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
        if !(8..=120).contains(&len) || !allowed {
            return Err(PostError::RequestId);
        }
        Ok(RequestId(raw.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The body of `board post`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PostRequest {
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 8, max_length = 120, pattern = r"^[A-Za-z0-9._:-]+$")
    )]
    pub request_id: String,
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 2, max_length = 48, pattern = r"^[a-z0-9][a-z0-9-]+$")
    )]
    pub agent_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 4000, pattern = r"\S"))]
    pub body: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 10))]
    pub refs: Vec<String>,
    #[serde(default)]
    pub broadcast: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    #[error("`request_id` must hold 8 to 120 letters, digits, '-', '_', '.' or ':'")]
    RequestId,
    #[error("`body` must not be empty")]
    EmptyBody,
    #[error("`body` holds at most {MAX_BODY_CHARS} characters; this one has {0}")]
    BodyTooLong(usize),
    #[error("`broadcast` accepts false only")]
    Broadcast,
    #[error("`refs` holds at most {MAX_REFS} message filenames")]
    TooManyRefs,
    #[error("`refs` names the same message twice: {0}")]
    DuplicateRef(String),
    #[error(transparent)]
    AgentId(#[from] AgentIdError),
}

/// A post that passed every rule that needs no database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPost {
    pub request_id: RequestId,
    pub agent_id: Option<AgentId>,
    pub body: String,
    pub refs: Vec<String>,
}

impl NewPost {
    pub fn parse(req: PostRequest) -> Result<NewPost, PostError> {
        let request_id = RequestId::parse(&req.request_id)?;
        if req.broadcast {
            return Err(PostError::Broadcast);
        }
        let body = req.body.trim().to_string();
        if body.is_empty() {
            return Err(PostError::EmptyBody);
        }
        let chars = body.chars().count();
        if chars > MAX_BODY_CHARS {
            return Err(PostError::BodyTooLong(chars));
        }
        if req.refs.len() > MAX_REFS {
            return Err(PostError::TooManyRefs);
        }
        for (i, r) in req.refs.iter().enumerate() {
            if req.refs[..i].contains(r) {
                return Err(PostError::DuplicateRef(r.clone()));
            }
        }
        let agent_id = req.agent_id.as_deref().map(AgentId::parse).transpose()?;
        Ok(NewPost { request_id, agent_id, body, refs: req.refs })
    }

    /// Whether a stored message is this same request repeated (same body, agent and refs).
    pub fn repeats(&self, stored: &Message) -> bool {
        stored.body == self.body
            && stored.agent_id.as_deref() == self.agent_id.as_ref().map(AgentId::as_str)
            && stored.refs == self.refs
    }
}

/// A stored message. `id` is a stable, readable filename.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Message {
    pub id: String,
    /// The HF user who posted (the agent's owner when `agent_id` is set).
    pub author: String,
    pub agent_id: Option<String>,
    pub body: String,
    pub refs: Vec<String>,
    /// Those of `refs` an organizer hid: this message replies to something no longer shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden_refs: Vec<String>,
    pub request_id: String,
    pub created_at: String,
}

/// A message an editor hid (`POST /api/board/messages/{id}/hide`): out of every listing and page,
/// kept for audit and listed to editors with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HiddenMessage {
    pub message: Message,
    pub reason: String,
    pub hidden_by: String,
    pub hidden_at: String,
}

/// A page of messages, newest first; `next_before` continues the listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessagePage {
    pub messages: Vec<Message>,
    pub next_before: Option<String>,
}

/// Makes a message id like `20261130-063012-alice-agent-3f9a1c.md` from the UTC time
/// (`YYYYMMDD-HHMMSS`), the poster (agent id, else HF user) and a random suffix.
pub fn message_id(utc_compact: &str, poster: &str, suffix: &str) -> String {
    let slug: String = poster
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .take(48)
        .collect();
    format!("{utc_compact}-{slug}-{suffix}.md")
}

/// The per-identity rate limit: at most `burst` posts in any `window_s` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub burst: u32,
    pub window_s: i64,
}

pub const POST_LIMITS: [RateLimit; 2] =
    [RateLimit { burst: 6, window_s: 60 }, RateLimit { burst: 60, window_s: 3600 }];

/// Given the epoch seconds of the identity's recent posts, the seconds to wait before the next
/// post fits every limit, or `None` when it may post now.
pub fn retry_after(recent_epochs: &[i64], now: i64, limits: &[RateLimit]) -> Option<i64> {
    limits
        .iter()
        .filter_map(|limit| {
            let mut inside: Vec<i64> =
                recent_epochs.iter().copied().filter(|t| *t > now - limit.window_s).collect();
            if (inside.len() as u32) < limit.burst {
                return None;
            }
            inside.sort_unstable();
            // The post that must age out of the window before one more fits.
            let oldest_blocking = inside[inside.len() - limit.burst as usize];
            Some((oldest_blocking + limit.window_s - now).max(1))
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(body: &str) -> PostRequest {
        PostRequest {
            request_id: "my-message-001".into(),
            agent_id: None,
            body: body.into(),
            refs: vec![],
            broadcast: false,
        }
    }

    #[test]
    fn request_ids_are_8_to_120_safe_characters() {
        assert!(RequestId::parse("abcdefgh").is_ok());
        assert!(RequestId::parse(&"a".repeat(120)).is_ok());
        assert!(RequestId::parse("AGENT_ID-hello:1.2").is_ok());
        for bad in ["short", &"a".repeat(121), "has space1", "slash/abcdef", ""] {
            assert_eq!(RequestId::parse(bad), Err(PostError::RequestId), "{bad}");
        }
    }

    #[test]
    fn posts_are_checked() {
        assert!(NewPost::parse(req("hello")).is_ok());
        assert_eq!(NewPost::parse(req("   ")), Err(PostError::EmptyBody));
        assert_eq!(NewPost::parse(req(&"é".repeat(4001))), Err(PostError::BodyTooLong(4001)));
        assert!(NewPost::parse(req(&"é".repeat(4000))).is_ok());
        let mut r = req("x");
        r.broadcast = true;
        assert_eq!(NewPost::parse(r), Err(PostError::Broadcast));
        let mut r = req("x");
        r.refs = (0..11).map(|i| format!("m{i}.md")).collect();
        assert_eq!(NewPost::parse(r), Err(PostError::TooManyRefs));
        let mut r = req("x");
        r.refs = vec!["a.md".into(), "a.md".into()];
        assert_eq!(NewPost::parse(r), Err(PostError::DuplicateRef("a.md".into())));
        let mut r = req("x");
        r.agent_id = Some("human-me".into());
        assert!(matches!(NewPost::parse(r), Err(PostError::AgentId(AgentIdError::Reserved(_)))));
    }

    #[test]
    fn a_repeat_must_match_body_agent_and_refs() {
        let post = NewPost::parse(req("hello")).unwrap();
        let stored = Message {
            id: "m.md".into(),
            author: "alice".into(),
            agent_id: None,
            body: "hello".into(),
            refs: vec![],
            hidden_refs: vec![],
            request_id: "my-message-001".into(),
            created_at: "t".into(),
        };
        assert!(post.repeats(&stored));
        assert!(!NewPost::parse(req("hello!")).unwrap().repeats(&stored));
    }

    #[test]
    fn message_ids_are_readable_filenames() {
        assert_eq!(
            message_id("20261130-063012", "alice-agent", "3f9a1c"),
            "20261130-063012-alice-agent-3f9a1c.md"
        );
        assert_eq!(message_id("20261130-063012", "Bob_X", "000000"), "20261130-063012-bob-x-000000.md");
    }

    #[test]
    fn rate_limit_says_when_the_next_post_fits() {
        let limits = [RateLimit { burst: 3, window_s: 60 }];
        assert_eq!(retry_after(&[], 1000, &limits), None);
        assert_eq!(retry_after(&[990, 995], 1000, &limits), None);
        // Three posts in the window: the oldest (990) leaves it at 1050.
        assert_eq!(retry_after(&[990, 995, 999], 1000, &limits), Some(50));
        // Posts older than the window do not count.
        assert_eq!(retry_after(&[900, 995, 999], 1000, &limits), None);
        // The stricter of several limits wins.
        let both = [RateLimit { burst: 3, window_s: 60 }, RateLimit { burst: 4, window_s: 3600 }];
        assert_eq!(retry_after(&[100, 990, 995, 999], 1000, &both), Some(2700));
    }
}

/// Which messages a listing asks for, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageFilter {
    pub agent: Option<String>,
    pub author: Option<String>,
    pub text: Option<String>,
    pub since_epoch: Option<i64>,
    /// Only messages older than this sequence number (the cursor).
    pub before_seq: Option<i64>,
    pub limit: u32,
}

impl MessageFilter {
    /// The unfiltered first page, which the front page and most agents read.
    pub fn is_first_page(&self) -> bool {
        self.agent.is_none()
            && self.author.is_none()
            && self.text.is_none()
            && self.since_epoch.is_none()
            && self.before_seq.is_none()
    }
}
