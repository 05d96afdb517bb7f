//! The OpenEnv track's queue and the cluster's capacity (issue 70): where an admitted submission
//! stands in line, when its run may start, and the figures participants and organizers read.
//!
//! The cluster is any number of nodes, each a cluster agent with its GPUs; runs start in
//! acceptance order on whichever node has a free GPU. The estimates here are arithmetic on what
//! the nodes report and on how long recent runs took: no clock, no storage.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

/// A node silent this long (no hello or heartbeat) is lost: it gets no new runs, its runs that
/// never started go back to the head of the queue and those that were training fail
/// `RUN_NODE_LOST` (`ARENA_NODE_LOST_S`).
pub const NODE_LOST_S: i64 = 600;

/// Past this projected wait, the organizers' page raises an alert.
pub const LONG_WAIT_S: i64 = 24 * 3600;

/// What one node last said, and its runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub node_id: String,
    /// Heard from within the relay grace period, over a connection still open.
    pub connected: bool,
    pub seen_epoch: i64,
    pub gpus: u32,
    pub gpus_free: u32,
    /// Seconds each of its live runs has been on its GPU (0 for one not started yet).
    pub running_s: Vec<i64>,
}

/// How long a run takes, for the estimates: the median of recent runs' durations (from the
/// trainer's start to the end), or `limit_s`, the run's limit, when none ended recently (every run
/// ends within it).
pub fn typical_run_s(recent_durations: &[i64], limit_s: i64) -> i64 {
    let mut d: Vec<i64> = recent_durations.iter().copied().filter(|d| *d >= 0).collect();
    if d.is_empty() {
        return limit_s;
    }
    d.sort_unstable();
    d[d.len() / 2].max(1)
}

/// Seconds until each connected GPU frees: 0 for a free one, the rest of a typical run for a busy
/// one (at least a minute: a run past the typical length is about to end, not ended).
fn gpu_free_in(nodes: &[Node], typical_s: i64) -> Vec<i64> {
    let mut out = Vec::new();
    for node in nodes.iter().filter(|n| n.connected) {
        let busy = node.gpus.saturating_sub(node.gpus_free) as usize;
        out.extend(std::iter::repeat_n(0, node.gpus_free as usize));
        let mut running = node.running_s.clone();
        running.sort_unstable_by_key(|s| Reverse(*s));
        for i in 0..busy {
            let elapsed = running.get(i).copied().unwrap_or(0);
            out.push((typical_s - elapsed).max(60));
        }
    }
    out
}

/// Seconds until the run at `position` (1-based) in the queue starts, if every GPU takes the next
/// run as it frees and each run takes `typical_s`; None when no GPU is connected.
pub fn wait_s(nodes: &[Node], position: usize, typical_s: i64) -> Option<i64> {
    let mut free: BinaryHeap<Reverse<i64>> = gpu_free_in(nodes, typical_s).into_iter().map(Reverse).collect();
    let mut start = None;
    for _ in 0..position.max(1) {
        let Reverse(at) = free.pop()?;
        start = Some(at);
        free.push(Reverse(at + typical_s));
    }
    start
}

/// A waiting submission's place: `position` is 1-based, `ahead` the submissions before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvQueuePlace))]
pub struct QueuePlace {
    pub position: u32,
    pub ahead: u32,
    /// When its run is expected to start (RFC 3339): from the GPUs the cluster reports and the
    /// median duration of recent runs; null while no GPU is connected.
    pub estimated_start_at: Option<String>,
}

/// `GET /api/openenv`'s public figures of the cluster and the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvClusterCounts))]
pub struct ClusterCounts {
    pub nodes_connected: u32,
    pub gpus_busy: u32,
    pub gpus_free: u32,
    /// Admitted submissions whose run has not started.
    pub runs_waiting: u32,
    /// The median time from admission to a GPU of the runs started in the last 24 hours (null
    /// when none started).
    pub median_wait_s: Option<i64>,
}

pub fn counts(nodes: &[Node], runs_waiting: u32, waits_last_day: &[i64]) -> ClusterCounts {
    let connected: Vec<&Node> = nodes.iter().filter(|n| n.connected).collect();
    let gpus: u32 = connected.iter().map(|n| n.gpus).sum();
    let free: u32 = connected.iter().map(|n| n.gpus_free.min(n.gpus)).sum();
    let mut waits: Vec<i64> = waits_last_day.to_vec();
    waits.sort_unstable();
    ClusterCounts {
        nodes_connected: connected.len() as u32,
        gpus_busy: gpus - free,
        gpus_free: free,
        runs_waiting,
        median_wait_s: waits.get(waits.len() / 2).copied(),
    }
}

/// One node as organizers see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvNode))]
pub struct NodeView {
    pub node_id: String,
    pub connected: bool,
    /// Its last hello or heartbeat (RFC 3339).
    pub last_heartbeat_at: String,
    pub gpus: u32,
    pub gpus_free: u32,
    pub sandboxes_free: u32,
    /// Its live runs.
    pub runs: Vec<String>,
    /// When the arena gave it up, silent past the bound (RFC 3339).
    pub lost_at: Option<String>,
}

/// `GET /api/openenv/capacity` (editors).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvCapacity))]
pub struct CapacityView {
    pub nodes: Vec<NodeView>,
    pub queue_length: u32,
    pub runs_started_24h: u32,
    /// GPU-hours spent in the last 24 hours: each run's time on its GPU within the window.
    pub gpu_hours_24h: f64,
    /// How long the queue would take to empty: the last one's start plus a typical run (null
    /// while no GPU is connected; 0 for an empty queue).
    pub projected_empty_s: Option<i64>,
    /// The median duration of recent runs the projections use (the run limit when none ended).
    pub typical_run_s: i64,
    /// What needs an organizer, in words.
    pub alerts: Vec<String>,
}

/// A run's time on its GPU within the last day, in seconds.
pub fn gpu_s_within(started: i64, ended: Option<i64>, now: i64) -> i64 {
    let from = started.max(now - 24 * 3600);
    (ended.unwrap_or(now).min(now) - from).max(0)
}

/// The alerts: a node silent past the relay's grace, and a projected wait past a day.
pub fn alerts(
    nodes: &[NodeView],
    silent: &[&str],
    queue_length: u32,
    projected_empty_s: Option<i64>,
) -> Vec<String> {
    let mut out = Vec::new();
    for id in silent {
        let runs = nodes.iter().find(|n| n.node_id == *id).map_or(0, |n| n.runs.len());
        out.push(format!(
            "node `{id}` went silent (last heard at {}), holding {runs} live run{}",
            nodes.iter().find(|n| n.node_id == *id).map_or("?", |n| n.last_heartbeat_at.as_str()),
            if runs == 1 { "" } else { "s" }
        ));
    }
    match projected_empty_s {
        Some(s) if s > LONG_WAIT_S => out.push(format!(
            "the queue of {queue_length} would take {:.1} h to empty at today's capacity (over 24 h): add GPUs or pause intake",
            s as f64 / 3600.0
        )),
        None if queue_length > 0 => {
            out.push(format!("{queue_length} submissions wait and no GPU is connected"))
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, gpus: u32, free: u32, running: &[i64]) -> Node {
        Node {
            node_id: id.into(),
            connected: true,
            seen_epoch: 0,
            gpus,
            gpus_free: free,
            running_s: running.to_vec(),
        }
    }

    #[test]
    fn the_typical_run_is_the_median_or_the_limit() {
        assert_eq!(typical_run_s(&[], 14_400), 14_400);
        assert_eq!(typical_run_s(&[300, 100, 200], 14_400), 200);
        assert_eq!(typical_run_s(&[-5], 14_400), 14_400, "a negative duration is no record");
    }

    #[test]
    fn a_queue_waits_for_gpus_in_turn() {
        // Two nodes of one GPU: one free, one an hour into a two-hour run.
        let nodes = [node("a", 1, 1, &[]), node("b", 1, 0, &[3600])];
        assert_eq!(wait_s(&nodes, 1, 7200), Some(0), "the free GPU");
        assert_eq!(wait_s(&nodes, 2, 7200), Some(3600), "the busy one frees in an hour");
        assert_eq!(wait_s(&nodes, 3, 7200), Some(7200), "the first again, after its run");
        assert_eq!(wait_s(&nodes, 4, 7200), Some(3600 + 7200));
        // A run past the typical length is about to end, not ended.
        assert_eq!(wait_s(&[node("c", 1, 0, &[9000])], 1, 7200), Some(60));
        let mut gone = node("d", 4, 4, &[]);
        gone.connected = false;
        assert_eq!(wait_s(&[gone], 1, 7200), None, "no GPU connected: no estimate");
    }

    #[test]
    fn counts_are_of_connected_nodes() {
        let mut gone = node("x", 8, 8, &[]);
        gone.connected = false;
        let c = counts(&[node("a", 2, 1, &[10]), node("b", 1, 0, &[5]), gone], 3, &[30, 10, 20]);
        assert_eq!(
            c,
            ClusterCounts {
                nodes_connected: 2,
                gpus_busy: 2,
                gpus_free: 1,
                runs_waiting: 3,
                median_wait_s: Some(20)
            }
        );
        assert_eq!(counts(&[], 0, &[]).median_wait_s, None);
    }

    #[test]
    fn gpu_time_counts_only_the_last_day() {
        let now = 100_000;
        assert_eq!(gpu_s_within(now - 100, None, now), 100);
        assert_eq!(gpu_s_within(now - 90_000, Some(now - 86_000), now), 400);
        assert_eq!(gpu_s_within(now - 200_000, Some(now - 100_000), now), 0);
    }

    #[test]
    fn alerts_name_silent_nodes_and_long_waits() {
        let view = NodeView {
            node_id: "gpu-7".into(),
            connected: false,
            last_heartbeat_at: "2026-12-08T01:00:00Z".into(),
            gpus: 8,
            gpus_free: 0,
            sandboxes_free: 0,
            runs: vec!["oe-1".into()],
            lost_at: None,
        };
        let a = alerts(&[view], &["gpu-7"], 40, Some(30 * 3600));
        assert!(a[0].contains("`gpu-7` went silent") && a[0].ends_with("holding 1 live run"), "{a:?}");
        assert!(a[1].contains("30.0 h"), "{a:?}");
        assert!(alerts(&[], &[], 0, Some(0)).is_empty());
        assert_eq!(alerts(&[], &[], 2, None), ["2 submissions wait and no GPU is connected"]);
    }
}
