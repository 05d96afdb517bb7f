use std::collections::BTreeMap;

use crate::db::Db;
use domain::budget::{summarize, LedgerEntry, LedgerState};
use domain::catalog::{LiveState, MeasuredBaseline};
use domain::Registry;

/// A budget reservation's row (`ledger`).
#[derive(sqlx::FromRow)]
struct LedgerRow {
    challenge_id: String,
    run_id: Option<String>,
    amount_cents: i64,
    state: LedgerState,
}

impl LedgerRow {
    fn entry(&self) -> LedgerEntry {
        LedgerEntry { amount_cents: self.amount_cents, state: self.state }
    }
}

async fn ledger(db: &Db) -> Result<Vec<LedgerRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT challenge_id, run_id, amount_cents, state FROM budget_ledger ORDER BY created_at, id",
    )
    .fetch_all(&db.pool)
    .await
}

/// The live state every read view needs: the budget, the active job (a run holding a live
/// reservation), and launched runs per challenge (runs that reserved and were not released).
pub async fn live_state(db: &Db, registry: &Registry) -> Result<LiveState, sqlx::Error> {
    let rows = ledger(db).await?;
    let entries: Vec<LedgerEntry> = rows.iter().map(LedgerRow::entry).collect();
    let active_job = rows
        .iter()
        .find(|r| r.state == LedgerState::Live)
        .map(|r| r.run_id.clone().unwrap_or_else(|| format!("a run on {}", r.challenge_id)));
    // `health.runs` counts runs whose job was created.
    let mut launched_runs = BTreeMap::new();
    for (challenge_id, n) in sqlx::query_as::<_, (String, i64)>(
        "SELECT challenge_id, COUNT(*) AS n FROM runs WHERE launch = 'launched' GROUP BY challenge_id",
    )
    .fetch_all(&db.pool)
    .await?
    {
        launched_runs.insert(challenge_id, n.max(0) as u64);
    }
    let hf = hf_recorded_cents(db).await?;
    // Newest first: the first seen per challenge is its current baseline.
    let mut baselines = BTreeMap::new();
    for m in crate::baselines::repo::list(db, None).await? {
        if !baselines.contains_key(&m.challenge_id) {
            let measured = MeasuredBaseline {
                reference: m.as_reference(),
                run_id: m.run_id.clone(),
                measured_at: m.collected_at.clone(),
            };
            baselines.insert(m.challenge_id.clone(), measured);
        }
    }
    Ok(LiveState {
        budget: summarize(registry.budget_cap_cents, &entries, hf),
        active_job,
        launched_runs,
        baselines,
    })
}

/// Every reservation, newest first.
pub async fn reservations(db: &Db) -> Result<Vec<domain::views::Reservation>, sqlx::Error> {
    let rows: Vec<ReservationRow> = sqlx::query_as(
        "SELECT l.run_id, l.challenge_id, l.amount_cents, l.state, l.created_at, l.updated_at, r.state AS run_state \
         FROM budget_ledger l LEFT JOIN runs r ON r.id = l.run_id ORDER BY l.created_at DESC, l.id LIMIT 1000",
    )
    .fetch_all(&db.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| domain::views::Reservation {
            run_id: r.run_id,
            challenge_id: r.challenge_id,
            amount_usd: domain::budget::dollars(r.amount_cents),
            state: r.state,
            run_state: r.run_state,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
        .collect())
}

/// A reservation's row with its run's state (`reservations`).
#[derive(sqlx::FromRow)]
struct ReservationRow {
    run_id: Option<String>,
    challenge_id: String,
    amount_cents: i64,
    state: String,
    run_state: Option<String>,
    created_at: String,
    updated_at: String,
}

/// A job of the arena's HF namespace as last inspected, priced.
pub struct HfJob<'a> {
    pub job_id: &'a str,
    pub run_id: Option<&'a str>,
    pub purpose: &'a str,
    pub flavor: &'a str,
    pub stage: &'a str,
    pub created_at: Option<&'a str>,
    pub started_at: Option<&'a str>,
    pub finished_at: Option<&'a str>,
    pub running_s: f64,
    pub cost_cents: i64,
    pub now: &'a str,
}

pub async fn upsert_hf_job(db: &Db, j: &HfJob<'_>) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO hf_jobs (job_id, run_id, purpose, flavor, stage, created_at, started_at, finished_at, running_s, cost_cents, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (job_id) DO UPDATE SET stage = excluded.stage, started_at = excluded.started_at, \
         finished_at = excluded.finished_at, running_s = excluded.running_s, cost_cents = excluded.cost_cents, \
         updated_at = excluded.updated_at",
    )
    .bind(j.job_id)
    .bind(j.run_id)
    .bind(j.purpose)
    .bind(j.flavor)
    .bind(j.stage)
    .bind(j.created_at)
    .bind(j.started_at)
    .bind(j.finished_at)
    .bind(j.running_s)
    .bind(j.cost_cents)
    .bind(j.now)
    .execute(&db.writer)
    .await?;
    Ok(())
}

/// What HF's records say finished jobs cost; `None` before any job was priced.
pub async fn hf_recorded_cents(db: &Db) -> Result<Option<i64>, sqlx::Error> {
    let (n, cents): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*) AS n, CAST(COALESCE(SUM(cost_cents), 0) AS BIGINT) AS c FROM hf_jobs \
         WHERE stage IN ('COMPLETED', 'CANCELED', 'ERROR', 'DELETED')",
    )
    .fetch_one(&db.pool)
    .await?;
    Ok((n > 0).then_some(cents))
}

/// The running seconds the reconciler recorded for each job.
pub async fn hf_running_s(db: &Db) -> Result<Vec<(String, f64)>, sqlx::Error> {
    sqlx::query_as("SELECT job_id, running_s FROM hf_jobs").fetch_all(&db.pool).await
}

/// Committed spend after each reservation, in order: the sum so far of every reservation not
/// released (live ones at their reservation, settled ones at what was billed).
pub async fn history(db: &Db) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let rows: Vec<(String, i64, String)> =
        sqlx::query_as("SELECT created_at, amount_cents, state FROM budget_ledger ORDER BY created_at, id")
            .fetch_all(&db.pool)
            .await?;
    let mut total = 0i64;
    let mut points = Vec::new();
    for (created_at, amount_cents, state) in rows {
        if state != "released" {
            total += amount_cents;
        }
        points.push((created_at, total));
    }
    Ok(points)
}
