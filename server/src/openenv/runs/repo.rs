//! OpenEnv runs and their events. The queue is the admitted submissions without a run, in
//! acceptance order; a run exists from its assignment to the cluster, once per submission.

use crate::db::{Db, Flag, JsonText};
use domain::openenv::controls::{CleanupView, Release, CLEANUP_RECOUNT_S, CLEANUP_STALL_S};
use domain::openenv::evaluation::{check_coverage, EpisodeRecord, Phase, Plan};
use domain::openenv::run::{RunEvent, RunState};

/// An OpenEnv run's row, read by column name (`COLUMNS` selects them).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RunRow {
    pub run_id: String,
    pub account_id: String,
    pub submission_id: String,
    pub state: RunState,
    pub policy_version: i64,
    pub last_seq: i64,
    pub assigned_at: String,
    pub assigned_epoch: i64,
    pub started_epoch: Option<i64>,
    pub ended_at: Option<String>,
    pub error_code: Option<String>,
    pub message: Option<String>,
    #[sqlx(try_from = "Flag")]
    pub delivered: bool,
    /// The held-out evaluation it was assigned with (none for a run from before evaluations).
    #[sqlx(try_from = "JsonText<Option<Plan>>")]
    pub eval_plan: Option<Plan>,
    /// When it entered `cleanup`: the arena's clock, and the cluster's time in words.
    pub cleanup_epoch: Option<i64>,
    pub cleanup_at: Option<String>,
    /// The run's live sandboxes when the arena last counted them (a stalled cleanup), and when.
    pub sandboxes_left: Option<i64>,
    pub counted_at: Option<String>,
    /// An editor's release of its stalled cleanup.
    #[sqlx(try_from = "JsonText<Option<Release>>")]
    pub released: Option<Release>,
    /// The cluster node it was assigned to.
    pub node_id: Option<String>,
}

impl RunRow {
    /// The run's cleanup as its page shows it, from when it entered `cleanup` (null before).
    pub fn cleanup(&self, now_epoch: i64) -> Option<CleanupView> {
        let since = self.cleanup_at.clone()?;
        let stalled = self.state == RunState::Cleanup
            && self.cleanup_epoch.is_some_and(|at| now_epoch - at >= CLEANUP_STALL_S);
        Some(CleanupView {
            since,
            stalled,
            sandboxes_left: self.sandboxes_left.and_then(|n| u32::try_from(n).ok()),
            counted_at: self.counted_at.clone(),
            released: self.released.clone(),
        })
    }
}

const COLUMNS: &str = "run_id, account_id, submission_id, state, policy_version, last_seq, assigned_at, \
    assigned_epoch, started_epoch, ended_at, error_code, message, delivered, eval_plan, cleanup_epoch, \
    cleanup_at, sandboxes_left, counted_at, released, node_id";

pub async fn get(db: &Db, run_id: &str) -> Result<Option<RunRow>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM openenv_runs WHERE run_id = $1"))
        .bind(run_id)
        .fetch_optional(&db.writer)
        .await
}

/// Runs, newest first: one account's, or every one (editors).
pub async fn list(db: &Db, account_id: Option<&str>) -> Result<Vec<RunRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM openenv_runs WHERE ($1 = '' OR account_id = $1) ORDER BY assigned_epoch DESC, run_id LIMIT 500"
    ))
    .bind(account_id.unwrap_or(""))
    .fetch_all(&db.pool)
    .await
}

/// Runs in the given states.
/// Runs assigned before `epoch` that are still `starting`: past the queue's limit.
pub async fn starting_before(db: &Db, epoch: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT run_id FROM openenv_runs WHERE state = 'starting' AND assigned_epoch <= $1 ORDER BY assigned_epoch")
        .bind(epoch)
        .fetch_all(&db.pool)
        .await
}

/// The queue sweep's lease on an OpenEnv run (`crate::engine`).
pub const LEASE: crate::engine::RowLease =
    crate::engine::RowLease { table: "openenv_runs", key: &["run_id"], leasable: "" };

pub async fn in_states(db: &Db, states: &[RunState]) -> Result<Vec<RunRow>, sqlx::Error> {
    let list = states.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", ");
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM openenv_runs WHERE state IN ({list}) ORDER BY assigned_epoch"
    ))
    .fetch_all(&db.writer)
    .await
}

/// The next admitted submissions without a run, in acceptance order, at most `n`.
pub async fn queue_head(db: &Db, n: usize) -> Result<Vec<(String, String)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT account_id, submission_id FROM openenv_submissions \
         WHERE state = 'validated' AND run_id IS NULL ORDER BY seq LIMIT $1",
    )
    .bind(n as i64)
    .fetch_all(&db.writer)
    .await
}

/// Where a run is assigned: its node, the connection that speaks for the node, and when.
pub struct Placement<'a> {
    pub node_id: &'a str,
    pub holder: &'a str,
    pub at: &'a str,
    pub epoch: i64,
}

/// Creates the submission's run in `starting` on a node with its evaluation plan, and the arena's
/// own first event, taking one of the node's free GPUs and `sandboxes` of its sandboxes; false
/// when the submission already has a run (another server assigned it first), or when the node has
/// no room or is spoken for by another connection (its agent reconnected elsewhere): the database
/// decides, so no run and no GPU is given twice.
pub async fn assign(
    db: &Db,
    run_id: &str,
    (account_id, submission_id): (&str, &str),
    plan: Option<&Plan>,
    place: &Placement<'_>,
    sandboxes: i64,
) -> Result<bool, sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    let room = sqlx::query(
        "UPDATE openenv_nodes SET gpus_free = gpus_free - 1, sandboxes_free = sandboxes_free - $3 \
         WHERE node_id = $1 AND holder = $2 AND connected = 1 AND gpus_free >= 1 AND sandboxes_free >= $3",
    )
    .bind(place.node_id)
    .bind(place.holder)
    .bind(sandboxes)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if room == 0 {
        return Ok(false);
    }
    let taken = sqlx::query(
        "UPDATE openenv_submissions SET run_id = $3, updated_at = $4 \
         WHERE account_id = $1 AND submission_id = $2 AND state = 'validated' AND run_id IS NULL",
    )
    .bind(account_id)
    .bind(submission_id)
    .bind(run_id)
    .bind(place.at)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if taken == 0 {
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO openenv_runs (run_id, account_id, submission_id, state, assigned_at, assigned_epoch, eval_plan, node_id) \
         VALUES ($1, $2, $3, 'starting', $4, $5, $6, $7)",
    )
    .bind(run_id)
    .bind(account_id)
    .bind(submission_id)
    .bind(place.at)
    .bind(place.epoch)
    .bind(plan.map(|p| serde_json::to_string(p).expect("JSON")))
    .bind(place.node_id)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO openenv_run_events (run_id, seq, state, policy_version, at, message) \
         VALUES ($1, 0, 'starting', 0, $2, $3)",
    )
    .bind(run_id)
    .bind(place.at)
    .bind(format!("handed to the training cluster (node `{}`)", place.node_id))
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// Puts a run that never started back in the queue, at its place by acceptance: the run and its
/// one event go, its submission waits again (none of its time was spent). False when it started
/// or ended since it was found.
pub async fn requeue(db: &Db, run_id: &str) -> Result<bool, sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    let gone = sqlx::query(
        "DELETE FROM openenv_run_events WHERE run_id = $1 AND EXISTS (SELECT 1 FROM openenv_runs r \
         WHERE r.run_id = $1 AND r.state = 'starting' AND r.started_epoch IS NULL)",
    )
    .bind(run_id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    let run = sqlx::query(
        "DELETE FROM openenv_runs WHERE run_id = $1 AND state = 'starting' AND started_epoch IS NULL",
    )
    .bind(run_id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if run == 0 {
        tx.rollback().await?;
        return Ok(false);
    }
    sqlx::query("UPDATE openenv_submissions SET run_id = NULL WHERE run_id = $1")
        .bind(run_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    tracing::info!(run = %run_id, events = gone, "an OpenEnv run that never started is back in the queue");
    Ok(true)
}

/// Live runs, with the node each was assigned to.
pub async fn live_on(db: &Db, node_id: &str) -> Result<Vec<RunRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM openenv_runs WHERE node_id = $1 \
         AND state NOT IN ('completed', 'failed', 'cancelled') ORDER BY assigned_epoch"
    ))
    .bind(node_id)
    .fetch_all(&db.writer)
    .await
}

/// The figures of the queue and the cluster since `since` (epoch seconds): durations of runs that
/// ended (trainer start to end), waits of runs assigned (admission to assignment), and each run's
/// time on its GPU as (started, ended).
pub struct Recent {
    pub durations: Vec<i64>,
    pub waits: Vec<i64>,
    pub gpu_spans: Vec<(i64, Option<i64>)>,
    pub started: u32,
}

pub async fn recent(db: &Db, since: i64, typical_since: i64) -> Result<Recent, sqlx::Error> {
    let durations: Vec<i64> = sqlx::query_scalar(
        "SELECT ended_epoch - started_epoch FROM openenv_runs WHERE ended_epoch >= $1 \
         AND started_epoch IS NOT NULL ORDER BY ended_epoch DESC LIMIT 200",
    )
    .bind(typical_since)
    .fetch_all(&db.pool)
    .await?;
    let waits: Vec<i64> = sqlx::query_scalar(
        "SELECT r.assigned_epoch - s.decided_epoch FROM openenv_runs r JOIN openenv_submissions s \
         ON s.account_id = r.account_id AND s.submission_id = r.submission_id \
         WHERE r.assigned_epoch >= $1 AND s.decided_epoch IS NOT NULL ORDER BY r.assigned_epoch DESC LIMIT 1000",
    )
    .bind(since)
    .fetch_all(&db.pool)
    .await?;
    let gpu_spans: Vec<(i64, Option<i64>)> = sqlx::query_as(
        "SELECT started_epoch, ended_epoch FROM openenv_runs WHERE started_epoch IS NOT NULL \
         AND (ended_epoch IS NULL OR ended_epoch >= $1) LIMIT 10000",
    )
    .bind(since)
    .fetch_all(&db.pool)
    .await?;
    let started = gpu_spans.iter().filter(|(s, _)| *s >= since).count() as u32;
    Ok(Recent { durations, waits, gpu_spans, started })
}

pub async fn mark_delivered(db: &Db, run_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE openenv_runs SET delivered = 1 WHERE run_id = $1")
        .bind(run_id)
        .execute(&db.writer)
        .await?;
    Ok(())
}

/// Runs the arena ended (cancelled, released from a stalled cleanup, or out of queue time) that the
/// cluster was given and has not yet confirmed stopping.
pub async fn stops_to_send(db: &Db) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT run_id FROM openenv_runs WHERE state IN ('completed', 'failed', 'cancelled') AND delivered = 1 \
         AND cancel_sent = 0",
    )
    .fetch_all(&db.writer)
    .await
}

pub async fn mark_stopped(db: &Db, run_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE openenv_runs SET cancel_sent = 1 WHERE run_id = $1")
        .bind(run_id)
        .execute(&db.writer)
        .await?;
    Ok(())
}

/// What became of an event the cluster sent.
#[derive(Debug, PartialEq)]
pub enum Recorded {
    /// Stored, and the run moved to its state.
    Applied,
    /// Already stored (a resend), or the run had ended: nothing changed.
    AlreadyKnown,
    /// The run does not exist.
    UnknownRun,
    /// The state cannot follow the run's current one.
    OutOfOrder(RunState),
    /// Evaluation records that do not account for every planned episode: why.
    RecordsRefused(String),
}

/// The run as its transaction sees it.
async fn run_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
) -> Result<Option<RunRow>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM openenv_runs WHERE run_id = $1"))
        .bind(run_id)
        .fetch_optional(&mut **tx)
        .await
}

/// Stores one event once, by its sequence, and moves the run to its state. The run's row is
/// updated only from the state it was read in, so two servers recording at once cannot both apply.
pub async fn record(db: &Db, run_id: &str, e: &RunEvent, epoch: i64) -> Result<Recorded, sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    let Some(run) = run_in(&mut tx, run_id).await? else {
        return Ok(Recorded::UnknownRun);
    };
    let known = sqlx::query("SELECT 1 AS one FROM openenv_run_events WHERE run_id = $1 AND seq = $2")
        .bind(run_id)
        .bind(e.seq)
        .fetch_optional(&mut *tx)
        .await?
        .is_some();
    if known || run.state.has_ended() || e.seq <= run.last_seq {
        return Ok(Recorded::AlreadyKnown);
    }
    if !e.may_follow(run.state) {
        return Ok(Recorded::OutOfOrder(run.state));
    }
    // The message is the arena's own sentence (`domain::openenv::wording`), written before.
    let message = e.message.clone();
    if let Some(report) = &e.evaluation {
        let Some(plan) = &run.eval_plan else {
            return Ok(Recorded::RecordsRefused("the run has no evaluation plan".into()));
        };
        if !report.records.is_empty() {
            if let Err(why) = check_coverage(plan, &report.records) {
                return Ok(Recorded::RecordsRefused(why.into()));
            }
            store_records(&mut tx, run_id, report.phase, &report.records).await?;
        }
    }
    let rewards = e.rewards.as_ref().map(|r| serde_json::to_string(r).expect("JSON"));
    sqlx::query(
        "INSERT INTO openenv_run_events (run_id, seq, state, policy_version, at, rewards, message, detail) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(run_id)
    .bind(e.seq)
    .bind(e.state.as_str())
    .bind(e.policy_version)
    .bind(&e.at)
    .bind(rewards)
    .bind(&message)
    .bind(Detail::of(e))
    .execute(&mut *tx)
    .await?;
    let terminal = e.state.has_ended();
    let applied = sqlx::query(
        "UPDATE openenv_runs SET state = $2, policy_version = $3, last_seq = $4, \
         started_epoch = CASE WHEN started_epoch IS NULL AND $2 <> 'starting' THEN $5 ELSE started_epoch END, \
         ended_at = CASE WHEN $6 = 1 THEN $7 ELSE ended_at END, \
         ended_epoch = CASE WHEN $6 = 1 THEN $5 ELSE ended_epoch END, \
         error_code = CASE WHEN $2 = 'failed' THEN $8 ELSE error_code END, \
         message = CASE WHEN $6 = 1 THEN $9 ELSE message END, \
         cancel_sent = CASE WHEN $6 = 1 THEN 1 ELSE cancel_sent END, delivered = 1, \
         cleanup_epoch = CASE WHEN $2 = 'cleanup' AND cleanup_epoch IS NULL THEN $5 ELSE cleanup_epoch END, \
         cleanup_at = CASE WHEN $2 = 'cleanup' AND cleanup_at IS NULL THEN $7 ELSE cleanup_at END \
         WHERE run_id = $1 AND state = $10 AND last_seq = $11",
    )
    .bind(run_id)
    .bind(e.state.as_str())
    .bind(e.policy_version)
    .bind(e.seq)
    .bind(epoch)
    .bind(i64::from(terminal))
    .bind(&e.at)
    .bind(e.message.as_deref().and_then(domain::openenv::wording::failure_code))
    .bind(&message)
    .bind(run.state.as_str())
    .bind(run.last_seq)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if applied == 0 {
        return Ok(Recorded::AlreadyKnown);
    }
    if terminal {
        crate::endings::openenv_run_in(&mut tx, run_id, &e.at, epoch).await?;
    }
    tx.commit().await?;
    if terminal {
        db.ended();
    }
    Ok(Recorded::Applied)
}

/// One phase's records, once each (a resent phase finds them stored).
async fn store_records(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
    phase: Phase,
    records: &[EpisodeRecord],
) -> Result<(), sqlx::Error> {
    for r in records {
        sqlx::query(
            "INSERT INTO openenv_eval_episodes (run_id, phase, task_id, trial, reward, replays) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(run_id)
        .bind(phase.as_str())
        .bind(&r.task_id)
        .bind(i64::from(r.trial))
        .bind(r.reward)
        .bind(i64::from(r.replays))
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// The held-out records of runs: those of one run, or (None) of every completed run; by run id,
/// each with its phase.
pub async fn eval_records(
    db: &Db,
    run_id: Option<&str>,
) -> Result<std::collections::BTreeMap<String, Vec<(Phase, EpisodeRecord)>>, sqlx::Error> {
    let rows: Vec<EpisodeRow> = sqlx::query_as(
        "SELECT e.run_id, e.phase, e.task_id, e.trial, e.reward, e.replays FROM openenv_eval_episodes e \
         JOIN openenv_runs r ON r.run_id = e.run_id \
         WHERE ($1 = '' AND r.state = 'completed') OR e.run_id = $1 ORDER BY e.run_id, e.task_id, e.trial",
    )
    .bind(run_id.unwrap_or(""))
    .fetch_all(&db.pool)
    .await?;
    let mut out: std::collections::BTreeMap<String, Vec<(Phase, EpisodeRecord)>> = Default::default();
    for r in rows {
        let record =
            EpisodeRecord { task_id: r.task_id, trial: r.trial, reward: r.reward, replays: r.replays };
        out.entry(r.run_id).or_default().push((r.phase, record));
    }
    Ok(out)
}

/// A held-out episode's row (`eval_records`).
#[derive(sqlx::FromRow)]
struct EpisodeRow {
    run_id: String,
    phase: Phase,
    task_id: String,
    #[sqlx(try_from = "i64")]
    trial: u32,
    reward: Option<f64>,
    #[sqlx(try_from = "i64")]
    replays: u32,
}

/// The arena ends a run itself (an editor's cancel, or the queue timeout): the state, its event
/// after the last one, and the reason; false when it had already ended, or (with `only_from`)
/// had moved on from that state.
pub async fn end(
    db: &Db,
    run_id: &str,
    only_from: Option<RunState>,
    state: RunState,
    code: Option<&str>,
    message: &str,
    at: &str,
) -> Result<bool, sqlx::Error> {
    end_with(db, run_id, only_from, state, code, message, at, None).await
}

/// Ends a run whose stalled cleanup an editor released, recording the release.
pub async fn end_released(
    db: &Db,
    run_id: &str,
    state: RunState,
    code: Option<&str>,
    message: &str,
    release: &Release,
) -> Result<bool, sqlx::Error> {
    end_with(db, run_id, Some(RunState::Cleanup), state, code, message, &release.at, Some(release)).await
}

/// Runs whose cleanup has stalled and whose sandboxes are due to be counted (again).
pub async fn stalled_cleanups(db: &Db, now: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT run_id FROM openenv_runs WHERE state = 'cleanup' AND cleanup_epoch <= $1 \
         AND (counted_epoch IS NULL OR counted_epoch <= $2) ORDER BY cleanup_epoch",
    )
    .bind(now - CLEANUP_STALL_S)
    .bind(now - CLEANUP_RECOUNT_S)
    .fetch_all(&db.pool)
    .await
}

/// The count of a stalled cleanup's live sandboxes (`None`: they could not be listed).
pub async fn save_count(
    db: &Db,
    run_id: &str,
    left: Option<i64>,
    epoch: i64,
    at: &str,
) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query(
        "UPDATE openenv_runs SET sandboxes_left = $2, counted_epoch = $3, counted_at = $4 \
         WHERE run_id = $1 AND state = 'cleanup'",
    )
    .bind(run_id)
    .bind(left)
    .bind(epoch)
    .bind(at)
    .execute(&db.writer)
    .await?
    .rows_affected()
        == 1)
}

#[allow(clippy::too_many_arguments)]
async fn end_with(
    db: &Db,
    run_id: &str,
    only_from: Option<RunState>,
    state: RunState,
    code: Option<&str>,
    message: &str,
    at: &str,
    released: Option<&Release>,
) -> Result<bool, sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    let Some(run) = run_in(&mut tx, run_id).await? else {
        return Ok(false);
    };
    if run.state.has_ended() || only_from.is_some_and(|from| run.state != from) {
        return Ok(false);
    }
    // Far past anything the cluster has sent, so that its own events never take this sequence.
    let seq = run.last_seq + 1_000_000;
    let epoch = crate::clock::parse_rfc3339(at).map_or(0, |t| t.unix_timestamp());
    let updated = sqlx::query(
        "UPDATE openenv_runs SET state = $2, last_seq = $3, ended_at = $4, error_code = $5, message = $6, \
         released = $9, ended_epoch = $10 WHERE run_id = $1 AND state = $7 AND last_seq = $8",
    )
    .bind(run_id)
    .bind(state.as_str())
    .bind(seq)
    .bind(at)
    .bind(code)
    .bind(message)
    .bind(run.state.as_str())
    .bind(run.last_seq)
    .bind(released.map(|r| serde_json::to_string(r).expect("JSON")))
    .bind(epoch)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if updated == 0 {
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO openenv_run_events (run_id, seq, state, policy_version, at, message) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(run_id)
    .bind(seq)
    .bind(state.as_str())
    .bind(run.policy_version)
    .bind(at)
    .bind(message)
    .execute(&mut *tx)
    .await?;
    crate::endings::openenv_run_in(&mut tx, run_id, at, epoch).await?;
    tx.commit().await?;
    db.ended();
    Ok(true)
}

pub async fn events(db: &Db, run_id: &str) -> Result<Vec<RunEvent>, sqlx::Error> {
    let rows: Vec<EventRow> = sqlx::query_as(
        "SELECT seq, state, policy_version, at, rewards, message, detail FROM openenv_run_events WHERE run_id = $1 ORDER BY seq",
    )
    .bind(run_id)
    .fetch_all(&db.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| RunEvent {
            seq: r.seq,
            state: r.state,
            policy_version: r.policy_version,
            at: r.at,
            rewards: r.rewards,
            message: r.message,
            ..r.detail.unwrap_or_default().into_event()
        })
        .collect())
}

/// A run event's row (`events`).
#[derive(sqlx::FromRow)]
struct EventRow {
    seq: i64,
    state: RunState,
    policy_version: i64,
    at: String,
    #[sqlx(try_from = "JsonText<Option<Vec<Option<f64>>>>")]
    rewards: Option<Vec<Option<f64>>>,
    message: Option<String>,
    #[sqlx(try_from = "JsonText<Option<Detail>>")]
    detail: Option<Detail>,
}

/// An event's parts beyond its state, stored as one JSON object (`detail`).
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Detail {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    metrics: Option<domain::openenv::run::StepMetrics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    alert: Option<domain::openenv::run::Alert>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    trainer: Option<domain::openenv::run::TrainerInfo>,
    /// An `evaluating` event's phase and progress, its records left out (kept apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    evaluation: Option<domain::openenv::evaluation::EvaluationReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task_id: Option<String>,
    /// The cluster's own words: editors only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reported: Option<domain::openenv::run::Reported>,
    /// How a step's episodes ended (`updating`, a `RUN_NO_TRAINING_SIGNAL` failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ends: Option<domain::openenv::run::EpisodeEnds>,
}

impl Detail {
    fn of(e: &RunEvent) -> Option<String> {
        let evaluation = e.evaluation.clone().map(|mut r| {
            r.records.clear();
            r
        });
        let d = Detail {
            metrics: e.metrics.clone(),
            alert: e.alert,
            trainer: e.trainer.clone(),
            evaluation,
            task_id: e.task_id.clone(),
            reported: e.reported.clone(),
            ends: e.ends.clone(),
        };
        let empty = d.metrics.is_none()
            && d.alert.is_none()
            && d.trainer.is_none()
            && d.evaluation.is_none()
            && d.task_id.is_none()
            && d.reported.is_none()
            && d.ends.is_none();
        (!empty).then(|| serde_json::to_string(&d).expect("JSON"))
    }

    fn into_event(self) -> RunEvent {
        RunEvent {
            seq: 0,
            state: RunState::Starting,
            policy_version: 0,
            at: String::new(),
            rewards: None,
            message: None,
            metrics: self.metrics,
            alert: self.alert,
            trainer: self.trainer,
            evaluation: self.evaluation,
            task_id: self.task_id,
            reported: self.reported,
            ends: self.ends,
        }
    }
}

/// Runs not yet ended (predeploy refuses while any is on the cluster).
pub async fn active(db: &Db) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT COUNT(*) AS n FROM openenv_runs WHERE state NOT IN ('completed', 'failed', 'cancelled')",
    )
    .fetch_one(&db.pool)
    .await
}
