//! The one place where ends are written down: every terminal write of a run (either track), an
//! admission's verdict and a result's review add their ending row in the same transaction as the
//! write itself (`record_in`), once per subject, so nothing can end without it and nothing is
//! notified twice. The webhooks' pass (`crate::webhooks`) turns them into deliveries.

use domain::endings::Track;

use crate::db::Db;

/// What ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    RunEnded,
    SubmissionDecided,
    ResultVerified,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::RunEnded => "run.ended",
            Kind::SubmissionDecided => "submission.decided",
            Kind::ResultVerified => "result.verified",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        [Kind::RunEnded, Kind::SubmissionDecided, Kind::ResultVerified].into_iter().find(|k| k.as_str() == s)
    }
}

/// The subject of a run's ending: its track and id.
pub fn run_subject(track: Track, run_id: &str) -> String {
    format!("{}:{run_id}", track.as_str())
}

/// Adds the ending of `subject` for `account_id` in the caller's transaction; false when it was
/// written before (a write that applied twice notifies once).
pub async fn record_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    kind: Kind,
    subject: &str,
    account_id: &str,
    at: &str,
    epoch: i64,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "INSERT INTO endings (kind, subject, account_id, at, epoch) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (kind, subject) DO NOTHING",
    )
    .bind(kind.as_str())
    .bind(subject)
    .bind(account_id)
    .bind(at)
    .bind(epoch)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A collection run's ending, its author read from its row, in the caller's transaction.
pub async fn collection_run_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
    at: &str,
    epoch: i64,
) -> Result<bool, sqlx::Error> {
    let author: String = sqlx::query_scalar("SELECT author_id FROM runs WHERE id = $1")
        .bind(run_id)
        .fetch_one(&mut **tx)
        .await?;
    record_in(tx, Kind::RunEnded, &run_subject(Track::Collection, run_id), &author, at, epoch).await
}

/// An OpenEnv run's ending, its account read from its row, in the caller's transaction.
pub async fn openenv_run_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
    at: &str,
    epoch: i64,
) -> Result<bool, sqlx::Error> {
    let account: String = sqlx::query_scalar("SELECT account_id FROM openenv_runs WHERE run_id = $1")
        .bind(run_id)
        .fetch_one(&mut **tx)
        .await?;
    record_in(tx, Kind::RunEnded, &run_subject(Track::Openenv, run_id), &account, at, epoch).await
}

/// An ending waiting to be fanned out to webhooks.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Ending {
    pub seq: i64,
    pub kind: String,
    pub subject: String,
    pub account_id: String,
    pub at: String,
    pub epoch: i64,
}

/// Endings not fanned out yet, oldest first.
pub async fn pending(db: &Db, limit: i64) -> Result<Vec<Ending>, sqlx::Error> {
    sqlx::query_as(
        "SELECT seq, kind, subject, account_id, at, epoch FROM endings WHERE fanned_out = 0 ORDER BY seq LIMIT $1",
    )
    .bind(limit)
    .fetch_all(&db.pool)
    .await
}
