//! The wire form of every API error: a stable `code`, a human `message`, and extra fields where the
//! guide promises them. Shared by the server (which answers it) and the front end (which reads it).

use serde::{Deserialize, Serialize};

/// Declares `ErrorCode` from one table: each row is a variant, its wire string and its HTTP status,
/// so that a new code is one line and the enum, `ALL`, `as_str` and `status` cannot drift apart.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $wire:literal, $status:literal;)+) => {
        /// Stable error codes. The string forms are part of the API contract: never rename one.
        // `rename_all` rather than each row's string: utoipa does not read a `rename` a macro
        // passes on, and a test checks each row's string is its variant in this case.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)+
        }

        impl ErrorCode {
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $wire,)+
                }
            }

            /// The HTTP status that goes with the code.
            pub fn status(self) -> u16 {
                match self {
                    $(ErrorCode::$variant => $status,)+
                }
            }
        }
    };
}

// Run failure codes (`RUN_QUEUE_TIMEOUT`, `RUN_STEP_DOES_NOT_FIT`, `RUN_TRAINER_FAILED`,
// `RUN_NO_TRAINING_SIGNAL`) are never an answer of their own; their 500 only keeps every code's
// status defined.
error_codes! {
    NotFound = "NOT_FOUND", 404;
    ChallengeNotFound = "CHALLENGE_NOT_FOUND", 404;
    BenchmarkNotFound = "BENCHMARK_NOT_FOUND", 404;
    MethodNotAllowed = "METHOD_NOT_ALLOWED", 405;
    InvalidQuery = "INVALID_QUERY", 400;
    InvalidJson = "INVALID_JSON", 400;
    PayloadTooLarge = "PAYLOAD_TOO_LARGE", 413;
    UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE", 415;
    AuthRequired = "AUTH_REQUIRED", 401;
    InvalidToken = "INVALID_TOKEN", 401;
    HubUnavailable = "HUB_UNAVAILABLE", 503;
    CsrfInvalid = "CSRF_INVALID", 403;
    OauthNotConfigured = "OAUTH_NOT_CONFIGURED", 503;
    OauthFailed = "OAUTH_FAILED", 400;
    HandoffInvalid = "HANDOFF_INVALID", 400;
    InvalidAgentId = "INVALID_AGENT_ID", 422;
    InvalidRegistration = "INVALID_REGISTRATION", 422;
    AgentRegisteredByAnother = "AGENT_REGISTERED_BY_ANOTHER", 409;
    AgentImmutable = "AGENT_IMMUTABLE", 409;
    AgentNotFound = "AGENT_NOT_FOUND", 404;
    AgentNotOwned = "AGENT_NOT_OWNED", 403;
    InvalidPost = "INVALID_POST", 422;
    UnknownRefs = "UNKNOWN_REFS", 422;
    RequestIdReused = "REQUEST_ID_REUSED", 409;
    RateLimited = "RATE_LIMITED", 429;
    InvalidEnvironment = "INVALID_ENVIRONMENT", 422;
    RepoNotFound = "REPO_NOT_FOUND", 404;
    RevisionNotFound = "REVISION_NOT_FOUND", 404;
    RepoPrivate = "REPO_PRIVATE", 403;
    RepoGated = "REPO_GATED", 403;
    GithubRateLimited = "GITHUB_RATE_LIMITED", 503;
    SourceUnavailable = "SOURCE_UNAVAILABLE", 502;
    ValidationFailed = "VALIDATION_FAILED", 422;
    EnvironmentNotFound = "ENVIRONMENT_NOT_FOUND", 404;
    InvalidCheck = "INVALID_CHECK", 422;
    ChallengeNotOpen = "CHALLENGE_NOT_OPEN", 409;
    NotAuthorOrEditor = "NOT_AUTHOR_OR_EDITOR", 403;
    DailyRunLimit = "DAILY_RUN_LIMIT", 429;
    LayoutInvalid = "LAYOUT_INVALID", 409;
    AnotherRunActive = "ANOTHER_RUN_ACTIVE", 409;
    CapExceeded = "CAP_EXCEEDED", 409;
    NoEligibleTasks = "NO_ELIGIBLE_TASKS", 422;
    HeldoutNameCollision = "HELDOUT_NAME_COLLISION", 422;
    InvalidRunRequest = "INVALID_RUN_REQUEST", 422;
    LaunchUnknown = "LAUNCH_UNKNOWN", 503;
    LaunchFailed = "LAUNCH_FAILED", 502;
    RunNotFound = "RUN_NOT_FOUND", 404;
    Forbidden = "FORBIDDEN", 403;
    /// The caller is one of the arena's own accounts (its bot, a sandbox or evaluation reader):
    /// never a participant, refused everywhere before anything is stored or counted.
    ServiceAccount = "SERVICE_ACCOUNT", 403;
    /// `/mcp` asked from a page of another origin, or for a host the arena does not serve (DNS
    /// rebinding).
    OriginRefused = "ORIGIN_REFUSED", 403;
    RunNotCancelable = "RUN_NOT_CANCELABLE", 409;
    RunNotScored = "RUN_NOT_SCORED", 409;
    HeldoutUnknown = "HELDOUT_UNKNOWN", 409;
    ResultFilesMissing = "RESULT_FILES_MISSING", 422;
    ResultUnreadable = "RESULT_UNREADABLE", 422;
    ResultIncomplete = "RESULT_INCOMPLETE", 422;
    ResultMismatch = "RESULT_MISMATCH", 422;
    /// GRPO's own records (`jobs/grpo-train/`) do not account for the run's train tasks.
    TrainingRecordsInvalid = "TRAINING_RECORDS_INVALID", 422;
    ResultNotFound = "RESULT_NOT_FOUND", 404;
    InvalidReview = "INVALID_REVIEW", 422;
    ReviewExists = "REVIEW_EXISTS", 409;
    BenchmarkNotScored = "BENCHMARK_NOT_SCORED", 404;
    PlanChanged = "PLAN_CHANGED", 409;
    InvalidGateResults = "INVALID_GATE_RESULTS", 422;
    InvalidPolicy = "INVALID_POLICY", 422;
    /// A collection's result route given a baseline measurement, or the other way round.
    WrongRunPurpose = "WRONG_RUN_PURPOSE", 409;
    /// The training cluster is not connected: every OpenEnv route but the status answers 503.
    OpenenvDisconnected = "OPENENV_DISCONNECTED", 503;
    ContractInvalid = "CONTRACT_INVALID", 422;
    EnvironmentTooLargeForSandbox = "ENVIRONMENT_TOO_LARGE_FOR_SANDBOX", 422;
    SchemaInvalid = "SCHEMA_INVALID", 422;
    ImageReferenceInvalid = "IMAGE_REFERENCE_INVALID", 422;
    ImageRegistryUnsupported = "IMAGE_REGISTRY_UNSUPPORTED", 422;
    SubmissionFormatRetired = "SUBMISSION_FORMAT_RETIRED", 422;
    ImageLimitExceeded = "IMAGE_LIMIT_EXCEEDED", 422;
    ImageInaccessible = "IMAGE_INACCESSIBLE", 422;
    ImagePlatformUnsupported = "IMAGE_PLATFORM_UNSUPPORTED", 422;
    ImageManifestUnsupported = "IMAGE_MANIFEST_UNSUPPORTED", 422;
    ImageServerInvalid = "IMAGE_SERVER_INVALID", 422;
    ImageCompressedSizeExceeded = "IMAGE_COMPRESSED_SIZE_EXCEEDED", 422;
    SubmissionSizeExceeded = "SUBMISSION_SIZE_EXCEEDED", 422;
    ImageUnavailable = "IMAGE_UNAVAILABLE", 503;
    RegistryRateLimited = "REGISTRY_RATE_LIMITED", 503;
    CapacityBusy = "CAPACITY_BUSY", 503;
    /// An account's registered agents or stored collections are at their cap.
    AccountLimitReached = "ACCOUNT_LIMIT_REACHED", 409;
    SubmissionQuotaExceeded = "SUBMISSION_QUOTA_EXCEEDED", 429;
    SubmissionNotFound = "SUBMISSION_NOT_FOUND", 404;
    /// The same `submission_id` resent with a changed body.
    SubmissionIdReused = "SUBMISSION_ID_REUSED", 409;
    /// Admission: the image's server failed an `openenv validate` criterion (author).
    OpenenvEndpointInvalid = "OPENENV_ENDPOINT_INVALID", 422;
    /// Admission: the image's `/schema` differs from the submission's (author).
    ImageSchemaMismatch = "IMAGE_SCHEMA_MISMATCH", 422;
    /// Admission: the example actions did not end the episode with a reward in [0, 1] (author).
    AdmissionEpisodeFailed = "ADMISSION_EPISODE_FAILED", 422;
    /// Admission: the environment's task API (openenv 0.10) lists no task with the submitted
    /// `task_id` (author).
    TaskNotListed = "TASK_NOT_LISTED", 422;
    /// Admission: `finish_action`, sent from a fresh reset (and after the first example action),
    /// did not end the episode with a reward in [0, 1] (author).
    FinishActionInvalid = "FINISH_ACTION_INVALID", 422;
    /// A webhook's URL is not https, or its host resolves to an address the arena never calls.
    WebhookUrlRefused = "WEBHOOK_URL_REFUSED", 422;
    /// A webhook's events or format are not ones the arena knows.
    InvalidWebhook = "INVALID_WEBHOOK", 422;
    /// The account keeps as many webhooks as it may.
    WebhookLimit = "WEBHOOK_LIMIT", 409;
    WebhookNotFound = "WEBHOOK_NOT_FOUND", 404;
    /// Webhooks cannot be registered: the arena has no key to seal their secrets with
    /// (`ARENA_WEBHOOK_KEY`).
    WebhooksNotConfigured = "WEBHOOKS_NOT_CONFIGURED", 503;
    /// Admission: the sandbox never served `/health` (platform; retried).
    SandboxStartupFailed = "SANDBOX_STARTUP_FAILED", 503;
    /// Admission: the probe could not finish for the arena's reasons (platform; retried).
    AdmissionInfrastructureFailure = "ADMISSION_INFRASTRUCTURE_FAILURE", 503;
    /// An OpenEnv run was training on a node that went silent past its bound (platform).
    RunNodeLost = "RUN_NODE_LOST", 500;
    /// An OpenEnv run's trainer did not start on a GPU within two hours of its assignment.
    RunQueueTimeout = "RUN_QUEUE_TIMEOUT", 500;
    /// An OpenEnv run's time could not fit even one optimizer step.
    RunStepDoesNotFit = "RUN_STEP_DOES_NOT_FIT", 500;
    /// An OpenEnv run stopped before it ended (the cluster lost it, or its trainer failed).
    RunTrainerFailed = "RUN_TRAINER_FAILED", 500;
    /// An OpenEnv run's steps trained nothing for too long (no group of four valid rewards):
    /// ended early, never ranked.
    RunNoTrainingSignal = "RUN_NO_TRAINING_SIGNAL", 500;
    /// The cluster's held-out records of a phase do not account for every planned episode once.
    EvaluationRecordsIncomplete = "EVALUATION_RECORDS_INCOMPLETE", 422;
    /// An organizer's control without a usable reason (1 to 500 characters of one line).
    InvalidReason = "INVALID_REASON", 422;
    /// Only an OpenEnv run whose cleanup stalled (in `cleanup` over 900 s) can be released.
    RunNotReleasable = "RUN_NOT_RELEASABLE", 409;
    Internal = "INTERNAL", 500;
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

    #[test]
    fn wire_strings_are_unique_and_the_variant_in_screaming_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "{} twice", code.as_str());
            let mut snake = String::new();
            for (i, c) in format!("{code:?}").chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    snake.push('_');
                }
                snake.push(c.to_ascii_uppercase());
            }
            assert_eq!(code.as_str(), snake);
        }
    }
}
