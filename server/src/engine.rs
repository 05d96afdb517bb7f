//! The one engine every track's long-running records go through: collection runs and baselines
//! being launched (`runs::launch`) and followed (`runs::reconcile`), OpenEnv submissions in
//! admission (`openenv::admission`) and OpenEnv runs waiting in the cluster's queue
//! (`openenv::runs`). A track says which of its records are due, how one is leased, and what one
//! step on it is. The engine takes each due record's lease (a record another server holds is left
//! to it), renews it every third of its length while the step runs, releases it afterwards, and
//! logs a failed step with the record's id. So no two servers, and no two tasks of one server,
//! ever work on one record at once, whatever the track; and a server that dies mid-step leaves
//! a lease that lapses, after which the next pass anywhere resumes the record.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;

use crate::AppState;

/// A kind of record the engine works on.
#[async_trait]
pub trait Track: Send + Sync {
    /// A record's key.
    type Key: Display + Send + Sync;
    /// What a record is called in logs (`run`, `submission`).
    const RECORD: &'static str;

    /// Records worked on at once in a pass.
    fn at_once(&self) -> usize;
    /// How long a lease lasts unrenewed (seconds; at least 3).
    fn lease_s(&self, s: &AppState) -> i64;
    /// The records a pass takes a step on, in the order they came.
    async fn due(&self, s: &AppState) -> anyhow::Result<Vec<Self::Key>>;
    /// Where the records' leases are kept.
    const LEASE: RowLease;
    /// The record's key, column by column as `LEASE.key` names them.
    fn key_values(key: &Self::Key) -> Vec<&str>;
    /// One step on one record, under its lease: whether it changed, or why the step failed (the
    /// next pass tries again), with its causes.
    async fn step(&self, s: &AppState, key: &Self::Key) -> anyhow::Result<bool>;
}

/// A track's leases: the `lease_owner` and `lease_until` columns of one table, its rows named by
/// `key`'s columns; a row is leasable when free or lapsed and, when `leasable` is not empty, when
/// that condition holds too. The same SQL on both backends, one place for every track.
pub struct RowLease {
    pub table: &'static str,
    pub key: &'static [&'static str],
    /// A condition a row must meet to be leased (`state = 'validating'`), or empty.
    pub leasable: &'static str,
}

impl RowLease {
    /// `k1 = $first AND k2 = $first+1 …`.
    fn key_clause(&self, first: usize) -> String {
        let cols: Vec<String> =
            self.key.iter().enumerate().map(|(i, c)| format!("{c} = ${}", first + i)).collect();
        cols.join(" AND ")
    }

    fn bind<'q>(
        &self,
        mut q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
        values: &[&'q str],
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
        debug_assert_eq!(values.len(), self.key.len(), "a key value per key column of {}", self.table);
        for v in values {
            q = q.bind(*v);
        }
        q
    }

    /// Takes the row's lease for `owner` until `until`; false while anyone else holds it.
    pub async fn take(
        &self,
        db: &crate::db::Db,
        values: &[&str],
        owner: &str,
        now: i64,
        until: i64,
    ) -> Result<bool, sqlx::Error> {
        let extra = if self.leasable.is_empty() { String::new() } else { format!(" AND {}", self.leasable) };
        let sql = format!(
            "UPDATE {} SET lease_owner = $1, lease_until = $3 WHERE {} AND (lease_owner IS NULL OR lease_until < $2){extra}",
            self.table,
            self.key_clause(4)
        );
        let q = sqlx::query(&sql).bind(owner).bind(now).bind(until);
        Ok(self.bind(q, values).execute(&db.writer).await?.rows_affected() == 1)
    }

    /// Extends a lease `owner` still holds; false when it no longer does.
    pub async fn renew(
        &self,
        db: &crate::db::Db,
        values: &[&str],
        owner: &str,
        until: i64,
    ) -> Result<bool, sqlx::Error> {
        let sql = format!(
            "UPDATE {} SET lease_until = $2 WHERE {} AND lease_owner = $1",
            self.table,
            self.key_clause(3)
        );
        let q = sqlx::query(&sql).bind(owner).bind(until);
        Ok(self.bind(q, values).execute(&db.writer).await?.rows_affected() == 1)
    }

    pub async fn release(&self, db: &crate::db::Db, values: &[&str], owner: &str) -> Result<(), sqlx::Error> {
        let sql = format!(
            "UPDATE {} SET lease_owner = NULL, lease_until = NULL WHERE {} AND lease_owner = $1",
            self.table,
            self.key_clause(2)
        );
        self.bind(sqlx::query(&sql).bind(owner), values).execute(&db.writer).await?;
        Ok(())
    }
}

/// Runs `work` on one record under its lease: `None` when another holder has the lease.
pub async fn leased<T: Track, R>(
    s: &AppState,
    track: &T,
    key: &T::Key,
    work: impl Future<Output = R>,
) -> Result<Option<R>, sqlx::Error> {
    let holder = s.lease_holder();
    let lease_s = track.lease_s(s).max(3);
    let now = s.now().epoch;
    let lease = &T::LEASE;
    let values = T::key_values(key);
    if !lease.take(&s.db, &values, &holder, now, now + lease_s).await? {
        return Ok(None);
    }
    let renew = async {
        loop {
            tokio::time::sleep(Duration::from_secs((lease_s / 3) as u64)).await;
            match lease.renew(&s.db, &values, &holder, s.now().epoch + lease_s).await {
                Ok(true) => {}
                Ok(false) => tracing::warn!(record = T::RECORD, id = %key, "the lease was lost"),
                Err(e) => {
                    tracing::warn!(record = T::RECORD, id = %key, error = %e, "renewing the lease failed")
                }
            }
        }
    };
    let out = tokio::select! {
        out = work => out,
        never = renew => never,
    };
    lease.release(&s.db, &values, &holder).await?;
    Ok(Some(out))
}

/// One pass of a track: a step on each due record under its lease, `at_once` at a time.
/// Answers how many records changed.
pub async fn pass<T: Track>(s: &AppState, track: &T) -> anyhow::Result<usize> {
    let keys = track.due(s).await?;
    let outcomes: Vec<Result<bool, sqlx::Error>> = futures_util::stream::iter(keys)
        .map(|key| async move {
            let stepped = leased(s, track, &key, track.step(s, &key)).await?;
            Ok(match stepped {
                Some(Ok(changed)) => changed,
                Some(Err(e)) => {
                    tracing::warn!(record = T::RECORD, id = %key, error = format!("{e:#}"), "a step failed this pass");
                    false
                }
                // Another server has it this pass.
                None => false,
            })
        })
        .buffer_unordered(track.at_once().max(1))
        .collect()
        .await;
    let mut changed = 0;
    for outcome in outcomes {
        if outcome? {
            changed += 1;
        }
    }
    Ok(changed)
}
