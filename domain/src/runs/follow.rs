//! Following a launched run to its end: the relay's messages, the stage timeline, and the
//! reconciler's rule, which looks at what the outside world says now (the HF job, the relay's last
//! heartbeat, the newest log line, the job's GPUs) and decides the run's next step. Pure: the
//! server gathers the facts and carries out the decision, so the rule is tested here without a
//! server.

use crate::invalid::Invalid;
use serde::{Deserialize, Serialize};

use super::job_stage::JobStage;
pub use super::relay::RelayState;
use super::stage::Stage;
use super::state::{is_platform_fault, Purpose, RunState};
use crate::pipeline::steps;

/// The stage a job log line shows progress in: the pipeline's `[posttrainarena] {step}: …` or
/// the job script's `[arena-job] {stage}: …` (`domain::pipeline::steps`).
pub fn stage_of_log_line(line: &str) -> Option<Stage> {
    steps::parse_line(line).map(|s| s.stage)
}

/// A message the job script sends over the relay. `seq` numbers them; the arena answers
/// `{"last_seq": N}` when the job connects (so that a restarted attempt goes on from there),
/// acknowledges each with `{"ack": seq}` once it is stored, and stores a repeat once.
///
/// - `hello` (`detail`), `heartbeat`;
/// - `step`: the pipeline began `step` (a name it prints, or one of the script's stages);
/// - `eval`: the evaluation `step` finished with its pass counts (`passed`, `total` tasks,
///   `timeouts` scored as failures, `errors` without a scored row);
/// - `progress`: GRPO's optimizer steps `done` of `planned`;
/// - `metrics`: TRL's numbers (`metrics`) logged at optimizer step `done`
///   (`domain::training::log`);
/// - `error`: the job failed (`detail`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RelayMessage {
    pub seq: u64,
    pub kind: RelayKind,
    #[serde(default)]
    pub step: Option<String>,
    #[serde(default)]
    pub stage: Option<String>,
    #[serde(default)]
    pub detail: Option<String>,
    #[serde(default)]
    pub passed: Option<u64>,
    #[serde(default)]
    pub total: Option<u64>,
    #[serde(default)]
    pub timeouts: Option<u64>,
    #[serde(default)]
    pub errors: Option<u64>,
    #[serde(default)]
    pub done: Option<u64>,
    #[serde(default)]
    pub planned: Option<u64>,
    #[serde(default)]
    pub metrics: Option<crate::training::TrainMetrics>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RelayKind {
    Hello,
    Heartbeat,
    Step,
    Eval,
    Progress,
    Metrics,
    Error,
}

impl RelayKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RelayKind::Hello => "hello",
            RelayKind::Heartbeat => "heartbeat",
            RelayKind::Step => "step",
            RelayKind::Eval => "eval",
            RelayKind::Progress => "progress",
            RelayKind::Metrics => "metrics",
            RelayKind::Error => "error",
        }
    }
}

/// A step name's stage: a pipeline step, or one of the guide's stages the script names itself.
fn step_stage(step: &str) -> Option<Stage> {
    steps::step(step).map(|s| s.stage).or_else(|| Stage::parse(step))
}

impl RelayMessage {
    /// The guide's stage the message is about, once it passed `check`.
    pub fn stage(&self) -> Option<Stage> {
        match self.kind {
            RelayKind::Step | RelayKind::Eval => self.step.as_deref().and_then(step_stage),
            RelayKind::Progress | RelayKind::Metrics => Some(Stage::Training),
            _ => self.stage.as_deref().and_then(Stage::parse),
        }
    }

    /// What is wrong with the message, if anything.
    pub fn check(&self) -> Result<(), Invalid> {
        if self.seq == 0 {
            return Err("`seq` starts at 1".into());
        }
        if self.step.as_deref().is_some_and(|s| s.len() > 200)
            || self.detail.as_deref().is_some_and(|d| d.len() > 4000)
        {
            return Err("`step` or `detail` is too long".into());
        }
        match self.kind {
            RelayKind::Step | RelayKind::Eval => match self.step.as_deref() {
                None => Err(format!("a {} message names its `step`", self.kind.as_str()).into()),
                Some(step) if step_stage(step).is_none() => {
                    Err(format!("`{step}` is not a step the pipeline prints").into())
                }
                Some(step)
                    if self.kind == RelayKind::Eval
                        && !matches!(
                            steps::step(step).map(|s| s.kind),
                            Some(steps::StepKind::Eval { .. })
                        ) =>
                {
                    Err(format!("`{step}` is not an evaluation").into())
                }
                _ => Ok(()),
            },
            RelayKind::Progress if self.done.is_none() => {
                Err("a progress message says how many steps are `done`".into())
            }
            RelayKind::Metrics => match (&self.done, &self.metrics) {
                (Some(1..), Some(m)) if !m.is_empty() => m.check(),
                _ => {
                    Err("a metrics message names its optimizer step `done` (from 1) and its `metrics`".into())
                }
            },
            _ => match self.stage.as_deref() {
                Some(stage) if Stage::parse(stage).is_none() => {
                    let all: Vec<&str> = Stage::ALL.iter().map(|s| s.as_str()).collect();
                    Err(format!("unknown stage `{stage}`; stages are {}", all.join(", ")).into())
                }
                _ => Ok(()),
            },
        }
    }
}

/// The relay's state now: a connection that has not been heard from within the grace period is
/// gone, whichever server held it (a server that died never said it dropped).
pub fn relay_now(stored: RelayState, seen_epoch: Option<i64>, now: i64, grace_s: i64) -> RelayState {
    match (stored, seen_epoch) {
        (RelayState::Connected | RelayState::Reconnecting, Some(seen)) if now - seen > grace_s => {
            RelayState::Gone
        }
        (state, _) => state,
    }
}

/// One stage on the run's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StageSpan {
    pub stage: String,
    /// `done`, `running`, `failed` (where the run stopped) or `pending`.
    pub status: String,
    pub started_epoch: Option<i64>,
    pub finished_epoch: Option<i64>,
    pub passed: Option<u64>,
    pub total: Option<u64>,
    pub timeouts: Option<u64>,
    pub errors: Option<u64>,
}

/// What the timeline reads of a run's stored events.
#[derive(Debug, Clone)]
pub struct StageEvent {
    pub epoch: i64,
    pub kind: String,
    pub stage: Option<String>,
    pub passed: Option<u64>,
    pub total: Option<u64>,
    pub timeouts: Option<u64>,
    pub errors: Option<u64>,
}

/// Every stage, in order, from the run's events: when each started and finished and its counts.
/// A stage that started without finishing is running while the run is, and failed once the run
/// failed there; a stage seen only through a later one is done. Only the purpose's stages are kept.
pub fn timeline(
    events: &[StageEvent],
    state: RunState,
    stage: Option<Stage>,
    purpose: Purpose,
) -> Vec<StageSpan> {
    let mut spans: Vec<StageSpan> = Stage::ALL
        .iter()
        .map(|s| StageSpan {
            stage: s.to_string(),
            status: "pending".into(),
            started_epoch: None,
            finished_epoch: None,
            passed: None,
            total: None,
            timeouts: None,
            errors: None,
        })
        .collect();
    let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    for e in events {
        let Some(i) = e.stage.as_deref().and_then(Stage::parse).map(Stage::index) else { continue };
        match e.kind.as_str() {
            // A stage starts at its first step; the one before it ends there.
            "step" | "stage_started" | "running" | "stage" => {
                spans[i].started_epoch.get_or_insert(e.epoch);
                for earlier in spans[..i].iter_mut().filter(|s| s.started_epoch.is_some()) {
                    earlier.finished_epoch.get_or_insert(e.epoch);
                }
            }
            // Each evaluation cell adds its counts to its stage.
            "eval" => {
                let span = &mut spans[i];
                span.started_epoch.get_or_insert(e.epoch);
                span.passed = add(span.passed, e.passed);
                span.total = add(span.total, e.total);
                span.timeouts = add(span.timeouts, e.timeouts);
                span.errors = add(span.errors, e.errors);
            }
            "stage_finished" => {
                let span = &mut spans[i];
                span.started_epoch.get_or_insert(e.epoch);
                span.finished_epoch = Some(e.epoch);
                span.passed = e.passed.or(span.passed);
                span.total = e.total.or(span.total);
                span.timeouts = e.timeouts.or(span.timeouts);
                span.errors = e.errors.or(span.errors);
            }
            "scored" => {
                for s in spans.iter_mut().filter(|s| s.started_epoch.is_some()) {
                    s.finished_epoch.get_or_insert(e.epoch);
                }
            }
            _ => {}
        }
    }
    let reached = stage.map(Stage::index).unwrap_or(0);
    let last = spans.iter().rposition(|s| s.started_epoch.is_some()).unwrap_or(0).max(reached);
    for (i, span) in spans.iter_mut().enumerate() {
        span.status =
            if span.finished_epoch.is_some() || i < last || (i == last && state == RunState::Scored) {
                "done"
            } else if i == last && (span.started_epoch.is_some() || stage.is_some()) {
                match state {
                    RunState::Failed | RunState::Canceled => "failed",
                    _ => "running",
                }
            } else {
                "pending"
            }
            .into();
    }
    spans.retain(|s| purpose.stages().iter().any(|p| p.as_str() == s.stage));
    spans
}

/// The facts about a launched, unfinished run the reconciler acts on.
#[derive(Debug, Clone)]
pub struct Facts {
    pub state: RunState,
    pub stage: Option<Stage>,
    pub relay: RelayState,
    pub relay_seen_epoch: Option<i64>,
    /// When a new log line last appeared (the second source of progress).
    pub log_seen_epoch: Option<i64>,
    /// The stage the newest pipeline log line shows.
    pub log_stage: Option<Stage>,
    /// Since when every GPU of the job has read idle (HF's metrics), while they still do.
    pub gpus_idle_since: Option<i64>,
    pub now: i64,
    pub job: Job,
}

/// The HF job, as inspected now.
#[derive(Debug, Clone)]
pub struct Job {
    pub stage: JobStage,
    pub message: Option<String>,
    pub created_epoch: i64,
    pub started_epoch: Option<i64>,
    /// Whether the run's result files are in the runs dataset (asked only once the job completed).
    pub has_results: Option<bool>,
    /// The pipeline's own error, when it published its failure (`reports/hub_run.json`, redacted
    /// by the pipeline).
    pub pipeline_error: Option<String>,
}

/// How long a run may go without progress, and wait to start.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Without a heartbeat, no new log line (or GPUs idle) for this long: the run stalled. The
    /// challenge's own silence limit (`pipeline::config::silence_limit_s`): a real evaluation
    /// step prints nothing for as long as one attempt may take.
    pub stall_s: i64,
    /// In SCHEDULING for this long: canceled at HF and failed.
    pub scheduling_s: i64,
    /// A relay heard from within this long is heartbeating: its job is never stalled.
    pub relay_grace_s: i64,
}

/// What to do with the reservation when a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// The job never started: nothing was spent.
    Release,
    /// At the job's recorded duration × the flavor's price.
    AtDuration,
    /// A canceled job: up to its last log line.
    UpToLastLog,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub state: RunState,
    pub stage: Option<Stage>,
    pub reason: Option<String>,
    pub platform_fault: bool,
    /// Cancel the HF job (it is stuck or silent).
    pub cancel_job: bool,
    pub settle: Option<Settle>,
    /// The event that records the change: (source, kind, detail).
    pub event: (String, String, String),
}

fn minutes(s: i64) -> String {
    if s >= 120 {
        format!("{} min", s / 60)
    } else {
        format!("{s} s")
    }
}

/// The run's next step, or `None` when nothing changed.
pub fn decide(f: &Facts, limits: Limits) -> Option<Decision> {
    let stage = furthest_stage(f);
    if let Some(ended) = job_ended(f, limits, &stage) {
        return Some(ended);
    }
    if f.job.stage.is_active() {
        return while_running(f, limits, stage);
    }
    None
}

/// The furthest stage either source (the relay, the log) reached.
fn furthest_stage(f: &Facts) -> Option<Stage> {
    f.stage.max(f.log_stage)
}

/// A decision that ends the run.
fn ending(
    stage: &Option<Stage>,
    state: RunState,
    source: &str,
    reason: String,
    settle: Settle,
    cancel: bool,
) -> Decision {
    let platform_fault = state == RunState::Failed && is_platform_fault(&reason);
    Decision {
        state,
        stage: *stage,
        event: (source.into(), state.as_str().into(), reason.clone()),
        reason: Some(reason),
        platform_fault,
        cancel_job: cancel,
        settle: Some(settle),
    }
}

/// HF's status ended the job (or it waited too long to start): how the run ends.
fn job_ended(f: &Facts, limits: Limits, stage: &Option<Stage>) -> Option<Decision> {
    let at_stage = stage.unwrap_or(Stage::Setup);
    let started = f.job.started_epoch.is_some();
    let by_duration = if started { Settle::AtDuration } else { Settle::Release };
    let decision = match &f.job.stage {
        JobStage::Completed => match f.job.has_results {
            Some(true) => Decision {
                state: RunState::Scored,
                stage: Some(Stage::Collect),
                reason: None,
                platform_fault: false,
                cancel_job: false,
                settle: Some(Settle::AtDuration),
                event: ("job status".into(), "scored".into(), "the HF job completed and its result files are in the runs dataset".into()),
            },
            _ => ending(
                stage,
                RunState::Failed,
                "job status",
                format!("the pipeline exited without a result (the HF job completed at stage {at_stage}, but no result files were written)"),
                Settle::AtDuration,
                false,
            ),
        },
        JobStage::Error => {
            let message = f.job.message.clone().unwrap_or_else(|| "no message".into());
            let reason = match (&f.job.pipeline_error, message.as_str()) {
                // The pipeline said why before the job ended.
                (Some(error), _) => format!("the pipeline failed at stage {at_stage}: {error}"),
                (None, "Job timeout") => format!("the HF job hit its timeout at stage {at_stage}"),
                // Killed before it could publish anything: only HF's status says what happened.
                (None, _) => format!("the HF job failed at stage {at_stage}, before the pipeline published anything: {message}"),
            };
            ending(stage, RunState::Failed, "job status", reason, by_duration, false)
        }
        JobStage::Canceled => {
            let message = f.job.message.clone().unwrap_or_else(|| "canceled".into());
            let settle = if started { Settle::UpToLastLog } else { Settle::Release };
            ending(stage, RunState::Canceled, "job status", format!("the HF job was canceled: {message}"), settle, false)
        }
        JobStage::Deleted => ending(stage, RunState::Failed, "job status", "the HF job was deleted".into(), by_duration, false),
        job if job.is_waiting() && f.now - f.job.created_epoch > limits.scheduling_s => ending(
            stage,
            RunState::Failed,
            "reconciler",
            format!(
                "the HF job waited in SCHEDULING for {} without starting; canceled",
                minutes(f.now - f.job.created_epoch)
            ),
            Settle::Release,
            true,
        ),
        _ => return None,
    };
    Some(decision)
}

/// A running job: stalled (no heartbeat, and a silent log or idle GPUs past the limit), moved on
/// (the log shows a later stage than the relay did), or started.
fn while_running(f: &Facts, limits: Limits, stage: Option<Stage>) -> Option<Decision> {
    let at_stage = stage.unwrap_or(Stage::Setup);
    // A job whose relay is heartbeating is alive, however quiet its log and its GPUs.
    let heartbeating = f.relay == RelayState::Connected
        && f.relay_seen_epoch.is_some_and(|seen| f.now - seen <= limits.relay_grace_s);
    if !heartbeating {
        let heard = [f.relay_seen_epoch, f.log_seen_epoch, f.job.started_epoch].into_iter().flatten().max();
        let stalled = |reason: String| {
            Some(ending(&stage, RunState::Failed, "reconciler", reason, Settle::UpToLastLog, true))
        };
        if let Some(heard) = heard.filter(|h| f.now - h > limits.stall_s) {
            return stalled(format!(
                "no heartbeat and no new log line for {} at stage {at_stage}; the job was canceled",
                minutes(f.now - heard)
            ));
        }
        if let Some(idle) = f.gpus_idle_since.filter(|i| f.now - i > limits.stall_s) {
            return stalled(format!(
                "the job's GPUs sat idle for {} at stage {at_stage} with no heartbeat; the job was canceled",
                minutes(f.now - idle)
            ));
        }
    }
    // Progress the relay missed, from the logs.
    let log_ahead = match (f.log_stage, f.stage) {
        (Some(l), Some(s)) => l > s,
        (Some(_), None) => true,
        _ => false,
    };
    if log_ahead {
        let to = f.log_stage;
        let kind = if f.state == RunState::Queued { "running" } else { "stage" };
        return Some(Decision {
            state: RunState::Running,
            stage: to,
            reason: None,
            platform_fault: false,
            cancel_job: false,
            settle: None,
            event: (
                "logs".into(),
                kind.into(),
                format!("the job's log shows stage {}", to.map(Stage::as_str).unwrap_or_default()),
            ),
        });
    }
    (f.state == RunState::Queued).then(|| Decision {
        state: RunState::Running,
        stage: stage.or(Some(Stage::Setup)),
        reason: None,
        platform_fault: false,
        cancel_job: false,
        settle: None,
        event: ("job status".into(), "running".into(), "the HF job is running".into()),
    })
}

/// The cost of a job's running time: HF bills per started minute, so a job that ran at all costs
/// at least one.
pub fn cost_cents(hourly_usd: f64, running_s: f64) -> i64 {
    let minutes = if running_s > 0.0 { (running_s / 60.0).ceil() } else { 0.0 };
    crate::money::cents_ceil(minutes * hourly_usd / 60.0)
}

#[cfg(test)]
mod tests;
