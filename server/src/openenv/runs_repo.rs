//! OpenEnv runs and their events. The queue is the admitted submissions without a run, in
//! acceptance order; a run exists from its assignment to the cluster, once per submission.

use domain::openenv::run::{RunEvent, RunState};
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::db::Db;

#[derive(Debug, Clone)]
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
    pub delivered: bool,
}

const COLUMNS: &str = "run_id, account_id, submission_id, state, policy_version, last_seq, assigned_at, \
    assigned_epoch, started_epoch, ended_at, error_code, message, delivered";

fn run_row(r: &AnyRow) -> Result<RunRow, sqlx::Error> {
    let state: String = r.try_get("state")?;
    Ok(RunRow {
        run_id: r.try_get("run_id")?,
        account_id: r.try_get("account_id")?,
        submission_id: r.try_get("submission_id")?,
        state: RunState::parse(&state)
            .ok_or_else(|| sqlx::Error::Decode(format!("run state {state}").into()))?,
        policy_version: r.try_get("policy_version")?,
        last_seq: r.try_get("last_seq")?,
        assigned_at: r.try_get("assigned_at")?,
        assigned_epoch: r.try_get("assigned_epoch")?,
        started_epoch: r.try_get("started_epoch")?,
        ended_at: r.try_get("ended_at")?,
        error_code: r.try_get("error_code")?,
        message: r.try_get("message")?,
        delivered: r.try_get::<i64, _>("delivered")? != 0,
    })
}

pub async fn get(db: &Db, run_id: &str) -> Result<Option<RunRow>, sqlx::Error> {
    sqlx::query(&format!("SELECT {COLUMNS} FROM openenv_runs WHERE run_id = $1"))
        .bind(run_id)
        .fetch_optional(&db.writer)
        .await?
        .as_ref()
        .map(run_row)
        .transpose()
}

/// Runs, newest first: one account's, or every one (editors).
pub async fn list(db: &Db, account_id: Option<&str>) -> Result<Vec<RunRow>, sqlx::Error> {
    sqlx::query(&format!(
        "SELECT {COLUMNS} FROM openenv_runs WHERE ($1 = '' OR account_id = $1) ORDER BY assigned_epoch DESC, run_id LIMIT 500"
    ))
    .bind(account_id.unwrap_or(""))
    .fetch_all(&db.pool)
    .await?
    .iter()
    .map(run_row)
    .collect()
}

/// Runs in the given states.
/// Runs assigned before `epoch` that are still `starting`: past the queue's limit.
pub async fn starting_before(db: &Db, epoch: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query("SELECT run_id FROM openenv_runs WHERE state = 'starting' AND assigned_epoch <= $1 ORDER BY assigned_epoch")
        .bind(epoch)
        .fetch_all(&db.pool)
        .await?
        .iter()
        .map(|r| r.try_get("run_id"))
        .collect()
}

/// The queue sweep's lease on an OpenEnv run (`crate::engine`).
pub const LEASE: crate::engine::RowLease =
    crate::engine::RowLease { table: "openenv_runs", key: &["run_id"], leasable: "" };

pub async fn in_states(db: &Db, states: &[RunState]) -> Result<Vec<RunRow>, sqlx::Error> {
    let list = states.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", ");
    sqlx::query(&format!(
        "SELECT {COLUMNS} FROM openenv_runs WHERE state IN ({list}) ORDER BY assigned_epoch"
    ))
    .fetch_all(&db.writer)
    .await?
    .iter()
    .map(run_row)
    .collect()
}

/// The next admitted submission without a run, in acceptance order.
pub async fn queue_head(db: &Db) -> Result<Option<(String, String)>, sqlx::Error> {
    sqlx::query(
        "SELECT account_id, submission_id FROM openenv_submissions \
         WHERE state = 'validated' AND run_id IS NULL ORDER BY seq LIMIT 1",
    )
    .fetch_optional(&db.writer)
    .await?
    .map(|r| Ok((r.try_get("account_id")?, r.try_get("submission_id")?)))
    .transpose()
}

/// Creates the submission's run in `starting`, with the arena's own first event; false when the
/// submission already has one (another server assigned it first).
pub async fn assign(
    db: &Db,
    run_id: &str,
    account_id: &str,
    submission_id: &str,
    at: &str,
    epoch: i64,
) -> Result<bool, sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    let taken = sqlx::query(
        "UPDATE openenv_submissions SET run_id = $3, updated_at = $4 \
         WHERE account_id = $1 AND submission_id = $2 AND state = 'validated' AND run_id IS NULL",
    )
    .bind(account_id)
    .bind(submission_id)
    .bind(run_id)
    .bind(at)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if taken == 0 {
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO openenv_runs (run_id, account_id, submission_id, state, assigned_at, assigned_epoch) \
         VALUES ($1, $2, $3, 'starting', $4, $5)",
    )
    .bind(run_id)
    .bind(account_id)
    .bind(submission_id)
    .bind(at)
    .bind(epoch)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO openenv_run_events (run_id, seq, state, policy_version, at, message) \
         VALUES ($1, 0, 'starting', 0, $2, 'handed to the training cluster')",
    )
    .bind(run_id)
    .bind(at)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

pub async fn mark_delivered(db: &Db, run_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE openenv_runs SET delivered = 1 WHERE run_id = $1")
        .bind(run_id)
        .execute(&db.writer)
        .await?;
    Ok(())
}

/// Runs the arena ended (cancelled, or out of queue time) that the cluster was given and has not
/// yet confirmed stopping.
pub async fn stops_to_send(db: &Db) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query(
        "SELECT run_id FROM openenv_runs WHERE state IN ('failed', 'cancelled') AND delivered = 1 AND cancel_sent = 0",
    )
    .fetch_all(&db.writer)
    .await?
    .iter()
    .map(|r| r.try_get("run_id"))
    .collect()
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
}

/// The run as its transaction sees it.
async fn run_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
) -> Result<Option<RunRow>, sqlx::Error> {
    sqlx::query(&format!("SELECT {COLUMNS} FROM openenv_runs WHERE run_id = $1"))
        .bind(run_id)
        .fetch_optional(&mut **tx)
        .await?
        .as_ref()
        .map(run_row)
        .transpose()
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
    if known || run.state.terminal() || e.seq <= run.last_seq {
        return Ok(Recorded::AlreadyKnown);
    }
    if !e.may_follow(run.state) {
        return Ok(Recorded::OutOfOrder(run.state));
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
    .bind(&e.message)
    .bind(Detail::of(e))
    .execute(&mut *tx)
    .await?;
    let terminal = e.state.terminal();
    let applied = sqlx::query(
        "UPDATE openenv_runs SET state = $2, policy_version = $3, last_seq = $4, \
         started_epoch = CASE WHEN started_epoch IS NULL AND $2 <> 'starting' THEN $5 ELSE started_epoch END, \
         ended_at = CASE WHEN $6 = 1 THEN $7 ELSE ended_at END, \
         error_code = CASE WHEN $2 = 'failed' THEN $8 ELSE error_code END, \
         message = CASE WHEN $6 = 1 THEN $9 ELSE message END, \
         cancel_sent = CASE WHEN $6 = 1 THEN 1 ELSE cancel_sent END, delivered = 1 \
         WHERE run_id = $1 AND state = $10 AND last_seq = $11",
    )
    .bind(run_id)
    .bind(e.state.as_str())
    .bind(e.policy_version)
    .bind(e.seq)
    .bind(epoch)
    .bind(i64::from(terminal))
    .bind(&e.at)
    .bind(e.message.as_deref().and_then(error_code_of))
    .bind(&e.message)
    .bind(run.state.as_str())
    .bind(run.last_seq)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if applied == 0 {
        return Ok(Recorded::AlreadyKnown);
    }
    tx.commit().await?;
    Ok(Recorded::Applied)
}

/// A failure's code when its message starts with one (`RUN_…: why`).
fn error_code_of(message: &str) -> Option<String> {
    let (code, _) = message.split_once(':')?;
    (!code.is_empty() && code.chars().all(|c| c.is_ascii_uppercase() || c == '_')).then(|| code.to_string())
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
    let mut tx = db.writer.begin().await?;
    let Some(run) = run_in(&mut tx, run_id).await? else {
        return Ok(false);
    };
    if run.state.terminal() || only_from.is_some_and(|from| run.state != from) {
        return Ok(false);
    }
    // Far past anything the cluster has sent, so that its own events never take this sequence.
    let seq = run.last_seq + 1_000_000;
    let updated = sqlx::query(
        "UPDATE openenv_runs SET state = $2, last_seq = $3, ended_at = $4, error_code = $5, message = $6 \
         WHERE run_id = $1 AND state = $7 AND last_seq = $8",
    )
    .bind(run_id)
    .bind(state.as_str())
    .bind(seq)
    .bind(at)
    .bind(code)
    .bind(message)
    .bind(run.state.as_str())
    .bind(run.last_seq)
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
    tx.commit().await?;
    Ok(true)
}

pub async fn events(db: &Db, run_id: &str) -> Result<Vec<RunEvent>, sqlx::Error> {
    sqlx::query(
        "SELECT seq, state, policy_version, at, rewards, message, detail FROM openenv_run_events WHERE run_id = $1 ORDER BY seq",
    )
    .bind(run_id)
    .fetch_all(&db.pool)
    .await?
    .iter()
    .map(|r| {
        let state: String = r.try_get("state")?;
        let rewards: Option<String> = r.try_get("rewards")?;
        Ok(RunEvent {
            seq: r.try_get("seq")?,
            state: RunState::parse(&state).ok_or_else(|| sqlx::Error::Decode(format!("event state {state}").into()))?,
            policy_version: r.try_get("policy_version")?,
            at: r.try_get("at")?,
            rewards: rewards.map(|t| serde_json::from_str(&t)).transpose().map_err(|e| sqlx::Error::Decode(e.into()))?,
            message: r.try_get("message")?,
            ..Detail::read(r.try_get("detail")?)?.into_event()
        })
    })
    .collect()
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
}

impl Detail {
    fn of(e: &RunEvent) -> Option<String> {
        let d = Detail { metrics: e.metrics.clone(), alert: e.alert, trainer: e.trainer.clone() };
        (d.metrics.is_some() || d.alert.is_some() || d.trainer.is_some())
            .then(|| serde_json::to_string(&d).expect("JSON"))
    }

    fn read(text: Option<String>) -> Result<Detail, sqlx::Error> {
        text.map(|t| serde_json::from_str(&t))
            .transpose()
            .map_err(|e| sqlx::Error::Decode(e.into()))
            .map(Option::unwrap_or_default)
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
        }
    }
}

/// Runs not yet ended (predeploy refuses while any is on the cluster).
pub async fn active(db: &Db) -> Result<i64, sqlx::Error> {
    sqlx::query(
        "SELECT COUNT(*) AS n FROM openenv_runs WHERE state NOT IN ('completed', 'failed', 'cancelled')",
    )
    .fetch_one(&db.pool)
    .await?
    .try_get("n")
}
