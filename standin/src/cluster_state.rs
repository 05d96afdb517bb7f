//! What the simulated cluster holds between connections, shared with its trainers: the runs in
//! training and the events the arena has not acknowledged yet.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// What the cluster holds between connections.
#[derive(Default)]
pub struct Held {
    /// Runs in training, and their tasks (aborted on a stop).
    pub runs: BTreeMap<String, JoinHandle<()>>,
    /// Events not yet acknowledged: (run, seq) → the message.
    pub outbox: BTreeMap<(String, i64), Value>,
}

/// The cluster's state, shared with its trainers.
#[derive(Clone, Default)]
pub struct Shared {
    pub held: Arc<Mutex<Held>>,
    pub wake: Arc<Notify>,
}

impl Shared {
    /// Queues one event of a run for the arena.
    pub fn emit(&self, run_id: &str, event: Value) {
        let seq = event["seq"].as_i64().unwrap_or_default();
        let message = json!({"kind": "event", "run_id": run_id, "event": event});
        self.held.lock().unwrap().outbox.insert((run_id.to_string(), seq), message);
        self.wake.notify_one();
    }

    pub fn gpus_busy(&self) -> u32 {
        let held = self.held.lock().unwrap();
        held.runs.values().filter(|h| !h.is_finished()).count() as u32
    }
}
