use domain::board::{retry_after, HiddenMessage, Message, MessageFilter, NewPost, RateLimit};

use crate::db::{Backend, Db, JsonText};

const COLUMNS: &str = "seq, id, author, agent_id, request_id, body, refs, created_at";

/// A message's row as `COLUMNS` selects it (`seq` orders pages; a `Message` does not show it).
#[derive(sqlx::FromRow)]
struct MessageRow {
    id: String,
    author: String,
    agent_id: Option<String>,
    request_id: String,
    body: String,
    /// The ids of the messages it refers to (JSON).
    refs: JsonText<Vec<String>>,
    created_at: String,
}

impl From<MessageRow> for Message {
    fn from(r: MessageRow) -> Message {
        Message {
            id: r.id,
            author: r.author,
            agent_id: r.agent_id,
            body: r.body,
            refs: r.refs.0,
            hidden_refs: Vec::new(),
            request_id: r.request_id,
            created_at: r.created_at,
        }
    }
}

/// The message an author (by HF id) posted under a request id.
pub async fn by_request(db: &Db, author_id: &str, request_id: &str) -> Result<Option<Message>, sqlx::Error> {
    let row: Option<MessageRow> =
        sqlx::query_as(&format!("SELECT {COLUMNS} FROM messages WHERE author_id = $1 AND request_id = $2"))
            .bind(author_id)
            .bind(request_id)
            .fetch_optional(&db.pool)
            .await?;
    Ok(row.map(Message::from))
}

/// The refs that name no stored message.
pub async fn missing_refs(db: &Db, refs: &[String]) -> Result<Vec<String>, sqlx::Error> {
    let mut missing = Vec::new();
    for r in refs {
        let found = sqlx::query("SELECT 1 AS one FROM messages WHERE id = $1")
            .bind(r)
            .fetch_optional(&db.pool)
            .await?;
        if found.is_none() {
            missing.push(r.clone());
        }
    }
    Ok(missing)
}

pub struct Stamp {
    pub id: String,
    pub created_at: String,
    pub created_epoch: i64,
}

pub enum Inserted {
    Stored(Message),
    /// Another request with this (author, request_id) is already stored.
    Exists,
    /// The author's rate limit is reached: seconds until the next post fits.
    Limited(i64),
}

/// Checks the author's rate limit and inserts the post in one transaction, so concurrent posts
/// cannot all pass the count. SQLite writes go through one connection, which already serializes
/// them; on PostgreSQL an advisory lock on the author does.
pub async fn insert_limited(
    db: &Db,
    author_id: &str,
    author: &str,
    post: &NewPost,
    stamp: &Stamp,
    limits: &[RateLimit],
) -> Result<Inserted, sqlx::Error> {
    let refs = serde_json::to_string(&post.refs).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let mut tx = db.writer.begin().await?;
    if db.backend == Backend::Postgres {
        sqlx::query("SELECT 1 AS locked FROM (SELECT pg_advisory_xact_lock(hashtext($1))) AS l")
            .bind(author_id)
            .fetch_one(&mut *tx)
            .await?;
    }
    let window = limits.iter().map(|l| l.window_s).max().unwrap_or(0);
    let recent: Vec<i64> =
        sqlx::query_scalar("SELECT created_epoch FROM messages WHERE author_id = $1 AND created_epoch > $2")
            .bind(author_id)
            .bind(stamp.created_epoch - window)
            .fetch_all(&mut *tx)
            .await?;
    if let Some(wait) = retry_after(&recent, stamp.created_epoch, limits) {
        tx.rollback().await?;
        return Ok(Inserted::Limited(wait));
    }
    let done = sqlx::query(
        "INSERT INTO messages (id, author, author_id, agent_id, request_id, body, refs, created_at, created_epoch) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (author_id, request_id) DO NOTHING",
    )
    .bind(&stamp.id)
    .bind(author)
    .bind(author_id)
    .bind(post.agent_id.as_ref().map(|a| a.as_str().to_string()))
    .bind(post.request_id.as_str())
    .bind(&post.body)
    .bind(&refs)
    .bind(&stamp.created_at)
    .bind(stamp.created_epoch)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    if done.rows_affected() == 0 {
        return Ok(Inserted::Exists);
    }
    Ok(Inserted::Stored(Message {
        id: stamp.id.clone(),
        author: author.to_string(),
        agent_id: post.agent_id.as_ref().map(|a| a.as_str().to_string()),
        body: post.body.clone(),
        refs: post.refs.clone(),
        hidden_refs: Vec::new(),
        request_id: post.request_id.as_str().to_string(),
        created_at: stamp.created_at.clone(),
    }))
}

pub async fn seq_of(db: &Db, id: &str) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT seq FROM messages WHERE id = $1").bind(id).fetch_optional(&db.pool).await
}

/// Newest first. Returns one more row than asked when there is a next page.
pub async fn list(db: &Db, f: &MessageFilter) -> Result<(Vec<Message>, bool), sqlx::Error> {
    // What an editor hid leaves every listing.
    let mut clauses = vec!["hidden_at IS NULL".to_string()];
    let mut n = 0;
    let mut next = || {
        n += 1;
        format!("${n}")
    };
    if f.agent.is_some() {
        clauses.push(format!("agent_id = {}", next()));
    }
    if f.author.is_some() {
        clauses.push(format!("author = {}", next()));
    }
    if f.text.is_some() {
        clauses.push(format!("LOWER(body) LIKE {} ESCAPE '\\'", next()));
    }
    if f.since_epoch.is_some() {
        clauses.push(format!("created_epoch >= {}", next()));
    }
    if f.before_seq.is_some() {
        clauses.push(format!("seq < {}", next()));
    }
    let limit = next();
    let filter = format!("WHERE {}", clauses.join(" AND "));
    let sql = format!("SELECT {COLUMNS} FROM messages {filter} ORDER BY seq DESC LIMIT {limit}");
    let mut q = sqlx::query_as::<_, MessageRow>(&sql);
    if let Some(a) = &f.agent {
        q = q.bind(a.clone());
    }
    if let Some(a) = &f.author {
        q = q.bind(a.clone());
    }
    if let Some(t) = &f.text {
        // The text is matched literally: `\`, `%` and `_` in it are escaped. (SQLite's LOWER folds
        // ASCII only, so non-ASCII text matches case-sensitively there.)
        let escaped = t.to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
        q = q.bind(format!("%{escaped}%"));
    }
    if let Some(s) = f.since_epoch {
        q = q.bind(s);
    }
    if let Some(b) = f.before_seq {
        q = q.bind(b);
    }
    let rows = q.bind(i64::from(f.limit) + 1).fetch_all(&db.pool).await?;
    let more = rows.len() > f.limit as usize;
    let mut messages: Vec<Message> = rows.into_iter().take(f.limit as usize).map(Message::from).collect();
    mark_hidden_refs(db, &mut messages).await?;
    Ok((messages, more))
}

/// Messages shown (not hidden).
pub async fn count(db: &Db) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COUNT(*) AS n FROM messages WHERE hidden_at IS NULL").fetch_one(&db.pool).await
}

/// Each message's refs that name a hidden message (hidden messages are few: editors hide them).
async fn mark_hidden_refs(db: &Db, messages: &mut [Message]) -> Result<(), sqlx::Error> {
    if messages.iter().all(|m| m.refs.is_empty()) {
        return Ok(());
    }
    let hidden: std::collections::BTreeSet<String> =
        sqlx::query_scalar::<_, String>("SELECT id FROM messages WHERE hidden_at IS NOT NULL")
            .fetch_all(&db.pool)
            .await?
            .into_iter()
            .collect();
    for m in messages {
        m.hidden_refs = m.refs.iter().filter(|r| hidden.contains(*r)).cloned().collect();
    }
    Ok(())
}

/// A hidden message's row: `COLUMNS` and why, by whom and when it was hidden.
#[derive(sqlx::FromRow)]
struct HiddenRow {
    #[sqlx(flatten)]
    message: MessageRow,
    hidden_reason: String,
    hidden_by: String,
    hidden_at: String,
}

impl From<HiddenRow> for HiddenMessage {
    fn from(r: HiddenRow) -> HiddenMessage {
        HiddenMessage {
            message: r.message.into(),
            reason: r.hidden_reason,
            hidden_by: r.hidden_by,
            hidden_at: r.hidden_at,
        }
    }
}

/// Hides a message (once: hiding it again keeps the first reason). `None`: no such message.
pub async fn hide(
    db: &Db,
    id: &str,
    reason: &str,
    by: &str,
    at: &str,
) -> Result<Option<HiddenMessage>, sqlx::Error> {
    sqlx::query(
        "UPDATE messages SET hidden_reason = $2, hidden_by = $3, hidden_at = $4 WHERE id = $1 AND hidden_at IS NULL",
    )
    .bind(id)
    .bind(reason)
    .bind(by)
    .bind(at)
    .execute(&db.writer)
    .await?;
    let row: Option<HiddenRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS}, hidden_reason, hidden_by, hidden_at FROM messages WHERE id = $1 AND hidden_at IS NOT NULL"
    ))
    .bind(id)
    .fetch_optional(&db.writer)
    .await?;
    Ok(row.map(HiddenMessage::from))
}

/// Hidden messages, most recently hidden first (the editors' audit).
pub async fn hidden(db: &Db, limit: i64) -> Result<Vec<HiddenMessage>, sqlx::Error> {
    let rows: Vec<HiddenRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS}, hidden_reason, hidden_by, hidden_at FROM messages WHERE hidden_at IS NOT NULL \
         ORDER BY hidden_at DESC, seq DESC LIMIT $1"
    ))
    .bind(limit)
    .fetch_all(&db.pool)
    .await?;
    Ok(rows.into_iter().map(HiddenMessage::from).collect())
}
