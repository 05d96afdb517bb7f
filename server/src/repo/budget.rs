use std::collections::BTreeMap;

use domain::budget::{summarize, LedgerEntry, LedgerState};
use domain::catalog::LiveState;
use domain::Registry;
use sqlx::Row;

use crate::db::Db;

struct LedgerRow {
    challenge_id: String,
    run_id: Option<String>,
    entry: LedgerEntry,
}

async fn ledger(db: &Db) -> Result<Vec<LedgerRow>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT challenge_id, run_id, amount_cents, state FROM budget_ledger ORDER BY created_at, id",
    )
    .fetch_all(&db.pool)
    .await?;
    rows.into_iter()
        .map(|row| {
            let state: String = row.try_get("state")?;
            let state = LedgerState::parse(&state).ok_or_else(|| {
                sqlx::Error::Decode(format!("budget_ledger.state holds unknown value `{state}`").into())
            })?;
            Ok(LedgerRow {
                challenge_id: row.try_get("challenge_id")?,
                run_id: row.try_get("run_id")?,
                entry: LedgerEntry { amount_cents: row.try_get("amount_cents")?, state },
            })
        })
        .collect()
}

/// The live state every read view needs: the budget, the active job (a run holding a live
/// reservation), and launched runs per challenge (runs that reserved and were not released).
pub async fn live_state(db: &Db, registry: &Registry) -> Result<LiveState, sqlx::Error> {
    let rows = ledger(db).await?;
    let entries: Vec<LedgerEntry> = rows.iter().map(|r| r.entry).collect();
    let active_job = rows
        .iter()
        .find(|r| r.entry.state == LedgerState::Live)
        .map(|r| r.run_id.clone().unwrap_or_else(|| format!("a run on {}", r.challenge_id)));
    let mut launched_runs = BTreeMap::new();
    for r in rows.iter().filter(|r| r.entry.state != LedgerState::Released) {
        *launched_runs.entry(r.challenge_id.clone()).or_insert(0) += 1;
    }
    Ok(LiveState { budget: summarize(registry.budget_cap_cents, &entries, None), active_job, launched_runs })
}

/// A reservation of the ledger, with the run it is for.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Reservation {
    pub run_id: Option<String>,
    pub challenge_id: String,
    pub amount_usd: f64,
    /// `live` (reserved before the job starts), `settled` (at what HF billed) or `released`.
    pub state: String,
    /// The run's state, when the reservation belongs to a run the arena knows.
    pub run_state: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// Every reservation, newest first.
pub async fn reservations(db: &Db) -> Result<Vec<Reservation>, sqlx::Error> {
    sqlx::query(
        "SELECT l.run_id, l.challenge_id, l.amount_cents, l.state, l.created_at, l.updated_at, r.state AS run_state \
         FROM budget_ledger l LEFT JOIN runs r ON r.id = l.run_id ORDER BY l.created_at DESC, l.id LIMIT 1000",
    )
    .fetch_all(&db.pool)
    .await?
    .iter()
    .map(|row| {
        Ok(Reservation {
            run_id: row.try_get("run_id")?,
            challenge_id: row.try_get("challenge_id")?,
            amount_usd: domain::budget::dollars(row.try_get("amount_cents")?),
            state: row.try_get("state")?,
            run_state: row.try_get("run_state")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        })
    })
    .collect()
}
