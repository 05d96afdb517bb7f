//! OpenEnv runs: the arena starts the one run of each admitted submission, in acceptance order,
//! when the connected cluster reports a free H200 and sandboxes for a step's five episodes; the
//! cluster reports each run's events, stored once by sequence; the arena ends a run itself when an
//! editor cancels it or its trainer has not started on a GPU within two hours
//! (`RUN_QUEUE_TIMEOUT`).
//!
//! The cluster's connection (`/api/relay/cluster`) speaks JSON messages with a `kind`:
//! - cluster → arena: `hello` / `heartbeat` (`gpus_free`, `sandboxes_free`, and on `hello` the
//!   `runs` it holds), `accepted` (`run_id`: it has the assignment), `event` (`run_id`, `event`:
//!   `seq`, `state`, `policy_version`, `at`, `rewards?`, `message?`), `stopped` (`run_id`);
//! - arena → cluster: `ack` (for each of those, with `run_id`/`seq` for an event, or `error`),
//!   `assign` (`run_id`, `time_limit_s`, the pinned submission) and `stop` (`run_id`, `reason`).
//!
//! An assignment is sent until the cluster accepts it and a stop until the cluster confirms it, so
//! a connection lost or an arena restarted in between loses nothing: whichever server holds the
//! connection sends what is outstanding after every heartbeat.

use std::collections::{BTreeMap, BTreeSet};

use domain::ids::OpenEnvRunId;
use domain::openenv::episode::{EPISODES_PER_STEP, QUEUE_TIMEOUT_S, RUN_LIMIT_S};
use domain::openenv::run::{reward_curve, OpenEnvRunView, RunEvent, RunEvents, RunFailure, RunState};
use domain::openenv::SubmissionRequest;
use domain::ErrorCode;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::http::ApiError;
use crate::identity::Identity;
use crate::openenv::runs_repo::{Recorded, RunRow};
use crate::AppState;

/// What the cluster sends.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum ClusterMessage {
    Hello {
        #[serde(default)]
        gpus_free: u32,
        #[serde(default)]
        sandboxes_free: u32,
        #[serde(default)]
        runs: Vec<String>,
    },
    Heartbeat {
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
pub async fn on_message(s: &AppState, text: &str) -> Vec<Value> {
    let message = match serde_json::from_str::<ClusterMessage>(text) {
        Ok(m) => m,
        Err(e) => return vec![json!({"kind": "ack", "error": format!("not a cluster message: {e}")})],
    };
    match handle(s, message).await {
        Ok(out) => out,
        Err(e) => {
            tracing::error!(error = %e, "handling the cluster's message failed");
            vec![json!({"kind": "ack", "error": "the arena could not record it; send it again"})]
        }
    }
}

async fn handle(s: &AppState, message: ClusterMessage) -> Result<Vec<Value>, sqlx::Error> {
    let domain::time::Timestamp { text: at, epoch } = s.now();
    match message {
        ClusterMessage::Hello { gpus_free, sandboxes_free, runs } => {
            crate::openenv::repo::cluster_seen(
                &s.db,
                &s.server_id,
                epoch,
                gpus_free.into(),
                sandboxes_free.into(),
            )
            .await?;
            let mut out = vec![json!({"kind": "ack", "of": "hello"})];
            out.extend(forget_lost(s, &runs, &at).await?);
            out.extend(outbox(s, gpus_free, sandboxes_free).await?);
            Ok(out)
        }
        ClusterMessage::Heartbeat { gpus_free, sandboxes_free } => {
            crate::openenv::repo::cluster_seen(
                &s.db,
                &s.server_id,
                epoch,
                gpus_free.into(),
                sandboxes_free.into(),
            )
            .await?;
            let mut out = vec![json!({"kind": "ack", "of": "heartbeat"})];
            out.extend(outbox(s, gpus_free, sandboxes_free).await?);
            Ok(out)
        }
        ClusterMessage::Accepted { run_id } => {
            crate::openenv::runs_repo::mark_delivered(&s.db, &run_id).await?;
            Ok(vec![json!({"kind": "ack", "of": "accepted", "run_id": run_id})])
        }
        ClusterMessage::Stopped { run_id } => {
            crate::openenv::runs_repo::mark_stopped(&s.db, &run_id).await?;
            Ok(vec![json!({"kind": "ack", "of": "stopped", "run_id": run_id})])
        }
        ClusterMessage::Event { run_id, event } => {
            if let Err(why) = event.check() {
                return Ok(vec![
                    json!({"kind": "ack", "of": "event", "run_id": run_id, "seq": event.seq, "error": why}),
                ]);
            }
            let ack = |extra: Value| {
                let mut a = json!({"kind": "ack", "of": "event", "run_id": run_id, "seq": event.seq});
                if let (Some(a), Some(extra)) = (a.as_object_mut(), extra.as_object()) {
                    a.extend(extra.clone());
                }
                a
            };
            Ok(vec![match crate::openenv::runs_repo::record(&s.db, &run_id, &event, epoch).await? {
                Recorded::Applied => ack(json!({})),
                Recorded::AlreadyKnown => ack(json!({"known": true})),
                // Acknowledged so that the cluster stops resending it; the reason is in the ack.
                Recorded::UnknownRun => ack(json!({"error": "no such run"})),
                Recorded::OutOfOrder(current) => ack(json!({"error": format!(
                    "`{}` cannot follow `{}`", event.state.as_str(), current.as_str())})),
            }])
        }
    }
}

/// On a hello: runs the cluster was given that it no longer holds (it restarted) end `failed`;
/// runs it holds that have ended here get a stop.
async fn forget_lost(s: &AppState, held: &[String], at: &str) -> Result<Vec<Value>, sqlx::Error> {
    let held: BTreeSet<&str> = held.iter().map(String::as_str).collect();
    let live = crate::openenv::runs_repo::in_states(
        &s.db,
        &[RunState::Starting, RunState::Loading, RunState::Rolling, RunState::Updating, RunState::Cleanup],
    )
    .await?;
    for run in live.iter().filter(|r| r.delivered && !held.contains(r.run_id.as_str())) {
        crate::openenv::runs_repo::end(
            &s.db,
            &run.run_id,
            None,
            RunState::Failed,
            Some(ErrorCode::RunTrainerFailed.as_str()),
            "RUN_TRAINER_FAILED: the training cluster reconnected without this run",
            at,
        )
        .await?;
        crate::openenv::runs_repo::mark_stopped(&s.db, &run.run_id).await?;
    }
    let mut out = Vec::new();
    for run_id in held {
        if let Some(run) = crate::openenv::runs_repo::get(&s.db, run_id).await? {
            if run.state.terminal() {
                out.push(stop_message(&run));
            }
        }
    }
    Ok(out)
}

fn stop_message(run: &RunRow) -> Value {
    json!({"kind": "stop", "run_id": run.run_id, "reason": run.message.clone().unwrap_or_default()})
}

/// What the arena has for the cluster: a new assignment when it has room and nothing is waiting
/// for its acceptance, every assignment not yet accepted, and every stop not yet confirmed.
async fn outbox(s: &AppState, gpus_free: u32, sandboxes_free: u32) -> Result<Vec<Value>, sqlx::Error> {
    let mut waiting = crate::openenv::runs_repo::in_states(&s.db, &[RunState::Starting]).await?;
    waiting.retain(|r| !r.delivered);
    if waiting.is_empty() && gpus_free >= 1 && sandboxes_free as usize >= EPISODES_PER_STEP {
        if let Some(run) = schedule(s).await? {
            waiting.push(run);
        }
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
    for run_id in crate::openenv::runs_repo::stops_to_send(&s.db).await? {
        if let Some(run) = crate::openenv::runs_repo::get(&s.db, &run_id).await? {
            out.push(stop_message(&run));
        }
    }
    Ok(out)
}

/// Starts the next admitted submission's run, if any waits.
async fn schedule(s: &AppState) -> Result<Option<RunRow>, sqlx::Error> {
    let Some((account_id, submission_id)) = crate::openenv::runs_repo::queue_head(&s.db).await? else {
        return Ok(None);
    };
    let domain::time::Timestamp { text: at, epoch } = s.now();
    let run_id = format!("oe-{}", crate::identity::random_hex(8));
    if !crate::openenv::runs_repo::assign(&s.db, &run_id, &account_id, &submission_id, &at, epoch).await? {
        return Ok(None);
    }
    tracing::info!(run = %run_id, submission = %submission_id, "OpenEnv run handed to the cluster");
    crate::openenv::runs_repo::get(&s.db, &run_id).await
}

/// The `assign` message (`domain::openenv::assignment`): the run, the submission as admitted with
/// each task's pinned image and start, the model and the recipe.
async fn assignment(s: &AppState, run: &RunRow) -> Result<Option<Value>, sqlx::Error> {
    use domain::openenv::assignment::{assignment, track_recipe, PinnedImage};
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
    let (model, recipe) = match track_recipe(&s.registry) {
        Ok(r) => r,
        Err(why) => {
            tracing::error!(run = %run.run_id, %why, "no recipe for the OpenEnv track");
            return Ok(None);
        }
    };
    Ok(pinned.and_then(|p| assignment(&run.run_id, RUN_LIMIT_S, &request, &p, &model, &recipe)))
}

/// The worker's pass: runs whose trainer has not started on a GPU two hours after their
/// assignment fail with `RUN_QUEUE_TIMEOUT` (their time is not spent; the cluster gets a stop).
pub async fn sweep(s: &AppState) -> Result<usize, ApiError> {
    crate::engine::pass(s, &QueueTimeouts).await
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

    async fn due(&self, s: &AppState) -> Result<Vec<String>, ApiError> {
        Ok(crate::openenv::runs_repo::starting_before(&s.db, s.now().epoch - QUEUE_TIMEOUT_S).await?)
    }

    const LEASE: crate::engine::RowLease = crate::openenv::runs_repo::LEASE;

    fn key_values(id: &String) -> Vec<&str> {
        vec![id.as_str()]
    }

    /// Ends the run unless it started (or ended) since it was found due.
    async fn step(&self, s: &AppState, id: &String) -> Result<bool, String> {
        let message = "RUN_QUEUE_TIMEOUT: the trainer did not start on a GPU within two hours; none of the run's time was spent";
        crate::openenv::runs_repo::end(
            &s.db,
            id,
            Some(RunState::Starting),
            RunState::Failed,
            Some("RUN_QUEUE_TIMEOUT"),
            message,
            &s.now().text,
        )
        .await
        .map_err(|e| e.to_string())
    }
}

fn not_found(run_id: &OpenEnvRunId) -> ApiError {
    ApiError::new(ErrorCode::RunNotFound, format!("you have no OpenEnv run `{run_id}`"))
}

/// The run, if `me` may see it (its submitter, or an editor); anyone else gets a 404.
async fn visible(s: &AppState, me: &Identity, run_id: &OpenEnvRunId) -> Result<(RunRow, String), ApiError> {
    let run = crate::openenv::runs_repo::get(&s.db, run_id).await?.ok_or_else(|| not_found(run_id))?;
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
    let (run, account) = visible(s, me, run_id).await?;
    let events = crate::openenv::runs_repo::events(&s.db, run_id).await?;
    Ok(run_view(&run, account, &events))
}

pub fn run_view(run: &RunRow, account: String, events: &[RunEvent]) -> OpenEnvRunView {
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
        error: failed.then(|| RunFailure { code: run.error_code.clone(), message: run.message.clone() }),
        time_limit_s: RUN_LIMIT_S,
        reward_curve: reward_curve(events),
        steps: domain::openenv::run::steps(events),
        trainer: domain::openenv::run::trainer_of(events),
        alert: domain::openenv::run::latest_alert(events),
    }
}

pub async fn events(s: &AppState, me: &Identity, run_id: &OpenEnvRunId) -> Result<RunEvents, ApiError> {
    visible(s, me, run_id).await?;
    Ok(RunEvents {
        run_id: run_id.to_string(),
        events: crate::openenv::runs_repo::events(&s.db, run_id).await?,
    })
}

/// Both at once, for the run's page.
pub async fn view_with_events(
    s: &AppState,
    me: &Identity,
    run_id: &OpenEnvRunId,
) -> Result<(OpenEnvRunView, Vec<RunEvent>), ApiError> {
    let (run, account) = visible(s, me, run_id).await?;
    let events = crate::openenv::runs_repo::events(&s.db, run_id).await?;
    Ok((run_view(&run, account, &events), events))
}

/// `POST /api/openenv/runs/{id}/cancel`: an editor stops a run; the cluster gets a stop. Resent, it
/// answers the run as it is.
pub async fn cancel(s: &AppState, me: &Identity, run_id: &OpenEnvRunId) -> Result<OpenEnvRunView, ApiError> {
    let (run, account) = visible(s, me, run_id).await?;
    if !me.editor {
        return Err(ApiError::new(ErrorCode::Forbidden, "only a BenchFlow editor can stop an OpenEnv run"));
    }
    if !run.state.terminal() {
        let at = s.now().text;
        let message = format!("cancelled by {}", me.name);
        crate::openenv::runs_repo::end(&s.db, run_id, None, RunState::Cancelled, None, &message, &at).await?;
    }
    let run = crate::openenv::runs_repo::get(&s.db, run_id).await?.ok_or_else(|| not_found(run_id))?;
    let events = crate::openenv::runs_repo::events(&s.db, run_id).await?;
    Ok(run_view(&run, account, &events))
}

/// States of the runs of these submissions, by run id.
pub async fn states(s: &AppState, account_id: Option<&str>) -> Result<BTreeMap<String, RunState>, ApiError> {
    Ok(crate::openenv::runs_repo::list(&s.db, account_id)
        .await?
        .into_iter()
        .map(|r| (r.run_id, r.state))
        .collect())
}

/// The cluster's connection to this server closed: what it held waits for it to come back.
pub async fn cluster_gone(s: &AppState) {
    if let Err(e) = crate::openenv::repo::cluster_gone(&s.db, &s.server_id).await {
        tracing::error!(error = %e, "recording the cluster's disconnection failed");
    }
}
