use domain::agents::{AgentRecord, AgentRegistration};
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::db::Db;

fn record(row: &AnyRow) -> Result<AgentRecord, sqlx::Error> {
    Ok(AgentRecord {
        agent_id: row.try_get("agent_id")?,
        owner: row.try_get("owner")?,
        owner_id: row.try_get("owner_id")?,
        description: row.try_get("description")?,
        model: row.try_get("model")?,
        harness: row.try_get("harness")?,
        created_at: row.try_get("created_at")?,
    })
}

const COLUMNS: &str = "agent_id, owner, owner_id, description, model, harness, created_at";

/// Inserts the registration unless the id is taken; returns whether this call inserted it and
/// the record now stored under the id. The primary key decides races, not a prior read.
pub async fn register(
    db: &Db,
    owner_id: &str,
    owner: &str,
    reg: &AgentRegistration,
    now: &str,
) -> Result<(bool, AgentRecord), sqlx::Error> {
    let inserted = sqlx::query(
        "INSERT INTO agents (agent_id, owner, owner_id, description, model, harness, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (agent_id) DO NOTHING",
    )
    .bind(reg.agent_id.as_str())
    .bind(owner)
    .bind(owner_id)
    .bind(&reg.description)
    .bind(reg.model.clone())
    .bind(reg.harness.clone())
    .bind(now)
    .execute(&db.writer)
    .await?
    .rows_affected()
        == 1;
    let stored = get(db, reg.agent_id.as_str()).await?.ok_or(sqlx::Error::RowNotFound)?;
    Ok((inserted, stored))
}

pub async fn get(db: &Db, agent_id: &str) -> Result<Option<AgentRecord>, sqlx::Error> {
    sqlx::query(&format!("SELECT {COLUMNS} FROM agents WHERE agent_id = $1"))
        .bind(agent_id)
        .fetch_optional(&db.pool)
        .await?
        .as_ref()
        .map(record)
        .transpose()
}

/// Every agent, or those of one owner (by HF id).
pub async fn list(db: &Db, owner_id: Option<&str>) -> Result<Vec<AgentRecord>, sqlx::Error> {
    let rows = match owner_id {
        Some(o) => {
            sqlx::query(&format!("SELECT {COLUMNS} FROM agents WHERE owner_id = $1 ORDER BY agent_id"))
                .bind(o)
                .fetch_all(&db.pool)
                .await?
        }
        None => {
            sqlx::query(&format!("SELECT {COLUMNS} FROM agents ORDER BY agent_id"))
                .fetch_all(&db.pool)
                .await?
        }
    };
    rows.iter().map(record).collect()
}
