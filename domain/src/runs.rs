//! Runs of a collection on a challenge: the launch request, the preflight's checks in the guide's
//! order, the refusal each failed check becomes, and the run's states and stages.

use crate::invalid::Invalid;
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::agents::AgentId;
use crate::board::RequestId;
use crate::money::dollars;
use crate::registry::{Challenge, ChallengeStatus, ProviderStatus};
use crate::ErrorCode;

pub mod follow;
pub mod job_stage;
pub mod relay;
pub mod stage;
pub mod state;
pub use job_stage::JobStage;
pub use stage::Stage;
pub use state::{is_platform_fault, Purpose, RunState};

/// A collection may have one counted run per challenge in this window.
pub const DAILY_WINDOW_S: i64 = 24 * 3600;

/// The body of `run --execute`, as sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// 8–120 characters you keep: repeating the request with it never starts a second run.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 8, max_length = 120, pattern = r"^[A-Za-z0-9._:-]+$")
    )]
    pub request_id: String,
    #[cfg_attr(feature = "openapi", schema(pattern = r"^env-[0-9a-f]+$"))]
    pub environment_id: String,
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 2, max_length = 48, pattern = r"^[a-z0-9][a-z0-9-]+$")
    )]
    pub agent_id: Option<String>,
}

/// The body of `baseline --execute`: an editor's measurement of the base model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BaselineRequest {
    /// 8–120 characters you keep: repeating the request with it never starts a second job.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 8, max_length = 120, pattern = r"^[A-Za-z0-9._:-]+$")
    )]
    pub request_id: String,
}

/// A launch request whose fields have been checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub request_id: RequestId,
    pub environment_id: String,
    pub agent_id: Option<AgentId>,
}

impl Launch {
    pub fn parse(req: RunRequest) -> Result<Launch, Invalid> {
        let request_id = RequestId::parse(&req.request_id).map_err(|e| e.to_string())?;
        let agent_id = req.agent_id.as_deref().map(AgentId::parse).transpose().map_err(|e| e.to_string())?;
        if req.environment_id.trim().is_empty() {
            return Err("`environment_id` is required (it starts with env-)".into());
        }
        Ok(Launch { request_id, environment_id: req.environment_id, agent_id })
    }

    /// What makes two requests with one request id the same request: the collection and agent.
    pub fn body_key(&self, challenge_id: &str) -> String {
        let agent = self.agent_id.as_ref().map(|a| a.as_str()).unwrap_or("");
        format!("{challenge_id}\n{}\n{agent}", self.environment_id)
    }
}

/// One check of the preflight. `ok` is `None` when an earlier failure made it meaningless.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Check {
    pub name: String,
    pub ok: Option<bool>,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Preflight {
    pub challenge_id: String,
    pub environment_id: String,
    pub allowed: bool,
    pub checks: Vec<Check>,
    /// The reservation a launch would make; `null` when none can be quoted (`max_compute_reason`).
    pub max_compute_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_compute_reason: Option<String>,
    pub eligible_tasks: u64,
    /// Tasks the static gates excluded: they are left out of the run's training list.
    pub excluded_task_count: u64,
    /// The job's hardware, as the layout check shows it.
    pub hardware: Hardware,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Hardware {
    pub provider: String,
    pub flavor: String,
    pub gpus: u32,
    pub vllm_gpus: u32,
    pub trainer_gpus: u32,
    pub max_context_tokens: u32,
    pub timeout_s: u32,
}

/// Who asks: their HF account id and whether they are an editor.
#[derive(Debug, Clone)]
pub struct Caller {
    pub id: String,
    pub name: String,
    pub editor: bool,
}

/// The collection as the checks need it.
#[derive(Debug, Clone)]
pub struct Collection {
    pub id: String,
    pub author_id: String,
    pub author: String,
    pub eligible_tasks: Vec<String>,
    pub excluded_task_count: u64,
}

/// Why a run's allocation cannot be quoted: its provider is only planned, or its flavor has no
/// price. The preflight shows it; the launch refuses with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unpriced(pub String);

/// Everything the preflight reads; the caller gathers it, the rules here decide.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub challenge: &'a Challenge,
    /// The allocation in cents, or why none can be quoted.
    pub allocation: Result<i64, Unpriced>,
    pub caller: Option<Caller>,
    pub collection: Collection,
    /// When this collection's newest counted run on this challenge was requested (epoch s).
    pub last_counted_epoch: Option<i64>,
    pub now_epoch: i64,
    /// The run holding the arena's one live reservation.
    pub active_run: Option<String>,
    pub remaining_cents: i64,
    /// Task names of the challenge's held-out suites.
    pub heldout_names: &'a BTreeSet<String>,
    /// What keeps the challenge's job from starting (`pipeline::job_problems`).
    pub job_problems: Vec<String>,
}

pub mod check {
    pub const CHALLENGE_OPEN: &str = "challenge open";
    pub const SIGNED_IN: &str = "signed in";
    pub const AUTHOR_OR_EDITOR: &str = "author or editor";
    pub const DAILY_LIMIT: &str = "no counted run in the last 24 hours";
    pub const LAYOUT: &str = "job layout valid";
    pub const NO_ACTIVE_JOB: &str = "no other arena job active";
    pub const CAP: &str = "cap covers the allocation";
    pub const ELIGIBLE: &str = "at least one eligible task";
    pub const NAMES: &str = "no training task named like a held-out task";
}

fn hardware(challenge: &Challenge) -> Hardware {
    let s = &challenge.serving;
    Hardware {
        provider: challenge.spec.compute.provider.clone(),
        flavor: s.flavor.clone(),
        gpus: s.gpus,
        vllm_gpus: s.vllm_gpus,
        trainer_gpus: s.trainer_gpus,
        max_context_tokens: s.max_context_tokens,
        timeout_s: challenge.spec.compute.max_wall_s,
    }
}

// Long: the guide's nine checks in its order, each a few lines that read the ones before; one
// function keeps the order visible.
/// The preflight: every check the arena makes before a run, in the guide's order.
pub fn preflight(f: &Facts) -> Preflight {
    let header = &f.challenge.spec.challenge;
    let compute = &f.challenge.spec.compute;
    let mut checks = Vec::new();
    let mut push = |name: &str, ok: Option<bool>, detail: String| {
        checks.push(Check { name: name.to_string(), ok, detail });
    };

    let open = match (header.status, &header.runs_paused, compute.provider_status) {
        (ChallengeStatus::Open, None, ProviderStatus::Connected) => Ok(format!("`{}` is open", header.id)),
        (ChallengeStatus::Open, Some(reason), _) => Err(format!("runs are paused: {reason}")),
        (ChallengeStatus::Open, None, ProviderStatus::Planned) => {
            Err(format!("provider `{}` is planned: the arena does not launch there yet", compute.provider))
        }
        (status, _, _) => Err(format!("`{}` is {}: it takes no runs", header.id, status.as_str())),
    };
    push(check::CHALLENGE_OPEN, Some(open.is_ok()), open.unwrap_or_else(|e| e));

    match &f.caller {
        Some(c) => push(check::SIGNED_IN, Some(true), format!("as {}", c.name)),
        None => push(check::SIGNED_IN, Some(false), "send an HF token (or sign in) to preflight".into()),
    }
    let (ok, detail) = author_or_editor(f);
    push(check::AUTHOR_OR_EDITOR, ok, detail);

    match f.last_counted_epoch.filter(|t| f.now_epoch - t < DAILY_WINDOW_S) {
        Some(t) => push(
            check::DAILY_LIMIT,
            Some(false),
            format!(
                "this collection had a counted run on `{}` {} min ago; the next fits in {} s",
                header.id,
                (f.now_epoch - t) / 60,
                retry_after_daily(t, f.now_epoch)
            ),
        ),
        None => push(check::DAILY_LIMIT, Some(true), "none in the last 24 hours".into()),
    }

    let hw = hardware(f.challenge);
    let (ok, detail) = layout_check(&hw, &f.job_problems);
    push(check::LAYOUT, Some(ok), detail);

    match &f.active_run {
        Some(run) => push(
            check::NO_ACTIVE_JOB,
            Some(false),
            format!("{run} is active; one runs at a time across the arena"),
        ),
        None => push(check::NO_ACTIVE_JOB, Some(true), "no arena job is active".into()),
    }

    let (ok, detail) = cap_check(f);
    push(check::CAP, ok, detail);

    let eligible = f.collection.eligible_tasks.len();
    push(
        check::ELIGIBLE,
        Some(eligible > 0),
        format!("{eligible} eligible, {} excluded by the static gates", f.collection.excluded_task_count),
    );

    let clashes: Vec<&String> =
        f.collection.eligible_tasks.iter().filter(|t| f.heldout_names.contains(*t)).collect();
    if clashes.is_empty() {
        push(check::NAMES, Some(true), "no clash with a held-out task name".into());
    } else {
        let names: Vec<&str> = clashes.iter().map(|s| s.as_str()).collect();
        push(check::NAMES, Some(false), format!("named like held-out tasks: {}", names.join(", ")));
    }

    Preflight {
        challenge_id: header.id.clone(),
        environment_id: f.collection.id.clone(),
        allowed: checks.iter().all(|c| c.ok == Some(true)),
        max_compute_usd: f.allocation.as_ref().ok().map(|c| dollars(*c)),
        max_compute_reason: f.allocation.as_ref().err().map(|u| u.0.clone()),
        eligible_tasks: eligible as u64,
        excluded_task_count: f.collection.excluded_task_count,
        hardware: hw,
        checks,
    }
}

/// The author-or-editor check: unknown without a caller.
fn author_or_editor(f: &Facts) -> (Option<bool>, String) {
    match &f.caller {
        None => (None, "needs a signed-in caller".into()),
        Some(c) if c.id == f.collection.author_id => {
            (Some(true), format!("{} submitted the collection", c.name))
        }
        Some(c) if c.editor => (Some(true), format!("{} is a BenchFlow editor", c.name)),
        Some(c) => (
            Some(false),
            format!(
                "{} is neither the collection's author ({}) nor a BenchFlow editor",
                c.name, f.collection.author
            ),
        ),
    }
}

/// The cap check: unknown when the run's allocation cannot be priced.
fn cap_check(f: &Facts) -> (Option<bool>, String) {
    match &f.allocation {
        Err(reason) => (None, reason.0.clone()),
        Ok(cents) if *cents <= f.remaining_cents => {
            (Some(true), format!("${:.2} of ${:.2} remaining", dollars(*cents), dollars(f.remaining_cents)))
        }
        Ok(cents) => (
            Some(false),
            format!(
                "a run reserves ${:.2} and ${:.2} remains; runs are refused until the organizers raise the cap",
                dollars(*cents),
                dollars(f.remaining_cents)
            ),
        ),
    }
}

/// The layout check: the hardware it shows, and what keeps the job from starting.
fn layout_check(hw: &Hardware, problems: &[String]) -> (bool, String) {
    let shown = format!(
        "{} on {}: {} GPU(s), vLLM on {} and the trainer on {}, context {} tokens, timeout {} s",
        hw.flavor, hw.provider, hw.gpus, hw.vllm_gpus, hw.trainer_gpus, hw.max_context_tokens, hw.timeout_s
    );
    if problems.is_empty() {
        (true, shown)
    } else {
        (false, format!("{shown}; the job cannot start: {}", problems.join("; ")))
    }
}

fn retry_after_daily(last: i64, now: i64) -> i64 {
    (last + DAILY_WINDOW_S - now).max(1)
}

/// Why a launch is refused: the first failed check, as the guide's status and a stable code.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
    pub retry_after_s: Option<u64>,
}

pub fn refusal(p: &Preflight, f: &Facts) -> Option<Refusal> {
    let failed = p.checks.iter().find(|c| c.ok != Some(true))?;
    let code = match failed.name.as_str() {
        check::CHALLENGE_OPEN => ErrorCode::ChallengeNotOpen,
        check::SIGNED_IN => ErrorCode::AuthRequired,
        check::AUTHOR_OR_EDITOR => ErrorCode::NotAuthorOrEditor,
        check::DAILY_LIMIT => ErrorCode::DailyRunLimit,
        check::NO_ACTIVE_JOB => ErrorCode::AnotherRunActive,
        check::CAP => ErrorCode::CapExceeded,
        check::ELIGIBLE => ErrorCode::NoEligibleTasks,
        check::NAMES => ErrorCode::HeldoutNameCollision,
        _ => ErrorCode::LayoutInvalid,
    };
    let retry_after_s = (code == ErrorCode::DailyRunLimit)
        .then(|| f.last_counted_epoch.map(|t| retry_after_daily(t, f.now_epoch) as u64))
        .flatten();
    Some(Refusal { code, message: format!("{}: {}", failed.name, failed.detail), retry_after_s })
}

/// What an editor's launch of a baseline measurement is checked against.
#[derive(Debug, Clone)]
pub struct BaselineFacts<'a> {
    pub challenge: &'a Challenge,
    pub allocation: Result<i64, Unpriced>,
    pub caller: Option<Caller>,
    pub active_run: Option<String>,
    pub remaining_cents: i64,
    /// What keeps the challenge's job from starting (`pipeline::job_problems`).
    pub job_problems: Vec<String>,
}

/// A baseline measurement is launched under a run's rules, in the same order, with two
/// differences: paused runs do not stop it (measuring the baseline is what they wait for), and
/// only a BenchFlow editor launches it (no collection, so no author).
pub fn baseline_refusal(f: &BaselineFacts) -> Option<Refusal> {
    let header = &f.challenge.spec.challenge;
    let compute = &f.challenge.spec.compute;
    let no = |code, message: String| Some(Refusal { code, message, retry_after_s: None });
    if header.status != ChallengeStatus::Open {
        return no(
            ErrorCode::ChallengeNotOpen,
            format!("{}: `{}` is {}", check::CHALLENGE_OPEN, header.id, header.status.as_str()),
        );
    }
    if compute.provider_status == ProviderStatus::Planned {
        return no(
            ErrorCode::ChallengeNotOpen,
            format!(
                "{}: provider `{}` is planned: the arena does not launch there yet",
                check::CHALLENGE_OPEN,
                compute.provider
            ),
        );
    }
    let Some(caller) = &f.caller else {
        return no(ErrorCode::AuthRequired, "send an HF token (or sign in) to launch a measurement".into());
    };
    if !caller.editor {
        return no(
            ErrorCode::Forbidden,
            format!("{} is not a BenchFlow editor: editors measure the base model", caller.name),
        );
    }
    let (layout_ok, layout) = layout_check(&hardware(f.challenge), &f.job_problems);
    if !layout_ok {
        return no(ErrorCode::LayoutInvalid, format!("{}: {layout}", check::LAYOUT));
    }
    if let Some(run) = &f.active_run {
        return no(
            ErrorCode::AnotherRunActive,
            format!("{}: {run} is active; one runs at a time across the arena", check::NO_ACTIVE_JOB),
        );
    }
    match &f.allocation {
        Err(reason) => no(ErrorCode::CapExceeded, format!("{}: {reason}", check::CAP)),
        Ok(cents) if *cents > f.remaining_cents => no(
            ErrorCode::CapExceeded,
            format!(
                "{}: a measurement reserves ${:.2} and ${:.2} remains",
                check::CAP,
                dollars(*cents),
                dollars(f.remaining_cents)
            ),
        ),
        Ok(_) => None,
    }
}

/// Whether a reason names a fault of the arena's side (serving, sandboxes, the agent handshake,
/// billing) rather than of the collection.
/// Text anyone may read (a run's reason, its events), with each of `hidden` (the ids of sealed
/// held-out tasks) that stands as a word of its own replaced: a pipeline's error can quote a task
/// it was evaluating.
pub fn redact_tasks(text: &str, hidden: &std::collections::BTreeSet<String>) -> String {
    if hidden.is_empty() {
        return text.to_string();
    }
    let word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest.find(|c: char| !word(c)).unwrap_or(rest.len());
        let (run, tail) = rest.split_at(end);
        if run.is_empty() {
            let c = tail.chars().next().expect("a character that is not a word");
            out.push(c);
            rest = &tail[c.len_utf8()..];
            continue;
        }
        out.push_str(if hidden.contains(run) { "[a held-out task]" } else { run });
        rest = tail;
    }
    out
}

/// A run as `runs` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunView {
    pub run_id: String,
    pub challenge_id: String,
    /// `collection`, or `baseline` for a measurement of the base model alone.
    pub purpose: Purpose,
    /// The collection trained on; `null` for a baseline measurement.
    pub environment_id: Option<String>,
    /// Who launched it (the collection's author or an editor).
    pub author: String,
    pub agent_id: Option<String>,
    /// The request id it was launched with.
    pub request_key: String,
    pub state: RunState,
    /// The last stage the run reached.
    pub stage: Option<String>,
    /// Why it stopped, when it stopped early.
    pub reason: Option<String>,
    /// The HF job's stage, or `not launched` for a request that never got a job.
    pub status: String,
    pub job_status: Option<String>,
    pub job_id: Option<String>,
    /// The HF job page and the run's folder in the runs dataset: private to BenchFlow.
    pub job_url: Option<String>,
    pub runs_url: Option<String>,
    /// The pipeline's own report once the run is scored (`score.json`, or `baseline.json` for a
    /// baseline measurement), in the private runs dataset.
    pub report_url: Option<String>,
    /// The run's view of the challenge's Trackio dashboard (TRL's curves on the organizers'
    /// Space), when the challenge keeps one (`[tracking]`) and the run trains.
    #[serde(default)]
    pub dashboard_url: Option<String>,
    /// The reason names serving, sandboxes or the agent handshake: the arena's side failed.
    pub platform_fault: bool,
    /// GRPO's optimizer steps taken and planned, as the job reported them.
    pub training_steps_done: Option<i64>,
    pub training_steps_planned: Option<i64>,
    pub launched: bool,
    pub max_compute_usd: f64,
    pub flavor: String,
    pub timeout_s: i64,
    pub eligible_tasks: i64,
    pub excluded_task_count: i64,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunEvent {
    pub at: String,
    /// Where the change came from: launch, job status, logs, relay, reconciler.
    pub source: String,
    pub kind: String,
    /// The stage it is about, when it is about one.
    pub stage: Option<String>,
    pub detail: String,
    /// What happened, in words, with the stage it is about (`Began baseline_eval in stage
    /// baseline`).
    #[serde(default)]
    pub what: String,
    /// Who said so, in words (`the job, over its relay`).
    #[serde(default)]
    pub by: String,
}

impl RunEvent {
    /// An event with its words.
    pub fn new(at: String, source: String, kind: String, stage: Option<String>, detail: String) -> RunEvent {
        let what = event_what(&kind, stage.as_deref(), &detail);
        let by = source_words(&source);
        RunEvent { at, source, kind, stage, detail, what, by }
    }

    /// The detail left to show after `what` (a step's name is already in it).
    pub fn rest(&self) -> &str {
        match self.kind.as_str() {
            "step" | "eval" => "",
            _ => &self.detail,
        }
    }
}

fn event_what(kind: &str, stage: Option<&str>, detail: &str) -> String {
    let what = match kind {
        "requested" => "Run requested".to_string(),
        "collection mirrored" => "Collection mirrored into the runs dataset".to_string(),
        "mirrored" => "Job bundle written to the runs dataset".to_string(),
        "launched" => "HF job created".to_string(),
        "hello" => "The job connected to the arena".to_string(),
        "step" if !detail.is_empty() => format!("Began {detail}"),
        "eval" if !detail.is_empty() => format!("Finished evaluation {detail}"),
        "stage_started" => "Stage started".to_string(),
        "stage_finished" => "Stage finished".to_string(),
        "running" => "The job is running".to_string(),
        "stage" => "Moved on".to_string(),
        "error" => "The job reported an error".to_string(),
        "scored" => "Scored".to_string(),
        "failed" => "Failed".to_string(),
        "canceled" => "Canceled".to_string(),
        other => other.replace('_', " "),
    };
    match stage {
        Some(stage) => format!("{what} in stage {stage}"),
        None => what,
    }
}

fn source_words(source: &str) -> String {
    match source {
        "launch" => "the arena's launcher",
        "job status" => "HF's job status",
        "logs" => "the job's log",
        "relay" => "the job, over its relay",
        "reconciler" => "the arena's reconciler",
        other => other,
    }
    .to_string()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunDetail {
    #[serde(flatten)]
    pub run: RunView,
    /// Every stage on one time axis: when it started and finished, its status and pass counts.
    pub stages: Vec<follow::StageSpan>,
    /// The job's connection back to the arena: none, connected, reconnecting or gone.
    pub relay: follow::RelayState,
    pub relay_seen_epoch: Option<i64>,
    pub created_epoch: i64,
    /// The arena's clock when it answered, for drawing the running stage.
    pub now_epoch: i64,
    /// The job's GPUs as HF's metrics last showed them, oldest first (a sample per reconciler
    /// pass, the newest 60).
    pub gpu: Vec<GpuSample>,
    /// GRPO's optimizer steps as TRL logged them (loss, reward and its spread, gradient norm, …)
    /// with the steps planned: from the job's relay while it trains, from its log's tail when the
    /// relay is off, and from `training_diagnostics.json` once the result is collected.
    pub training: crate::training::TrainingCurve,
    /// How many steps `training` holds (the page redraws its curves when this moves).
    pub training_steps_logged: u64,
    pub events: Vec<RunEvent>,
}

/// One reading of the job's GPUs: the mean utilisation over them (whole percent) and the memory
/// in use (MiB). Whole numbers: the pages' wasm decodes them without float parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuSample {
    pub epoch: i64,
    pub utilization_pct: u32,
    pub memory_used_mib: u64,
}

#[cfg(test)]
mod tests;
