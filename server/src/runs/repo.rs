//! Runs and their events. A launch stores the run, its budget reservation and its first event in
//! one transaction; `(author_id, request_key)` makes a repeated launch find the first run, and the
//! ledger's one-live-reservation index keeps one run active across the arena.

use domain::ids::{ChallengeId, EnvironmentId, JobId, RunId};
use domain::runs::{Purpose, RunState, Stage};
use sqlx::{Any, Transaction};

use crate::db::{Db, JsonText};

/// Where a launch got to. Each step is recorded once it is done, so a restart resumes after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchStep {
    /// The run and its reservation are stored; nothing is outside yet.
    Reserved,
    /// The bundle is in the runs dataset (`bundle_commit`).
    Mirrored,
    /// The HF job exists (`job_id`).
    Launched,
    /// The launch definitely failed; the reservation is released.
    Failed,
}

impl LaunchStep {
    pub fn as_str(self) -> &'static str {
        match self {
            LaunchStep::Reserved => "reserved",
            LaunchStep::Mirrored => "mirrored",
            LaunchStep::Launched => "launched",
            LaunchStep::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Option<LaunchStep> {
        [LaunchStep::Reserved, LaunchStep::Mirrored, LaunchStep::Launched, LaunchStep::Failed]
            .into_iter()
            .find(|l| l.as_str() == s)
    }
}

domain::text_column!(LaunchStep, "launch step");

/// A run's row, read by column name (`COLUMNS` selects them).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Run {
    pub id: RunId,
    pub challenge_id: ChallengeId,
    pub purpose: Purpose,
    /// `None` for a baseline measurement (the database holds them to it).
    pub environment_id: Option<EnvironmentId>,
    pub author: String,
    pub author_id: String,
    pub agent_id: Option<String>,
    pub request_key: String,
    pub request_body: String,
    pub state: RunState,
    pub stage: Option<Stage>,
    pub reason: Option<String>,
    #[sqlx(try_from = "i64")]
    pub platform_fault: crate::db::Flag,
    pub launch: LaunchStep,
    pub bundle_commit: Option<String>,
    pub job_id: Option<JobId>,
    pub job_status: Option<String>,
    pub flavor: String,
    pub timeout_s: i64,
    pub reserved_cents: i64,
    pub eligible_tasks: i64,
    pub excluded_task_count: i64,
    pub created_at: String,
    pub created_epoch: i64,
    pub updated_at: String,
    pub relay_state: String,
    pub relay_seen_epoch: Option<i64>,
    pub log_lines: i64,
    pub log_seen_epoch: Option<i64>,
    pub log_last_at: Option<String>,
    pub log_stage: Option<Stage>,
    pub job_created_epoch: Option<i64>,
    pub job_started_epoch: Option<i64>,
    pub finished_at: Option<String>,
    /// The runs dataset commit where the reconciler found the result files.
    pub results_commit: Option<String>,
    /// The commit of the collection's mirror (the bundle's `[train_dataset]` revision).
    pub mirror_commit: Option<String>,
    /// SHA-256 of the job script the job was created to run.
    pub job_script_sha256: Option<String>,
    /// GRPO's optimizer steps taken and planned, as the job reported them.
    pub steps_done: Option<i64>,
    pub steps_planned: Option<i64>,
    /// The newest log line read, `timestamp line`: the next read starts after it.
    pub log_last_line: Option<String>,
    /// The job's GPU readings, oldest first (JSON of `GpuSample`s).
    pub gpu_samples: String,
    /// Since when every GPU has read idle, while they still do.
    pub gpus_idle_since: Option<i64>,
    /// The global step of the last GRPO rollout line the reconciler read.
    pub log_rollout_step: Option<i64>,
}

const COLUMNS: &str = "id, challenge_id, purpose, environment_id, author, author_id, agent_id, request_key, request_body, \
    state, stage, reason, platform_fault, launch, bundle_commit, job_id, job_status, flavor, timeout_s, \
    reserved_cents, eligible_tasks, excluded_task_count, created_at, created_epoch, updated_at, relay_state, \
    relay_seen_epoch, log_lines, log_seen_epoch, log_last_at, log_stage, job_created_epoch, job_started_epoch, finished_at, results_commit, \
    mirror_commit, job_script_sha256, steps_done, steps_planned, log_last_line, gpu_samples, gpus_idle_since, log_rollout_step";

pub struct NewRun<'a> {
    pub id: &'a str,
    pub challenge_id: &'a str,
    pub purpose: Purpose,
    pub environment_id: Option<&'a str>,
    pub author: &'a str,
    pub author_id: &'a str,
    pub agent_id: Option<&'a str>,
    pub request_key: &'a str,
    pub request_body: &'a str,
    pub flavor: &'a str,
    pub timeout_s: i64,
    pub reserved_cents: i64,
    pub eligible_tasks: i64,
    pub excluded_task_count: i64,
    pub secret_hash: &'a str,
    pub now: &'a str,
    pub now_epoch: i64,
}

pub enum Inserted {
    Stored(Run),
    /// This author already used the request id: the stored run.
    Repeat(Run),
    /// Another run holds the arena's one live reservation.
    AnotherActive,
}

/// Stores the run, its live reservation and its first event in one transaction.
pub async fn insert(db: &Db, n: &NewRun<'_>) -> Result<Inserted, sqlx::Error> {
    store(db, n, None).await
}

/// A run found again from its HF job after a restore: stored launched, with its live reservation
/// and its request and finding (`at`) as events, in one transaction. The relay secret's hash is
/// `n`'s (one nobody holds: the job's own secret went with the lost row).
pub async fn recovered(
    db: &Db,
    n: &NewRun<'_>,
    found: &FoundJob<'_>,
    at: &domain::time::Timestamp,
) -> Result<Inserted, sqlx::Error> {
    store(db, n, Some((found, at))).await
}

/// The run's row, its live reservation and its events in one transaction; a used id or request
/// id answers the run stored under it.
async fn store(
    db: &Db,
    n: &NewRun<'_>,
    found: Option<(&FoundJob<'_>, &domain::time::Timestamp)>,
) -> Result<Inserted, sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    match row_and_reservation(&mut tx, n, found.map(|(f, _)| f)).await? {
        Stored::RequestUsed => {
            tx.rollback().await?;
            let known = match get(db, n.id).await? {
                Some(run) => Some(run),
                None => by_request(db, n.author_id, n.request_key).await?,
            };
            return known.map(Inserted::Repeat).ok_or(sqlx::Error::RowNotFound);
        }
        Stored::AnotherActive => {
            tx.rollback().await?;
            return Ok(Inserted::AnotherActive);
        }
        Stored::Row => {}
    }
    let detail = format!("request {} by {}", n.request_key, n.author);
    event_in(&mut tx, &launch_event(n.id, n.now, n.now_epoch, "requested", &detail)).await?;
    if let Some((job, at)) = found {
        let detail = format!(
            "found again from HF job {} after the database was restored from a backup (the bundle at {}); \
             it is followed from HF's records, without its relay",
            job.job_id, job.bundle_commit
        );
        event_in(&mut tx, &launch_event(n.id, &at.text, at.epoch, "found again", &detail)).await?;
    }
    tx.commit().await?;
    let run = get(db, n.id).await?.ok_or(sqlx::Error::RowNotFound)?;
    Ok(Inserted::Stored(run))
}

/// What HF's record of a run's job says, beside the bundle's origin (`recover`).
pub struct FoundJob<'a> {
    pub bundle_commit: &'a str,
    pub mirror_commit: Option<&'a str>,
    pub job_id: &'a str,
    pub job_status: &'a str,
    pub job_script_sha256: &'a str,
}

enum Stored {
    Row,
    /// The run's id or the author's request id is taken.
    RequestUsed,
    /// Another run holds the arena's one live reservation.
    AnotherActive,
}

/// The run's row (reserved, or launched with its job when `found`) and its live reservation, in
/// `tx`; the caller rolls back unless it is `Row`.
async fn row_and_reservation(
    tx: &mut Transaction<'_, Any>,
    n: &NewRun<'_>,
    found: Option<&FoundJob<'_>>,
) -> Result<Stored, sqlx::Error> {
    let stored = sqlx::query(
        "INSERT INTO runs (id, challenge_id, purpose, environment_id, author, author_id, agent_id, request_key, \
         request_body, state, launch, flavor, timeout_s, reserved_cents, eligible_tasks, excluded_task_count, \
         secret_hash, created_at, created_epoch, updated_at, bundle_commit, mirror_commit, job_id, job_status, \
         job_script_sha256) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'queued', $10, $11, $12, $13, $14, $15, $16, $17, $18, $17, \
         $19, $20, $21, $22, $23) ON CONFLICT DO NOTHING",
    )
    .bind(n.id)
    .bind(n.challenge_id)
    .bind(n.purpose.as_str())
    .bind(n.environment_id)
    .bind(n.author)
    .bind(n.author_id)
    .bind(n.agent_id)
    .bind(n.request_key)
    .bind(n.request_body)
    .bind(if found.is_some() { LaunchStep::Launched } else { LaunchStep::Reserved }.as_str())
    .bind(n.flavor)
    .bind(n.timeout_s)
    .bind(n.reserved_cents)
    .bind(n.eligible_tasks)
    .bind(n.excluded_task_count)
    .bind(n.secret_hash)
    .bind(n.now)
    .bind(n.now_epoch)
    .bind(found.map(|f| f.bundle_commit))
    .bind(found.and_then(|f| f.mirror_commit))
    .bind(found.map(|f| f.job_id))
    .bind(found.map(|f| f.job_status))
    .bind(found.map(|f| f.job_script_sha256))
    .execute(&mut **tx)
    .await?
    .rows_affected()
        == 1;
    if !stored {
        return Ok(Stored::RequestUsed);
    }
    let reserved = sqlx::query(
        "INSERT INTO budget_ledger (id, challenge_id, run_id, amount_cents, state, created_at, updated_at) \
         VALUES ($1, $2, $1, $3, 'live', $4, $4) ON CONFLICT DO NOTHING",
    )
    .bind(n.id)
    .bind(n.challenge_id)
    .bind(n.reserved_cents)
    .bind(n.now)
    .execute(&mut **tx)
    .await?
    .rows_affected()
        == 1;
    Ok(if reserved { Stored::Row } else { Stored::AnotherActive })
}

/// A run's event as stored.
#[derive(Debug, Clone, Default)]
pub struct NewEvent<'a> {
    pub run_id: &'a str,
    pub at: &'a str,
    pub epoch: i64,
    pub source: &'a str,
    pub kind: &'a str,
    pub detail: &'a str,
    pub stage: Option<&'a str>,
    pub passed: Option<i64>,
    pub total: Option<i64>,
    pub timeouts: Option<i64>,
    pub errors: Option<i64>,
    pub relay_seq: Option<i64>,
}

/// Stores an event; one already stored under its relay sequence number is not stored again.
async fn event_in(tx: &mut Transaction<'_, Any>, e: &NewEvent<'_>) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "INSERT INTO run_events (run_id, at, epoch, source, kind, detail, stage, passed, total, timeouts, errors, relay_seq) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING",
    )
    .bind(e.run_id)
    .bind(e.at)
    .bind(e.epoch)
    .bind(e.source)
    .bind(e.kind)
    .bind(e.detail)
    .bind(e.stage)
    .bind(e.passed)
    .bind(e.total)
    .bind(e.timeouts)
    .bind(e.errors)
    .bind(e.relay_seq)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

fn launch_event<'a>(
    run_id: &'a str,
    at: &'a str,
    epoch: i64,
    kind: &'a str,
    detail: &'a str,
) -> NewEvent<'a> {
    NewEvent { run_id, at, epoch, source: "launch", kind, detail, ..Default::default() }
}

pub async fn get(db: &Db, id: &str) -> Result<Option<Run>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM runs WHERE id = $1"))
        .bind(id)
        .fetch_optional(&db.writer)
        .await
}

pub async fn by_request(db: &Db, author_id: &str, request_key: &str) -> Result<Option<Run>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM runs WHERE author_id = $1 AND request_key = $2"))
        .bind(author_id)
        .bind(request_key)
        .fetch_optional(&db.writer)
        .await
}

/// Every run request on a challenge (or all), newest first.
pub async fn list(
    db: &Db,
    challenge_id: Option<&str>,
    environment_id: Option<&str>,
) -> Result<Vec<Run>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM runs WHERE ($1 = '' OR challenge_id = $1) AND ($2 = '' OR environment_id = $2) \
         ORDER BY seq DESC LIMIT 1000"
    ))
    .bind(challenge_id.unwrap_or(""))
    .bind(environment_id.unwrap_or(""))
    .fetch_all(&db.pool)
    .await
}

/// When this collection's newest counted run on the challenge was requested.
pub async fn last_counted(
    db: &Db,
    environment_id: &str,
    challenge_id: &str,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT MAX(created_epoch) AS t FROM runs WHERE environment_id = $1 AND challenge_id = $2 \
         AND state NOT IN ('failed', 'canceled')",
    )
    .bind(environment_id)
    .bind(challenge_id)
    .fetch_one(&db.writer)
    .await
}

/// Runs whose launch is not finished: the launcher's work.
pub async fn unlaunched(db: &Db) -> Result<Vec<RunId>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT id FROM runs WHERE launch IN ('reserved', 'mirrored') AND state = 'queued' ORDER BY seq",
    )
    .fetch_all(&db.pool)
    .await
}

/// A run's one lease: its launch and its following never overlap (`crate::engine`).
pub const LEASE: crate::engine::RowLease =
    crate::engine::RowLease { table: "runs", key: &["id"], leasable: "" };

/// The hash of the secret the run's job is given, set just before the job is created.
pub async fn set_secret(db: &Db, id: &str, secret_hash: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE runs SET secret_hash = $2 WHERE id = $1")
        .bind(id)
        .bind(secret_hash)
        .execute(&db.writer)
        .await?;
    Ok(())
}

/// Records the bundle's commit: the launch is mirrored.
/// Records the collection's mirror (the first half of the launch's dataset step).
pub async fn collection_mirrored(
    db: &Db,
    id: &str,
    commit: &str,
    now: &str,
    epoch: i64,
) -> Result<(), sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    let changed = sqlx::query(
        "UPDATE runs SET mirror_commit = $2, updated_at = $3 WHERE id = $1 AND mirror_commit IS NULL",
    )
    .bind(id)
    .bind(commit)
    .bind(now)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if changed == 1 {
        let detail = format!("the collection mirrored into the runs dataset at {commit}");
        event_in(&mut tx, &launch_event(id, now, epoch, "collection mirrored", &detail)).await?;
    }
    tx.commit().await
}

/// The job script a run's job is created with (set before the job exists, as its secret is).
pub async fn set_job_script(db: &Db, id: &str, sha256: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE runs SET job_script_sha256 = $2 WHERE id = $1")
        .bind(id)
        .bind(sha256)
        .execute(&db.writer)
        .await?;
    Ok(())
}

/// GRPO's progress, as the job reports it.
pub async fn set_progress(db: &Db, id: &str, done: i64, planned: Option<i64>) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE runs SET steps_done = $2, steps_planned = COALESCE($3, steps_planned)          WHERE id = $1 AND state IN ('queued', 'running')",
    )
    .bind(id)
    .bind(done)
    .bind(planned)
    .execute(&db.writer)
    .await?;
    Ok(())
}

pub async fn mirrored(db: &Db, id: &str, commit: &str, now: &str, epoch: i64) -> Result<(), sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    sqlx::query("UPDATE runs SET launch = 'mirrored', bundle_commit = $2, updated_at = $3 WHERE id = $1 AND launch = 'reserved'")
        .bind(id)
        .bind(commit)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let detail = format!("bundle committed to the runs dataset at {commit}");
    event_in(&mut tx, &launch_event(id, now, epoch, "mirrored", &detail)).await?;
    tx.commit().await
}

/// Records the HF job: the launch is done.
pub async fn launched(
    db: &Db,
    id: &str,
    job_id: &str,
    job_status: &str,
    now: &str,
    epoch: i64,
) -> Result<(), sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    sqlx::query(
        "UPDATE runs SET launch = 'launched', job_id = $2, job_status = $3, updated_at = $4 \
         WHERE id = $1 AND launch IN ('reserved', 'mirrored')",
    )
    .bind(id)
    .bind(job_id)
    .bind(job_status)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    let detail = format!("HF job {job_id} created ({job_status})");
    event_in(&mut tx, &launch_event(id, now, epoch, "launched", &detail)).await?;
    tx.commit().await
}

/// The launch definitely failed: the run fails with `reason`, its reservation is released, and it
/// does not count against the daily limit (failed runs never do).
pub async fn launch_failed(
    db: &Db,
    id: &str,
    reason: &str,
    platform_fault: bool,
    now: &str,
    epoch: i64,
) -> Result<(), sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    let failed = sqlx::query(
        "UPDATE runs SET launch = 'failed', state = 'failed', stage = 'setup', reason = $2, platform_fault = $3, \
         updated_at = $4 WHERE id = $1 AND launch IN ('reserved', 'mirrored')",
    )
    .bind(id)
    .bind(reason)
    .bind(i64::from(platform_fault))
    .bind(now)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !failed {
        // Launched meanwhile, or failed before: nothing to write.
        return tx.rollback().await;
    }
    sqlx::query(
        "UPDATE budget_ledger SET state = 'released', updated_at = $2 WHERE run_id = $1 AND state = 'live'",
    )
    .bind(id)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    event_in(&mut tx, &launch_event(id, now, epoch, "failed", reason)).await?;
    crate::endings::collection_run_in(&mut tx, id, now, epoch).await?;
    tx.commit().await?;
    db.ended();
    Ok(())
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Event {
    pub at: String,
    pub epoch: i64,
    pub source: String,
    pub kind: String,
    pub detail: String,
    pub stage: Option<String>,
    pub passed: Option<i64>,
    pub total: Option<i64>,
    pub timeouts: Option<i64>,
    pub errors: Option<i64>,
}

pub async fn events(db: &Db, run_id: &str) -> Result<Vec<Event>, sqlx::Error> {
    sqlx::query_as(
        "SELECT at, epoch, source, kind, detail, stage, passed, total, timeouts, errors FROM run_events \
         WHERE run_id = $1 ORDER BY seq",
    )
    .bind(run_id)
    .fetch_all(&db.pool)
    .await
}

/// The secret's hash the run's relay must present.
/// The hash of a run's relay secret while the run has not ended: a finished run's secret no
/// longer opens the relay.
pub async fn secret_hash(db: &Db, id: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT secret_hash FROM runs WHERE id = $1 AND state IN ('queued', 'running')")
        .bind(id)
        .fetch_optional(&db.pool)
        .await
}

/// The highest sequence number of the run's stored relay messages: a job that connects (again, or
/// in a new attempt of its command) numbers its messages from here.
pub async fn last_relay_seq(db: &Db, id: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COALESCE(MAX(relay_seq), 0) AS seq FROM run_events WHERE run_id = $1")
        .bind(id)
        .fetch_one(&db.pool)
        .await
}

/// Stores a relay message as an event (a repeat is stored once), marks the relay heard from, and
/// moves the run to a later stage it reports. Answers whether the message was new.
pub async fn relay_message(
    db: &Db,
    e: &NewEvent<'_>,
    advance_to: Option<&str>,
    holder: &str,
) -> Result<bool, sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    // A heartbeat only says the job is alive: it marks the relay heard from, not an event.
    let stored = e.kind != "heartbeat" && event_in(&mut tx, e).await?;
    sqlx::query(
        "UPDATE runs SET relay_state = 'connected', relay_seen_epoch = $2, relay_holder = $3 \
         WHERE id = $1 AND state IN ('queued', 'running')",
    )
    .bind(e.run_id)
    .bind(e.epoch)
    .bind(holder)
    .execute(&mut *tx)
    .await?;
    if let (Some(stage), true) = (advance_to, stored) {
        let started = sqlx::query(
            "UPDATE runs SET state = 'running', updated_at = $2 WHERE id = $1 AND state = 'queued'",
        )
        .bind(e.run_id)
        .bind(e.at)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if started {
            let detail = format!("the job reported stage {stage} over its relay");
            let running = NewEvent {
                kind: "running",
                detail: &detail,
                relay_seq: None,
                stage: Some(stage),
                ..e.clone()
            };
            event_in(&mut tx, &running).await?;
        }
        sqlx::query("UPDATE runs SET stage = $2, updated_at = $3 WHERE id = $1 AND state = 'running'")
            .bind(e.run_id)
            .bind(stage)
            .bind(e.at)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(stored)
}

/// The relay dropped (or was replaced): reconnecting until its grace period ends.
pub async fn relay_dropped(db: &Db, id: &str, holder: &str, epoch: i64) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE runs SET relay_state = 'reconnecting', relay_seen_epoch = $3 \
         WHERE id = $1 AND relay_holder = $2 AND relay_state = 'connected'",
    )
    .bind(id)
    .bind(holder)
    .bind(epoch)
    .execute(&db.writer)
    .await?;
    Ok(())
}

pub async fn set_relay_state(db: &Db, id: &str, state: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE runs SET relay_state = $2 WHERE id = $1")
        .bind(id)
        .bind(state)
        .execute(&db.writer)
        .await?;
    Ok(())
}

/// Launched runs that have not ended: the reconciler's work.
pub async fn following(db: &Db) -> Result<Vec<RunId>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT id FROM runs WHERE launch = 'launched' AND state IN ('queued', 'running') ORDER BY seq",
    )
    .fetch_all(&db.pool)
    .await
}

/// Where the reconciler found the run's result files.
pub async fn set_results_commit(db: &Db, id: &str, commit: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE runs SET results_commit = $2 WHERE id = $1")
        .bind(id)
        .bind(commit)
        .execute(&db.writer)
        .await?;
    Ok(())
}

/// What the reconciler saw of the job this pass.
pub struct Observed<'a> {
    pub job_status: &'a str,
    pub job_created_epoch: Option<i64>,
    pub job_started_epoch: Option<i64>,
    /// Log lines read so far (each pass reads only new ones).
    pub log_lines: i64,
    pub log_seen_epoch: Option<i64>,
    pub log_last_at: Option<&'a str>,
    pub log_stage: Option<&'a str>,
    pub log_last_line: Option<&'a str>,
    pub gpu_samples: &'a str,
    pub gpus_idle_since: Option<i64>,
    pub log_rollout_step: Option<i64>,
}

pub async fn observe(db: &Db, id: &str, o: &Observed<'_>) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE runs SET job_status = $2, job_created_epoch = $3, job_started_epoch = $4, log_lines = $5, \
         log_seen_epoch = $6, log_last_at = $7, log_stage = $8, log_last_line = $9, gpu_samples = $10, \
         gpus_idle_since = $11, log_rollout_step = $12 WHERE id = $1",
    )
    .bind(id)
    .bind(o.job_status)
    .bind(o.job_created_epoch)
    .bind(o.job_started_epoch)
    .bind(o.log_lines)
    .bind(o.log_seen_epoch)
    .bind(o.log_last_at)
    .bind(o.log_stage)
    .bind(o.log_last_line)
    .bind(o.gpu_samples)
    .bind(o.gpus_idle_since)
    .bind(o.log_rollout_step)
    .execute(&db.writer)
    .await?;
    Ok(())
}

/// A change the reconciler decided, with its event and, when the run ends, its reservation
/// settled at `settle_cents` or released (`None`), all in one transaction.
pub struct Change<'a> {
    /// The state the change was decided from: it applies only if the run is still in it.
    pub from: RunState,
    pub state: RunState,
    pub stage: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub platform_fault: bool,
    pub event: NewEvent<'a>,
    pub settle_cents: Option<Option<i64>>,
}

/// Applies the change; false when the run had moved on since it was decided (nothing written).
/// A change that ends the run writes its ending too, in the same transaction.
pub async fn apply(db: &Db, id: &str, c: &Change<'_>) -> Result<bool, sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    let finished = c.state.has_ended().then_some(c.event.at);
    let done = sqlx::query(
        "UPDATE runs SET state = $2, stage = COALESCE($3, stage), reason = $4, platform_fault = $5, updated_at = $6, \
         finished_at = COALESCE($7, finished_at), relay_state = CASE WHEN $8 = 1 AND relay_state <> 'none' THEN 'gone' ELSE relay_state END \
         WHERE id = $1 AND state = $9",
    )
    .bind(id)
    .bind(c.state.as_str())
    .bind(c.stage)
    .bind(c.reason)
    .bind(i64::from(c.platform_fault))
    .bind(c.event.at)
    .bind(finished)
    .bind(i64::from(c.state.has_ended()))
    .bind(c.from.as_str())
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() == 0 {
        // Something else moved the run since the decision (the relay, another pass): the next
        // pass decides again from what is true then.
        tx.rollback().await?;
        return Ok(false);
    }
    event_in(&mut tx, &c.event).await?;
    if c.state.has_ended() {
        crate::endings::collection_run_in(&mut tx, id, c.event.at, c.event.epoch).await?;
    }
    match c.settle_cents {
        Some(Some(cents)) => {
            sqlx::query(
                "UPDATE budget_ledger SET state = 'settled', amount_cents = $2, updated_at = $3 WHERE run_id = $1 AND state = 'live'",
            )
            .bind(id)
            .bind(cents)
            .bind(c.event.at)
            .execute(&mut *tx)
            .await?;
        }
        Some(None) => {
            sqlx::query("UPDATE budget_ledger SET state = 'released', updated_at = $2 WHERE run_id = $1 AND state = 'live'")
                .bind(id)
                .bind(c.event.at)
                .execute(&mut *tx)
                .await?;
        }
        None => {}
    }
    tx.commit().await?;
    if c.state.has_ended() {
        db.ended();
    }
    Ok(true)
}

/// Every run's relay as stored: (run, state, last heard from).
pub async fn relays(db: &Db) -> Result<Vec<(RunId, String, Option<i64>)>, sqlx::Error> {
    sqlx::query_as("SELECT id, relay_state, relay_seen_epoch FROM runs WHERE relay_state IN ('connected', 'reconnecting')")
        .fetch_all(&db.pool)
        .await
}

/// Stores optimizer steps' metrics from `source` (`relay`, `logs` or `diagnostics`); a step
/// already stored keeps its first numbers (every source reads the same line of TRL's).
pub async fn add_train_points(
    db: &Db,
    run_id: &str,
    points: &[domain::training::TrainPoint],
    source: &str,
    at: &str,
) -> Result<(), sqlx::Error> {
    if points.is_empty() {
        return Ok(());
    }
    let mut tx = db.writer.begin().await?;
    for p in points {
        let metrics = serde_json::to_string(&p.metrics).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
        sqlx::query(
            "INSERT INTO run_train_steps (run_id, step, metrics, source, at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (run_id, step) DO NOTHING",
        )
        .bind(run_id)
        .bind(p.step.min(i64::MAX as u64) as i64)
        .bind(metrics)
        .bind(source)
        .bind(at)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

/// A run's stored steps, in order.
pub async fn train_points(db: &Db, run_id: &str) -> Result<Vec<domain::training::TrainPoint>, sqlx::Error> {
    let rows: Vec<(i64, JsonText<_>)> =
        sqlx::query_as("SELECT step, metrics FROM run_train_steps WHERE run_id = $1 ORDER BY step")
            .bind(run_id)
            .fetch_all(&db.pool)
            .await?;
    Ok(rows
        .into_iter()
        .map(|(step, metrics)| domain::training::TrainPoint { step: step.max(0) as u64, metrics: metrics.0 })
        .collect())
}
