//! Collected results and their reviews. One result per run (its primary key makes a repeated
//! collect find the first); a review applies only to a pending result, so it is final.

use crate::db::{Db, JsonText};
use domain::results::{Measured, Review, SuiteResult};

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

/// A result's row as `COLUMNS` selects it; `Stored` gathers the measurement.
#[derive(sqlx::FromRow)]
struct ResultRow {
    run_id: String,
    challenge_id: String,
    environment_id: String,
    baseline_pass_rate: f64,
    after_pass_rate: f64,
    delta_pp: f64,
    stderr_pp: Option<f64>,
    #[sqlx(try_from = "i64")]
    trials: u32,
    suites: JsonText<Vec<SuiteResult>>,
    #[sqlx(try_from = "i64")]
    paired_tasks: u64,
    #[sqlx(try_from = "i64")]
    infra_error_cells: u64,
    task_identities: JsonText<Vec<String>>,
    read_commit: String,
    collected_by: String,
    collected_at: String,
    review: String,
    review_note: Option<String>,
    reviewed_by: Option<String>,
    reviewed_at: Option<String>,
    reviewed_epoch: Option<i64>,
    training: JsonText<Option<domain::training::signal::TrainingSignal>>,
}

impl From<ResultRow> for Stored {
    fn from(r: ResultRow) -> Stored {
        Stored {
            run_id: r.run_id,
            challenge_id: r.challenge_id,
            environment_id: r.environment_id,
            measured: Measured {
                baseline_pass_rate: r.baseline_pass_rate,
                after_pass_rate: r.after_pass_rate,
                delta_pp: r.delta_pp,
                stderr_pp: r.stderr_pp,
                trials: r.trials,
                suites: r.suites.0,
                paired_tasks: r.paired_tasks,
                infra_error_cells: r.infra_error_cells,
            },
            task_identities: r.task_identities.0,
            read_commit: r.read_commit,
            collected_by: r.collected_by,
            collected_at: r.collected_at,
            review: r.review,
            review_note: r.review_note,
            reviewed_by: r.reviewed_by,
            reviewed_at: r.reviewed_at,
            reviewed_epoch: r.reviewed_epoch,
            training: r.training.0,
        }
    }
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
    let row: Option<ResultRow> = sqlx::query_as(&format!("SELECT {COLUMNS} FROM results WHERE run_id = $1"))
        .bind(run_id)
        .fetch_optional(&db.writer)
        .await?;
    Ok(row.map(Stored::from))
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
    // The review and its ending (`result.verified`, for the run's author) are one transaction.
    let mut tx = db.writer.begin().await?;
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
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() != 1 {
        tx.rollback().await?;
        return Ok(false);
    }
    let author: String = sqlx::query_scalar("SELECT author_id FROM runs WHERE id = $1")
        .bind(run_id)
        .fetch_one(&mut *tx)
        .await?;
    let subject = format!("result:{run_id}");
    crate::endings::record_in(&mut tx, crate::endings::Kind::ResultVerified, &subject, &author, now, epoch)
        .await?;
    tx.commit().await?;
    db.ended();
    Ok(true)
}

/// Every result on a challenge (or all), in the order they were collected.
pub async fn list(db: &Db, challenge_id: Option<&str>) -> Result<Vec<Stored>, sqlx::Error> {
    let rows: Vec<ResultRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM results WHERE ($1 = '' OR challenge_id = $1) ORDER BY collected_at, run_id"
    ))
    .bind(challenge_id.unwrap_or(""))
    .fetch_all(&db.pool)
    .await?;
    Ok(rows.into_iter().map(Stored::from).collect())
}
