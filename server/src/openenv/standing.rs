//! Where a participant stands: their quota (`GET /api/openenv/quota`) and the leaderboard by
//! account (`GET /api/openenv/leaderboard?by=account`), read in pages from a snapshot frozen when
//! its first page was read and kept in the database, so any replica serves the next page.

use domain::openenv::by_account::{self, AccountPage, AccountRow};
use domain::openenv::quota::QuotaView;
use domain::ErrorCode;
use serde::{Deserialize, Serialize};

use crate::http::ApiError;
use crate::identity::Identity;
use crate::AppState;

/// `GET /api/openenv/quota`.
pub async fn quota(s: &AppState, me: &Identity) -> Result<QuotaView, ApiError> {
    let policy = &s.registry.openenv_quota;
    let now = s.now().epoch;
    let held: Vec<i64> = crate::openenv::repo::slot_epochs(&s.db, &me.id)
        .await?
        .into_iter()
        .filter(|at| at + policy.window_s > now)
        .collect();
    let next = held.iter().min().map(|at| at + policy.window_s);
    Ok(QuotaView {
        limit: policy.limit,
        window_s: policy.window_s,
        used: held.len() as u32,
        next_free_at: next
            .and_then(|t| time::OffsetDateTime::from_unix_timestamp(t).ok())
            .map(crate::clock::rfc3339),
        exempt: policy.exempts(&me.id, me.editor),
    })
}

/// A frozen ranking: what a snapshot holds.
#[derive(Serialize, Deserialize)]
struct Frozen {
    benchmark: Option<String>,
    domains: Vec<String>,
    rows: Vec<AccountRow>,
}

/// Snapshots are kept this long.
const KEEP_S: i64 = 3600;

/// The paging parameters, refused alike whichever board is asked for (`INVALID_QUERY`): a
/// `limit` of 1 to 100 and a cursor of this leaderboard's shape.
pub fn check_paging(limit: Option<u32>, cursor: Option<&str>) -> Result<(), ApiError> {
    let invalid = |why: &str| Err(ApiError::new(ErrorCode::InvalidQuery, why.to_string()));
    if limit.is_some_and(|l| !(1..=by_account::MAX_PAGE).contains(&l)) {
        return invalid("`limit` is 1 to 100");
    }
    if cursor.is_some_and(|c| by_account::parse_cursor(c).is_none()) {
        return invalid("`cursor`: not a cursor of this leaderboard");
    }
    Ok(())
}

/// One page of the leaderboard by account: from a new snapshot without a cursor, from the cursor's
/// snapshot with one; `me`'s row pinned.
pub async fn by_account(
    s: &AppState,
    me: Option<&Identity>,
    cursor: Option<&str>,
    limit: u32,
) -> Result<AccountPage, ApiError> {
    check_paging(Some(limit), cursor)?;
    let (id, offset, taken_at, frozen) = match cursor.and_then(by_account::parse_cursor) {
        Some((id, offset)) => {
            let (taken_at, body) = read(s, id, s.now().epoch - KEEP_S).await?.ok_or_else(|| {
                ApiError::new(
                    ErrorCode::NotFound,
                    "the cursor's snapshot is gone (kept an hour): read the first page again",
                )
            })?;
            (id.to_string(), offset, taken_at, body)
        }
        None => {
            let board = crate::openenv::runs::service::leaderboard(s).await?;
            // Named by its content: first pages of an unchanged board share one snapshot, so a
            // public read writes only when the board changed (or to keep it from expiring).
            let id = domain::digest::sha256_hex(&board.json)[..16].to_string();
            match read(s, &id, s.now().epoch - KEEP_S / 2).await? {
                Some((taken_at, frozen)) => (id, 0, taken_at, frozen),
                None => {
                    let frozen = Frozen {
                        benchmark: board.value.benchmark.clone(),
                        domains: board.value.domains.clone(),
                        rows: by_account::by_account(&board.value.rows),
                    };
                    let now = s.now();
                    store(s, &id, &now, &frozen).await?;
                    (id, 0, now.text, frozen)
                }
            }
        }
    };
    let total = frozen.rows.len() as u32;
    let end = offset.saturating_add(limit).min(total);
    let rows = frozen.rows.get(offset as usize..end as usize).unwrap_or_default().to_vec();
    Ok(AccountPage {
        by: "account".into(),
        benchmark: frozen.benchmark,
        domains: frozen.domains,
        snapshot_at: taken_at,
        total,
        rows,
        next_cursor: (end < total).then(|| by_account::cursor(&id, end)),
        me: me.and_then(|me| frozen.rows.iter().find(|r| r.account == me.name).cloned()),
    })
}

async fn store(
    s: &AppState,
    id: &str,
    now: &domain::time::Timestamp,
    frozen: &Frozen,
) -> Result<(), sqlx::Error> {
    let mut tx = s.db.writer.begin().await?;
    sqlx::query("DELETE FROM openenv_board_snapshots WHERE epoch < $1")
        .bind(now.epoch - KEEP_S)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO openenv_board_snapshots (id, taken_at, epoch, body) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (id) DO UPDATE SET taken_at = excluded.taken_at, epoch = excluded.epoch",
    )
    .bind(id)
    .bind(&now.text)
    .bind(now.epoch)
    .bind(serde_json::to_string(frozen).expect("JSON"))
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// The snapshot, if it was stored (or refreshed) at `since` or later.
async fn read(s: &AppState, id: &str, since: i64) -> Result<Option<(String, Frozen)>, sqlx::Error> {
    let row: Option<(String, crate::db::JsonText<Frozen>)> =
        sqlx::query_as("SELECT taken_at, body FROM openenv_board_snapshots WHERE id = $1 AND epoch >= $2")
            .bind(id)
            .bind(since)
            .fetch_optional(&s.db.pool)
            .await?;
    Ok(row.map(|(taken_at, body)| (taken_at, body.0)))
}
