//! Validation and submission: a request checked against the challenge and the agent, the source
//! read at its commit and judged, and the record stored once per pinned source and author; and the
//! stateless check of uploaded files.

use base64::Engine;
use domain::collection::listing::{self, MAX_FILES};
use domain::collection::record::{environment_id, EnvironmentRecord};
use domain::collection::report::Report;
use domain::collection::request::{EnvironmentRequest, Source};
use domain::gates::Severity;
use domain::registry::{Challenge, ChallengeStatus};
use domain::ErrorCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::changes::Topic;
use crate::http::ApiError;
use crate::identity::Identity;
use crate::sources::fetch::FetchStats;
use crate::sources::SourceError;
use crate::{clock, heldout, AppState};

#[derive(Serialize, ToSchema)]
pub struct SourceView {
    pub repo_type: String,
    pub repo_id: String,
    pub revision: String,
    /// The commit the revision resolved to: what `submit` pins.
    pub commit: String,
    pub entry_path: String,
    pub url: String,
}

#[derive(Serialize, ToSchema)]
pub struct ValidationView {
    pub challenge_id: String,
    pub source: SourceView,
    #[serde(flatten)]
    pub report: Report,
    pub fetch: FetchStats,
}

fn source_error(e: SourceError, source: &Source, now_epoch: i64) -> ApiError {
    let host = match source.repo_type {
        domain::collection::request::RepoType::Dataset => "Hugging Face datasets",
        domain::collection::request::RepoType::Github => "GitHub",
    };
    let repo = source.repo_id();
    match e {
        SourceError::RepoNotFound => ApiError::new(
            ErrorCode::RepoNotFound,
            format!("`{repo}` was not found on {host}; check `repo_type` and `repo_id` (the repository must be public)"),
        ),
        SourceError::RevisionNotFound(rev) => ApiError::new(
            ErrorCode::RevisionNotFound,
            format!("`{repo}` has no branch, tag or commit `{rev}`"),
        ),
        SourceError::Private => ApiError::new(
            ErrorCode::RepoPrivate,
            format!("`{repo}` is private on {host} (or, on the Hub, missing): the arena reads only public repositories; check the name and make it public"),
        ),
        SourceError::Gated => ApiError::new(
            ErrorCode::RepoGated,
            format!("`{repo}` is gated on Hugging Face: the arena reads only public, ungated datasets; remove the gate"),
        ),
        SourceError::RateLimited { limit, reset_epoch } => {
            let wait = reset_epoch.saturating_sub(now_epoch.max(0) as u64).max(1);
            let at = time::OffsetDateTime::from_unix_timestamp(reset_epoch as i64)
                .map(clock::rfc3339)
                .unwrap_or_else(|_| format!("epoch {reset_epoch}"));
            ApiError::new(
                ErrorCode::GithubRateLimited,
                format!(
                    "GitHub's hourly API limit for the arena ({limit} requests, shared by every participant's GitHub validations) is used up; it resets at {at} (in {wait} s). A collection on a Hugging Face dataset does not use GitHub's API."
                ),
            )
            .retry_after(wait)
        }
        SourceError::TooLarge(why) | SourceError::Unreadable(why) => ApiError::new(ErrorCode::InvalidEnvironment, why),
        e @ SourceError::NotADirectory(_) => ApiError::new(ErrorCode::InvalidEnvironment, e.to_string()),
        SourceError::Unavailable(why) => ApiError::new(ErrorCode::SourceUnavailable, format!("{host}: {why}; try again shortly")),
    }
}

/// Checks the request, the challenge (or the track: `challenge_id` may name the collections'
/// track, `environments`, instead of an open challenge) and the agent; answers the source to read.
async fn prepare<'a>(
    s: &'a AppState,
    me: &Identity,
    req: &EnvironmentRequest,
) -> Result<(Source, Option<&'a Challenge>), ApiError> {
    let source =
        req.source().map_err(|problems| ApiError::new(ErrorCode::InvalidEnvironment, problems.join("; ")))?;
    let challenge = if req.challenge_id == domain::collection::record::TRACK {
        None
    } else {
        Some(s.registry.challenge(&req.challenge_id).ok_or_else(|| {
            ApiError::new(
                ErrorCode::ChallengeNotFound,
                format!(
                    "no challenge `{}`; `challenges` lists them (or name the track, `environments`)",
                    req.challenge_id
                ),
            )
        })?)
    };
    if let Some(challenge) = challenge.filter(|c| c.spec.challenge.status != ChallengeStatus::Open) {
        return Err(ApiError::new(
            ErrorCode::InvalidEnvironment,
            format!(
                "`{}` is {} and takes no collections",
                challenge.id(),
                challenge.spec.challenge.status.as_str()
            ),
        ));
    }
    if let Some(agent_id) = &req.agent_id {
        let no_agent = || {
            ApiError::new(
                ErrorCode::AgentNotFound,
                format!("no agent `{agent_id}`; register it first, or send `agent_id: null`"),
            )
        };
        // A string that is no agent id names no agent.
        let parsed = domain::agents::AgentId::parse(agent_id).map_err(|_| no_agent())?;
        let agent = crate::agents::service::get(s, &parsed).await?.ok_or_else(|| {
            ApiError::new(
                ErrorCode::AgentNotFound,
                format!("no agent `{agent_id}`; register it first, or send `agent_id: null`"),
            )
        })?;
        if agent.owner_id != me.id {
            return Err(ApiError::new(
                ErrorCode::AgentNotOwned,
                format!("the agent `{agent_id}` belongs to another HF user"),
            ));
        }
    }
    Ok((source, challenge))
}

async fn run_validation(
    s: &AppState,
    me: &Identity,
    req: &EnvironmentRequest,
    source: Source,
    challenge: Option<&Challenge>,
) -> Result<ValidationView, ApiError> {
    if !me.editor {
        s.sources.admit_validation(&me.id).map_err(|wait| {
            ApiError::new(
                ErrorCode::RateLimited,
                format!(
                    "{} validations an hour per account (each compares with the sealed held-out suite); wait {wait} s",
                    s.sources.validations_per_hour
                ),
            )
            .retry_after(wait)
        })?;
    }
    let fetched = super::service::validate(s, &source, challenge)
        .await
        .map_err(|e| source_error(e, &source, s.now().epoch))?;
    let report = fetched.report;
    Ok(ValidationView {
        challenge_id: req.challenge_id.clone(),
        source: SourceView {
            repo_type: source.repo_type.as_str().into(),
            repo_id: source.repo_id(),
            revision: source.revision.clone(),
            url: source.browse_url(&fetched.commit),
            commit: fetched.commit,
            entry_path: source.entry_path.clone(),
        },
        report,
        fetch: fetched.stats,
    })
}

/// Validates `req` for `me`: reads the source and judges it; stores nothing.
pub async fn validate(
    s: &AppState,
    me: &Identity,
    req: &EnvironmentRequest,
) -> Result<ValidationView, ApiError> {
    let (source, challenge) = prepare(s, me, req).await?;
    run_validation(s, me, req, source, challenge).await
}

fn collections_cap() -> ApiError {
    ApiError::new(
        ErrorCode::AccountLimitReached,
        format!(
            "your account has stored {} collections, the most one account may; ask an organizer",
            super::repo::MAX_COLLECTIONS_PER_ACCOUNT
        ),
    )
}

#[derive(Serialize, ToSchema)]
#[schema(as = EnvironmentSubmission)]
pub struct SubmissionView {
    pub environment_id: String,
    /// True when this pinned source was already submitted by you: the first title, notes and agent are kept.
    pub existing: bool,
    pub title: String,
    pub notes: String,
    pub agent_id: Option<String>,
    /// The request pinned to the commit: retry with it, not with the moving branch.
    pub pinned: EnvironmentRequest,
    pub environment: EnvironmentRecord,
    pub validation: ValidationView,
}

#[derive(Serialize, ToSchema)]
pub struct ValidationFailed {
    pub code: ErrorCode,
    pub message: String,
    /// With `VALIDATION_FAILED`; absent for `INVALID_ENVIRONMENT`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationView>,
}

/// What a submission did.
pub enum Submitted {
    /// Stored now (`inserted`) or found stored.
    Stored { view: Box<SubmissionView>, inserted: bool },
    /// The validation failed: nothing was stored.
    Failed(Box<ValidationFailed>),
}

/// Submits `req` for `me`: validated again and pinned to its commit, stored once.
pub async fn submit(s: &AppState, me: &Identity, req: EnvironmentRequest) -> Result<Submitted, ApiError> {
    let (source, challenge) = prepare(s, me, &req).await?;
    // A retry with the pinned file finds its record without reading the repository again.
    if domain::collection::request::is_commit(&source.revision) {
        let id = environment_id(&me.id, &source, &source.revision.to_ascii_lowercase());
        if let Some((record, report)) = super::repo::get(&s.db, &id).await? {
            let report: Report = serde_json::from_str(&report).map_err(ApiError::internal)?;
            return Ok(Submitted::Stored {
                view: Box::new(existing_view(record, report, req)),
                inserted: false,
            });
        }
    }
    // At the cap, refused before the repository is read (the store enforces it again).
    if super::repo::count_by_author(&s.db, &me.id).await? >= super::repo::MAX_COLLECTIONS_PER_ACCOUNT {
        return Err(collections_cap());
    }
    let validation = run_validation(s, me, &req, source.clone(), challenge).await?;
    if !validation.report.valid {
        let blocked = validation
            .report
            .quality_gates
            .static_
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Block)
            .count();
        let message = format!(
            "validation failed: {} structure error(s), {blocked} blocking finding(s); nothing was registered",
            validation.report.errors.len()
        );
        let body =
            ValidationFailed { code: ErrorCode::ValidationFailed, message, validation: Some(validation) };
        return Ok(Submitted::Failed(Box::new(body)));
    }
    let commit = validation.source.commit.clone();
    let id = environment_id(&me.id, &source, &commit);
    let title = if req.title.trim().is_empty() { source.repo_id() } else { req.title.trim().to_string() };
    let (inserted, record) = super::repo::submit(
        &s.db,
        super::repo::NewEnvironment {
            id: &id,
            author: &me.name,
            author_id: &me.id,
            agent_id: req.agent_id.as_deref(),
            challenge_id: challenge.map(|c| c.id().as_str()).unwrap_or(domain::collection::record::TRACK),
            source: &source,
            commit: &commit,
            title: &title,
            notes: req.notes.trim(),
            report: &validation.report,
            now: &s.now().text,
        },
    )
    .await?
    .ok_or_else(collections_cap)?;
    if inserted {
        s.changes.bump(Topic::Environments);
    }
    let pinned = EnvironmentRequest { revision: commit, entry_path: source.entry_path.clone(), ..req };
    let view = SubmissionView {
        environment_id: record.environment_id.clone(),
        existing: !inserted,
        title: record.title.clone(),
        notes: record.notes.clone(),
        agent_id: record.agent_id.clone(),
        pinned,
        environment: record,
        validation,
    };
    Ok(Submitted::Stored { view: Box::new(view), inserted })
}

/// The answer for a submission already stored: its stored validation, nothing fetched.
fn existing_view(record: EnvironmentRecord, report: Report, req: EnvironmentRequest) -> SubmissionView {
    let validation = ValidationView {
        challenge_id: record.challenge_id.clone(),
        source: SourceView {
            repo_type: record.repo_type.clone(),
            repo_id: record.repo_id.clone(),
            revision: record.revision.clone(),
            commit: record.commit.clone(),
            entry_path: record.entry_path.clone(),
            url: record.source_url.clone(),
        },
        report,
        fetch: FetchStats { requests: 0, listed_files: 0, files_read: 0, bytes_read: 0, millis: 0 },
    };
    SubmissionView {
        environment_id: record.environment_id.clone(),
        existing: true,
        title: record.title.clone(),
        notes: record.notes.clone(),
        agent_id: record.agent_id.clone(),
        pinned: EnvironmentRequest {
            revision: record.commit.clone(),
            entry_path: record.entry_path.clone(),
            ..req
        },
        environment: record,
        validation,
    }
}

#[derive(Deserialize, ToSchema)]
pub struct CheckFile {
    /// Relative to the collection root, `/`-separated.
    pub path: String,
    /// Standard base64, padded.
    #[schema(pattern = r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")]
    pub content_b64: String,
    #[serde(default)]
    pub symlink: bool,
}

#[derive(Deserialize, ToSchema)]
pub struct CheckRequest {
    pub files: Vec<CheckFile>,
    /// The challenge whose suites count as evaluated (default: the first open one).
    #[serde(default)]
    pub challenge_id: Option<String>,
}

/// The stateless check of uploaded files (`/api/check`): decoded, listed and checked like a
/// validation, against the public suites only (the sealed ones need an identity).
pub async fn check(s: &AppState, req: CheckRequest) -> Result<Report, ApiError> {
    if req.files.len() > MAX_FILES {
        return Err(ApiError::new(ErrorCode::InvalidCheck, format!("at most {MAX_FILES} files")));
    }
    // Standard and padded, as the schema's pattern says; unused trailing bits are ignored, as
    // Python's `base64.b64decode` ignores them, so every string the pattern admits decodes.
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    let mut decoded = Vec::with_capacity(req.files.len());
    for f in req.files {
        let bytes = engine.decode(f.content_b64.as_bytes()).map_err(|_| {
            let shown: String = f.path.chars().take(200).collect();
            ApiError::new(ErrorCode::InvalidCheck, format!("`{shown}`: content_b64 is not base64"))
        })?;
        decoded.push((f.path, bytes, f.symlink));
    }
    let challenge =
        match &req.challenge_id {
            Some(id) => Some(s.registry.challenge(id).ok_or_else(|| {
                ApiError::new(ErrorCode::ChallengeNotFound, format!("no challenge `{id}`"))
            })?),
            None => s.registry.challenges.iter().find(|c| c.spec.challenge.status == ChallengeStatus::Open),
        };
    // The private (sealed) suites are compared only at validation, which needs an identity.
    let public: Vec<_> = s.fingerprints.iter().filter(|f| !f.sealed).cloned().collect();
    let held = heldout::for_challenge(&public, challenge);
    let report = tokio::task::spawn_blocking(move || {
        let (listing, contents) =
            listing::from_files(decoded.iter().map(|(p, b, l)| (p.as_str(), b.as_slice(), *l)));
        domain::collection::check_tasks(&listing, &contents, &held)
    })
    .await
    .map_err(ApiError::internal)?;
    Ok(report)
}
