//! Collected results and their reviews. One result per run (its primary key makes a repeated
//! collect find the first); a review applies only to a pending result, so it is final.

use domain::results::{Measured, Review, SuiteResult};
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::db::Db;

#[derive(Debug, Clone)]
pub struct Stored {
    pub run_id: String,
    pub challenge_id: String,
    pub environment_id: String,
    pub measured: Measured,
    pub task_identities: Vec<String>,
    pub read_commit: String,
    pub collected_by: String,
    pub collected_at: String,
    /// `pending`, `accepted` or `rejected`.
    pub review: String,
    pub review_note: Option<String>,
    pub reviewed_by: Option<String>,
    pub reviewed_at: Option<String>,
    pub reviewed_epoch: Option<i64>,
    pub training: Option<domain::training::signal::TrainingSignal>,
}

const COLUMNS: &str = "run_id, challenge_id, environment_id, baseline_pass_rate, after_pass_rate, delta_pp, stderr_pp, \
    trials, suites, paired_tasks, infra_error_cells, task_identities, read_commit, collected_by, collected_at, review, \
    review_note, reviewed_by, reviewed_at, reviewed_epoch, training";

fn json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, sqlx::Error> {
    serde_json::from_str(text).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

fn stored(row: &AnyRow) -> Result<Stored, sqlx::Error> {
    let suites: Vec<SuiteResult> = json(&row.try_get::<String, _>("suites")?)?;
    Ok(Stored {
        run_id: row.try_get("run_id")?,
        challenge_id: row.try_get("challenge_id")?,
        environment_id: row.try_get("environment_id")?,
        measured: Measured {
            baseline_pass_rate: row.try_get("baseline_pass_rate")?,
            after_pass_rate: row.try_get("after_pass_rate")?,
            delta_pp: row.try_get("delta_pp")?,
            stderr_pp: row.try_get("stderr_pp")?,
            trials: row.try_get::<i64, _>("trials")? as u32,
            suites,
            paired_tasks: row.try_get::<i64, _>("paired_tasks")? as u64,
            infra_error_cells: row.try_get::<i64, _>("infra_error_cells")? as u64,
        },
        task_identities: json(&row.try_get::<String, _>("task_identities")?)?,
        read_commit: row.try_get("read_commit")?,
        collected_by: row.try_get("collected_by")?,
        collected_at: row.try_get("collected_at")?,
        review: row.try_get("review")?,
        review_note: row.try_get("review_note")?,
        reviewed_by: row.try_get("reviewed_by")?,
        reviewed_at: row.try_get("reviewed_at")?,
        reviewed_epoch: row.try_get("reviewed_epoch")?,
        training: row.try_get::<Option<String>, _>("training")?.map(|t| json(&t)).transpose()?,
    })
}

pub struct NewResult<'a> {
    pub run_id: &'a str,
    pub challenge_id: &'a str,
    pub environment_id: &'a str,
    pub measured: &'a Measured,
    pub task_identities: &'a [String],
    pub read_commit: &'a str,
    pub collected_by: &'a str,
    pub now: &'a str,
    pub training: Option<&'a domain::training::signal::TrainingSignal>,
}

/// Stores the result unless the run has one; answers whether this call stored it, and the result.
pub async fn insert(db: &Db, n: &NewResult<'_>) -> Result<(bool, Stored), sqlx::Error> {
    let m = n.measured;
    let suites = serde_json::to_string(&m.suites).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let identities =
        serde_json::to_string(n.task_identities).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let training =
        n.training.map(serde_json::to_string).transpose().map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let inserted = sqlx::query(
        "INSERT INTO results (run_id, challenge_id, environment_id, baseline_pass_rate, after_pass_rate, delta_pp, \
         stderr_pp, trials, suites, paired_tasks, infra_error_cells, task_identities, read_commit, collected_by, \
         collected_at, training) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
         ON CONFLICT (run_id) DO NOTHING",
    )
    .bind(n.run_id)
    .bind(n.challenge_id)
    .bind(n.environment_id)
    .bind(m.baseline_pass_rate)
    .bind(m.after_pass_rate)
    .bind(m.delta_pp)
    .bind(m.stderr_pp)
    .bind(i64::from(m.trials))
    .bind(suites)
    .bind(m.paired_tasks as i64)
    .bind(m.infra_error_cells as i64)
    .bind(identities)
    .bind(n.read_commit)
    .bind(n.collected_by)
    .bind(n.now)
    .bind(training)
    .execute(&db.writer)
    .await?
    .rows_affected()
        == 1;
    let row = get(db, n.run_id).await?.ok_or(sqlx::Error::RowNotFound)?;
    Ok((inserted, row))
}

pub async fn get(db: &Db, run_id: &str) -> Result<Option<Stored>, sqlx::Error> {
    sqlx::query(&format!("SELECT {COLUMNS} FROM results WHERE run_id = $1"))
        .bind(run_id)
        .fetch_optional(&db.writer)
        .await?
        .as_ref()
        .map(stored)
        .transpose()
}

/// Reviews a pending result; `false` when it was already reviewed.
pub async fn review(
    db: &Db,
    run_id: &str,
    r: &Review,
    by: &str,
    now: &str,
    epoch: i64,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE results SET review = $2, review_note = $3, reviewed_by = $4, reviewed_at = $5, reviewed_epoch = $6 \
         WHERE run_id = $1 AND review = 'pending'",
    )
    .bind(run_id)
    .bind(if r.accepted { "accepted" } else { "rejected" })
    .bind(r.note.trim())
    .bind(by)
    .bind(now)
    .bind(epoch)
    .execute(&db.writer)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Every result on a challenge (or all), in the order they were collected.
pub async fn list(db: &Db, challenge_id: Option<&str>) -> Result<Vec<Stored>, sqlx::Error> {
    sqlx::query(&format!(
        "SELECT {COLUMNS} FROM results WHERE ($1 = '' OR challenge_id = $1) ORDER BY collected_at, run_id"
    ))
    .bind(challenge_id.unwrap_or(""))
    .fetch_all(&db.pool)
    .await?
    .iter()
    .map(stored)
    .collect()
}
