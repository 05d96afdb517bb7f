//! Submitted collections. `(author_id, track, repo_type, repo_id, commit_sha, entry_path)` is
//! unique, so a repeated submit (even concurrent ones) finds the first record instead of a second.

use domain::collection::record::{EnvironmentRecord, RecordGates, RecordStaticGates, TRACK};
use domain::collection::request::Source;
use domain::collection::Report;

use crate::db::{Db, Flag, JsonText};

const COLUMNS: &str = "id, author, agent_id, challenge_id, track, repo_type, repo_id, revision, commit_sha, \
    entry_path, title, notes, valid, tasks, eligible_tasks, gates_version, legacy, created_at, \
    first_gates_version, rechecked_at, recheck_error, task_identity";

/// A collection's row as `COLUMNS` selects it; `EnvironmentRecord` adds the browse link.
#[derive(sqlx::FromRow)]
struct EnvironmentRow {
    id: String,
    author: String,
    agent_id: Option<String>,
    challenge_id: String,
    track: String,
    repo_type: String,
    repo_id: String,
    revision: String,
    commit_sha: String,
    entry_path: String,
    title: String,
    notes: String,
    #[sqlx(try_from = "Flag")]
    valid: bool,
    tasks: i64,
    eligible_tasks: i64,
    gates_version: String,
    #[sqlx(try_from = "Flag")]
    legacy: bool,
    created_at: String,
    first_gates_version: Option<String>,
    rechecked_at: Option<String>,
    recheck_error: Option<String>,
    /// Task directory → `sha256:` content hash (JSON).
    task_identity: JsonText<std::collections::BTreeMap<String, String>>,
}

impl From<EnvironmentRow> for EnvironmentRecord {
    fn from(row: EnvironmentRow) -> EnvironmentRecord {
        let source_url = match domain::collection::request::RepoType::parse(&row.repo_type) {
            Some(t) => {
                let (owner, name) = row.repo_id.split_once('/').unwrap_or((&row.repo_id, ""));
                Source {
                    repo_type: t,
                    owner: owner.into(),
                    name: name.into(),
                    revision: row.commit_sha.clone(),
                    entry_path: row.entry_path.clone(),
                }
                .browse_url(&row.commit_sha)
            }
            None => String::new(),
        };
        EnvironmentRecord {
            environment_id: row.id,
            title: row.title,
            notes: row.notes,
            agent_id: row.agent_id,
            author: row.author,
            target_challenge_id: Some(row.challenge_id.clone()).filter(|c| c != TRACK),
            challenge_id: row.challenge_id,
            track: row.track,
            repo_type: row.repo_type,
            repo_id: row.repo_id,
            revision: row.revision,
            commit: row.commit_sha,
            entry_path: row.entry_path,
            valid: row.valid,
            tasks: row.tasks,
            eligible_tasks: row.eligible_tasks,
            gates_version: row.gates_version,
            first_gates_version: row.first_gates_version,
            rechecked_at: row.rechecked_at,
            recheck_error: row.recheck_error,
            legacy: row.legacy,
            created_at: row.created_at,
            source_url,
            quality_gates: RecordGates { static_: RecordStaticGates { task_identity: row.task_identity.0 } },
        }
    }
}

/// A collection's row with its stored validation report (`get`).
#[derive(sqlx::FromRow)]
struct WithReport {
    #[sqlx(flatten)]
    row: EnvironmentRow,
    report: String,
}

pub struct NewEnvironment<'a> {
    pub id: &'a str,
    pub author: &'a str,
    pub author_id: &'a str,
    pub agent_id: Option<&'a str>,
    pub challenge_id: &'a str,
    pub source: &'a Source,
    pub commit: &'a str,
    pub title: &'a str,
    pub notes: &'a str,
    pub report: &'a Report,
    pub now: &'a str,
}

/// Inserts unless the same pinned source is already registered by this author; returns whether
/// this call inserted and the stored record.
/// How many collections the author stores.
pub async fn count_by_author(db: &Db, author_id: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COUNT(*) AS n FROM environments WHERE author_id = $1")
        .bind(author_id)
        .fetch_one(&db.pool)
        .await
}

/// Collections one HF account may store.
pub const MAX_COLLECTIONS_PER_ACCOUNT: i64 = 200;

/// Stores a validated collection, or finds the one this author stored from the same pinned
/// source; `None` when the author is at `MAX_COLLECTIONS_PER_ACCOUNT`. The count and the insert
/// are one transaction (an advisory lock on the author on PostgreSQL).
pub async fn submit(
    db: &Db,
    n: NewEnvironment<'_>,
) -> Result<Option<(bool, EnvironmentRecord)>, sqlx::Error> {
    let report_json = serde_json::to_string(n.report).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let mut tx = db.writer.begin().await?;
    if db.backend == crate::db::Backend::Postgres {
        sqlx::query("SELECT 1 AS locked FROM (SELECT pg_advisory_xact_lock(hashtext($1))) AS l")
            .bind(format!("environments:{}", n.author_id))
            .fetch_one(&mut *tx)
            .await?;
    }
    if let Some(row) = pinned(&mut tx, &n).await? {
        tx.rollback().await?;
        return Ok(Some((false, row.into())));
    }
    let held: i64 = sqlx::query_scalar("SELECT COUNT(*) AS n FROM environments WHERE author_id = $1")
        .bind(n.author_id)
        .fetch_one(&mut *tx)
        .await?;
    if held >= MAX_COLLECTIONS_PER_ACCOUNT {
        tx.rollback().await?;
        return Ok(None);
    }
    let inserted = sqlx::query(
        "INSERT INTO environments (id, author, author_id, agent_id, challenge_id, track, repo_type, repo_id, \
         revision, commit_sha, entry_path, title, notes, valid, tasks, eligible_tasks, gates_version, report, created_at, \
         task_identity) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) \
         ON CONFLICT DO NOTHING",
    )
    .bind(n.id)
    .bind(n.author)
    .bind(n.author_id)
    .bind(n.agent_id)
    .bind(n.challenge_id)
    .bind(TRACK)
    .bind(n.source.repo_type.as_str())
    .bind(n.source.repo_id())
    .bind(&n.source.revision)
    .bind(n.commit)
    .bind(&n.source.entry_path)
    .bind(n.title)
    .bind(n.notes)
    .bind(i64::from(n.report.valid))
    .bind(n.report.tasks as i64)
    .bind(n.report.eligible_tasks as i64)
    .bind(&n.report.quality_gates.static_.version)
    .bind(report_json)
    .bind(n.now)
    .bind(identities(n.report)?)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    let row = pinned(&mut tx, &n).await?.ok_or(sqlx::Error::RowNotFound)?;
    tx.commit().await?;
    Ok(Some((inserted, row.into())))
}

/// The author's collection stored from this pinned source, if any.
async fn pinned(
    conn: &mut sqlx::AnyConnection,
    n: &NewEnvironment<'_>,
) -> Result<Option<EnvironmentRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM environments WHERE author_id = $1 AND track = $2 AND repo_type = $3 \
         AND repo_id = $4 AND commit_sha = $5 AND entry_path = $6"
    ))
    .bind(n.author_id)
    .bind(TRACK)
    .bind(n.source.repo_type.as_str())
    .bind(n.source.repo_id())
    .bind(n.commit)
    .bind(&n.source.entry_path)
    .fetch_optional(conn)
    .await
}

pub async fn get(db: &Db, id: &str) -> Result<Option<(EnvironmentRecord, String)>, sqlx::Error> {
    let row: Option<WithReport> =
        sqlx::query_as(&format!("SELECT {COLUMNS}, report FROM environments WHERE id = $1"))
            .bind(id)
            .fetch_optional(&db.pool)
            .await?;
    Ok(row.map(|r| (r.row.into(), r.report)))
}

/// The records of these collections (without their stored validation), by id, in one query.
pub async fn records(
    db: &Db,
    ids: &[&str],
) -> Result<std::collections::BTreeMap<String, EnvironmentRecord>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let marks: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
    let sql = format!("SELECT {COLUMNS} FROM environments WHERE id IN ({})", marks.join(", "));
    let mut query = sqlx::query_as::<_, EnvironmentRow>(&sql);
    for id in ids {
        query = query.bind(*id);
    }
    let rows = query.fetch_all(&db.pool).await?;
    Ok(rows.into_iter().map(|r| (r.id.clone(), r.into())).collect())
}

/// Newest first; legacy records only when asked.
pub async fn list(
    db: &Db,
    challenge_id: Option<&str>,
    legacy: bool,
    limit: i64,
) -> Result<Vec<EnvironmentRecord>, sqlx::Error> {
    let rows: Vec<EnvironmentRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM environments WHERE ($1 = '' OR challenge_id = $1 OR track = $1) AND (legacy = 0 OR $2 = 1) \
         ORDER BY seq DESC LIMIT $3"
    ))
    .bind(challenge_id.unwrap_or(""))
    .bind(i64::from(legacy))
    .bind(limit)
    .fetch_all(&db.pool)
    .await?;
    Ok(rows.into_iter().map(EnvironmentRecord::from).collect())
}

/// The HF account id of the collection's author (ownership is decided by it).
pub async fn author_id(db: &Db, id: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT author_id FROM environments WHERE id = $1")
        .bind(id)
        .fetch_optional(&db.pool)
        .await
}

/// Collections judged by an older gates version and due for a re-check (never tried, or the last
/// try failed a day ago), oldest first.
pub async fn stale(
    db: &Db,
    current: &str,
    retry_before: i64,
    limit: i64,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT id FROM environments WHERE legacy = 0 AND gates_version <> $1 \
         AND (recheck_epoch IS NULL OR recheck_epoch < $2) ORDER BY seq LIMIT $3",
    )
    .bind(current)
    .bind(retry_before)
    .bind(limit)
    .fetch_all(&db.pool)
    .await
}

/// Replaces the judgement of `from` with the re-check's report; false when another server did it
/// first.
pub async fn rechecked(
    db: &Db,
    id: &str,
    from: &str,
    report: &Report,
    now: &str,
    epoch: i64,
) -> Result<bool, sqlx::Error> {
    let report_json = serde_json::to_string(report).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let done = sqlx::query(
        "UPDATE environments SET report = $3, valid = $4, tasks = $5, eligible_tasks = $6, gates_version = $7, \
         first_gates_version = COALESCE(first_gates_version, gates_version), rechecked_at = $8, \
         recheck_error = NULL, recheck_epoch = $9, task_identity = $10 WHERE id = $1 AND gates_version = $2",
    )
    .bind(id)
    .bind(from)
    .bind(report_json)
    .bind(i64::from(report.valid))
    .bind(report.tasks as i64)
    .bind(report.eligible_tasks as i64)
    .bind(&report.quality_gates.static_.version)
    .bind(now)
    .bind(epoch)
    .bind(identities(report)?)
    .execute(&db.writer)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Records why a re-check could not be made; `epoch` decides when it is tried again.
pub async fn recheck_failed(db: &Db, id: &str, error: &str, epoch: i64) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE environments SET recheck_error = $2, recheck_epoch = $3 WHERE id = $1")
        .bind(id)
        .bind(error)
        .bind(epoch)
        .execute(&db.writer)
        .await?;
    Ok(())
}

fn identities(report: &Report) -> Result<String, sqlx::Error> {
    serde_json::to_string(&report.quality_gates.static_.task_identity)
        .map_err(|e| sqlx::Error::Encode(Box::new(e)))
}
