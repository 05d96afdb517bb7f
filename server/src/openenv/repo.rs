//! OpenEnv submissions, the accounts' quota slots, and the training cluster's connection.

use domain::ids::SubmissionId;
use domain::openenv::admission::{ErrorOrigin, SlotState, SubmissionState};
use domain::openenv::quota::QuotaPolicy;

use crate::db::{Db, Flag};

/// A submission's row, read by column name (`COLUMNS` selects them).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Stored {
    pub account_id: String,
    pub account: String,
    pub submission_id: String,
    pub body_hash: String,
    pub body: String,
    pub images: String,
    pub state: SubmissionState,
    pub slot_state: SlotState,
    pub report: String,
    pub error_origin: Option<String>,
    pub run_id: Option<String>,
    pub probes: String,
    pub accepted_at: String,
    pub updated_at: String,
    /// Admission takes it from then on (its account was past its returned slots' cap).
    pub admit_after_epoch: Option<i64>,
}

const COLUMNS: &str =
    "account_id, account, submission_id, body_hash, body, images, state, slot_state, report, \
    error_origin, run_id, probes, accepted_at, updated_at, admit_after_epoch";

pub async fn get(db: &Db, account_id: &str, submission_id: &str) -> Result<Option<Stored>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM openenv_submissions WHERE account_id = $1 AND submission_id = $2"
    ))
    .bind(account_id)
    .bind(submission_id)
    .fetch_optional(&db.writer)
    .await
}

/// Every submission (the organizer view), or one account's, newest first.
pub async fn list(db: &Db, account_id: Option<&str>) -> Result<Vec<Stored>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM openenv_submissions WHERE ($1 = '' OR account_id = $1) ORDER BY seq DESC LIMIT 500"
    ))
    .bind(account_id.unwrap_or(""))
    .fetch_all(&db.pool)
    .await
}

/// Submissions waiting for admission.
pub async fn validating(db: &Db) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COUNT(*) AS n FROM openenv_submissions WHERE state = 'validating'")
        .fetch_one(&db.pool)
        .await
}

pub struct NewSubmission<'a> {
    pub account_id: &'a str,
    pub account: &'a str,
    pub submission_id: &'a str,
    pub body_hash: &'a str,
    pub body: &'a str,
    pub images: &'a str,
    pub now: &'a str,
    pub epoch: i64,
    /// The quota it takes a slot of; `None` for an exempt account.
    pub quota: Option<&'a QuotaPolicy>,
    /// Admission waits until then (the account is past its returned slots' cap).
    pub admit_after_epoch: Option<i64>,
}

pub enum Accepted {
    Stored(Stored),
    /// This account already used the submission id: the stored record.
    Repeat(Stored),
    /// The account's slot is taken; it frees at this epoch.
    QuotaUsed {
        frees_epoch: i64,
    },
}

/// The account's quota slots as (slot, accepted epoch), held or expired.
async fn slots<'e>(
    exec: impl sqlx::Executor<'e, Database = sqlx::Any>,
    account_id: &str,
) -> Result<Vec<(i64, i64)>, sqlx::Error> {
    sqlx::query_as("SELECT slot, accepted_epoch FROM openenv_quota_slots WHERE account_id = $1")
        .bind(account_id)
        .fetch_all(exec)
        .await
}

/// When each of the account's quota slots was taken (held or expired).
pub async fn slot_epochs(db: &Db, account_id: &str) -> Result<Vec<i64>, sqlx::Error> {
    Ok(slots(&db.pool, account_id).await?.into_iter().map(|(_, e)| e).collect())
}

/// Seconds until one of the account's slots frees, when every one is held now (read before any
/// registry request; the slot itself is taken in `accept`).
pub async fn quota_wait(
    db: &Db,
    account_id: &str,
    policy: &QuotaPolicy,
    epoch: i64,
) -> Result<Option<i64>, sqlx::Error> {
    let epochs: Vec<i64> = slots(&db.pool, account_id).await?.into_iter().map(|(_, e)| e).collect();
    Ok(policy.wait_s(&epochs, epoch))
}

/// Takes one of the account's quota slots (unless it is exempt) and stores the submission, in one
/// transaction. A slot is taken only when free (never taken, accepted a window ago, or returned),
/// and the key (account, slot) lets no two submissions take one, so concurrent submissions by one
/// account are accepted at most `limit` times.
pub async fn accept(db: &Db, n: &NewSubmission<'_>) -> Result<Accepted, sqlx::Error> {
    if let Some(existing) = get(db, n.account_id, n.submission_id).await? {
        return Ok(Accepted::Repeat(existing));
    }
    let mut tx = db.writer.begin().await?;
    if let Some(policy) = n.quota {
        let cutoff = n.epoch - policy.window_s;
        let held = slots(&mut *tx, n.account_id).await?;
        let free = (0..i64::from(policy.limit))
            .filter(|i| held.iter().find(|(slot, _)| slot == i).is_none_or(|(_, at)| *at <= cutoff));
        let mut taken = false;
        for slot in free {
            taken = sqlx::query(
                "INSERT INTO openenv_quota_slots (account_id, slot, submission_id, accepted_epoch) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (account_id, slot) DO UPDATE SET \
                 submission_id = excluded.submission_id, accepted_epoch = excluded.accepted_epoch \
                 WHERE openenv_quota_slots.accepted_epoch <= $5",
            )
            .bind(n.account_id)
            .bind(slot)
            .bind(n.submission_id)
            .bind(n.epoch)
            .bind(cutoff)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if taken {
                break;
            }
        }
        if !taken {
            tx.rollback().await?;
            if let Some(existing) = get(db, n.account_id, n.submission_id).await? {
                return Ok(Accepted::Repeat(existing));
            }
            let epochs: Vec<i64> =
                slots(&db.writer, n.account_id).await?.into_iter().map(|(_, e)| e).collect();
            let wait = policy.wait_s(&epochs, n.epoch).unwrap_or(1);
            return Ok(Accepted::QuotaUsed { frees_epoch: n.epoch + wait });
        }
    }
    let inserted = sqlx::query(
        "INSERT INTO openenv_submissions (account_id, account, submission_id, body_hash, body, images, state, \
         slot_state, report, accepted_at, accepted_epoch, updated_at, admit_after_epoch) \
         VALUES ($1, $2, $3, $4, $5, $6, 'validating', 'held', '{\"errors\":[]}', $7, $8, $7, $9) \
         ON CONFLICT (account_id, submission_id) DO NOTHING",
    )
    .bind(n.account_id)
    .bind(n.account)
    .bind(n.submission_id)
    .bind(n.body_hash)
    .bind(n.body)
    .bind(n.images)
    .bind(n.now)
    .bind(n.epoch)
    .bind(n.admit_after_epoch)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !inserted {
        // The same id, stored concurrently: it keeps its slot, this one takes none.
        tx.rollback().await?;
        let existing = get(db, n.account_id, n.submission_id).await?.ok_or(sqlx::Error::RowNotFound)?;
        return Ok(Accepted::Repeat(existing));
    }
    tx.commit().await?;
    let row = get(db, n.account_id, n.submission_id).await?.ok_or(sqlx::Error::RowNotFound)?;
    Ok(Accepted::Stored(row))
}

/// A cluster node as last recorded.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct NodeRow {
    pub node_id: String,
    pub holder: Option<String>,
    #[sqlx(try_from = "Flag")]
    pub connected: bool,
    pub seen_epoch: i64,
    pub gpus: i64,
    pub gpus_free: i64,
    pub sandboxes_free: i64,
    pub lost_epoch: Option<i64>,
}

/// Every node the arena has heard from, by id.
pub async fn nodes(db: &Db) -> Result<Vec<NodeRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT node_id, holder, connected, seen_epoch, gpus, gpus_free, sandboxes_free, lost_epoch \
         FROM openenv_nodes ORDER BY node_id",
    )
    .fetch_all(&db.pool)
    .await
}

/// A node said hello or sent a heartbeat over connection `holder`: the newest connection holds
/// it (an agent that reconnects elsewhere takes its node along), and a lost node is back.
pub async fn node_seen(
    db: &Db,
    node_id: &str,
    holder: &str,
    epoch: i64,
    (gpus, gpus_free, sandboxes_free): (i64, i64, i64),
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO openenv_nodes (node_id, holder, seen_epoch, gpus, gpus_free, sandboxes_free, connected) \
         VALUES ($1, $2, $3, $4, $5, $6, 1) ON CONFLICT (node_id) DO UPDATE SET holder = excluded.holder, \
         seen_epoch = excluded.seen_epoch, gpus = excluded.gpus, gpus_free = excluded.gpus_free, \
         sandboxes_free = excluded.sandboxes_free, connected = 1, lost_epoch = NULL",
    )
    .bind(node_id)
    .bind(holder)
    .bind(epoch)
    .bind(gpus)
    .bind(gpus_free)
    .bind(sandboxes_free)
    .execute(&db.writer)
    .await?;
    Ok(())
}

/// Connection `holder` closed: its node waits for its agent to come back (unless a newer
/// connection of the node already said hello).
pub async fn node_gone(db: &Db, holder: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE openenv_nodes SET connected = 0 WHERE holder = $1")
        .bind(holder)
        .execute(&db.writer)
        .await?;
    Ok(())
}

/// Nodes not heard from since `before` that are not yet given up, or still hold runs to move (a
/// sweep killed between the two finds them again): the sweep's to give up.
pub async fn nodes_silent_since(db: &Db, before: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT node_id FROM openenv_nodes n WHERE seen_epoch < $1 AND (lost_epoch IS NULL OR EXISTS \
         (SELECT 1 FROM openenv_runs r WHERE r.node_id = n.node_id \
          AND r.state NOT IN ('cleanup', 'completed', 'failed', 'cancelled'))) ORDER BY node_id",
    )
    .bind(before)
    .fetch_all(&db.writer)
    .await
}

/// Gives node `node_id` up, unless it was heard from since `before`: true when this call did.
pub async fn node_lost(db: &Db, node_id: &str, before: i64, epoch: i64) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query(
        "UPDATE openenv_nodes SET connected = 0, lost_epoch = $3 \
         WHERE node_id = $1 AND seen_epoch < $2 AND lost_epoch IS NULL",
    )
    .bind(node_id)
    .bind(before)
    .bind(epoch)
    .execute(&db.writer)
    .await?
    .rows_affected()
        == 1)
}

/// The admitted submissions waiting for a GPU, in acceptance order: (account, submission id).
pub async fn waiting(db: &Db) -> Result<Vec<(String, String)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT account_id, submission_id FROM openenv_submissions \
         WHERE state = 'validated' AND run_id IS NULL ORDER BY seq",
    )
    .fetch_all(&db.pool)
    .await
}

/// Submissions admission may take now: each account's oldest one validating and not waiting, as
/// (account, submission id), oldest first. One per account, so that one account's submissions
/// never hold admission for another's.
pub async fn admissible(db: &Db, now: i64) -> Result<Vec<(String, SubmissionId)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT account_id, submission_id FROM openenv_submissions s WHERE state = 'validating' \
         AND (admit_after_epoch IS NULL OR admit_after_epoch <= $1) \
         AND seq = (SELECT MIN(o.seq) FROM openenv_submissions o WHERE o.account_id = s.account_id \
                    AND o.state = 'validating' AND (o.admit_after_epoch IS NULL OR o.admit_after_epoch <= $1)) \
         ORDER BY seq LIMIT 50",
    )
    .bind(now)
    .fetch_all(&db.pool)
    .await
}

/// When the account's submissions whose slot was returned after `since` were decided, oldest first.
pub async fn returned_since(db: &Db, account_id: &str, since: i64) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT decided_epoch FROM openenv_submissions WHERE account_id = $1 AND slot_state = 'returned' \
         AND decided_epoch > $2 ORDER BY decided_epoch",
    )
    .bind(account_id)
    .bind(since)
    .fetch_all(&db.pool)
    .await
}

/// A submission's admission lease (`crate::engine`): only while it is validating.
pub const ADMISSION_LEASE: crate::engine::RowLease = crate::engine::RowLease {
    table: "openenv_submissions",
    key: &["account_id", "submission_id"],
    leasable: "state = 'validating'",
};

/// Each task's probes so far (JSON), stored after every probe so a restart resumes after it.
pub async fn save_probes(
    db: &Db,
    account_id: &str,
    submission_id: &str,
    probes: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE openenv_submissions SET probes = $3 WHERE account_id = $1 AND submission_id = $2")
        .bind(account_id)
        .bind(submission_id)
        .bind(probes)
        .execute(&db.writer)
        .await?;
    Ok(())
}

/// Admission's verdict, in one transaction: a returned slot frees the account's quota.
#[allow(clippy::too_many_arguments)]
pub async fn decide(
    db: &Db,
    account_id: &str,
    submission_id: &str,
    state: SubmissionState,
    slot: SlotState,
    origin: Option<ErrorOrigin>,
    report: &str,
    probes: &str,
    now: &domain::time::Timestamp,
) -> Result<(), sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    sqlx::query(
        "UPDATE openenv_submissions SET state = $3, slot_state = $4, error_origin = $5, report = $6, probes = $7, \
         updated_at = $8, decided_epoch = $9 WHERE account_id = $1 AND submission_id = $2 AND state = 'validating'",
    )
    .bind(account_id)
    .bind(submission_id)
    .bind(state.as_str())
    .bind(slot.as_str())
    .bind(origin.map(ErrorOrigin::as_str))
    .bind(report)
    .bind(probes)
    .bind(&now.text)
    .bind(now.epoch)
    .execute(&mut *tx)
    .await?;
    if slot == SlotState::Returned {
        sqlx::query("DELETE FROM openenv_quota_slots WHERE account_id = $1 AND submission_id = $2")
            .bind(account_id)
            .bind(submission_id)
            .execute(&mut *tx)
            .await?;
    }
    let subject = format!("submission:{account_id}/{submission_id}");
    crate::endings::record_in(
        &mut tx,
        crate::endings::Kind::SubmissionDecided,
        &subject,
        account_id,
        &now.text,
        now.epoch,
    )
    .await?;
    tx.commit().await?;
    db.ended();
    Ok(())
}

/// The submissions a probe is under way for (their lease is held and not expired).
pub async fn probing(db: &Db, now: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT submission_id FROM openenv_submissions WHERE lease_owner IS NOT NULL AND lease_until >= $1",
    )
    .bind(now)
    .fetch_all(&db.writer)
    .await
}
