//! The stand-in's table of HF jobs: what the hub holds, apart from the Jobs routes (`crate::jobs`)
//! that read the hub.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::job_record::{now_rfc3339, JobFaults, JobView};

pub struct Job {
    pub view: JobView,
    /// The job's main process while a command runs (`crate::runner`).
    pub pid: Option<u32>,
    pub namespace: String,
    /// The secret values, for the simulated pipeline only.
    pub secrets: BTreeMap<String, String>,
    pub logs: Vec<(String, String)>,
    pub faults: JobFaults,
    pub created: std::time::Instant,
    pub started: Option<std::time::Instant>,
    pub finished: Option<std::time::Instant>,
    pub cancel: Arc<tokio::sync::Notify>,
}

impl Job {
    pub fn stage(&self) -> &str {
        self.view.status["stage"].as_str().unwrap_or("")
    }

    pub fn finished(&self) -> bool {
        matches!(self.stage(), "COMPLETED" | "CANCELED" | "ERROR" | "DELETED")
    }

    pub(crate) fn refresh(&mut self) {
        let secs = |a: std::time::Instant, b: Option<std::time::Instant>| {
            b.unwrap_or_else(std::time::Instant::now).duration_since(a).as_secs_f64()
        };
        let scheduling = secs(self.created, self.started.or(self.finished));
        let running = self.started.map(|s| secs(s, self.finished));
        self.view.durations = json!({
            "schedulingSecs": scheduling,
            "runningSecs": running,
            "totalSecs": secs(self.created, self.finished),
        });
    }
}

#[derive(Default)]
pub struct Jobs {
    pub jobs: std::sync::Mutex<Vec<Job>>,
    pub faults: std::sync::Mutex<JobFaults>,
    pub(crate) next: AtomicU64,
    /// How long each simulated step takes, in ms (`STANDIN_STEP_MS` of a job's programs).
    pub stage_ms: AtomicU64,
    /// Each create's body as it came, secret values masked: `GET /_standin/jobs/bodies`.
    pub bodies: std::sync::Mutex<Vec<Value>>,
    /// How long a sandbox (a job that exposes a port) stays `SCHEDULING` before its command starts,
    /// in ms, as HF's scheduling and image pull delay its first `/health` (`STANDIN_SANDBOX_START_S`,
    /// `PUT /_standin/sandboxes`).
    pub sandbox_start_ms: AtomicU64,
    /// The next this many sandboxes never start: they stay `SCHEDULING` until canceled.
    pub never_serve: std::sync::atomic::AtomicU32,
    /// Answer nulls from the start (`STANDIN_JOB_NULLS=1`), as the `nulls` switch does.
    pub nulls_always: std::sync::atomic::AtomicBool,
    /// The summaries of the latest dataset commits, newest last (`KEPT_COMMITS`): `crash_at` waits
    /// for a run's checkpoint among them (`crate::runner`).
    pub commits: std::sync::Mutex<std::collections::VecDeque<String>>,
}

/// The bodies kept for `GET /_standin/jobs/bodies`, newest last.
pub(crate) const KEPT_BODIES: usize = 2000;
/// The commit summaries kept for `Jobs::committed`.
const KEPT_COMMITS: usize = 500;

impl Jobs {
    pub fn new(stage_ms: u64) -> Jobs {
        let jobs = Jobs::default();
        jobs.stage_ms.store(stage_ms, Ordering::Relaxed);
        jobs
    }

    /// Runs `f` on a job, keeping its durations current.
    pub fn with<T>(&self, id: &str, f: impl FnOnce(&mut Job) -> T) -> Option<T> {
        let mut jobs = self.jobs.lock().unwrap();
        let job = jobs.iter_mut().find(|j| j.view.id == id)?;
        let out = f(job);
        job.refresh();
        Some(out)
    }

    pub fn log(&self, id: &str, line: impl Into<String>) {
        let line = line.into();
        self.with(id, |j| j.logs.push((now_rfc3339(), line)));
    }

    /// Moves a job to a stage (`RUNNING` stamps its start; a final stage its end).
    pub fn set_stage(&self, id: &str, stage: &str, message: Option<String>) {
        self.with(id, |j| {
            if j.finished() {
                return;
            }
            j.view.status = json!({"stage": stage, "message": message});
            if stage == "RUNNING" && j.started.is_none() {
                j.started = Some(std::time::Instant::now());
                j.view.started_at = Some(now_rfc3339());
            }
            if j.finished() {
                j.finished = Some(std::time::Instant::now());
                j.view.finished_at = Some(now_rfc3339());
            }
        });
    }

    /// A dataset commit landed with this summary.
    pub fn note_commit(&self, summary: &str) {
        let mut commits = self.commits.lock().unwrap();
        if commits.len() == KEPT_COMMITS {
            commits.pop_front();
        }
        commits.push_back(summary.to_string());
    }

    /// Whether a checkpoint of `run` landed: a kept commit whose summary starts `Checkpoint` and
    /// names it (the job script's `Checkpoint running PostTrain Arena run {run}`).
    pub fn checkpointed(&self, run: &str) -> bool {
        self.commits.lock().unwrap().iter().any(|s| s.starts_with("Checkpoint") && s.contains(run))
    }

    /// Whether answers carry explicit nulls now.
    pub fn nulls(&self) -> bool {
        self.nulls_always.load(Ordering::Relaxed) || self.faults.lock().unwrap().nulls
    }

    pub fn stats(&self) -> Value {
        let jobs = self.jobs.lock().unwrap();
        json!({"jobs_created": jobs.len(), "jobs_running": jobs.iter().filter(|j| j.stage() == "RUNNING").count()})
    }
}
