//! Admission of accepted OpenEnv submissions, in the background: for each task, its pinned image in
//! one fresh sandbox (`probe`: `/health` within 120 s or the server's exit seen at once, the six
//! `openenv validate` criteria, the served schema against the submission's, the example actions
//! and `finish_action` played over the server's WebSocket to a terminal reward in [0, 1]). The
//! rules are `domain::openenv::admission`; each probe's outcome is stored with the submission, so a
//! restart resumes with the tasks still to probe, and every sandbox is stopped when its probe ends.
//! The verdict's report carries each refusal's evidence and fix, scrubbed of the arena's
//! credentials, and the warnings of a validated submission.

use domain::ids::{SubmissionId, TaskId};
use domain::job_labels;
use std::time::Instant;

use domain::openenv::admission::{self, Outcome, SlotState, SubmissionState, TaskProbe, Verdict};
use domain::openenv::{SubmissionReport, SubmissionRequest};
use domain::ErrorCode;
use futures_util::StreamExt;
use serde_json::Value;

use crate::AppState;

pub mod probe;
mod socket;

pub use probe::{probe_task, Sandbox};

fn platform(code: ErrorCode, message: impl Into<String>) -> Outcome {
    Outcome::Platform { code, message: message.into(), evidence: None }
}

/// Stops sandboxes no probe is using: those a crashed or restarted server left running (a probe
/// holds its submission's lease while its sandbox runs).
pub async fn sweep(s: &AppState) -> anyhow::Result<usize> {
    let Some(sandboxes) = &s.deps.sandboxes else { return Ok(0) };
    let jobs = match sandboxes.find_by_label(job_labels::PURPOSE, job_labels::ADMISSION).await {
        Ok(jobs) => jobs,
        Err(e) => {
            tracing::warn!(error = %e, "listing admission sandboxes failed; the next pass tries again");
            return Ok(0);
        }
    };
    let live: Vec<&crate::ports::jobs::Job> = jobs.iter().filter(|j| j.status.stage.is_live()).collect();
    if live.is_empty() {
        return Ok(0);
    }
    // A sandbox's label is its submission's id as HF accepts it (`domain::job_labels`).
    let probing: std::collections::BTreeSet<String> = crate::openenv::repo::probing(&s.db, s.now().epoch)
        .await?
        .iter()
        .map(|id| job_labels::value(id))
        .collect();
    let mut stopped = 0;
    for job in live {
        let submission = job.labels.get(job_labels::SUBMISSION).map(String::as_str).unwrap_or_default();
        if probing.contains(submission) {
            continue;
        }
        match sandboxes.cancel(&job.id).await {
            Ok(()) => {
                tracing::info!(job = %job.id, submission, "stopped a sandbox no probe was using");
                stopped += 1;
            }
            Err(e) => tracing::warn!(job = %job.id, error = %e, "stopping an orphaned sandbox failed"),
        }
    }
    Ok(stopped)
}

/// One pass: sandboxes left running are stopped, then each submission still validating gets its
/// pending probes and its verdict, under its admission lease (renewed while the probes run, so
/// that no other server probes it a second time).
pub async fn pass(s: &AppState) -> anyhow::Result<usize> {
    sweep(s).await?;
    crate::engine::pass(s, &Admissions(s.openenv.admissions_at_once)).await
}

/// A submission in admission: its account and id.
pub struct Validating {
    pub account_id: String,
    pub submission_id: SubmissionId,
}

impl std::fmt::Display for Validating {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.submission_id)
    }
}

/// OpenEnv submissions being admitted, on the engine (`crate::engine`), so many at once.
pub struct Admissions(pub usize);

#[async_trait::async_trait]
impl crate::engine::Track for Admissions {
    type Key = Validating;
    const RECORD: &'static str = "submission";

    /// Several accounts' submissions side by side (`due` gives one per account); their probes
    /// share this server's admission sandboxes.
    fn at_once(&self) -> usize {
        self.0
    }

    fn lease_s(&self, s: &AppState) -> i64 {
        s.openenv.lease_s
    }

    async fn due(&self, s: &AppState) -> anyhow::Result<Vec<Validating>> {
        Ok(crate::openenv::repo::admissible(&s.db, s.now().epoch)
            .await?
            .into_iter()
            .map(|(account_id, submission_id)| Validating { account_id, submission_id })
            .collect())
    }

    const LEASE: crate::engine::RowLease = crate::openenv::repo::ADMISSION_LEASE;

    fn key_values(k: &Validating) -> Vec<&str> {
        vec![k.account_id.as_str(), k.submission_id.as_str()]
    }

    async fn step(&self, s: &AppState, k: &Validating) -> anyhow::Result<bool> {
        admit(s, &k.account_id, &k.submission_id).await
    }
}

/// One round of a submission's admission: its verdict when it has one; else the next probes (as
/// many as this server's admission sandboxes allow, shared by every submission), each stored as
/// it comes in, then the verdict again. A round ends well within a probe's deadline, so that the
/// next pass takes other accounts' submissions too. True once it is decided.
async fn admit(s: &AppState, account_id: &str, submission_id: &SubmissionId) -> anyhow::Result<bool> {
    use anyhow::Context;
    let Some(stored) = crate::openenv::repo::get(&s.db, account_id, submission_id).await? else {
        return Ok(false);
    };
    let request: SubmissionRequest =
        serde_json::from_str(&stored.body).context("reading the stored submission")?;
    let images: Vec<Value> = serde_json::from_str(&stored.images).context("reading the stored images")?;
    let mut probes: Vec<TaskProbe> = serde_json::from_str(&stored.probes).unwrap_or_default();
    for t in &request.tasks {
        if !probes.iter().any(|p| p.task_id == t.task_id) {
            probes.push(TaskProbe::new(&t.task_id));
        }
    }
    let allowance = &s.openenv.allowance;
    if let Some(decided) = decided(admission::verdict(&probes, allowance)) {
        finish(s, account_id, submission_id, &probes, decided, request.finish_action.is_some()).await?;
        return Ok(true);
    }
    let image_of = |task: &str| {
        let i =
            images.iter().find(|i| i["tasks"].as_array().is_some_and(|ts| ts.iter().any(|t| t == task)))?;
        Some(Sandbox {
            image: i["resolved"].as_str().unwrap_or_default().to_string(),
            port: i["port"].as_u64().and_then(|p| u16::try_from(p).ok())?,
            start: serde_json::from_value(i["start"].clone()).ok()?,
        })
    };
    let round: Vec<(usize, String)> = probes
        .iter()
        .enumerate()
        .filter(|(_, p)| p.pending())
        .map(|(i, p)| (i, p.task_id.clone()))
        .take(per_submission(s.openenv.sandbox_limit))
        .collect();
    let request = &request;
    let image_of = &image_of;
    let mut running = futures_util::stream::iter(round)
        .map(|(i, task)| async move {
            // A sandbox of this server's allowance, whichever submission holds the others.
            let _sandbox = s.openenv.sandboxes.acquire().await;
            let started = Instant::now();
            let outcome = match image_of(&task) {
                // Checked at submission with the task id's rule, so it parses.
                Some(sandbox) => match TaskId::parse(&task) {
                    Ok(task) => probe_task(s, submission_id, request, &task, &sandbox).await,
                    Err(e) => platform(ErrorCode::AdmissionInfrastructureFailure, e.to_string()),
                },
                None => platform(
                    ErrorCode::AdmissionInfrastructureFailure,
                    "no image, port or start command recorded for the task",
                ),
            };
            (i, outcome, started.elapsed().as_secs())
        })
        .buffer_unordered(s.openenv.sandbox_limit);
    while let Some((i, outcome, spent_s)) = running.next().await {
        probes[i].attempts += 1;
        probes[i].spent_s += spent_s;
        probes[i].last = Some(outcome);
        let text = serde_json::to_string(&probes).expect("JSON");
        crate::openenv::repo::save_probes(&s.db, account_id, submission_id, &text).await?;
    }
    drop(running);
    match decided(admission::verdict(&probes, allowance)) {
        Some(verdict) => {
            finish(s, account_id, submission_id, &probes, verdict, request.finish_action.is_some()).await?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// The admission sandboxes one submission's round may hold at once: half the server's (rounded
/// up), so that a large, slow submission always leaves sandboxes to other accounts' (which wait at
/// most one probe for the next one free: the sandboxes are handed out in the order asked).
pub fn per_submission(sandbox_limit: usize) -> usize {
    sandbox_limit.div_ceil(2).max(1)
}

fn decided(verdict: Verdict) -> Option<Verdict> {
    (verdict != Verdict::Pending).then_some(verdict)
}

async fn finish(
    s: &AppState,
    account_id: &str,
    submission_id: &SubmissionId,
    probes: &[TaskProbe],
    verdict: Verdict,
    has_finish: bool,
) -> Result<(), sqlx::Error> {
    let now = s.now();
    let (state, slot, origin, errors) = match verdict {
        Verdict::Validated => (SubmissionState::Validated, SlotState::Used, None, Vec::new()),
        Verdict::Rejected { origin, slot, errors } => (SubmissionState::Rejected, slot, Some(origin), errors),
        Verdict::Pending => return Ok(()),
    };
    let secrets: Vec<&str> = s.openenv.secrets.iter().map(|s| s.0.as_str()).collect();
    let scrub = |text: &str| domain::openenv::evidence::scrubbed(text, &secrets);
    // A validated submission's only: a task that failed leaves nothing to compare.
    let warnings = if state == SubmissionState::Validated {
        admission::warnings(probes, has_finish)
    } else {
        Vec::new()
    };
    let report = SubmissionReport {
        errors: errors
            .into_iter()
            .map(|e| domain::openenv::AdmissionError {
                code: e.code.as_str().to_string(),
                // What the participant's server sent is kept bounded (and shown so).
                message: domain::openenv::evidence::printable(&domain::openenv::evidence::cut(
                    &scrub(&e.message),
                    domain::openenv::evidence::MAX_MESSAGE_CHARS,
                )),
                task_id: Some(e.task_id),
                evidence: e.evidence.map(|v| {
                    let v = domain::openenv::evidence::bounded(
                        &v,
                        domain::openenv::evidence::MAX_STORED_EVIDENCE_BYTES,
                    );
                    domain::openenv::evidence::scrubbed_value(&v, &secrets)
                }),
                fix: Some(domain::openenv::evidence::fix_for(e.code).to_string()),
            })
            .collect(),
        warnings: warnings
            .into_iter()
            .map(|w| domain::openenv::AdmissionError {
                code: w.code.into(),
                message: w.message,
                task_id: w.task_id,
                evidence: None,
                fix: None,
            })
            .collect(),
    };
    let report = serde_json::to_string(&report).expect("JSON");
    let probes = serde_json::to_string(probes).expect("JSON");
    crate::openenv::repo::decide(
        &s.db,
        account_id,
        submission_id,
        state,
        slot,
        origin,
        &report,
        &probes,
        &now,
    )
    .await?;
    tracing::info!(submission = %submission_id, %state, %slot, "admission decided");
    Ok(())
}
