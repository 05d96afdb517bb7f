//! The service of OpenEnv runs: assignments, the cluster's messages, reads, cancels.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use domain::ids::OpenEnvRunId;
use domain::openenv::admission::{Outcome, TaskProbe};
use domain::openenv::episode::{EPISODES_PER_STEP, QUEUE_TIMEOUT_S, RUN_LIMIT_S};
use domain::openenv::evaluation::{EpisodeRecord, EvaluationReport, EvaluationView, Phase, Progress};
use domain::openenv::run::{reward_curve, OpenEnvRunView, RunEvent, RunEvents, RunFailure, RunState};
use domain::openenv::SubmissionRequest;
use domain::ErrorCode;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::changes::Topic;
use crate::http::ApiError;
use crate::identity::Identity;
use crate::openenv::runs::repo::{Recorded, RunRow};
use crate::AppState;

/// What the cluster sends. A connection speaks for one node: the `node_id` of its hello (an agent
/// that names none is the node `default`), with its GPUs and sandbox allowance.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum ClusterMessage {
    Hello {
        #[serde(default)]
        node_id: Option<String>,
        /// The node's GPUs in all (at least `gpus_free`; omitted: `gpus_free`).
        #[serde(default)]
        gpus: Option<u32>,
        #[serde(default)]
        gpus_free: u32,
        #[serde(default)]
        sandboxes_free: u32,
        #[serde(default)]
        runs: Vec<String>,
    },
    Heartbeat {
        #[serde(default)]
        node_id: Option<String>,
        #[serde(default)]
        gpus: Option<u32>,
        #[serde(default)]
        gpus_free: u32,
        #[serde(default)]
        sandboxes_free: u32,
    },
    Accepted {
        run_id: String,
    },
    Event {
        run_id: String,
        /// Boxed: an event with its metrics and trainer is far larger than the other messages.
        event: Box<RunEvent>,
    },
    Stopped {
        run_id: String,
    },
}

/// Handles one message from the cluster: the answer, then what the arena has for the cluster.
pub async fn on_message(s: &AppState, holder: &str, text: &str) -> Vec<Value> {
    let message = match serde_json::from_str::<ClusterMessage>(text) {
        Ok(m) => m,
        Err(e) => return vec![json!({"kind": "ack", "error": format!("not a cluster message: {e}")})],
    };
    match handle(s, holder, message).await {
        Ok(out) => out,
        Err(e) => {
            tracing::error!(error = %e, "handling the cluster's message failed");
            vec![json!({"kind": "ack", "error": "the arena could not record it; send it again"})]
        }
    }
}

async fn handle(s: &AppState, holder: &str, message: ClusterMessage) -> Result<Vec<Value>, sqlx::Error> {
    let domain::time::Timestamp { text: at, epoch } = s.now();
    match message {
        ClusterMessage::Hello { node_id, gpus, gpus_free, sandboxes_free, runs } => {
            let node = match node_name(node_id.as_deref()) {
                Ok(n) => n,
                Err(why) => return Ok(vec![json!({"kind": "ack", "of": "hello", "error": why})]),
            };
            let room = (i64::from(gpus.unwrap_or(0).max(gpus_free)), gpus_free.into(), sandboxes_free.into());
            crate::openenv::repo::node_seen(&s.db, node, holder, epoch, room).await?;
            let mut out = vec![json!({"kind": "ack", "of": "hello", "node_id": node})];
            out.extend(forget_lost(s, node, &runs, &at).await?);
            out.extend(outbox(s, node, holder, gpus_free, sandboxes_free).await?);
            Ok(out)
        }
        ClusterMessage::Heartbeat { node_id, gpus, gpus_free, sandboxes_free } => {
            let node = match node_name(node_id.as_deref()) {
                Ok(n) => n,
                Err(why) => return Ok(vec![json!({"kind": "ack", "of": "heartbeat", "error": why})]),
            };
            let room = (i64::from(gpus.unwrap_or(0).max(gpus_free)), gpus_free.into(), sandboxes_free.into());
            crate::openenv::repo::node_seen(&s.db, node, holder, epoch, room).await?;
            let mut out = vec![json!({"kind": "ack", "of": "heartbeat"})];
            out.extend(outbox(s, node, holder, gpus_free, sandboxes_free).await?);
            Ok(out)
        }
        ClusterMessage::Accepted { run_id } => {
            crate::openenv::runs::repo::mark_delivered(&s.db, &run_id).await?;
            Ok(vec![json!({"kind": "ack", "of": "accepted", "run_id": run_id})])
        }
        ClusterMessage::Stopped { run_id } => {
            crate::openenv::runs::repo::mark_stopped(&s.db, &run_id).await?;
            Ok(vec![json!({"kind": "ack", "of": "stopped", "run_id": run_id})])
        }
        ClusterMessage::Event { run_id, mut event } => {
            if let Err(why) = event.check() {
                return Ok(vec![
                    json!({"kind": "ack", "of": "event", "run_id": run_id, "seq": event.seq, "error": why.0}),
                ]);
            }
            let seq = event.seq;
            let ack = |extra: Value| {
                let mut a = json!({"kind": "ack", "of": "event", "run_id": run_id, "seq": seq});
                if let (Some(a), Some(extra)) = (a.as_object_mut(), extra.as_object()) {
                    a.extend(extra.clone());
                }
                a
            };
            // Participants read what the arena writes; the cluster's words go to editors and the log.
            domain::openenv::wording::for_participants(&mut event, &train_tasks(s, &run_id).await?);
            if let Some(reported) = event.reported.as_ref().filter(|_| event.state == RunState::Failed) {
                tracing::warn!(run = %run_id, ?reported, "the cluster reports the run failed");
            }
            let recorded = crate::openenv::runs::repo::record(&s.db, &run_id, &event, epoch).await?;
            let state = event.state;
            if recorded == Recorded::Applied && event.state.has_ended() {
                s.changes.bump(Topic::Openenv);
            }
            Ok(vec![match recorded {
                Recorded::Applied => ack(json!({})),
                Recorded::AlreadyKnown => ack(json!({"known": true})),
                // Acknowledged so that the cluster stops resending it; the reason is in the ack.
                Recorded::UnknownRun => ack(json!({"error": "no such run"})),
                Recorded::OutOfOrder(current) => ack(json!({"error": format!(
                    "`{}` cannot follow `{}`", state.as_str(), current.as_str())})),
                Recorded::RecordsRefused(why) => ack(json!({
                    "code": ErrorCode::EvaluationRecordsIncomplete.as_str(),
                    "error": format!("the evaluation's records were refused: {why}")})),
            }])
        }
    }
}

/// The run's submission's train tasks (none for a run this arena does not know).
async fn train_tasks(s: &AppState, run_id: &str) -> Result<Vec<String>, sqlx::Error> {
    let Some(run) = crate::openenv::runs::repo::get(&s.db, run_id).await? else { return Ok(Vec::new()) };
    let Some(stored) = crate::openenv::repo::get(&s.db, &run.account_id, &run.submission_id).await? else {
        return Ok(Vec::new());
    };
    let request: SubmissionRequest =
        serde_json::from_str(&stored.body).map_err(|e| sqlx::Error::Decode(e.into()))?;
    Ok(request.tasks.into_iter().filter(|t| t.split == "train").map(|t| t.task_id).collect())
}

/// A node's name as its agent says it: 1 to 64 of `A-Z a-z 0-9 . _ -`; none is `default`.
fn node_name(given: Option<&str>) -> Result<&str, String> {
    let name = given.unwrap_or("default");
    let fits = (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if fits {
        Ok(name)
    } else {
        Err("`node_id` is 1 to 64 characters of letters, digits, `.`, `_` and `-`".into())
    }
}

/// On a node's hello: runs it was given that it no longer holds (its agent restarted) end
/// `failed`; runs it holds that have ended here, or that the arena does not know (put back in the
/// queue while the node was lost), get a stop.
async fn forget_lost(s: &AppState, node: &str, held: &[String], at: &str) -> Result<Vec<Value>, sqlx::Error> {
    let held: BTreeSet<&str> = held.iter().map(String::as_str).collect();
    let live = crate::openenv::runs::repo::live_on(&s.db, node).await?;
    for run in live.iter().filter(|r| r.delivered && !held.contains(r.run_id.as_str())) {
        crate::openenv::runs::repo::end(
            &s.db,
            &run.run_id,
            None,
            RunState::Failed,
            Some(ErrorCode::RunTrainerFailed.as_str()),
            "RUN_TRAINER_FAILED: the training cluster reconnected without this run",
            at,
        )
        .await?;
        crate::openenv::runs::repo::mark_stopped(&s.db, &run.run_id).await?;
    }
    let mut out = Vec::new();
    for run_id in held {
        match crate::openenv::runs::repo::get(&s.db, run_id).await? {
            Some(run) if run.state.has_ended() => out.push(stop_message(&run)),
            Some(_) => {}
            None => out.push(json!({"kind": "stop", "run_id": run_id,
                "reason": "the arena put this run back in the queue while its node was silent"})),
        }
    }
    Ok(out)
}

fn stop_message(run: &RunRow) -> Value {
    json!({"kind": "stop", "run_id": run.run_id, "reason": run.message.clone().unwrap_or_default()})
}

/// How long an assignment waits for its acceptance before it is sent again.
const RESEND_S: i64 = 10;

/// What the arena has for a node: new assignments while it has room and none of its earlier ones
/// waits for acceptance (its free counts would not include them yet), every assignment of its not
/// yet accepted, and every stop not yet confirmed.
async fn outbox(
    s: &AppState,
    node: &str,
    holder: &str,
    gpus_free: u32,
    sandboxes_free: u32,
) -> Result<Vec<Value>, sqlx::Error> {
    let mut waiting = crate::openenv::runs::repo::live_on(&s.db, node).await?;
    waiting.retain(|r| r.state == RunState::Starting && !r.delivered);
    if waiting.is_empty() {
        let room = (gpus_free as usize).min(sandboxes_free as usize / EPISODES_PER_STEP);
        waiting.extend(schedule(s, node, holder, room).await?);
    } else {
        // An assignment is sent again once it waited RESEND_S for its acceptance, not at every
        // heartbeat: a node that heartbeats faster than the arena answers would otherwise pile
        // up copies of it ahead of its own acceptances.
        let now = s.now().epoch;
        waiting.retain(|r| now - r.assigned_epoch >= RESEND_S);
    }
    let mut out = Vec::new();
    for run in &waiting {
        match assignment(s, run).await? {
            Some(a) => out.push(a),
            None => {
                tracing::error!(run = %run.run_id, "an OpenEnv run whose assignment cannot be built: its submission, its pinned images or the track's recipe is missing")
            }
        }
    }
    for run_id in crate::openenv::runs::repo::stops_to_send(&s.db).await? {
        if let Some(run) = crate::openenv::runs::repo::get(&s.db, &run_id).await? {
            if run.node_id.as_deref().is_none_or(|n| n == node) {
                out.push(stop_message(&run));
            }
        }
    }
    Ok(out)
}

/// Starts up to `room` runs on `node`, the next admitted submissions in acceptance order. A
/// submission another server assigned first is passed over; the node's room is the database's to
/// grant (`repo::assign`).
async fn schedule(s: &AppState, node: &str, holder: &str, room: usize) -> Result<Vec<RunRow>, sqlx::Error> {
    let mut started = Vec::new();
    if room == 0 {
        return Ok(started);
    }
    let plan = track_benchmark(s).map(|b| b.plan());
    for (account_id, submission_id) in crate::openenv::runs::repo::queue_head(&s.db, room).await? {
        let domain::time::Timestamp { text: at, epoch } = s.now();
        let run_id = format!("oe-{}", crate::identity::random_hex(8));
        let place = crate::openenv::runs::repo::Placement { node_id: node, holder, at: &at, epoch };
        let submission = (account_id.as_str(), submission_id.as_str());
        let sandboxes = EPISODES_PER_STEP as i64;
        if !crate::openenv::runs::repo::assign(&s.db, &run_id, submission, plan.as_ref(), &place, sandboxes)
            .await?
        {
            continue;
        }
        tracing::info!(run = %run_id, submission = %submission_id, node, "OpenEnv run handed to the cluster");
        started.extend(crate::openenv::runs::repo::get(&s.db, &run_id).await?);
    }
    Ok(started)
}

/// The `assign` message (`domain::openenv::assignment`): the run, the submission as admitted with
/// each task's pinned image and start, the model and the recipe.
async fn assignment(s: &AppState, run: &RunRow) -> Result<Option<Value>, sqlx::Error> {
    use domain::openenv::assignment::{assignment, PinnedImage};
    let Some(stored) = crate::openenv::repo::get(&s.db, &run.account_id, &run.submission_id).await? else {
        return Ok(None);
    };
    let decode = |e: serde_json::Error| sqlx::Error::Decode(e.into());
    let request: SubmissionRequest = serde_json::from_str(&stored.body).map_err(decode)?;
    let images: Vec<Value> = serde_json::from_str(&stored.images).map_err(decode)?;
    let pinned: Option<Vec<PinnedImage>> = images
        .iter()
        .map(|i| {
            Some(PinnedImage {
                resolved: i["resolved"].as_str()?.to_string(),
                port: u16::try_from(i["port"].as_u64()?).ok()?,
                tasks: serde_json::from_value(i["tasks"].clone()).ok()?,
                start: serde_json::from_value(i["start"].clone()).ok()?,
            })
        })
        .collect();
    let (model, recipe) = match s.registry.openenv_track_recipe() {
        Ok(r) => r,
        Err(why) => {
            tracing::error!(run = %run.run_id, %why, "no recipe for the OpenEnv track");
            return Ok(None);
        }
    };
    let played = played(&stored.probes);
    let mut out =
        pinned.and_then(|p| assignment(&run.run_id, RUN_LIMIT_S, &request, &p, &played, &model, &recipe));
    // The benchmark as the run was planned with: its environments from the registry, when this
    // server has them (a private benchmark's overlay may be missing: the trainer then says so).
    if let (Some(a), Some(plan)) = (out.as_mut(), &run.eval_plan) {
        a["benchmark"] = match s.registry.benchmarks.get(&plan.benchmark) {
            Some(b) => domain::openenv::benchmark::assignment_part(b, &run.run_id),
            None => json!({"id": plan.benchmark, "trials": plan.trials,
                "phase_allowance_s": plan.phase_allowance_s, "environments": []}),
        };
    }
    Ok(out)
}

/// How admission played each task (its reset and its environment's tools), from its probes.
fn played(probes: &str) -> BTreeMap<String, domain::openenv::assignment::Played> {
    let probes: Vec<TaskProbe> = serde_json::from_str(probes).unwrap_or_default();
    probes
        .into_iter()
        .filter_map(|p| match p.last {
            Some(Outcome::Passed { reset, tools, .. }) => {
                Some((p.task_id, domain::openenv::assignment::Played { reset, tools }))
            }
            _ => None,
        })
        .collect()
}

/// The benchmark the track's runs are evaluated on, when the registry names one.
fn track_benchmark(s: &AppState) -> Option<&domain::openenv::benchmark::Benchmark> {
    s.registry.benchmarks.get(s.registry.openenv_benchmark.as_deref()?)
}

/// The worker's pass: nodes silent past `ARENA_NODE_LOST_S` are given up (`lose_silent_nodes`),
/// then runs whose trainer has not started on a GPU two hours after their assignment fail with
/// `RUN_QUEUE_TIMEOUT` (their time is not spent; the cluster gets a stop).
pub async fn sweep(s: &AppState) -> anyhow::Result<usize> {
    let lost = lose_silent_nodes(s).await?;
    Ok(lost + crate::engine::pass(s, &QueueTimeouts).await?)
}

/// Gives up each node silent past its bound, once (the database's update decides which server
/// does): its runs that never started go back to the queue at their place, those that were
/// training end `failed` with `RUN_NODE_LOST` (a platform failure), and runs in cleanup are left
/// to the cleanup's own watch. Answers how many runs it moved.
async fn lose_silent_nodes(s: &AppState) -> anyhow::Result<usize> {
    let now = s.now();
    let before = now.epoch - s.openenv.node_lost_s;
    let mut moved = 0;
    for node in crate::openenv::repo::nodes_silent_since(&s.db, before).await? {
        // Given up once; its runs are moved by whichever pass finds them (each move is guarded by
        // the run's state, so a pass killed half-way is finished by the next).
        if crate::openenv::repo::node_lost(&s.db, &node, before, now.epoch).await? {
            tracing::warn!(node = %node, "a cluster node went silent past its bound: its runs are moved");
        }
        for run in crate::openenv::runs::repo::live_on(&s.db, &node).await? {
            let done = match run.state {
                RunState::Starting => crate::openenv::runs::repo::requeue(&s.db, &run.run_id).await?,
                RunState::Cleanup => false,
                _ => {
                    let message = format!(
                        "RUN_NODE_LOST: the node training this run (`{node}`) went silent for over {} s; \
                         the arena lost it, not your environment",
                        s.openenv.node_lost_s
                    );
                    let code = Some(ErrorCode::RunNodeLost.as_str());
                    crate::openenv::runs::repo::end(
                        &s.db,
                        &run.run_id,
                        None,
                        RunState::Failed,
                        code,
                        &message,
                        &now.text,
                    )
                    .await?
                }
            };
            moved += usize::from(done);
        }
        if moved > 0 {
            s.changes.bump(Topic::Openenv);
        }
    }
    Ok(moved)
}

/// OpenEnv runs past the queue's limit, on the engine (`crate::engine`).
pub struct QueueTimeouts;

/// Long enough for one run's end to be written.
const SWEEP_LEASE_S: i64 = 30;

#[async_trait::async_trait]
impl crate::engine::Track for QueueTimeouts {
    type Key = String;
    const RECORD: &'static str = "OpenEnv run";

    fn at_once(&self) -> usize {
        1
    }

    fn lease_s(&self, _: &AppState) -> i64 {
        SWEEP_LEASE_S
    }

    async fn due(&self, s: &AppState) -> anyhow::Result<Vec<String>> {
        Ok(crate::openenv::runs::repo::starting_before(&s.db, s.now().epoch - QUEUE_TIMEOUT_S).await?)
    }

    const LEASE: crate::engine::RowLease = crate::openenv::runs::repo::LEASE;

    fn key_values(id: &String) -> Vec<&str> {
        vec![id.as_str()]
    }

    /// Ends the run unless it started (or ended) since it was found due.
    async fn step(&self, s: &AppState, id: &String) -> anyhow::Result<bool> {
        let message = "RUN_QUEUE_TIMEOUT: the trainer did not start on a GPU within two hours; none of the run's time was spent";
        crate::openenv::runs::repo::end(
            &s.db,
            id,
            Some(RunState::Starting),
            RunState::Failed,
            Some("RUN_QUEUE_TIMEOUT"),
            message,
            &s.now().text,
        )
        .await
        .context("ending the run")
    }
}

fn not_found(run_id: &OpenEnvRunId) -> ApiError {
    ApiError::new(ErrorCode::RunNotFound, format!("you have no OpenEnv run `{run_id}`"))
}

/// The run, if `me` may see it (its submitter, or an editor); anyone else gets a 404.
async fn visible(s: &AppState, me: &Identity, run_id: &OpenEnvRunId) -> Result<(RunRow, String), ApiError> {
    let run = crate::openenv::runs::repo::get(&s.db, run_id).await?.ok_or_else(|| not_found(run_id))?;
    if run.account_id != me.id && !me.editor {
        return Err(not_found(run_id));
    }
    let account = crate::openenv::repo::get(&s.db, &run.account_id, &run.submission_id)
        .await?
        .map(|st| st.account)
        .unwrap_or_default();
    Ok((run, account))
}

pub async fn view(s: &AppState, me: &Identity, run_id: &OpenEnvRunId) -> Result<OpenEnvRunView, ApiError> {
    Ok(view_with_events(s, me, run_id).await?.0)
}

/// The run's held-out evaluation, scored from its stored records; editors see each task.
pub fn evaluation_of(
    run: &RunRow,
    events: &[RunEvent],
    records: &[(Phase, EpisodeRecord)],
    editor: bool,
) -> Option<EvaluationView> {
    let plan = run.eval_plan.as_ref()?;
    let phase = |p: Phase| records.iter().filter(|r| r.0 == p).map(|r| r.1.clone()).collect::<Vec<_>>();
    let reports: Vec<&EvaluationReport> = events.iter().filter_map(|e| e.evaluation.as_ref()).collect();
    let last = reports.last();
    let progress = Progress {
        phase: last.map(|r| r.phase),
        done: last.map_or(0, |r| r.done),
        planned: last.map_or(0, |r| r.planned),
        // Editors read the cluster's own reason where it gave one.
        incomplete: events.iter().rev().find_map(|e| {
            let worded = e.evaluation.as_ref()?.incomplete.clone()?;
            let reported = e.reported.as_ref().and_then(|r| r.incomplete.clone()).filter(|_| editor);
            Some(reported.unwrap_or(worded))
        }),
        simulated: reports.iter().any(|r| r.simulated),
        running: run.state == RunState::Evaluating,
        ended: run.state.has_ended(),
        ended_why: (run.state != RunState::Completed && run.state.has_ended())
            .then(|| format!("the run ended `{}` before its evaluation finished", run.state.as_str())),
        trained: run.policy_version > 0,
    };
    Some(domain::openenv::evaluation::view(
        plan,
        &phase(Phase::Before),
        &phase(Phase::After),
        &progress,
        editor,
    ))
}

pub fn run_view(
    run: &RunRow,
    account: String,
    events: &[RunEvent],
    evaluation: Option<EvaluationView>,
    now_epoch: i64,
) -> OpenEnvRunView {
    let failed = matches!(run.state, RunState::Failed | RunState::Cancelled);
    OpenEnvRunView {
        run_id: run.run_id.clone(),
        submission_id: run.submission_id.clone(),
        account,
        state: run.state,
        state_words: run.state.words().to_string(),
        policy_version: run.policy_version,
        assigned_at: run.assigned_at.clone(),
        started: run.started_epoch.is_some(),
        ended_at: run.ended_at.clone(),
        error: failed.then(|| RunFailure {
            code: run.error_code.clone(),
            message: run.message.clone(),
            // Present only in an editor's events.
            reported: events.last().and_then(|e| e.reported.as_ref()?.message.clone()),
        }),
        time_limit_s: RUN_LIMIT_S,
        reward_curve: reward_curve(events),
        steps: domain::openenv::run::steps(events),
        trainer: domain::openenv::run::trainer_of(events),
        alert: domain::openenv::run::latest_alert(events),
        evaluation,
        cleanup: run.cleanup(now_epoch),
        node_id: None,
    }
}

pub async fn events(s: &AppState, me: &Identity, run_id: &OpenEnvRunId) -> Result<RunEvents, ApiError> {
    visible(s, me, run_id).await?;
    Ok(RunEvents { run_id: run_id.to_string(), events: read_events(s, run_id, me.editor).await? })
}

/// Both at once, for the run's page.
pub async fn view_with_events(
    s: &AppState,
    me: &Identity,
    run_id: &OpenEnvRunId,
) -> Result<(OpenEnvRunView, Vec<RunEvent>), ApiError> {
    let (run, account) = visible(s, me, run_id).await?;
    let events = read_events(s, run_id, me.editor).await?;
    let records = crate::openenv::runs::repo::eval_records(&s.db, Some(run_id)).await?;
    let records = records.get(run_id.as_str()).map(Vec::as_slice).unwrap_or_default();
    let evaluation = evaluation_of(&run, &events, records, me.editor);
    let mut view = run_view(&run, account, &events, evaluation, s.now().epoch);
    view.node_id = run.node_id.clone().filter(|_| me.editor);
    Ok((view, events))
}

/// A run's events as one person reads them: every alert in words (`domain::openenv::alerts`), and
/// the cluster's own words (`reported`) for editors only.
async fn read_events(s: &AppState, run_id: &str, editor: bool) -> Result<Vec<RunEvent>, sqlx::Error> {
    let mut events = crate::openenv::runs::repo::events(&s.db, run_id).await?;
    if !editor {
        events.iter_mut().for_each(|e| e.reported = None);
    }
    domain::openenv::alerts::in_words(&mut events);
    Ok(events)
}

/// `POST /api/openenv/runs/{id}/cancel`: an editor stops a run; the cluster gets a stop. Resent, it
/// answers the run as it is.
pub async fn cancel(s: &AppState, me: &Identity, run_id: &OpenEnvRunId) -> Result<OpenEnvRunView, ApiError> {
    let (run, _) = visible(s, me, run_id).await?;
    if !me.editor {
        return Err(ApiError::new(ErrorCode::Forbidden, "only a BenchFlow editor can stop an OpenEnv run"));
    }
    if !run.state.has_ended() {
        let at = s.now().text;
        let message = format!("cancelled by {}", me.name);
        crate::openenv::runs::repo::end(&s.db, run_id, None, RunState::Cancelled, None, &message, &at)
            .await?;
    }
    view(s, me, run_id).await
}

/// States of the runs of these submissions, by run id.
pub async fn states(s: &AppState, account_id: Option<&str>) -> Result<BTreeMap<String, RunState>, ApiError> {
    Ok(crate::openenv::runs::repo::list(&s.db, account_id)
        .await?
        .into_iter()
        .map(|r| (r.run_id, r.state))
        .collect())
}

/// The connection `holder` closed: its node's runs wait for its agent to come back (unless a
/// newer connection of the node already said hello), for `ARENA_NODE_LOST_S` at most.
pub async fn cluster_gone(s: &AppState, holder: &str) {
    if let Err(e) = crate::openenv::repo::node_gone(&s.db, holder).await {
        tracing::error!(error = %e, "recording the cluster's disconnection failed");
    }
}

/// `GET /api/openenv/leaderboard`: submissions ranked by the mean Δ of their evaluated runs, made
/// once per completed run (`Topic::Openenv`) and served from memory in between.
pub async fn leaderboard(
    s: &AppState,
) -> Result<crate::changes::Snapshot<domain::openenv::evaluation::Leaderboard>, ApiError> {
    s.caches.openenv_leaderboard.get(&s.changes, (), rank(s)).await
}

async fn rank(s: &AppState) -> Result<domain::openenv::evaluation::Leaderboard, ApiError> {
    use domain::openenv::evaluation::{leaderboard, unranked, EvaluatedRun, Leaderboard, METHOD};
    let benchmark = track_benchmark(s);
    // Failed runs too: one that ended without a training signal is listed apart (`unranked`).
    let runs = crate::openenv::runs::repo::in_states(&s.db, &[RunState::Completed, RunState::Failed]).await?;
    let records = crate::openenv::runs::repo::eval_records(&s.db, None).await?;
    let mut evaluated = Vec::new();
    for run in &runs {
        // Only runs planned on the track's benchmark rank together; of the failed, only those that
        // ended for want of a training signal are listed (apart, with their reason).
        if run.eval_plan.as_ref().map(|p| p.benchmark.as_str()) != benchmark.map(|b| b.id())
            || run.state == RunState::Failed && run.error_code.as_deref() != Some("RUN_NO_TRAINING_SIGNAL")
        {
            continue;
        }
        let Some(stored) = crate::openenv::repo::get(&s.db, &run.account_id, &run.submission_id).await?
        else {
            continue;
        };
        let mine = records.get(&run.run_id).map(Vec::as_slice).unwrap_or_default();
        // Its events say whether the simulated cluster played it.
        let events = crate::openenv::runs::repo::events(&s.db, &run.run_id).await?;
        // Participants' view: the leaderboard never carries a held-out task.
        let Some(evaluation) = evaluation_of(run, &events, mine, false) else { continue };
        let name =
            serde_json::from_str::<SubmissionRequest>(&stored.body).map(|r| r.name).unwrap_or_default();
        evaluated.push(EvaluatedRun {
            account: stored.account,
            submission_id: run.submission_id.clone(),
            name,
            run_id: run.run_id.clone(),
            order: run.assigned_epoch,
            evaluation,
        });
    }
    let domains = benchmark.map(|b| b.domains()).unwrap_or_default();
    let (rows, reference) = leaderboard(&evaluated, &domains);
    Ok(Leaderboard {
        benchmark: benchmark.map(|b| b.id().to_string()),
        benchmark_name: benchmark.map(|b| b.header.name.clone()),
        domains,
        rows,
        reference,
        unranked: unranked(&evaluated),
        method: METHOD.to_string(),
    })
}
