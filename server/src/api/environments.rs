//! Collections: validate (identity, stores nothing), submit (validates again, pins the commit,
//! registers an `env-…` record, idempotently), list, one record, its submissions-app view, the
//! gate catalogue, and the stateless check that the served `check_task.py` and
//! `validation_gates.py` call (no identity, stores nothing).

use axum::extract::{FromRequest, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use domain::collection::listing::{self, MAX_FILES};
use domain::collection::record::{environment_id, EnvironmentRecord, PostTrain};
use domain::collection::report::Report;
use domain::collection::request::{EnvironmentRequest, Source};
use domain::gates::Severity;
use domain::registry::{Challenge, ChallengeStatus};
use domain::{ApiErrorBody, ErrorCode};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::changes::Topic;
use crate::http::{ApiError, ApiJson, ApiQuery};
use crate::identity::{Identity, User};
use crate::service::{self, environments::EnvironmentList};
use crate::sources::fetch::FetchStats;
use crate::sources::SourceError;
use crate::{clock, heldout, repo, AppState};

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

fn source_error(e: SourceError, source: &Source) -> ApiError {
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
            let wait = reset_epoch.saturating_sub(clock::now_epoch()).max(1);
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
        let agent = repo::agents::get(&s.db, agent_id).await?.ok_or_else(|| {
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
    let fetched =
        service::environments::validate(s, &source, challenge).await.map_err(|e| source_error(e, &source))?;
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
    let (source, challenge) = prepare(&s, &me, &req).await?;
    Ok(Json(run_validation(&s, &me, &req, source, challenge).await?))
}

fn collections_cap() -> ApiError {
    ApiError::new(
        ErrorCode::AccountLimitReached,
        format!(
            "your account has stored {} collections, the most one account may; ask an organizer",
            repo::environments::MAX_COLLECTIONS_PER_ACCOUNT
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
    let (source, challenge) = prepare(&s, &me, &req).await?;
    // A retry with the pinned file finds its record without reading the repository again.
    if domain::collection::request::is_commit(&source.revision) {
        let id = environment_id(&me.id, &source, &source.revision.to_ascii_lowercase());
        if let Some((record, report)) = repo::environments::get(&s.db, &id).await? {
            let report: Report = serde_json::from_str(&report).map_err(ApiError::internal)?;
            return Ok((StatusCode::OK, Json(existing_view(record, report, req))).into_response());
        }
    }
    // At the cap, refused before the repository is read (the store enforces it again).
    if repo::environments::count_by_author(&s.db, &me.id).await?
        >= repo::environments::MAX_COLLECTIONS_PER_ACCOUNT
    {
        return Err(collections_cap());
    }
    let validation = run_validation(&s, &me, &req, source.clone(), challenge).await?;
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
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response());
    }
    let commit = validation.source.commit.clone();
    let id = environment_id(&me.id, &source, &commit);
    let title = if req.title.trim().is_empty() { source.repo_id() } else { req.title.trim().to_string() };
    let (inserted, record) = repo::environments::submit(
        &s.db,
        repo::environments::NewEnvironment {
            id: &id,
            author: &me.name,
            author_id: &me.id,
            agent_id: req.agent_id.as_deref(),
            challenge_id: challenge.map(|c| c.id()).unwrap_or(domain::collection::record::TRACK),
            source: &source,
            commit: &commit,
            title: &title,
            notes: req.notes.trim(),
            report: &validation.report,
            now: &clock::rfc3339(clock::now()),
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
    let status = if inserted { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(view)).into_response())
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
    let list = service::environments::list(
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
    Path(id): Path<String>,
) -> Result<Json<EnvironmentView>, ApiError> {
    let (environment, validation) = service::environments::get(&s, &id).await?;
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
    Path(id): Path<String>,
) -> Result<Json<AppSubmissionView>, ApiError> {
    let d = service::environments::submission(&s, &id).await?;
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
    if req.files.len() > MAX_FILES {
        return Err(ApiError::new(ErrorCode::InvalidCheck, format!("at most {MAX_FILES} files")));
    }
    let mut decoded = Vec::with_capacity(req.files.len());
    for f in req.files {
        let bytes =
            base64::engine::general_purpose::STANDARD.decode(f.content_b64.as_bytes()).map_err(|_| {
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
    Ok(Json(report))
}
