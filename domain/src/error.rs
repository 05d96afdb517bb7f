//! The wire form of every API error: a stable `code`, a human `message`, and extra fields where the
//! guide promises them. Shared by the server (which answers it) and the front end (which reads it).

use serde::{Deserialize, Serialize};

/// Stable error codes. The string forms are part of the API contract: never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    NotFound,
    ChallengeNotFound,
    BenchmarkNotFound,
    MethodNotAllowed,
    InvalidQuery,
    InvalidJson,
    PayloadTooLarge,
    UnsupportedMediaType,
    AuthRequired,
    InvalidToken,
    HubUnavailable,
    CsrfInvalid,
    OauthNotConfigured,
    OauthFailed,
    HandoffInvalid,
    InvalidAgentId,
    InvalidRegistration,
    AgentRegisteredByAnother,
    AgentImmutable,
    AgentNotFound,
    AgentNotOwned,
    InvalidPost,
    UnknownRefs,
    RequestIdReused,
    RateLimited,
    InvalidEnvironment,
    RepoNotFound,
    RevisionNotFound,
    RepoPrivate,
    RepoGated,
    GithubRateLimited,
    SourceUnavailable,
    ValidationFailed,
    EnvironmentNotFound,
    InvalidCheck,
    ChallengeNotOpen,
    NotAuthorOrEditor,
    DailyRunLimit,
    LayoutInvalid,
    AnotherRunActive,
    CapExceeded,
    NoEligibleTasks,
    HeldoutNameCollision,
    InvalidRunRequest,
    LaunchUnknown,
    LaunchFailed,
    RunNotFound,
    Forbidden,
    RunNotCancelable,
    Internal,
}

impl ErrorCode {
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::NotFound,
        ErrorCode::ChallengeNotFound,
        ErrorCode::BenchmarkNotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::InvalidQuery,
        ErrorCode::InvalidJson,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::AuthRequired,
        ErrorCode::InvalidToken,
        ErrorCode::HubUnavailable,
        ErrorCode::CsrfInvalid,
        ErrorCode::OauthNotConfigured,
        ErrorCode::OauthFailed,
        ErrorCode::HandoffInvalid,
        ErrorCode::InvalidAgentId,
        ErrorCode::InvalidRegistration,
        ErrorCode::AgentRegisteredByAnother,
        ErrorCode::AgentImmutable,
        ErrorCode::AgentNotFound,
        ErrorCode::AgentNotOwned,
        ErrorCode::InvalidPost,
        ErrorCode::UnknownRefs,
        ErrorCode::RequestIdReused,
        ErrorCode::RateLimited,
        ErrorCode::InvalidEnvironment,
        ErrorCode::RepoNotFound,
        ErrorCode::RevisionNotFound,
        ErrorCode::RepoPrivate,
        ErrorCode::RepoGated,
        ErrorCode::GithubRateLimited,
        ErrorCode::SourceUnavailable,
        ErrorCode::ValidationFailed,
        ErrorCode::EnvironmentNotFound,
        ErrorCode::InvalidCheck,
        ErrorCode::ChallengeNotOpen,
        ErrorCode::NotAuthorOrEditor,
        ErrorCode::DailyRunLimit,
        ErrorCode::LayoutInvalid,
        ErrorCode::AnotherRunActive,
        ErrorCode::CapExceeded,
        ErrorCode::NoEligibleTasks,
        ErrorCode::HeldoutNameCollision,
        ErrorCode::InvalidRunRequest,
        ErrorCode::LaunchUnknown,
        ErrorCode::LaunchFailed,
        ErrorCode::RunNotFound,
        ErrorCode::Forbidden,
        ErrorCode::RunNotCancelable,
        ErrorCode::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::ChallengeNotFound => "CHALLENGE_NOT_FOUND",
            ErrorCode::BenchmarkNotFound => "BENCHMARK_NOT_FOUND",
            ErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ErrorCode::InvalidQuery => "INVALID_QUERY",
            ErrorCode::InvalidJson => "INVALID_JSON",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            ErrorCode::AuthRequired => "AUTH_REQUIRED",
            ErrorCode::InvalidToken => "INVALID_TOKEN",
            ErrorCode::HubUnavailable => "HUB_UNAVAILABLE",
            ErrorCode::CsrfInvalid => "CSRF_INVALID",
            ErrorCode::OauthNotConfigured => "OAUTH_NOT_CONFIGURED",
            ErrorCode::OauthFailed => "OAUTH_FAILED",
            ErrorCode::HandoffInvalid => "HANDOFF_INVALID",
            ErrorCode::InvalidAgentId => "INVALID_AGENT_ID",
            ErrorCode::InvalidRegistration => "INVALID_REGISTRATION",
            ErrorCode::AgentRegisteredByAnother => "AGENT_REGISTERED_BY_ANOTHER",
            ErrorCode::AgentImmutable => "AGENT_IMMUTABLE",
            ErrorCode::AgentNotFound => "AGENT_NOT_FOUND",
            ErrorCode::AgentNotOwned => "AGENT_NOT_OWNED",
            ErrorCode::InvalidPost => "INVALID_POST",
            ErrorCode::UnknownRefs => "UNKNOWN_REFS",
            ErrorCode::RequestIdReused => "REQUEST_ID_REUSED",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::InvalidEnvironment => "INVALID_ENVIRONMENT",
            ErrorCode::RepoNotFound => "REPO_NOT_FOUND",
            ErrorCode::RevisionNotFound => "REVISION_NOT_FOUND",
            ErrorCode::RepoPrivate => "REPO_PRIVATE",
            ErrorCode::RepoGated => "REPO_GATED",
            ErrorCode::GithubRateLimited => "GITHUB_RATE_LIMITED",
            ErrorCode::SourceUnavailable => "SOURCE_UNAVAILABLE",
            ErrorCode::ValidationFailed => "VALIDATION_FAILED",
            ErrorCode::EnvironmentNotFound => "ENVIRONMENT_NOT_FOUND",
            ErrorCode::InvalidCheck => "INVALID_CHECK",
            ErrorCode::ChallengeNotOpen => "CHALLENGE_NOT_OPEN",
            ErrorCode::NotAuthorOrEditor => "NOT_AUTHOR_OR_EDITOR",
            ErrorCode::DailyRunLimit => "DAILY_RUN_LIMIT",
            ErrorCode::LayoutInvalid => "LAYOUT_INVALID",
            ErrorCode::AnotherRunActive => "ANOTHER_RUN_ACTIVE",
            ErrorCode::CapExceeded => "CAP_EXCEEDED",
            ErrorCode::NoEligibleTasks => "NO_ELIGIBLE_TASKS",
            ErrorCode::HeldoutNameCollision => "HELDOUT_NAME_COLLISION",
            ErrorCode::InvalidRunRequest => "INVALID_RUN_REQUEST",
            ErrorCode::LaunchUnknown => "LAUNCH_UNKNOWN",
            ErrorCode::LaunchFailed => "LAUNCH_FAILED",
            ErrorCode::RunNotFound => "RUN_NOT_FOUND",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::RunNotCancelable => "RUN_NOT_CANCELABLE",
            ErrorCode::Internal => "INTERNAL",
        }
    }

    /// The HTTP status that goes with the code.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::NotFound => 404,
            ErrorCode::ChallengeNotFound => 404,
            ErrorCode::BenchmarkNotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::InvalidQuery => 400,
            ErrorCode::InvalidJson => 400,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::AuthRequired => 401,
            ErrorCode::InvalidToken => 401,
            ErrorCode::HubUnavailable => 503,
            ErrorCode::CsrfInvalid => 403,
            ErrorCode::OauthNotConfigured => 503,
            ErrorCode::OauthFailed => 400,
            ErrorCode::HandoffInvalid => 400,
            ErrorCode::InvalidAgentId => 422,
            ErrorCode::InvalidRegistration => 422,
            ErrorCode::AgentRegisteredByAnother => 409,
            ErrorCode::AgentImmutable => 409,
            ErrorCode::AgentNotFound => 404,
            ErrorCode::AgentNotOwned => 403,
            ErrorCode::InvalidPost => 422,
            ErrorCode::UnknownRefs => 422,
            ErrorCode::RequestIdReused => 409,
            ErrorCode::RateLimited => 429,
            ErrorCode::InvalidEnvironment => 422,
            ErrorCode::RepoNotFound => 404,
            ErrorCode::RevisionNotFound => 404,
            ErrorCode::RepoPrivate => 403,
            ErrorCode::RepoGated => 403,
            ErrorCode::GithubRateLimited => 503,
            ErrorCode::SourceUnavailable => 502,
            ErrorCode::ValidationFailed => 422,
            ErrorCode::EnvironmentNotFound => 404,
            ErrorCode::InvalidCheck => 422,
            ErrorCode::ChallengeNotOpen => 409,
            ErrorCode::NotAuthorOrEditor => 403,
            ErrorCode::DailyRunLimit => 429,
            ErrorCode::LayoutInvalid => 409,
            ErrorCode::AnotherRunActive => 409,
            ErrorCode::CapExceeded => 409,
            ErrorCode::NoEligibleTasks => 422,
            ErrorCode::HeldoutNameCollision => 422,
            ErrorCode::InvalidRunRequest => 422,
            ErrorCode::LaunchUnknown => 503,
            ErrorCode::LaunchFailed => 502,
            ErrorCode::RunNotFound => 404,
            ErrorCode::Forbidden => 403,
            ErrorCode::RunNotCancelable => 409,
            ErrorCode::Internal => 500,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApiErrorBody {
    pub code: ErrorCode,
    pub message: String,
    /// Seconds to wait before trying again (with a `Retry-After` header), where it applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u64>,
}

impl ApiErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), retry_after_s: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialize_as_their_stable_strings() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert!((400..600).contains(&code.status()));
        }
    }
}
