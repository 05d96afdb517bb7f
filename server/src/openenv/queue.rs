//! The cluster's nodes and the queue as the arena reads them from the database (every replica
//! sees the same): whether the cluster is connected, a waiting submission's place, the public
//! counts and the organizers' capacity view. The arithmetic is `domain::openenv::queue`.

use std::collections::BTreeMap;

use domain::openenv::queue::{self, CapacityView, ClusterCounts, Node, NodeView, QueuePlace};
use domain::openenv::run::RunState;

use crate::http::ApiError;
use crate::openenv::repo::NodeRow;
use crate::AppState;

/// Runs that ended within this window set the typical run's length.
const TYPICAL_WINDOW_S: i64 = 7 * 24 * 3600;
const DAY_S: i64 = 24 * 3600;

/// The cluster and the queue, read once for a request.
pub struct Snapshot {
    rows: Vec<NodeRow>,
    nodes: Vec<Node>,
    live: BTreeMap<String, Vec<String>>,
    /// Waiting submissions in acceptance order: (account, submission id).
    pub waiting: Vec<(String, String)>,
    typical_s: i64,
    recent: crate::openenv::runs::repo::Recent,
    now: i64,
}

fn rfc3339(epoch: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(epoch).map(crate::clock::rfc3339).unwrap_or_default()
}

/// A node is connected while its connection is open and it was heard from within the relay's
/// grace period, and it was not given up.
fn connected(s: &AppState, row: &NodeRow, now: i64) -> bool {
    row.connected && row.lost_epoch.is_none() && now - row.seen_epoch <= s.reconcile.relay_grace_s
}

pub async fn snapshot(s: &AppState) -> Result<Snapshot, ApiError> {
    let now = s.now().epoch;
    let rows = crate::openenv::repo::nodes(&s.db).await?;
    let live_runs = crate::openenv::runs::repo::in_states(&s.db, RunState::LIVE).await?;
    let mut running: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut live: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for run in &live_runs {
        let node = run.node_id.clone().unwrap_or_default();
        running.entry(node.clone()).or_default().push(run.started_epoch.map_or(0, |t| (now - t).max(0)));
        live.entry(node).or_default().push(run.run_id.clone());
    }
    let nodes = rows
        .iter()
        .map(|r| Node {
            node_id: r.node_id.clone(),
            connected: connected(s, r, now),
            seen_epoch: r.seen_epoch,
            gpus: u32::try_from(r.gpus.max(0)).unwrap_or(u32::MAX),
            gpus_free: u32::try_from(r.gpus_free.max(0)).unwrap_or(u32::MAX),
            running_s: running.get(&r.node_id).cloned().unwrap_or_default(),
        })
        .collect();
    let recent = crate::openenv::runs::repo::recent(&s.db, now - DAY_S, now - TYPICAL_WINDOW_S).await?;
    Ok(Snapshot {
        rows,
        nodes,
        live,
        waiting: crate::openenv::repo::waiting(&s.db).await?,
        typical_s: queue::typical_run_s(&recent.durations, domain::openenv::episode::RUN_LIMIT_S as i64),
        recent,
        now,
    })
}

impl Snapshot {
    /// Whether any node is connected.
    pub fn connected(&self) -> bool {
        self.nodes.iter().any(|n| n.connected)
    }

    /// The place of a waiting submission; None for one that does not wait.
    pub fn place(&self, account_id: &str, submission_id: &str) -> Option<QueuePlace> {
        let index = self.waiting.iter().position(|(a, id)| a == account_id && id == submission_id)?;
        let wait = queue::wait_s(&self.nodes, index + 1, self.typical_s);
        Some(QueuePlace {
            position: index as u32 + 1,
            ahead: index as u32,
            estimated_start_at: wait.map(|w| rfc3339(self.now + w)),
        })
    }
}

/// Whether the training cluster is connected: any of its nodes.
pub async fn is_connected(s: &AppState) -> Result<bool, ApiError> {
    let now = s.now().epoch;
    Ok(crate::openenv::repo::nodes(&s.db).await?.iter().any(|r| connected(s, r, now)))
}

/// `GET /api/openenv`'s counts.
pub async fn counts(s: &AppState) -> Result<ClusterCounts, ApiError> {
    let snap = snapshot(s).await?;
    Ok(queue::counts(&snap.nodes, snap.waiting.len() as u32, &snap.recent.waits))
}

/// `GET /api/openenv/capacity`: every node, the queue, the last day's use and the alerts.
pub async fn capacity(s: &AppState) -> Result<CapacityView, ApiError> {
    let snap = snapshot(s).await?;
    let (now, recent) = (snap.now, &snap.recent);
    let views: Vec<NodeView> = snap
        .rows
        .iter()
        .zip(&snap.nodes)
        .map(|(r, n)| NodeView {
            node_id: r.node_id.clone(),
            connected: n.connected,
            last_heartbeat_at: rfc3339(r.seen_epoch),
            gpus: n.gpus,
            gpus_free: n.gpus_free,
            sandboxes_free: u32::try_from(r.sandboxes_free.max(0)).unwrap_or(u32::MAX),
            runs: snap.live.get(&r.node_id).cloned().unwrap_or_default(),
            lost_at: r.lost_epoch.map(rfc3339),
        })
        .collect();
    let queue_length = snap.waiting.len() as u32;
    let projected_empty_s = if queue_length == 0 {
        Some(0)
    } else {
        queue::wait_s(&snap.nodes, snap.waiting.len(), snap.typical_s).map(|w| w + snap.typical_s)
    };
    // Silent: not connected, yet holding runs or not given up.
    let silent: Vec<&str> = views
        .iter()
        .filter(|v| !v.connected && (v.lost_at.is_none() || !v.runs.is_empty()))
        .map(|v| v.node_id.as_str())
        .collect();
    let gpu_s: i64 = recent.gpu_spans.iter().map(|(start, end)| queue::gpu_s_within(*start, *end, now)).sum();
    Ok(CapacityView {
        alerts: queue::alerts(&views, &silent, queue_length, projected_empty_s),
        nodes: views,
        queue_length,
        runs_started_24h: recent.started,
        gpu_hours_24h: (gpu_s as f64 / 36.0).round() / 100.0,
        projected_empty_s,
        typical_run_s: snap.typical_s,
    })
}
