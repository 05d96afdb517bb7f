//! Whether the OpenEnv track takes new submissions. An editor pauses it with a reason and resumes
//! it; the state is one database row, so it survives a restart and every replica reads the same.
//! While it is paused, new submissions are answered 503 `CAPACITY_BUSY`; accepted ones are
//! admitted, their runs go on, and every read answers.

use domain::openenv::controls::{Intake, IntakeChange};
use domain::ErrorCode;
use sqlx::Row;

use crate::db::Db;
use crate::http::ApiError;
use crate::identity::Identity;
use crate::AppState;

/// The stored state (no row: open, never changed).
pub async fn read(db: &Db) -> Result<Intake, sqlx::Error> {
    let row = sqlx::query("SELECT is_open, reason, since FROM openenv_intake WHERE id = 1")
        .fetch_optional(&db.pool)
        .await?;
    Ok(match row {
        Some(r) => Intake {
            open: r.try_get::<i64, _>("is_open")? == 1,
            reason: r.try_get("reason")?,
            since: r.try_get("since")?,
        },
        None => Intake::open(),
    })
}

/// Stores a change. Pausing what is paused keeps its `since` (and takes the new reason);
/// resuming what is open changes nothing.
async fn write(db: &Db, open: bool, reason: Option<&str>, at: &str, by: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO openenv_intake (id, is_open, reason, since, changed_by) VALUES (1, $1, $2, $3, $4) \
         ON CONFLICT (id) DO UPDATE SET reason = excluded.reason, changed_by = excluded.changed_by, \
         since = CASE WHEN openenv_intake.is_open = excluded.is_open THEN openenv_intake.since ELSE excluded.since END, \
         is_open = excluded.is_open",
    )
    .bind(i64::from(open))
    .bind(reason)
    .bind(at)
    .bind(by)
    .execute(&db.writer)
    .await?;
    Ok(())
}

/// `POST /api/openenv/intake`: an editor pauses or resumes intake.
pub async fn change(s: &AppState, me: &Identity, change: &IntakeChange) -> Result<Intake, ApiError> {
    if !me.editor {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "only a BenchFlow editor pauses or resumes OpenEnv intake",
        ));
    }
    let reason = change.checked_reason().map_err(|why| ApiError::new(ErrorCode::InvalidReason, why))?;
    let current = read(&s.db).await?;
    if change.open && current.open {
        return Ok(current);
    }
    write(&s.db, change.open, reason.as_deref(), &s.now().text, &me.name).await?;
    tracing::info!(open = change.open, by = %me.name, "OpenEnv intake changed");
    Ok(read(&s.db).await?)
}

/// Refuses a new submission while intake is paused.
pub async fn require_open(s: &AppState) -> Result<(), ApiError> {
    let intake = read(&s.db).await?;
    if intake.open {
        return Ok(());
    }
    let refusal =
        domain::openenv::controls::paused_refusal(intake.reason.as_deref().unwrap_or("no reason given"));
    Err(ApiError::new(refusal.code, refusal.message).retry_after(domain::openenv::controls::PAUSED_RETRY_S))
}
