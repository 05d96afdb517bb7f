//! Which stored data has changed, so that reads can be served from memory without a database
//! round trip and are never served stale after a write.
//!
//! Each topic (the budget ledger, the collections, the board) has a version number. A cached read
//! remembers the version it saw *before* it queried, and is reused only while the version is the
//! same. Versions move:
//! - on this server, right after each write it commits (`bump`), so a client always reads its own
//!   writes from the server that made them;
//! - on PostgreSQL, through the database: triggers on the tables send `NOTIFY arena_changes`
//!   with the topic, which every replica's listener turns into a bump. That covers writes made by
//!   other replicas and by hand. While the listener is not connected (at start, after a dropped
//!   connection) nothing is cached, and when it reconnects every topic moves, since notifications
//!   sent in between are lost.
//!
//! SQLite is one process's database (the embedded default), so its writes all come through here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;

use crate::db::Backend;

/// The PostgreSQL channel the triggers notify (see the migration that creates them).
const CHANNEL: &str = "arena_changes";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Topic {
    Ledger,
    Environments,
    Board,
    Runs,
    Results,
    /// OpenEnv runs that completed (the OpenEnv leaderboard).
    Openenv,
}

impl Topic {
    const ALL: [Topic; 6] =
        [Topic::Ledger, Topic::Environments, Topic::Board, Topic::Runs, Topic::Results, Topic::Openenv];

    fn index(self) -> usize {
        self as usize
    }

    /// The payload the triggers send.
    fn parse(payload: &str) -> Option<Topic> {
        match payload {
            "ledger" => Some(Topic::Ledger),
            "environments" => Some(Topic::Environments),
            "board" => Some(Topic::Board),
            "runs" => Some(Topic::Runs),
            "results" => Some(Topic::Results),
            "openenv" => Some(Topic::Openenv),
            _ => None,
        }
    }
}

pub struct Changes {
    versions: [AtomicU64; 6],
    /// Whether every change is seen: always on SQLite, on PostgreSQL while the listener is up.
    watching: AtomicBool,
}

impl Changes {
    pub fn new(backend: Backend) -> Arc<Changes> {
        Arc::new(Changes {
            versions: Default::default(),
            watching: AtomicBool::new(backend == Backend::Sqlite),
        })
    }

    /// The topic's version, or `None` while changes may go unseen (then nothing is cached).
    pub fn version(&self, topic: Topic) -> Option<u64> {
        self.watching.load(Ordering::Acquire).then(|| self.versions[topic.index()].load(Ordering::Acquire))
    }

    /// Marks the topic changed: call it after committing a write.
    pub fn bump(&self, topic: Topic) {
        self.versions[topic.index()].fetch_add(1, Ordering::AcqRel);
    }

    pub fn bump_all(&self) {
        Topic::ALL.into_iter().for_each(|t| self.bump(t));
    }

    /// Follows the triggers' notifications on PostgreSQL for as long as the server runs.
    pub fn spawn_listener(self: &Arc<Self>, url: String) {
        let changes = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = changes.listen(&url).await {
                    tracing::warn!(error = %e, "change listener disconnected; reads bypass the cache until it is back");
                }
                changes.watching.store(false, Ordering::Release);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }

    async fn listen(&self, url: &str) -> Result<(), sqlx::Error> {
        let mut listener = sqlx::postgres::PgListener::connect(url).await?;
        // Without this the listener would reconnect by itself and hide the gap.
        listener.ignore_pool_close_event(false);
        listener.listen(CHANNEL).await?;
        // Anything written before LISTEN took effect was not notified.
        self.bump_all();
        self.watching.store(true, Ordering::Release);
        loop {
            let Some(note) = listener.try_recv().await? else {
                return Err(sqlx::Error::Protocol("the listener's connection closed".into()));
            };
            match Topic::parse(note.payload()) {
                Some(topic) => self.bump(topic),
                None => self.bump_all(),
            }
        }
    }
}

/// A read kept in memory with the JSON the API answers, both made once per version.
pub struct Snapshot<T> {
    pub value: Arc<T>,
    pub json: Bytes,
}

impl<T> Clone for Snapshot<T> {
    fn clone(&self) -> Self {
        Snapshot { value: self.value.clone(), json: self.json.clone() }
    }
}

impl<T: Serialize> Snapshot<T> {
    pub fn new(value: T) -> Result<Snapshot<T>, serde_json::Error> {
        let json = Bytes::from(serde_json::to_vec(&value)?);
        Ok(Snapshot { value: Arc::new(value), json })
    }
}

/// Cached reads of one topic, by key (the query that produced them).
pub struct Cache<K, T> {
    topic: Topic,
    /// Keys are bounded by the callers (a few query shapes), so the map stays small.
    slots: Mutex<HashMap<K, (u64, Snapshot<T>)>>,
}

impl<K: std::hash::Hash + Eq + Clone, T: Serialize> Cache<K, T> {
    pub fn new(topic: Topic) -> Self {
        Cache { topic, slots: Mutex::new(HashMap::new()) }
    }

    /// The snapshot for `key`, made by `fill` when the topic changed since it was last made.
    pub async fn get<E, F>(&self, changes: &Changes, key: K, fill: F) -> Result<Snapshot<T>, E>
    where
        F: std::future::Future<Output = Result<T, E>>,
        E: From<serde_json::Error>,
    {
        // Read the version before querying: a write that lands during the query moves it, and
        // the next read queries again.
        let version = changes.version(self.topic);
        if let Some(v) = version {
            let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((seen, snapshot)) = slots.get(&key) {
                if *seen == v {
                    return Ok(snapshot.clone());
                }
            }
        }
        let snapshot = Snapshot::new(fill.await?)?;
        if let Some(v) = version {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.insert(key, (v, snapshot.clone()));
        }
        Ok(snapshot)
    }
}
