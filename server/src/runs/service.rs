//! Runs: the preflight, the launch and its durable steps (reserve → mirror the collection into the
//! runs dataset → create the HF job), and the reads of runs.
//!
//! A launch is stored before anything happens outside, and each step is recorded once done. The
//! step that creates the job first looks for one carrying the run's label, so a retry, the
//! background launcher or a restarted server never makes a second job for one run. Only one server
//! works on a run at a time (a lease on its row).

use std::collections::BTreeSet;
use std::time::Duration;

use domain::board::RequestId;
use domain::collection::record::EnvironmentRecord;
use domain::collection::report::TaskStatus;
use domain::collection::Report;
use domain::ids::{ChallengeId, EnvironmentId, RunId};
use domain::runs::follow::{self, StageEvent};
use domain::runs::{
    self, BaselineFacts, BaselineRequest, Caller, Collection, Facts, Launch, Preflight, Purpose, RunDetail,
    RunEvent, RunRequest, RunView, Unpriced,
};
use domain::ErrorCode;
use serde::Serialize;

use crate::http::ApiError;
use crate::identity::Identity;
use crate::runs::launch;
use crate::runs::repo::{Inserted, LaunchStep, NewRun, Run};
use crate::AppState;

/// A fresh run id: `run-` and eight random bytes in hex.
fn new_run_id() -> RunId {
    RunId::parse(&format!("run-{}", crate::identity::random_hex(8))).expect("hex is an id")
}

/// How long a launch request waits for another server that is launching the same run.
const WAIT_FOR_OTHER: Duration = Duration::from_secs(30);

/// What a collection's stored validation says the run would train on.
fn collection_of(record: &EnvironmentRecord, author_id: String, report: &Report) -> Collection {
    let eligible: Vec<String> = report
        .task_list
        .iter()
        .filter(|t| t.status == TaskStatus::Eligible)
        .map(|t| t.name.clone())
        .collect();
    Collection {
        id: record.environment_id.clone(),
        author_id,
        author: record.author.clone(),
        excluded_task_count: (report.task_list.len() - eligible.len()) as u64,
        eligible_tasks: eligible,
    }
}

/// Task names of the challenge's held-out suites: their task lists and their fingerprints.
fn heldout_names(s: &AppState, challenge: &domain::registry::Challenge) -> BTreeSet<String> {
    let suites = &challenge.spec.challenge.suites;
    let mut names = BTreeSet::new();
    for id in suites {
        if let Some(tasks) = s.registry.suites.get(id).and_then(|suite| suite.tasks.as_ref()) {
            names.extend(tasks.names.iter().cloned());
        }
    }
    for fp in s.fingerprints.iter().filter(|f| suites.contains(&f.suite)) {
        names.extend(fp.tasks.iter().map(|t| t.name.clone()));
    }
    names
}

/// What keeps the challenge's job from starting: a held-out suite this deployment cannot give the
/// pipeline, or a secret it has no value for.
pub fn job_problems(s: &AppState, c: &domain::registry::Challenge) -> Vec<String> {
    let have: BTreeSet<String> = s.jobs.secrets.keys().cloned().collect();
    let mut problems = domain::pipeline::job_problems(&s.registry, c, &have);
    // A planned provider is refused as such before the layout is looked at.
    if c.spec.compute.provider_status != domain::registry::ProviderStatus::Planned {
        if let Err(none) = s.deps.launcher(&c.spec.compute.provider) {
            problems.push(none.to_string());
        }
    }
    problems
}

/// The checks' answers: each check, and the refusal of a launch when one fails.
struct Checked {
    preflight: Preflight,
    refusal: Option<runs::Refusal>,
}

/// Gathers what the checks read and runs them.
async fn check(
    s: &AppState,
    challenge_id: &ChallengeId,
    environment_id: &EnvironmentId,
    caller: Option<&Identity>,
) -> Result<Checked, ApiError> {
    let c = s.challenge(challenge_id)?;
    let (record, report) = crate::collections::service::get(s, environment_id).await?;
    let author_id = crate::collections::repo::author_id(&s.db, environment_id).await?.ok_or_else(|| {
        ApiError::new(ErrorCode::EnvironmentNotFound, format!("no collection `{environment_id}`"))
    })?;
    let live = crate::jobs::repo::live_state(&s.db, &s.registry).await?;
    let allocation = domain::catalog::allocation(&s.registry, c);
    let heldout = heldout_names(s, c);
    let facts = Facts {
        challenge: c,
        allocation: allocation
            .usd
            .map(domain::money::cents)
            .ok_or(Unpriced(allocation.reason.unwrap_or_default())),
        caller: caller.map(|i| Caller { id: i.id.clone(), name: i.name.clone(), editor: i.editor }),
        collection: collection_of(&record, author_id, &report),
        last_counted_epoch: crate::runs::repo::last_counted(&s.db, environment_id, challenge_id).await?,
        now_epoch: s.now().epoch,
        active_run: live.active_job,
        remaining_cents: domain::budget::cents_ceil(live.budget.remaining_usd),
        heldout_names: &heldout,
        job_problems: job_problems(s, c),
    };
    let preflight = runs::preflight(&facts);
    let refusal = runs::refusal(&preflight, &facts);
    Ok(Checked { preflight, refusal })
}

/// `GET /api/challenges/{id}/runs/preflight`: stores and reserves nothing.
pub async fn preflight(
    s: &AppState,
    challenge_id: &ChallengeId,
    environment_id: &EnvironmentId,
    caller: Option<&Identity>,
) -> Result<Preflight, ApiError> {
    Ok(check(s, challenge_id, environment_id, caller).await?.preflight)
}

/// The answer to a launch: the run, and whether this request created it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Launched {
    pub run: RunView,
    /// True when this request id was launched before: the stored run is returned.
    pub existing: bool,
    /// Whether the run's HF job exists.
    pub launched: bool,
}

/// `POST /api/challenges/{id}/runs`.
pub async fn launch(
    s: &AppState,
    challenge_id: &ChallengeId,
    me: &Identity,
    req: RunRequest,
) -> Result<Launched, ApiError> {
    let launch = Launch::parse(req).map_err(|e| ApiError::new(ErrorCode::InvalidRunRequest, e))?;
    let body = launch.body_key(challenge_id);
    // A repeat is answered before the checks: its own run would fail them.
    if let Some(repeat) = repeat_of(s, me, &launch.request_id, &body).await? {
        return Ok(repeat);
    }
    if let Some(agent) = &launch.agent_id {
        let record = crate::agents::repo::get(&s.db, agent.as_str()).await?.ok_or_else(|| {
            ApiError::new(ErrorCode::AgentNotFound, format!("no agent `{agent}`: register it first"))
        })?;
        if record.owner_id != me.id {
            return Err(ApiError::new(
                ErrorCode::AgentNotOwned,
                format!("agent `{agent}` belongs to another HF user"),
            ));
        }
    }
    let environment_id = crate::http::ids::id::<EnvironmentId>(&launch.environment_id)?;
    let Checked { preflight, refusal } = check(s, challenge_id, &environment_id, Some(me)).await?;
    if let Some(refused) = refused(s, me, &launch.request_id, &body, refusal).await? {
        return refused;
    }
    let c = s.challenge(challenge_id)?;
    let domain::time::Timestamp { text: now_text, epoch: now_epoch } = s.now();
    let id = new_run_id();
    let reserved_cents = domain::money::cents(preflight.max_compute_usd.unwrap_or(0.0));
    let new = NewRun {
        id: &id,
        challenge_id,
        purpose: Purpose::Collection,
        environment_id: Some(&environment_id),
        author: &me.name,
        author_id: &me.id,
        agent_id: launch.agent_id.as_ref().map(|a| a.as_str()),
        request_key: launch.request_id.as_str(),
        request_body: &body,
        flavor: &c.serving.flavor,
        timeout_s: i64::from(c.spec.compute.max_wall_s),
        reserved_cents,
        eligible_tasks: preflight.eligible_tasks as i64,
        excluded_task_count: preflight.excluded_task_count as i64,
        // Replaced by the secret the job is created with.
        secret_hash: "",
        now: &now_text,
        now_epoch,
    };
    store(s, &new, &launch.request_id).await
}

/// What a launch the checks refused answers (`None`: not refused): the same request stored a
/// moment ago by another replica or a retry, whose own run is what the checks refuse now, or the
/// refusal.
async fn refused(
    s: &AppState,
    me: &Identity,
    request_id: &RequestId,
    body: &str,
    refusal: Option<runs::Refusal>,
) -> Result<Option<Result<Launched, ApiError>>, ApiError> {
    let Some(r) = refusal else { return Ok(None) };
    if let Some(repeat) = repeat_of(s, me, request_id, body).await? {
        return Ok(Some(Ok(repeat)));
    }
    let e = ApiError::new(r.code, r.message);
    Ok(Some(Err(match r.retry_after_s {
        Some(wait) => e.retry_after(wait),
        None => e,
    })))
}

/// The stored run of an earlier request with this id: the answer when its body is the same, a
/// refusal when the id was used for something else, `None` when there is none.
async fn repeat_of(
    s: &AppState,
    me: &Identity,
    request_id: &RequestId,
    body: &str,
) -> Result<Option<Launched>, ApiError> {
    let Some(run) = crate::runs::repo::by_request(&s.db, &me.id, request_id.as_str()).await? else {
        return Ok(None);
    };
    if run.request_body != body {
        return Err(ApiError::new(
            ErrorCode::RequestIdReused,
            format!(
                "request_id `{}` already launched {} for another collection, agent or purpose; reuse a request id only with its original file",
                request_id.as_str(),
                run.id
            ),
        ));
    }
    finish(s, run, true).await.map(Some)
}

/// Stores a checked launch (run, reservation, first event) and carries it on.
async fn store(s: &AppState, new: &NewRun<'_>, request_id: &RequestId) -> Result<Launched, ApiError> {
    match crate::runs::repo::insert(&s.db, new).await? {
        Inserted::Stored(run) => {
            s.changes.bump(crate::changes::Topic::Ledger);
            s.changes.bump(crate::changes::Topic::Runs);
            finish(s, run, false).await
        }
        // The same request, concurrently: it is a repeat.
        Inserted::Repeat(run) if run.request_body == new.request_body => finish(s, run, true).await,
        Inserted::Repeat(run) => Err(ApiError::new(
            ErrorCode::RequestIdReused,
            format!("request_id `{}` already launched {}", request_id.as_str(), run.id),
        )),
        Inserted::AnotherActive => Err(ApiError::new(
            ErrorCode::AnotherRunActive,
            "no other arena job active: another run took the arena's one slot a moment ago; one runs at a time",
        )),
    }
}

/// `POST /api/challenges/{id}/baseline`: an editor measures the base model alone on the held-out
/// suite, as a job through the same launcher, charged to the same cap. Idempotent by request id.
pub async fn launch_baseline(
    s: &AppState,
    challenge_id: &ChallengeId,
    me: &Identity,
    req: BaselineRequest,
) -> Result<Launched, ApiError> {
    let request_id = RequestId::parse(&req.request_id)
        .map_err(|e| ApiError::new(ErrorCode::InvalidRunRequest, e.to_string()))?;
    let body = format!("{challenge_id}\nbaseline");
    if let Some(repeat) = repeat_of(s, me, &request_id, &body).await? {
        return Ok(repeat);
    }
    let c = s.challenge(challenge_id)?;
    let live = crate::jobs::repo::live_state(&s.db, &s.registry).await?;
    let allocation = domain::catalog::allocation(&s.registry, c);
    let facts = BaselineFacts {
        challenge: c,
        allocation: allocation
            .usd
            .map(domain::money::cents)
            .ok_or(Unpriced(allocation.reason.unwrap_or_default())),
        caller: Some(Caller { id: me.id.clone(), name: me.name.clone(), editor: me.editor }),
        active_run: live.active_job,
        remaining_cents: domain::budget::cents_ceil(live.budget.remaining_usd),
        job_problems: job_problems(s, c),
    };
    if let Some(refused) = refused(s, me, &request_id, &body, runs::baseline_refusal(&facts)).await? {
        return refused;
    }
    let domain::time::Timestamp { text: now_text, epoch: now_epoch } = s.now();
    let id = new_run_id();
    let new = NewRun {
        id: &id,
        challenge_id,
        purpose: Purpose::Baseline,
        environment_id: None,
        author: &me.name,
        author_id: &me.id,
        agent_id: None,
        request_key: request_id.as_str(),
        request_body: &body,
        flavor: &c.serving.flavor,
        timeout_s: i64::from(c.spec.compute.max_wall_s),
        reserved_cents: facts.allocation.clone().unwrap_or(0),
        eligible_tasks: 0,
        excluded_task_count: 0,
        secret_hash: "",
        now: &now_text,
        now_epoch,
    };
    store(s, &new, &request_id).await
}

/// Carries a stored run's launch to its end (or finds it ended) and answers it.
async fn finish(s: &AppState, run: Run, existing: bool) -> Result<Launched, ApiError> {
    let run = match run.launch {
        LaunchStep::Launched | LaunchStep::Failed => run,
        _ => match launch::advance(s, &run.id).await {
            Ok(run) => run,
            Err(launch::Advance::Busy) => wait_for_other(s, &run.id).await?,
            Err(launch::Advance::Unknown(reason)) => {
                return Err(launch_unknown(
                    &run.id,
                    format!(
                        "the launch of {} is not finished ({reason}); it goes on in the background. Send the same request again: it never starts a second run",
                        run.id
                    ),
                ));
            }
            Err(launch::Advance::Internal(e)) => return Err(e),
        },
    };
    if run.launch == LaunchStep::Failed {
        return Err(ApiError::new(
            ErrorCode::LaunchFailed,
            format!("{} was not launched: {}", run.id, run.reason.clone().unwrap_or_default()),
        )
        .with("launched", false)
        .with("retry_with_same_request_id", false)
        .with("run_id", run.id.to_string()));
    }
    Ok(Launched { launched: run.launch == LaunchStep::Launched, run: view(s, &run), existing })
}

/// A launch whose outcome is not known yet: the same request id, sent again, finds it.
fn launch_unknown(id: &RunId, message: String) -> ApiError {
    ApiError::new(ErrorCode::LaunchUnknown, message)
        .with("launched", "unknown")
        .with("retry_with_same_request_id", true)
        .with("run_id", id.to_string())
}

async fn wait_for_other(s: &AppState, id: &RunId) -> Result<Run, ApiError> {
    let start = std::time::Instant::now();
    loop {
        let run = launch::must_get(s, id).await?;
        if matches!(run.launch, LaunchStep::Launched | LaunchStep::Failed) {
            return Ok(run);
        }
        if start.elapsed() > WAIT_FOR_OTHER {
            return Err(launch_unknown(id, format!("the launch of {id} is still going on")));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub fn view(s: &AppState, r: &Run) -> RunView {
    let launched = r.launch == LaunchStep::Launched;
    RunView {
        run_id: r.id.to_string(),
        challenge_id: r.challenge_id.to_string(),
        purpose: r.purpose,
        environment_id: r.environment_id.as_ref().map(String::from),
        author: r.author.clone(),
        agent_id: r.agent_id.clone(),
        request_key: r.request_key.clone(),
        state: r.state,
        stage: r.stage.map(|s| s.as_str().to_string()),
        reason: r.reason.clone(),
        status: match (&r.job_status, launched) {
            (Some(status), true) => status.clone(),
            _ => "not launched".into(),
        },
        job_status: r.job_status.clone(),
        job_id: r.job_id.as_ref().map(String::from),
        job_url: r.job_id.as_deref().and_then(|j| Some(s.launcher_of(&r.challenge_id).ok()?.job_url(j))),
        runs_url: launched.then(|| s.deps.datasets.url(&s.runs_dataset, &format!("runs/{}", r.id))),
        report_url: (r.state == runs::RunState::Scored).then(|| {
            let file = crate::runs::reconcile::result_files(r.purpose)[0];
            s.deps.datasets.url(&s.runs_dataset, &format!("runs/{}/reports/{file}", r.id))
        }),
        dashboard_url: (launched && r.purpose == runs::Purpose::Collection)
            .then(|| {
                s.registry.challenge(&r.challenge_id)?.spec.tracking.as_ref().map(|t| t.dashboard_url(&r.id))
            })
            .flatten(),
        platform_fault: r.platform_fault.0,
        training_steps_done: r.steps_done,
        training_steps_planned: r.steps_planned,
        launched,
        max_compute_usd: domain::budget::dollars(r.reserved_cents),
        flavor: r.flavor.clone(),
        timeout_s: r.timeout_s,
        eligible_tasks: r.eligible_tasks,
        excluded_task_count: r.excluded_task_count,
        created_at: r.created_at.clone(),
        updated_at: r.updated_at.clone(),
    }
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RunList {
    pub challenge_id: String,
    pub runs: Vec<RunView>,
}

pub async fn list(
    s: &AppState,
    challenge_id: &ChallengeId,
    environment_id: Option<&EnvironmentId>,
) -> Result<RunList, ApiError> {
    s.challenge(challenge_id)?;
    let runs = crate::runs::repo::list(&s.db, Some(challenge_id), environment_id.map(|e| e.as_str())).await?;
    Ok(RunList { challenge_id: challenge_id.to_string(), runs: runs.iter().map(|r| view(s, r)).collect() })
}

/// Every run on every challenge (or one collection's), newest first.
pub async fn all(s: &AppState, environment_id: Option<&EnvironmentId>) -> Result<Vec<Run>, ApiError> {
    Ok(crate::runs::repo::list(&s.db, None, environment_id.map(|e| e.as_str())).await?)
}

/// A run, on any challenge (the run page knows only its id).
pub async fn find(s: &AppState, run_id: &RunId) -> Result<Run, ApiError> {
    crate::runs::repo::get(&s.db, run_id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::RunNotFound, format!("no run `{run_id}`")))
}

pub async fn detail(
    s: &AppState,
    challenge_id: Option<&ChallengeId>,
    run_id: &RunId,
) -> Result<RunDetail, ApiError> {
    let run = find(s, run_id).await?;
    if let Some(c) = challenge_id.filter(|c| **c != run.challenge_id) {
        return Err(ApiError::new(ErrorCode::RunNotFound, format!("no run `{run_id}` on `{c}`")));
    }
    let stored = crate::runs::repo::events(&s.db, run_id).await?;
    let count = |n: Option<i64>| n.map(|v| v.max(0) as u64);
    let stage_events: Vec<StageEvent> = stored
        .iter()
        .map(|e| StageEvent {
            epoch: e.epoch,
            kind: e.kind.clone(),
            stage: e.stage.clone(),
            passed: count(e.passed),
            total: count(e.total),
            timeouts: count(e.timeouts),
            errors: count(e.errors),
        })
        .collect();
    let stages = follow::timeline(&stage_events, run.state, run.stage, run.purpose);
    let now_epoch = s.now().epoch;
    let relay = follow::relay_now(
        follow::RelayState::parse(&run.relay_state),
        run.relay_seen_epoch,
        now_epoch,
        s.reconcile.relay_grace_s,
    );
    let events =
        stored.into_iter().map(|e| RunEvent::new(e.at, e.source, e.kind, e.stage, e.detail)).collect();
    let gpu = serde_json::from_str(&run.gpu_samples).unwrap_or_default();
    let training = training_curve(s, &run).await?;
    Ok(RunDetail {
        training_steps_logged: training.points.len() as u64,
        training,
        run: view(s, &run),
        stages,
        relay,
        relay_seen_epoch: run.relay_seen_epoch,
        created_epoch: run.created_epoch,
        now_epoch,
        gpu,
        events,
    })
}

/// A run's curves: its stored steps, on an axis to the steps GRPO planned.
pub async fn training_curve(
    s: &AppState,
    run: &crate::runs::repo::Run,
) -> Result<domain::training::TrainingCurve, ApiError> {
    Ok(domain::training::TrainingCurve {
        planned_steps: run.steps_planned.map(|p| p.max(0) as u64),
        points: crate::runs::repo::train_points(&s.db, &run.id).await?,
    })
}

/// `POST …/runs/{run_id}/cancel`: an editor at any time, the run's author while it is queued.
pub async fn cancel(
    s: &AppState,
    challenge_id: &ChallengeId,
    run_id: &RunId,
    me: &Identity,
) -> Result<RunDetail, ApiError> {
    let run = find(s, run_id).await?;
    if run.challenge_id != challenge_id {
        return Err(ApiError::new(ErrorCode::RunNotFound, format!("no run `{run_id}` on `{challenge_id}`")));
    }
    if run.state.has_ended() {
        return Err(ApiError::new(
            ErrorCode::RunNotCancelable,
            format!("{run_id} has already ended ({})", run.state.as_str()),
        ));
    }
    let author = run.author_id == me.id;
    let may = me.editor || (author && run.state == runs::RunState::Queued);
    if !may {
        let message = if author {
            "the author cancels a run only while it is queued; once it runs, ask a BenchFlow editor"
        } else {
            "only the run's author (while it is queued) or a BenchFlow editor cancels a run"
        };
        return Err(ApiError::new(ErrorCode::Forbidden, message));
    }
    crate::runs::reconcile::cancel(s, &run, &me.name).await?;
    detail(s, Some(challenge_id), run_id).await
}
