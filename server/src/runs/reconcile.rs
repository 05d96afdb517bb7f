//! The reconciler: for each launched run that has not ended, read what the outside world says now
//! (the HF job's status, its log, the relay's last heartbeat), decide with `domain::runs::follow`,
//! and carry the decision out: the run's state, stage and reason, one event with its source, the
//! HF job canceled when it is stuck, and the reservation settled or released when the run ends.
//! Level-triggered and idempotent: a second pass, or a pass after a crash, finds nothing to do
//! twice (the state change and its event and settlement are one transaction, guarded by state).

use std::time::Duration;

use anyhow::Context;
use domain::ids::{JobId, RunId};
use domain::runs::follow::{self, Decision, RelayState, Settle};
use domain::runs::{Purpose, RunState, Stage};

use crate::changes::Topic;
use crate::clock;
use crate::http::ApiError;
use crate::jobs::repo::HfJob;
use crate::ports::jobs::{Job, JobError, JobLauncher, LogLine};
use crate::runs::repo::{Change, NewEvent, Observed, Run};
use crate::AppState;

/// How long one server may follow a run before another may take over.
pub const LEASE_S: i64 = 60;

/// Each pass reads at most this many of a job's newest log lines, and this many bytes: only what
/// is new since the last pass matters, however long the log has grown. Few enough that the read
/// reaches the newest line well within `log_read` on a slow stream (a 2,000-line tail cost 3x the
/// CPU per pass in `dev/bench-follow`); the relay, not the log, carries every step.
const LOG_TAIL: usize = 300;
const LOG_BYTES: usize = 1 << 20;
/// GPU readings kept per run (one a pass), for the run page's sparkline.
const GPU_SAMPLES: usize = 60;

/// A log line as the reconciler remembers the newest it read.
fn line_key(l: &LogLine) -> String {
    format!("{}\t{}", l.timestamp, l.line.chars().take(500).collect::<String>())
}

/// The lines of a tail that come after the newest one read before (all of them when that one is
/// no longer in the window), and whether they follow on from it (no line was missed between).
fn new_lines<'a>(tail: &'a [LogLine], last: Option<&str>) -> (&'a [LogLine], bool) {
    match last.map(|k| tail.iter().rposition(|l| line_key(l) == k)) {
        Some(Some(i)) => (&tail[i + 1..], true),
        Some(None) => (tail, false),
        None => (tail, true),
    }
}

fn epoch_of(text: Option<&str>) -> Option<i64> {
    text.and_then(clock::parse_rfc3339).map(|t| t.unix_timestamp())
}

/// One pass over every run that is being followed; answers how many changed.
pub async fn pass(s: &AppState) -> anyhow::Result<usize> {
    let changed = crate::engine::pass(s, &Following).await?;
    if changed > 0 {
        s.changes.bump(Topic::Runs);
        s.changes.bump(Topic::Ledger);
    }
    Ok(changed)
}

/// The job as HF shows it; a job HF no longer knows is a deleted one.
async fn inspect(jobs: &dyn JobLauncher, job_id: &JobId) -> anyhow::Result<Job> {
    match jobs.inspect(job_id).await {
        Ok(job) => Ok(job),
        Err(JobError::NotFound) => Ok(Job {
            id: job_id.clone(),
            status: crate::ports::jobs::JobStatus {
                stage: domain::runs::JobStage::Deleted,
                message: Some("HF no longer knows the job".into()),
                expose_urls: Vec::new(),
            },
            command: Vec::new(),
            flavor: None,
            labels: Default::default(),
            created_at: None,
            started_at: None,
            finished_at: None,
            durations: Default::default(),
            expose: None,
        }),
        Err(e) => Err(anyhow::Error::new(e).context("reading the job from HF")),
    }
}

/// The job's GPUs now, as one sample (the mean utilisation and the memory in use), if HF's
/// metrics say.
async fn gpu_sample(jobs: &dyn JobLauncher, job_id: &JobId, now: i64) -> Option<domain::runs::GpuSample> {
    let m = jobs.metrics(job_id, Duration::from_secs(2)).await.ok()??;
    if m.gpus.is_empty() {
        return None;
    }
    let n = m.gpus.len() as f64;
    Some(domain::runs::GpuSample {
        epoch: now,
        utilization_pct: (m.gpus.values().map(|g| g.utilization).sum::<f64>() / n).clamp(0.0, 100.0).round()
            as u32,
        memory_used_mib: (m.gpus.values().map(|g| g.memory_used_bytes).sum::<f64>() / f64::from(1u32 << 20))
            as u64,
    })
}

/// The pipeline's own error, when it published its failure (`reports/hub_run.json`).
async fn pipeline_error(s: &AppState, run_id: &RunId) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct HubRun {
        status: String,
        #[serde(default)]
        error: Option<String>,
    }
    let head = s.deps.datasets.head(&s.runs_dataset).await.ok()?;
    let path = format!("runs/{run_id}/reports/hub_run.json");
    let bytes = s.deps.datasets.read(&s.runs_dataset, &head, &path, 64 << 10).await.ok()?;
    let record: HubRun = serde_json::from_slice(&bytes).ok()?;
    let error: String =
        (record.status == "failed").then_some(record.error).flatten()?.chars().take(2000).collect();
    Some(domain::runs::redact_tasks(&error, &s.sealed_task_ids()))
}

/// The run's GPU samples with `gpu` added (the newest `GPU_SAMPLES`, as JSON) and since when its
/// GPUs all read idle.
fn gpu_window(run: &Run, gpu: Option<domain::runs::GpuSample>, now: i64) -> (String, Option<i64>) {
    let mut samples: Vec<domain::runs::GpuSample> =
        serde_json::from_str(&run.gpu_samples).unwrap_or_default();
    let idle_since = match &gpu {
        Some(g) if g.utilization_pct == 0 => run.gpus_idle_since.or(Some(now)),
        Some(_) => None,
        None => run.gpus_idle_since,
    };
    if let Some(g) = gpu {
        samples.push(g);
        let drop = samples.len().saturating_sub(GPU_SAMPLES);
        samples.drain(..drop);
    }
    (serde_json::to_string(&samples).unwrap_or_else(|_| "[]".into()), idle_since)
}

/// A completed job's result files are in the runs dataset; their commit is kept, since collect
/// reads the evidence at this commit, not at whatever the dataset holds later.
async fn results_found(s: &AppState, run: &Run) -> anyhow::Result<bool> {
    let commit = results_written(s, run).await?;
    if let Some(commit) = &commit {
        crate::runs::repo::set_results_commit(&s.db, &run.id, commit).await?;
    }
    Ok(commit.is_some())
}

// Long: one pass reads the run twice (before and after the outside reads, so the relay's messages
// meanwhile count) and must decide on one consistent set of facts.
/// One pass over one launched run: HF's status, the log's new lines, the GPUs, the relay; then
/// `follow::decide` and, when it changes the run, the change applied with its settlement.
async fn follow_one(s: &AppState, id: &RunId) -> anyhow::Result<bool> {
    let run = crate::runs::repo::get(&s.db, id).await?.context("the run vanished")?;
    let Some(job_id) = run.job_id.clone() else { return Ok(false) };
    let jobs = s.launcher_of(&run.challenge_id)?.as_ref();
    let job = inspect(jobs, &job_id).await?;
    // The log's newest lines: those after the last one read are new; a new one means progress, and
    // the newest that names a step says which stage.
    let tail = jobs.logs(&job_id, Some(LOG_TAIL), s.reconcile.log_read, LOG_BYTES).await.unwrap_or_default();
    let (fresh, follows_on) = new_lines(&tail, run.log_last_line.as_deref());
    let domain::time::Timestamp { text: at, epoch: now } = s.now();
    let gpu = if job.status.stage.is_active() { gpu_sample(jobs, &job_id, now).await } else { None };
    // Read again now: what the relay stored meanwhile is in it.
    let run = crate::runs::repo::get(&s.db, id).await?.context("the run vanished")?;
    let log_stage = fresh.iter().rev().find_map(|l| follow::stage_of_log_line(&l.line)).or(run.log_stage);
    // TRL's per-step lines, numbered by the rollout lines before them: from an earlier pass only
    // when no line was missed since (after a gap, a step line waits for a rollout line to follow).
    let remembered = run.log_rollout_step.filter(|_| follows_on).map(|s| s.max(0) as u64);
    let mut trl = domain::training::log::LogState { rollout_step: remembered };
    let points = trl.lines(fresh.iter().map(|l| l.line.as_str()));
    crate::runs::repo::add_train_points(&s.db, id, &points, "logs", &at).await?;
    let last_log = fresh.last().map(|l| l.timestamp.clone()).or(run.log_last_at.clone());
    let last_line = fresh.last().map(line_key).or(run.log_last_line.clone());
    let (gpu_samples, idle_since) = gpu_window(&run, gpu, now);
    let observed = Observed {
        job_status: job.status.stage.as_str(),
        job_created_epoch: epoch_of(job.created_at.as_deref()),
        job_started_epoch: epoch_of(job.started_at.as_deref()),
        log_lines: run.log_lines + fresh.len() as i64,
        log_seen_epoch: if fresh.is_empty() { run.log_seen_epoch } else { Some(now) },
        log_last_at: last_log.as_deref(),
        log_stage: log_stage.map(Stage::as_str),
        log_last_line: last_line.as_deref(),
        gpu_samples: &gpu_samples,
        gpus_idle_since: idle_since,
        log_rollout_step: trl.rollout_step.map(|s| s.min(i64::MAX as u64) as i64),
    };
    crate::runs::repo::observe(&s.db, id, &observed).await?;
    let relay = follow::relay_now(
        RelayState::parse(&run.relay_state),
        run.relay_seen_epoch,
        now,
        s.reconcile.relay_grace_s,
    );
    if relay.as_str() != run.relay_state {
        crate::runs::repo::set_relay_state(&s.db, id, relay.as_str()).await?;
    }
    let has_results = if job.status.stage == domain::runs::JobStage::Completed {
        Some(results_found(s, &run).await?)
    } else {
        None
    };
    let pipeline_error = if job.status.stage == "ERROR" { pipeline_error(s, id).await } else { None };
    let facts = follow::Facts {
        state: run.state,
        stage: run.stage,
        relay,
        relay_seen_epoch: run.relay_seen_epoch,
        log_seen_epoch: observed.log_seen_epoch,
        log_stage,
        gpus_idle_since: idle_since,
        now,
        job: follow::Job {
            stage: job.status.stage.clone(),
            message: job.status.message.clone(),
            created_epoch: observed.job_created_epoch.unwrap_or(run.created_epoch),
            started_epoch: observed.job_started_epoch,
            has_results,
            pipeline_error,
        },
    };
    let decision = follow::decide(&facts, s.reconcile.limits(&s.registry, &run.challenge_id));
    record_job(s, &run, &job, last_log.as_deref(), &at).await?;
    let Some(d) = decision else {
        if Some(job.status.stage.as_str()) != run.job_status.as_deref() || !fresh.is_empty() {
            s.changes.bump(Topic::Runs);
        }
        return Ok(false);
    };
    if d.cancel_job {
        if let Err(e) = jobs.cancel(&job_id).await {
            tracing::warn!(run = %id, error = %e, "canceling a stuck job failed; the run ends anyway");
        }
    }
    let settle = d.settle.map(|how| settlement(s, &run, &job, last_log.as_deref(), how));
    apply(s, &run, &d, settle, &at, now).await?;
    Ok(true)
}

async fn apply(
    s: &AppState,
    run: &Run,
    d: &Decision,
    settle: Option<Option<i64>>,
    at: &str,
    now: i64,
) -> Result<(), sqlx::Error> {
    let change = Change {
        from: run.state,
        state: d.state,
        stage: d.stage.map(Stage::as_str),
        reason: d.reason.as_deref(),
        platform_fault: d.platform_fault,
        event: NewEvent {
            run_id: &run.id,
            at,
            epoch: now,
            source: &d.event.0,
            kind: &d.event.1,
            detail: &d.event.2,
            stage: d.stage.map(Stage::as_str),
            ..Default::default()
        },
        settle_cents: settle,
    };
    crate::runs::repo::apply(&s.db, &run.id, &change).await.map(|_applied| ())
}

/// The files a finished run of each purpose leaves under `runs/{id}/reports/`.
pub fn result_files(purpose: Purpose) -> [&'static str; 2] {
    match purpose {
        Purpose::Collection => ["score.json", "eval_task_outcomes.json"],
        Purpose::Baseline => ["baseline.json", "eval_task_outcomes.json"],
    }
}

/// The runs dataset commit holding every result file of the run, if the pipeline wrote them.
async fn results_written(s: &AppState, run: &Run) -> anyhow::Result<Option<String>> {
    use crate::ports::datasets::DatasetError;
    let commit = s.deps.datasets.head(&s.runs_dataset).await.context("reading the runs dataset")?;
    for file in result_files(run.purpose) {
        let path = format!("runs/{}/reports/{file}", run.id);
        match s.deps.datasets.read(&s.runs_dataset, &commit, &path, 64 << 20).await {
            Ok(_) => {}
            Err(DatasetError::NotFound) => return Ok(None),
            Err(e) => return Err(anyhow::Error::new(e).context("reading the run's results")),
        }
    }
    Ok(Some(commit))
}

/// The job's running seconds as HF recorded them (or as its times say).
fn running_s(job: &Job) -> f64 {
    if let Some(s) = job.durations.running_secs {
        return s;
    }
    match (epoch_of(job.started_at.as_deref()), epoch_of(job.finished_at.as_deref())) {
        (Some(a), Some(b)) => (b - a).max(0) as f64,
        _ => 0.0,
    }
}

/// A run job's price per hour: its challenge's, plus HF's surcharge for the bridge's exposed port
/// (every run job exposes it), so the ledger and the jobs page price a job the same.
fn hourly(s: &AppState, run: &Run) -> f64 {
    let flavor = s
        .registry
        .challenge(&run.challenge_id)
        .and_then(|c| domain::catalog::hourly_price(&s.registry, c))
        .unwrap_or(0.0);
    domain::budget::job_hourly_usd(flavor, true)
}

/// The reservation's end: `Some(cents)` settled, `None` released.
fn settlement(s: &AppState, run: &Run, job: &Job, last_log: Option<&str>, how: Settle) -> Option<i64> {
    let secs = match how {
        Settle::Release => return None,
        Settle::AtDuration => running_s(job),
        Settle::UpToLastLog => match (epoch_of(job.started_at.as_deref()), epoch_of(last_log)) {
            (Some(start), Some(last)) => (last - start).max(0) as f64,
            _ => running_s(job),
        },
    };
    // It started, so it is billed: at least its first minute (times here have whole seconds).
    let secs = if job.started_at.is_some() { secs.max(1.0) } else { secs };
    Some(follow::cost_cents(hourly(s, run), secs))
}

/// Keeps the job's priced record (what HF's records say was spent).
async fn record_job(
    s: &AppState,
    run: &Run,
    job: &Job,
    last_log: Option<&str>,
    now: &str,
) -> Result<(), sqlx::Error> {
    let secs = if job.status.stage == "CANCELED" {
        match (epoch_of(job.started_at.as_deref()), epoch_of(last_log)) {
            (Some(a), Some(b)) => (b - a).max(0) as f64,
            _ => running_s(job),
        }
    } else {
        running_s(job)
    };
    let secs = if job.started_at.is_some() { secs.max(1.0) } else { secs };
    let row = HfJob {
        job_id: &job.id,
        run_id: Some(&run.id),
        purpose: job.labels.get(domain::job_labels::PURPOSE).map(String::as_str).unwrap_or("challenge-run"),
        flavor: job.flavor.as_deref().unwrap_or(&run.flavor),
        stage: job.status.stage.as_str(),
        created_at: job.created_at.as_deref(),
        started_at: job.started_at.as_deref(),
        finished_at: job.finished_at.as_deref(),
        running_s: secs,
        cost_cents: follow::cost_cents(hourly(s, run), secs),
        now,
    };
    crate::jobs::repo::upsert_hf_job(&s.db, &row).await
}

/// Cancels a run: its HF job first (if any), then the run, with its reservation settled up to the
/// job's last log line, or released if it never started.
pub async fn cancel(s: &AppState, run: &Run, by: &str) -> Result<(), ApiError> {
    let domain::time::Timestamp { text: at, epoch: now } = s.now();
    let mut job_view = None;
    let jobs = s.launcher_of(&run.challenge_id).map_err(ApiError::internal)?.as_ref();
    if let Some(job_id) = &run.job_id {
        match jobs.cancel(job_id).await {
            Ok(()) | Err(JobError::NotFound) => {}
            Err(JobError::Unavailable { reason, .. }) => {
                return Err(ApiError::new(
                    domain::ErrorCode::HubUnavailable,
                    format!("HF Jobs did not answer the cancel ({reason}); the run goes on: try again"),
                ))
            }
            Err(e) => return Err(ApiError::internal(e)),
        }
        job_view = inspect(jobs, job_id).await.ok();
    }
    let logs: Vec<LogLine> = match &run.job_id {
        Some(job_id) => {
            jobs.logs(job_id, Some(1), Duration::from_millis(300), 64 << 10).await.unwrap_or_default()
        }
        None => Vec::new(),
    };
    let last_log = logs.last().map(|l| l.timestamp.clone()).or(run.log_last_at.clone());
    let settle = match &job_view {
        Some(job) if job.started_at.is_some() => {
            settlement(s, run, job, last_log.as_deref(), Settle::UpToLastLog)
        }
        _ => None,
    };
    if let Some(job) = &job_view {
        record_job(s, run, job, last_log.as_deref(), &at).await.map_err(ApiError::internal)?;
    }
    let reason = format!("canceled by {by}");
    let d = Decision {
        state: RunState::Canceled,
        stage: run.stage,
        reason: Some(reason.clone()),
        platform_fault: false,
        cancel_job: false,
        settle: None,
        event: ("cancel".into(), "canceled".into(), reason),
    };
    apply(s, run, &d, Some(settle), &at, now).await.map_err(ApiError::internal)?;
    s.changes.bump(Topic::Runs);
    s.changes.bump(Topic::Ledger);
    Ok(())
}

/// Launched runs that have not ended, on the engine (`crate::engine`), under the run's one lease.
pub struct Following;

#[async_trait::async_trait]
impl crate::engine::Track for Following {
    type Key = RunId;
    const RECORD: &'static str = "run";

    /// Each waits on HF and on its log stream.
    fn at_once(&self) -> usize {
        8
    }

    fn lease_s(&self, _: &AppState) -> i64 {
        LEASE_S
    }

    async fn due(&self, s: &AppState) -> anyhow::Result<Vec<RunId>> {
        Ok(crate::runs::repo::following(&s.db).await?)
    }

    const LEASE: crate::engine::RowLease = crate::runs::repo::LEASE;

    fn key_values(id: &RunId) -> Vec<&str> {
        vec![id.as_str()]
    }

    async fn step(&self, s: &AppState, id: &RunId) -> anyhow::Result<bool> {
        follow_one(s, id).await
    }
}
