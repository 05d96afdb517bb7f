use domain::agents::{AgentRecord, AgentRegistration};

use crate::db::Db;

/// An agent's row as `COLUMNS` selects it.
#[derive(sqlx::FromRow)]
struct AgentRow {
    agent_id: String,
    owner: String,
    owner_id: String,
    description: String,
    model: Option<String>,
    harness: Option<String>,
    created_at: String,
}

impl From<AgentRow> for AgentRecord {
    fn from(r: AgentRow) -> AgentRecord {
        AgentRecord {
            agent_id: r.agent_id,
            owner: r.owner,
            owner_id: r.owner_id,
            description: r.description,
            model: r.model,
            harness: r.harness,
            created_at: r.created_at,
        }
    }
}

const COLUMNS: &str = "agent_id, owner, owner_id, description, model, harness, created_at";

/// Inserts the registration unless the id is taken; returns whether this call inserted it and
/// the record now stored under the id. The primary key decides races, not a prior read.
/// Agents one HF account may register.
pub const MAX_AGENTS_PER_ACCOUNT: i64 = 20;

/// Registers an agent, unless its id is taken (then the stored one is answered) or the owner is at
/// `MAX_AGENTS_PER_ACCOUNT` (`None`). The count and the insert are one transaction: SQLite writes
/// go through one connection; on PostgreSQL an advisory lock on the owner serializes them.
pub async fn register(
    db: &Db,
    owner_id: &str,
    owner: &str,
    reg: &AgentRegistration,
    now: &str,
) -> Result<Option<(bool, AgentRecord)>, sqlx::Error> {
    if let Some(stored) = get(db, reg.agent_id.as_str()).await? {
        return Ok(Some((false, stored)));
    }
    let mut tx = db.writer.begin().await?;
    if db.backend == crate::db::Backend::Postgres {
        sqlx::query("SELECT 1 AS locked FROM (SELECT pg_advisory_xact_lock(hashtext($1))) AS l")
            .bind(format!("agents:{owner_id}"))
            .fetch_one(&mut *tx)
            .await?;
    }
    let held: i64 = sqlx::query_scalar("SELECT COUNT(*) AS n FROM agents WHERE owner_id = $1")
        .bind(owner_id)
        .fetch_one(&mut *tx)
        .await?;
    if held >= MAX_AGENTS_PER_ACCOUNT {
        tx.rollback().await?;
        return Ok(None);
    }
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
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    tx.commit().await?;
    let stored = get(db, reg.agent_id.as_str()).await?.ok_or(sqlx::Error::RowNotFound)?;
    Ok(Some((inserted, stored)))
}

pub async fn get(db: &Db, agent_id: &str) -> Result<Option<AgentRecord>, sqlx::Error> {
    let row: Option<AgentRow> = sqlx::query_as(&format!("SELECT {COLUMNS} FROM agents WHERE agent_id = $1"))
        .bind(agent_id)
        .fetch_optional(&db.pool)
        .await?;
    Ok(row.map(AgentRecord::from))
}

/// Every agent, or those of one owner (by HF id).
/// One page of every registered agent, by id after `after`, and how many there are in all.
pub async fn page(db: &Db, after: Option<&str>, limit: i64) -> Result<(Vec<AgentRecord>, i64), sqlx::Error> {
    let rows: Vec<AgentRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM agents WHERE agent_id > $1 ORDER BY agent_id LIMIT $2"
    ))
    .bind(after.unwrap_or(""))
    .bind(limit)
    .fetch_all(&db.pool)
    .await?;
    let total: i64 = sqlx::query_scalar("SELECT COUNT(*) AS n FROM agents").fetch_one(&db.pool).await?;
    Ok((rows.into_iter().map(AgentRecord::from).collect(), total))
}

pub async fn list(db: &Db, owner_id: Option<&str>) -> Result<Vec<AgentRecord>, sqlx::Error> {
    let rows: Vec<AgentRow> = match owner_id {
        Some(o) => {
            sqlx::query_as(&format!("SELECT {COLUMNS} FROM agents WHERE owner_id = $1 ORDER BY agent_id"))
                .bind(o)
                .fetch_all(&db.pool)
                .await?
        }
        None => {
            sqlx::query_as(&format!("SELECT {COLUMNS} FROM agents ORDER BY agent_id"))
                .fetch_all(&db.pool)
                .await?
        }
    };
    Ok(rows.into_iter().map(AgentRecord::from).collect())
}
