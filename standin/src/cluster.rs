//! A simulated OpenEnv training cluster: it connects to the arena's `/api/relay/cluster` with the
//! cluster's credential, says hello with what it has free and the runs it holds, sends heartbeats,
//! and reconnects with backoff. With a [`Trainer`] it accepts the arena's assignments and trains
//! them (`crate::trainer`, a simulation: real episodes against the image, a scripted policy); each
//! event stays in its outbox until the arena acknowledges it, so a lost connection or a restarted
//! arena loses nothing. Without one it only keeps the connection (the arena's routes answer).

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

pub use crate::cluster_state::{Held, Shared};
use crate::trainer::Trainer;

pub struct Cluster {
    /// The node this connection speaks for (`None`: the arena's `default`).
    pub node_id: Option<String>,
    /// The node's GPUs: those its runs do not hold are free.
    pub gpus_free: u32,
    pub sandboxes_free: u32,
    pub heartbeat: Duration,
    /// Trains what the arena assigns; `None`: a connection only.
    pub trainer: Option<Trainer>,
}

/// Connects and keeps the connection; abort the handle to disconnect (runs in training go on, as a
/// real cluster's would, and report when it connects again through [`connect_shared`]).
pub fn connect(arena_url: &str, secret: &str, cluster: Cluster) -> JoinHandle<()> {
    connect_shared(arena_url, secret, cluster, Shared::default())
}

pub fn connect_shared(arena_url: &str, secret: &str, cluster: Cluster, shared: Shared) -> JoinHandle<()> {
    let base = arena_url.trim_end_matches('/');
    let url = match base.strip_prefix("https://") {
        Some(rest) => format!("wss://{rest}/api/relay/cluster"),
        None => format!("ws://{}/api/relay/cluster", base.trim_start_matches("http://")),
    };
    let secret = secret.to_string();
    let cluster = Arc::new(cluster);
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            let Ok(mut request) = url.as_str().into_client_request() else { return };
            let Ok(auth) = format!("Bearer {secret}").parse() else { return };
            request.headers_mut().insert("authorization", auth);
            if let Ok((socket, _)) = tokio_tungstenite::connect_async(request).await {
                backoff = Duration::from_millis(100);
                session(socket, &cluster, &shared).await;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    })
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn free(cluster: &Cluster, shared: &Shared, kind: &str) -> Value {
    let busy = shared.gpus_busy();
    let mut m = json!({
        "kind": kind,
        "gpus": cluster.gpus_free,
        "gpus_free": cluster.gpus_free.saturating_sub(busy),
        "sandboxes_free": cluster.sandboxes_free.saturating_sub(busy * domain::openenv::episode::EPISODES_PER_STEP as u32),
    });
    if let Some(node) = &cluster.node_id {
        m["node_id"] = json!(node);
    }
    if kind == "hello" {
        m["runs"] = json!(shared.held.lock().unwrap().runs.keys().collect::<Vec<_>>());
    }
    m
}

/// One connection: hello, every unacknowledged event, then heartbeats and the arena's messages.
async fn session(mut socket: Socket, cluster: &Arc<Cluster>, shared: &Shared) {
    let send = |m: &Value| Message::Text(m.to_string().into());
    if socket.send(send(&free(cluster, shared, "hello"))).await.is_err() {
        return;
    }
    let mut sent: std::collections::BTreeSet<(String, i64)> = Default::default();
    let mut beat = tokio::time::interval(cluster.heartbeat);
    beat.tick().await;
    loop {
        // Whatever the outbox holds that this connection has not carried yet.
        let pending: Vec<((String, i64), Value)> = {
            let held = shared.held.lock().unwrap();
            held.outbox
                .iter()
                .filter(|(k, _)| !sent.contains(*k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        for (key, message) in pending {
            if socket.send(send(&message)).await.is_err() {
                return;
            }
            sent.insert(key);
        }
        tokio::select! {
            frame = socket.next() => {
                let text = match frame {
                    Some(Ok(Message::Text(t))) => t.to_string(),
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                    Some(Ok(_)) => continue,
                };
                let Ok(m) = serde_json::from_str::<Value>(&text) else { continue };
                for reply in on_arena_message(cluster, shared, &m) {
                    if socket.send(send(&reply)).await.is_err() {
                        return;
                    }
                }
            }
            _ = shared.wake.notified() => {}
            _ = beat.tick() => {
                if socket.send(send(&free(cluster, shared, "heartbeat"))).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The arena's acks, assignments and stops.
fn on_arena_message(cluster: &Arc<Cluster>, shared: &Shared, m: &Value) -> Vec<Value> {
    let run_id = m["run_id"].as_str().unwrap_or_default().to_string();
    match m["kind"].as_str() {
        Some("ack") if m["of"] == "event" => {
            if let Some(seq) = m["seq"].as_i64() {
                shared.held.lock().unwrap().outbox.remove(&(run_id, seq));
            }
            Vec::new()
        }
        Some("assign") => {
            let Some(trainer) = &cluster.trainer else { return Vec::new() };
            let mut held = shared.held.lock().unwrap();
            if !held.runs.contains_key(&run_id) {
                let task = tokio::spawn(trainer.clone().train(shared.clone(), run_id.clone(), m.clone()));
                held.runs.insert(run_id.clone(), task);
            }
            vec![json!({"kind": "accepted", "run_id": run_id})]
        }
        Some("stop") => {
            let mut held = shared.held.lock().unwrap();
            if let Some(task) = held.runs.remove(&run_id) {
                // Its sandboxes are child processes of the task: aborting it stops them.
                task.abort();
            }
            held.outbox.retain(|(r, _), _| *r != run_id);
            vec![json!({"kind": "stopped", "run_id": run_id})]
        }
        _ => Vec::new(),
    }
}
