//! Collected baseline measurements. One per baseline run (its primary key makes a repeated
//! collect find the first); the composite key to `runs (id, purpose)` admits baseline runs only.

use domain::results::BaselineMeasurement;
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::db::Db;

const COLUMNS: &str = "run_id, challenge_id, pass_rate, stderr, trials, per_trial, tasks, scored_cells, \
    infra_error_cells, harness_note, read_commit, collected_by, collected_at";

fn measurement(row: &AnyRow) -> Result<BaselineMeasurement, sqlx::Error> {
    let per_trial: String = row.try_get("per_trial")?;
    Ok(BaselineMeasurement {
        run_id: row.try_get("run_id")?,
        challenge_id: row.try_get("challenge_id")?,
        pass_rate: row.try_get("pass_rate")?,
        stderr: row.try_get("stderr")?,
        trials: row.try_get::<i64, _>("trials")? as u32,
        per_trial: serde_json::from_str(&per_trial).map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
        tasks: row.try_get::<i64, _>("tasks")? as u64,
        scored_cells: row.try_get::<i64, _>("scored_cells")? as u64,
        infra_error_cells: row.try_get::<i64, _>("infra_error_cells")? as u64,
        harness_note: row.try_get("harness_note")?,
        read_commit: row.try_get("read_commit")?,
        collected_by: row.try_get("collected_by")?,
        collected_at: row.try_get("collected_at")?,
        existing: true,
    })
}

/// Stores the measurement unless the run has one; answers whether this call stored it, and the
/// stored measurement.
pub async fn insert(
    db: &Db,
    m: &BaselineMeasurement,
    epoch: i64,
) -> Result<(bool, BaselineMeasurement), sqlx::Error> {
    let per_trial = serde_json::to_string(&m.per_trial).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let inserted = sqlx::query(
        "INSERT INTO baselines (run_id, challenge_id, pass_rate, stderr, trials, per_trial, tasks, scored_cells, \
         infra_error_cells, harness_note, read_commit, collected_by, collected_at, collected_epoch) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT (run_id) DO NOTHING",
    )
    .bind(&m.run_id)
    .bind(&m.challenge_id)
    .bind(m.pass_rate)
    .bind(m.stderr)
    .bind(i64::from(m.trials))
    .bind(per_trial)
    .bind(m.tasks as i64)
    .bind(m.scored_cells as i64)
    .bind(m.infra_error_cells as i64)
    .bind(&m.harness_note)
    .bind(&m.read_commit)
    .bind(&m.collected_by)
    .bind(&m.collected_at)
    .bind(epoch)
    .execute(&db.writer)
    .await?
    .rows_affected()
        == 1;
    let stored = get(db, &m.run_id).await?.ok_or(sqlx::Error::RowNotFound)?;
    Ok((inserted, stored))
}

pub async fn get(db: &Db, run_id: &str) -> Result<Option<BaselineMeasurement>, sqlx::Error> {
    sqlx::query(&format!("SELECT {COLUMNS} FROM baselines WHERE run_id = $1"))
        .bind(run_id)
        .fetch_optional(&db.writer)
        .await?
        .as_ref()
        .map(measurement)
        .transpose()
}

/// A challenge's measurements (every challenge's without one), newest first.
pub async fn list(db: &Db, challenge_id: Option<&str>) -> Result<Vec<BaselineMeasurement>, sqlx::Error> {
    sqlx::query(&format!(
        "SELECT {COLUMNS} FROM baselines WHERE ($1 = '' OR challenge_id = $1) \
         ORDER BY collected_epoch DESC, run_id DESC LIMIT 1000"
    ))
    .bind(challenge_id.unwrap_or(""))
    .fetch_all(&db.pool)
    .await?
    .iter()
    .map(measurement)
    .collect()
}
