//! Webhooks, their deliveries and each delivery's attempts.

use crate::db::Db;
use crate::endings::Ending;

/// A webhook as stored (its secret signs its deliveries).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Webhook {
    pub id: String,
    pub account_id: String,
    pub url: String,
    pub events: String,
    pub format: String,
    pub secret: String,
    pub created_at: String,
}

const COLUMNS: &str = "id, account_id, url, events, format, secret, created_at";

/// Stores a webhook unless the account already keeps `max`: false then. One transaction, so that
/// concurrent registrations cannot pass the limit together on SQLite; on PostgreSQL the count and
/// the insert are serialised by locking the account's rows.
pub async fn insert(db: &Db, w: &Webhook, epoch: i64, max: i64) -> Result<bool, sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    let kept = match db.backend {
        crate::db::Backend::Postgres => {
            // An advisory lock on the account: a count-then-insert cannot race another's.
            sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
                .bind(&w.account_id)
                .execute(&mut *tx)
                .await?;
            count_in(&mut tx, &w.account_id).await?
        }
        crate::db::Backend::Sqlite => count_in(&mut tx, &w.account_id).await?,
    };
    if kept >= max {
        tx.rollback().await?;
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO webhooks (id, account_id, url, events, format, secret, created_at, created_epoch) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&w.id)
    .bind(&w.account_id)
    .bind(&w.url)
    .bind(&w.events)
    .bind(&w.format)
    .bind(&w.secret)
    .bind(&w.created_at)
    .bind(epoch)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

async fn count_in(tx: &mut sqlx::Transaction<'_, sqlx::Any>, account_id: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COUNT(*) AS n FROM webhooks WHERE account_id = $1")
        .bind(account_id)
        .fetch_one(&mut **tx)
        .await
}

pub async fn of_account(db: &Db, account_id: &str) -> Result<Vec<Webhook>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM webhooks WHERE account_id = $1 ORDER BY created_epoch, id"
    ))
    .bind(account_id)
    .fetch_all(&db.pool)
    .await
}

pub async fn get(db: &Db, account_id: &str, id: &str) -> Result<Option<Webhook>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM webhooks WHERE account_id = $1 AND id = $2"))
        .bind(account_id)
        .bind(id)
        .fetch_optional(&db.pool)
        .await
}

/// Deletes an account's webhook and fails what it had still to deliver, in one transaction; false
/// (and nothing changed) when the account has no such webhook.
pub async fn delete(db: &Db, account_id: &str, id: &str) -> Result<bool, sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    let gone = sqlx::query("DELETE FROM webhooks WHERE account_id = $1 AND id = $2")
        .bind(account_id)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
        == 1;
    if !gone {
        tx.rollback().await?;
        return Ok(false);
    }
    sqlx::query("UPDATE webhook_deliveries SET state = 'failed' WHERE webhook_id = $1 AND state = 'pending'")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(true)
}

/// Replaces an account's webhook's (sealed) secret; false when the account has no such webhook.
pub async fn set_secret(db: &Db, account_id: &str, id: &str, sealed: &str) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query("UPDATE webhooks SET secret = $3 WHERE account_id = $1 AND id = $2")
        .bind(account_id)
        .bind(id)
        .bind(sealed)
        .execute(&db.writer)
        .await?
        .rows_affected()
        == 1)
}

/// One delivery to add for an ending.
pub struct NewDelivery<'a> {
    pub id: &'a str,
    pub webhook_id: &'a str,
    pub event: &'a str,
    pub body: &'a str,
}

/// Adds an ending's deliveries and marks it fanned out, in one transaction; a delivery already
/// there for (webhook, ending) is kept as it is.
pub async fn fan_out(
    db: &Db,
    ending: &Ending,
    deliveries: &[NewDelivery<'_>],
    now: i64,
) -> Result<(), sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    for d in deliveries {
        sqlx::query(
            "INSERT INTO webhook_deliveries (id, webhook_id, ending_seq, event, body, state, next_epoch, created_epoch, \
             ended_epoch) VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6, $7) ON CONFLICT (webhook_id, ending_seq) DO NOTHING",
        )
        .bind(d.id)
        .bind(d.webhook_id)
        .bind(ending.seq)
        .bind(d.event)
        .bind(d.body)
        .bind(now)
        .bind(ending.epoch)
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query("UPDATE endings SET fanned_out = 1 WHERE seq = $1")
        .bind(ending.seq)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// A delivery as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Delivery {
    pub id: String,
    pub webhook_id: String,
    pub event: String,
    pub body: String,
    pub state: String,
    pub attempts: i64,
    pub next_epoch: i64,
    pub created_epoch: i64,
    pub ended_epoch: i64,
    pub delivered_epoch: Option<i64>,
}

const DELIVERY_COLUMNS: &str =
    "id, webhook_id, event, body, state, attempts, next_epoch, created_epoch, ended_epoch, delivered_epoch";

/// Deliveries due now (pending, their next try passed), oldest first.
pub async fn due(db: &Db, now: i64, limit: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT id FROM webhook_deliveries WHERE state = 'pending' AND next_epoch <= $1 ORDER BY next_epoch, id LIMIT $2",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(&db.pool)
    .await
}

pub async fn delivery(db: &Db, id: &str) -> Result<Option<Delivery>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = $1"))
        .bind(id)
        .fetch_optional(&db.writer)
        .await
}

/// One attempt of a delivery as stored (in order of its number).
#[derive(Debug, Clone)]
pub struct Attempt {
    pub at: String,
    pub status: Option<i64>,
    pub error: Option<String>,
}

/// A webhook's newest deliveries, each with its attempts in order, read by one statement: an
/// attempt and the delivery's state are written in one transaction, and two reads could see the
/// attempt without the state it led to.
pub async fn deliveries_with_attempts(
    db: &Db,
    webhook_id: &str,
    limit: i64,
) -> Result<Vec<(Delivery, Vec<Attempt>)>, sqlx::Error> {
    let rows: Vec<DeliveryAttempt> = sqlx::query_as(&format!(
        "SELECT d.id, d.webhook_id, d.event, d.body, d.state, d.attempts, d.next_epoch, d.created_epoch, \
         d.ended_epoch, d.delivered_epoch, a.n, a.at, a.status, a.error \
         FROM (SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE webhook_id = $1 \
               ORDER BY created_epoch DESC, id LIMIT $2) d \
         LEFT JOIN webhook_attempts a ON a.delivery_id = d.id \
         ORDER BY d.created_epoch DESC, d.id, a.n"
    ))
    .bind(webhook_id)
    .bind(limit)
    .fetch_all(&db.pool)
    .await?;
    let mut out: Vec<(Delivery, Vec<Attempt>)> = Vec::new();
    for row in rows {
        let attempt =
            row.n.map(|_| Attempt { at: row.at.unwrap_or_default(), status: row.status, error: row.error });
        match out.last_mut() {
            Some((d, attempts)) if d.id == row.delivery.id => attempts.extend(attempt),
            _ => out.push((row.delivery, attempt.into_iter().collect())),
        }
    }
    Ok(out)
}

/// A delivery with one of its attempts (`n` null: none yet), as the join reads them.
#[derive(sqlx::FromRow)]
struct DeliveryAttempt {
    #[sqlx(flatten)]
    delivery: Delivery,
    n: Option<i64>,
    at: Option<String>,
    status: Option<i64>,
    error: Option<String>,
}

/// What one attempt came to: delivered, tried again at `next`, or given up.
pub enum AfterAttempt {
    Delivered,
    Again { next_epoch: i64 },
    GivenUp,
}

/// Records an attempt and the delivery's next state, in one transaction; only from the attempt
/// count it was read at (two servers never both count one attempt).
pub async fn attempted(
    db: &Db,
    d: &Delivery,
    at: &domain::time::Timestamp,
    status: Option<u16>,
    error: Option<&str>,
    after: AfterAttempt,
) -> Result<bool, sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    let (state, next, delivered) = match after {
        AfterAttempt::Delivered => ("delivered", d.next_epoch, Some(at.epoch)),
        AfterAttempt::Again { next_epoch } => ("pending", next_epoch, None),
        AfterAttempt::GivenUp => ("failed", d.next_epoch, None),
    };
    let moved = sqlx::query(
        "UPDATE webhook_deliveries SET state = $2, attempts = attempts + 1, next_epoch = $3, delivered_epoch = $4 \
         WHERE id = $1 AND attempts = $5 AND state = 'pending'",
    )
    .bind(&d.id)
    .bind(state)
    .bind(next)
    .bind(delivered)
    .bind(d.attempts)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !moved {
        tx.rollback().await?;
        return Ok(false);
    }
    sqlx::query("INSERT INTO webhook_attempts (delivery_id, n, at, epoch, status, error) VALUES ($1, $2, $3, $4, $5, $6)")
        .bind(&d.id)
        .bind(d.attempts + 1)
        .bind(&at.text)
        .bind(at.epoch)
        .bind(status.map(i64::from))
        .bind(error)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(true)
}

/// What a redelivery came to.
pub enum Redelivered {
    Queued,
    /// The account has no such webhook, or the webhook no such delivery.
    NoSuch,
    /// The webhook's redeliveries in this window are spent: the window ends at this epoch.
    Spent {
        until_epoch: i64,
    },
}

/// Sends an account's delivery again now (pending, due at once, its attempts kept), counted
/// against its webhook's `max` redeliveries per `window_s`: the count and the delivery move in one
/// transaction, and the count only while it is below `max` (two servers cannot both pass it).
pub async fn redeliver(
    db: &Db,
    account_id: &str,
    webhook_id: &str,
    delivery_id: &str,
    now: i64,
    (max, window_s): (i64, i64),
) -> Result<Redelivered, sqlx::Error> {
    let mut tx = db.writer.begin().await?;
    let exists: Option<i64> = sqlx::query_scalar(
        "SELECT w.redelivery_window FROM webhooks w JOIN webhook_deliveries d ON d.webhook_id = w.id \
         WHERE w.account_id = $1 AND w.id = $2 AND d.id = $3",
    )
    .bind(account_id)
    .bind(webhook_id)
    .bind(delivery_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(window) = exists else {
        tx.rollback().await?;
        return Ok(Redelivered::NoSuch);
    };
    let counted = sqlx::query(
        "UPDATE webhooks SET \
           redeliveries = CASE WHEN redelivery_window <= $3 THEN 1 ELSE redeliveries + 1 END, \
           redelivery_window = CASE WHEN redelivery_window <= $3 THEN $4 ELSE redelivery_window END \
         WHERE account_id = $1 AND id = $2 AND (redelivery_window <= $3 OR redeliveries < $5)",
    )
    .bind(account_id)
    .bind(webhook_id)
    .bind(now - window_s)
    .bind(now)
    .bind(max)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !counted {
        tx.rollback().await?;
        return Ok(Redelivered::Spent { until_epoch: window + window_s });
    }
    sqlx::query(
        "UPDATE webhook_deliveries SET state = 'pending', next_epoch = $3, delivered_epoch = NULL \
         WHERE id = $1 AND webhook_id = $2",
    )
    .bind(delivery_id)
    .bind(webhook_id)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Redelivered::Queued)
}

/// The leases of deliveries being sent (`crate::engine`).
pub const DELIVERY_LEASE: crate::engine::RowLease =
    crate::engine::RowLease { table: "webhook_deliveries", key: &["id"], leasable: "state = 'pending'" };
