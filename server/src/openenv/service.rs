//! The OpenEnv track's submissions: checked at once in the guide's order (contract, sandbox size,
//! schema and example actions, image references, each image read from its registry, sizes), then
//! the account's quota slot and the stored record in one transaction. Everything under
//! `/api/openenv` but the status answers 503 while the training cluster is not connected.

use std::collections::BTreeMap;

use domain::ids::SubmissionId;
use domain::openenv::admission::SubmissionState;
use domain::openenv::run::RunState;
use domain::openenv::{
    self, Compatibility, ImageFacts, ImageView, RunRef, Slot, SubmissionReport, SubmissionRequest,
    SubmissionView,
};
use domain::ErrorCode;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::http::ApiError;
use crate::identity::Identity;
use crate::openenv::repo::{Accepted, NewSubmission, Stored};
use crate::ports::registry::RegistryError;
use crate::AppState;

/// Registry reads in flight for one submission.
const READS_AT_ONCE: usize = 8;
/// What a client waits before resending after a 503 of ours.
const RETRY_S: u64 = 30;

/// Whether the training cluster is connected: any of its nodes heard from within the relay grace
/// period (`crate::openenv::queue`).
pub async fn connected(s: &AppState) -> Result<bool, ApiError> {
    crate::openenv::queue::is_connected(s).await
}

pub async fn require_connected(s: &AppState) -> Result<(), ApiError> {
    if connected(s).await? {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::OpenenvDisconnected,
        "the training cluster is not connected; nothing was stored. Send the identical request again later",
    )
    .retry_after(RETRY_S))
}

/// One image as stored with the submission.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredImage {
    submitted: String,
    resolved: String,
    port: u16,
    compressed_bytes: u64,
    labels: BTreeMap<String, String>,
    tasks: Vec<String>,
    /// How its sandboxes start it (`domain::openenv::sandbox_start`), from its pinned config.
    start: openenv::SandboxStart,
}

fn refusal(r: openenv::Refusal) -> ApiError {
    ApiError::new(r.code, r.message)
}

fn registry_error(image: &str, e: RegistryError) -> ApiError {
    match e {
        RegistryError::Inaccessible(m) => ApiError::new(ErrorCode::ImageInaccessible, m),
        RegistryError::PlatformUnsupported(m) => ApiError::new(ErrorCode::ImagePlatformUnsupported, m),
        RegistryError::ManifestUnsupported(m) => ApiError::new(ErrorCode::ImageManifestUnsupported, m),
        RegistryError::Unavailable(m) => ApiError::new(
            ErrorCode::ImageUnavailable,
            format!("{image}: {m}; nothing was stored: send the identical request again later"),
        )
        .retry_after(RETRY_S),
        RegistryError::RateLimited { message, retry_after_s } => {
            ApiError::new(ErrorCode::RegistryRateLimited, format!("{image}: {message}"))
                .retry_after(retry_after_s.unwrap_or(60))
        }
    }
}

/// The action and observation schemas point nowhere outside themselves and compile with the draft
/// they name (the assignment carries it to the trainer), and every example action (and the finish
/// action) is valid under the action schema: checked in a process of its own, bounded in time and
/// memory (`openenv::schema_guard`), since a schema is participant data a compiler may choke on.
async fn check_schemas(s: &AppState, account: &str, r: &SubmissionRequest) -> Result<(), ApiError> {
    use crate::openenv::schema_guard::Unchecked;
    let actions = r
        .example_actions
        .iter()
        .enumerate()
        .map(|(i, a)| (format!("example action {}", i + 1), a.clone()))
        .chain(r.finish_action.iter().map(|a| ("`finish_action`".to_string(), a.clone())))
        .collect();
    let check = domain::openenv::schema::SchemaCheck { schema: r.schema.clone(), actions };
    match s.openenv.schemas.check(account, &check).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(why)) => Err(ApiError::new(ErrorCode::SchemaInvalid, why.0)),
        Err(Unchecked::TooComplex(why)) => Err(ApiError::new(
            ErrorCode::SchemaInvalid,
            format!(
                "the schema is too complex to check: {why}. Nothing was stored; simplify it (fewer nested \
                 references and combinators, shorter patterns)"
            ),
        )),
        Err(Unchecked::Busy) => Err(ApiError::new(
            ErrorCode::CapacityBusy,
            "the arena is checking other schemas; nothing was stored. Send the identical request again shortly",
        )
        .retry_after(5)),
        Err(Unchecked::Throttled { why, retry_after_s }) => Err(ApiError::new(
            ErrorCode::RateLimited,
            format!("{why}; nothing was stored. Send it again in {retry_after_s} s"),
        )
        .retry_after(retry_after_s)),
        Err(Unchecked::Broken(why)) => Err(ApiError::internal(why)),
    }
}

fn body_hash(body: &Value) -> String {
    // serde_json's maps are ordered, so equal bodies serialize to equal bytes.
    let text = serde_json::to_string(body).expect("JSON");
    crate::identity::sha256_hex(&text)
}

/// What the at-once checks that need no registry say of a body.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Checked {
    pub tasks: usize,
    /// Each image as the arena will read it (Docker's shorthand expanded).
    pub images: Vec<String>,
}

/// `POST /api/openenv/check`: the contract, sandbox, schema and reference checks, stores nothing
/// and reads no registry (the submissions app runs it before submitting).
pub async fn check(s: &AppState, me: &Identity, body: &Value) -> Result<Checked, ApiError> {
    require_connected(s).await?;
    let r = openenv::parse(body).map_err(refusal)?;
    openenv::check_contract(&r).map_err(refusal)?;
    openenv::check_schema_shape(&r).map_err(refusal)?;
    check_schemas(s, &me.id, &r).await?;
    let (refs, _) = openenv::image_references(&r).map_err(refusal)?;
    Ok(Checked { tasks: r.tasks.len(), images: refs.iter().map(|i| i.canonical()).collect() })
}

/// `POST /api/openenv/submissions`.
pub async fn submit(s: &AppState, me: &Identity, body: Value) -> Result<SubmissionView, ApiError> {
    require_connected(s).await?;
    let r = openenv::parse(&body).map_err(refusal)?;
    openenv::check_contract(&r).map_err(refusal)?;
    openenv::check_schema_shape(&r).map_err(refusal)?;
    let (refs, by_task) = openenv::image_references(&r).map_err(refusal)?;
    let hash = body_hash(&body);
    // A resend is answered from the record, whatever the registries do now.
    if let Some(stored) = crate::openenv::repo::get(&s.db, &me.id, &r.submission_id).await? {
        let state = run_state(s, &stored).await?;
        return resend(stored, &hash, state);
    }
    // Paused intake, then the account's slot, before any registry request: neither costs the
    // registries anything.
    crate::openenv::intake::require_open(s).await?;
    let policy = &s.registry.openenv_quota;
    let quota = (!policy.exempts(&me.id, me.editor)).then_some(policy);
    if let Some(policy) = quota {
        if let Some(wait) = crate::openenv::repo::quota_wait(&s.db, &me.id, policy, s.now().epoch).await? {
            return Err(quota_used(wait, policy));
        }
    }
    if crate::openenv::repo::validating(&s.db).await? >= s.openenv.admission_queue {
        return Err(ApiError::new(
            ErrorCode::CapacityBusy,
            "the arena's sandboxes are busy with other submissions; nothing was stored: send the identical request again later",
        )
        .retry_after(RETRY_S));
    }
    // The schemas are compiled only for a submission that could be accepted: a spent quota or a
    // paused intake is answered at once, at no checker's cost.
    check_schemas(s, &me.id, &r).await?;
    // Each image once, several at a time; the first failure in submission order is answered.
    let reads: Vec<Result<ImageFacts, ApiError>> = futures_util::stream::iter(refs.iter().cloned())
        .map(|image| async move {
            let read = s.deps.registry.read(&image).await;
            read.map(|r| r.facts).map_err(|e| registry_error(&image.canonical(), e))
        })
        .buffered(READS_AT_ONCE)
        .collect()
        .await;
    let mut facts = Vec::new();
    for read in reads {
        facts.push(read?);
    }
    let mut images = Vec::new();
    for (i, (image, f)) in refs.iter().zip(&facts).enumerate() {
        let summary = openenv::judge_image(f, r.server_port, &image.canonical()).map_err(refusal)?;
        let tasks: Vec<String> = by_task.iter().filter(|(_, n)| **n == i).map(|(t, _)| t.clone()).collect();
        images.push(StoredImage {
            submitted: image.canonical(),
            resolved: image.pinned(&f.digest),
            port: summary.port,
            compressed_bytes: summary.compressed_bytes,
            labels: openenv::claimed_labels(&f.labels),
            tasks,
            start: summary.start,
        });
    }
    openenv::check_total_size(&facts.iter().collect::<Vec<_>>()).map_err(refusal)?;
    let domain::time::Timestamp { text: now, epoch } = s.now();
    let admit_after_epoch = match quota {
        Some(policy) => admit_after(s, &me.id, policy, epoch).await?,
        None => None,
    };
    let images_json = serde_json::to_string(&images).expect("JSON");
    let body_json = serde_json::to_string(&body).expect("JSON");
    let new = NewSubmission {
        account_id: &me.id,
        account: &me.name,
        submission_id: &r.submission_id,
        body_hash: &hash,
        body: &body_json,
        images: &images_json,
        now: &now,
        epoch,
        quota,
        admit_after_epoch,
    };
    match crate::openenv::repo::accept(&s.db, &new).await? {
        Accepted::Stored(stored) => view(&stored, false, None),
        Accepted::Repeat(stored) => {
            let state = run_state(s, &stored).await?;
            resend(stored, &hash, state)
        }
        Accepted::QuotaUsed { frees_epoch } => Err(quota_used(frees_epoch - epoch, policy)),
    }
}

/// Until when an account past its cap of returned slots waits before admission takes its new
/// submission: until enough of them leave the quota window. A returned slot does not count, so
/// without the cap an account whose image is judged the platform's fault could submit again and
/// again.
async fn admit_after(
    s: &AppState,
    account_id: &str,
    policy: &domain::openenv::quota::QuotaPolicy,
    now: i64,
) -> Result<Option<i64>, ApiError> {
    let returned = crate::openenv::repo::returned_since(&s.db, account_id, now - policy.window_s).await?;
    let cap = s.openenv.returned_slots_per_window.max(1) as usize;
    Ok((returned.len() >= cap).then(|| returned[returned.len() - cap] + policy.window_s))
}

fn quota_used(wait_s: i64, policy: &domain::openenv::quota::QuotaPolicy) -> ApiError {
    let wait = wait_s.max(1) as u64;
    ApiError::new(
        ErrorCode::SubmissionQuotaExceeded,
        format!("your account has used its quota ({}); a slot frees in {wait} s", policy.words()),
    )
    .retry_after(wait)
}

async fn run_state(s: &AppState, stored: &Stored) -> Result<Option<RunState>, ApiError> {
    Ok(match &stored.run_id {
        Some(id) => crate::openenv::runs::repo::get(&s.db, id).await?.map(|r| r.state),
        None => None,
    })
}

fn resend(stored: Stored, hash: &str, run_state: Option<RunState>) -> Result<SubmissionView, ApiError> {
    if stored.body_hash != hash {
        return Err(ApiError::new(
            ErrorCode::SubmissionIdReused,
            format!(
                "`{}` was submitted before with another body; a changed submission needs a new `submission_id`",
                stored.submission_id
            ),
        ));
    }
    view(&stored, true, run_state)
}

fn view(stored: &Stored, existing: bool, run_state: Option<RunState>) -> Result<SubmissionView, ApiError> {
    let request: SubmissionRequest = serde_json::from_str(&stored.body).map_err(ApiError::internal)?;
    let images: Vec<StoredImage> = serde_json::from_str(&stored.images).map_err(ApiError::internal)?;
    let report: SubmissionReport = serde_json::from_str(&stored.report).map_err(ApiError::internal)?;
    // Admission's per-task outcome, once it has one.
    let failed: BTreeMap<String, String> =
        report.errors.iter().filter_map(|e| e.task_id.clone().map(|t| (t, e.code.clone()))).collect();
    let status = |task: &str| match (stored.state, failed.get(task)) {
        (_, Some(code)) => Compatibility { status: "failed".into(), code: Some(code.clone()) },
        (SubmissionState::Validated, None) => Compatibility { status: "passed".into(), code: None },
        _ => Compatibility { status: "pending".into(), code: None },
    };
    Ok(SubmissionView {
        submission_id: stored.submission_id.clone(),
        name: request.name,
        account: stored.account.clone(),
        state: stored.state.as_str().to_string(),
        report,
        error_origin: stored.error_origin.clone(),
        slot: Slot { state: stored.slot_state.as_str().to_string(), retry_after_s: None },
        images: images
            .into_iter()
            .map(|i| ImageView {
                compatibility: i.tasks.iter().map(|t| (t.clone(), status(t))).collect(),
                submitted: i.submitted,
                resolved: i.resolved,
                port: i.port,
                compressed_bytes: i.compressed_bytes,
                labels: i.labels,
            })
            .collect(),
        run: RunRef { run_id: stored.run_id.clone(), state: run_state },
        source: request.source,
        accepted_at: stored.accepted_at.clone(),
        updated_at: stored.updated_at.clone(),
        existing,
        waiting: waiting(stored),
        queue: None,
    })
}

/// Each waiting admitted submission's place in the queue (one read of the cluster and the queue).
async fn with_places(s: &AppState, views: &mut [SubmissionView], rows: &[Stored]) -> Result<(), ApiError> {
    let waits = |r: &Stored| r.state == SubmissionState::Validated && r.run_id.is_none();
    if !rows.iter().any(waits) {
        return Ok(());
    }
    let snapshot = crate::openenv::queue::snapshot(s).await?;
    for (view, row) in views.iter_mut().zip(rows) {
        if waits(row) {
            view.queue = snapshot.place(&row.account_id, &row.submission_id);
        }
    }
    Ok(())
}

/// Why a submission still validating has not been taken by admission, while it waits.
fn waiting(stored: &Stored) -> Option<domain::openenv::Waiting> {
    let until = stored.admit_after_epoch.filter(|_| stored.state == SubmissionState::Validating)?;
    Some(domain::openenv::Waiting {
        until: time::OffsetDateTime::from_unix_timestamp(until).map(crate::clock::rfc3339).unwrap_or_default(),
        until_epoch: until,
        reason: "your account's recent submissions were rejected on the platform's side and their slots returned, \
                 more often than the arena admits in one quota window: admission takes this one when the oldest \
                 of them leaves the window"
            .into(),
    })
}

/// `GET /api/openenv/submissions/{id}`: the submitter's own; anyone else gets a 404.
pub async fn get(
    s: &AppState,
    me: &Identity,
    submission_id: &SubmissionId,
) -> Result<SubmissionView, ApiError> {
    require_connected(s).await?;
    let stored = crate::openenv::repo::get(&s.db, &me.id, submission_id).await?.ok_or_else(|| {
        ApiError::new(ErrorCode::SubmissionNotFound, format!("you have no submission `{submission_id}`"))
    })?;
    let state = run_state(s, &stored).await?;
    let mut views = [view(&stored, true, state)?];
    with_places(s, &mut views, std::slice::from_ref(&stored)).await?;
    let [mut view] = views;
    view.slot.retry_after_s = slot_wait(s, me).await?;
    Ok(view)
}

/// Seconds until the account's next slot frees, while every one is taken (a used slot's refusal
/// says when the participant may submit again).
async fn slot_wait(s: &AppState, me: &Identity) -> Result<Option<u64>, ApiError> {
    let policy = &s.registry.openenv_quota;
    if policy.exempts(&me.id, me.editor) {
        return Ok(None);
    }
    let wait = crate::openenv::repo::quota_wait(&s.db, &me.id, policy, s.now().epoch).await?;
    Ok(wait.map(|w| w.max(0) as u64))
}

/// `GET /api/openenv/submissions`: yours, or every one for an editor (the organizer view).
pub async fn list(s: &AppState, me: &Identity) -> Result<Vec<SubmissionView>, ApiError> {
    require_connected(s).await?;
    visible_to(s, me).await
}

/// What the submissions app shows one person, connected or not.
pub async fn visible_to(s: &AppState, me: &Identity) -> Result<Vec<SubmissionView>, ApiError> {
    let account = (!me.editor).then_some(me.id.as_str());
    let rows = crate::openenv::repo::list(&s.db, account).await?;
    let states = crate::openenv::runs::service::states(s, account).await?;
    let mut views = rows
        .iter()
        .map(|r| view(r, true, r.run_id.as_ref().and_then(|id| states.get(id).copied())))
        .collect::<Result<Vec<_>, _>>()?;
    with_places(s, &mut views, &rows).await?;
    Ok(views)
}
