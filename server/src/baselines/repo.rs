//! Collected baseline measurements. One per baseline run (its primary key makes a repeated
//! collect find the first); the composite key to `runs (id, purpose)` admits baseline runs only.

use domain::results::BaselineMeasurement;

use crate::db::{Db, JsonText};

const COLUMNS: &str = "run_id, challenge_id, pass_rate, stderr, trials, per_trial, tasks, scored_cells, \
    infra_error_cells, harness_note, read_commit, collected_by, collected_at";

/// A measurement's row as `COLUMNS` selects it.
#[derive(sqlx::FromRow)]
struct BaselineRow {
    run_id: String,
    challenge_id: String,
    pass_rate: f64,
    stderr: f64,
    #[sqlx(try_from = "i64")]
    trials: u32,
    /// The pass rate of each trial (JSON).
    per_trial: JsonText<Vec<f64>>,
    #[sqlx(try_from = "i64")]
    tasks: u64,
    #[sqlx(try_from = "i64")]
    scored_cells: u64,
    #[sqlx(try_from = "i64")]
    infra_error_cells: u64,
    harness_note: String,
    read_commit: String,
    collected_by: String,
    collected_at: String,
}

impl From<BaselineRow> for BaselineMeasurement {
    fn from(r: BaselineRow) -> BaselineMeasurement {
        BaselineMeasurement {
            run_id: r.run_id,
            challenge_id: r.challenge_id,
            pass_rate: r.pass_rate,
            stderr: r.stderr,
            trials: r.trials,
            per_trial: r.per_trial.0,
            tasks: r.tasks,
            scored_cells: r.scored_cells,
            infra_error_cells: r.infra_error_cells,
            harness_note: r.harness_note,
            read_commit: r.read_commit,
            collected_by: r.collected_by,
            collected_at: r.collected_at,
            existing: true,
        }
    }
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
    let row: Option<BaselineRow> =
        sqlx::query_as(&format!("SELECT {COLUMNS} FROM baselines WHERE run_id = $1"))
            .bind(run_id)
            .fetch_optional(&db.writer)
            .await?;
    Ok(row.map(BaselineMeasurement::from))
}

/// A challenge's measurements (every challenge's without one), newest first.
pub async fn list(db: &Db, challenge_id: Option<&str>) -> Result<Vec<BaselineMeasurement>, sqlx::Error> {
    let rows: Vec<BaselineRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM baselines WHERE ($1 = '' OR challenge_id = $1) \
         ORDER BY collected_epoch DESC, run_id DESC LIMIT 1000"
    ))
    .bind(challenge_id.unwrap_or(""))
    .fetch_all(&db.pool)
    .await?;
    Ok(rows.into_iter().map(BaselineMeasurement::from).collect())
}
