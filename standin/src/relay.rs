//! A relay client in Rust, for load measurements (`dev/bench-follow`): it connects to the arena's
//! relay with a run's own secret, sends numbered messages, resends every one not acknowledged after
//! a reconnect (with backoff), and sends a heartbeat. A run's job speaks the same protocol from the
//! arena's job script (`public/arena_job.py`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// The arena's address and the run's credentials, as the job's environment gives them.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: String,
    pub run_id: String,
    pub secret: String,
}

/// A running relay: `send` queues a message; `drop_connection` closes the current connection once
/// (it reconnects); `silence` stops everything (no heartbeats, no messages).
#[derive(Clone)]
pub struct Relay {
    queue: mpsc::UnboundedSender<Value>,
    seq: Arc<AtomicU64>,
    silent: Arc<AtomicBool>,
    drop_now: Arc<Notify>,
    closing: Arc<AtomicBool>,
    closed: Arc<Notify>,
}

impl Relay {
    pub fn start(target: Target, heartbeat: Duration) -> Relay {
        let (queue, rx) = mpsc::unbounded_channel();
        let relay = Relay {
            queue,
            seq: Arc::new(AtomicU64::new(0)),
            silent: Arc::new(AtomicBool::new(false)),
            drop_now: Arc::new(Notify::new()),
            closing: Arc::new(AtomicBool::new(false)),
            closed: Arc::new(Notify::new()),
        };
        tokio::spawn(run(target, rx, relay.clone(), heartbeat));
        relay
    }

    pub fn send(&self, mut message: Value) {
        if self.silent.load(Ordering::Relaxed) {
            return;
        }
        message["seq"] = json!(self.seq.fetch_add(1, Ordering::SeqCst) + 1);
        let _ = self.queue.send(message);
    }

    /// Waits (a few seconds at most) until every message is acknowledged, then disconnects.
    pub async fn close(&self) {
        let closed = self.closed.notified();
        self.closing.store(true, Ordering::Relaxed);
        self.drop_now.notify_waiters();
        let _ = tokio::time::timeout(Duration::from_secs(5), closed).await;
    }

    pub fn drop_connection(&self) {
        self.drop_now.notify_waiters();
    }

    pub fn silence(&self) {
        self.silent.store(true, Ordering::Relaxed);
        self.drop_now.notify_waiters();
    }
}

fn ws_url(target: &Target) -> String {
    let base = target.url.trim_end_matches('/');
    let base = base.strip_prefix("https://").map(|r| format!("wss://{r}")).unwrap_or_else(|| {
        base.strip_prefix("http://").map(|r| format!("ws://{r}")).unwrap_or_else(|| base.to_string())
    });
    format!("{base}/api/relay/runs/{}", target.run_id)
}

async fn run(target: Target, mut rx: mpsc::UnboundedReceiver<Value>, relay: Relay, heartbeat: Duration) {
    // Sent but not acknowledged, by sequence number: resent after every reconnect.
    let mut unacked: BTreeMap<u64, Value> = BTreeMap::new();
    let mut backoff = Duration::from_millis(100);
    let mut open = true;
    while open && !relay.silent.load(Ordering::Relaxed) {
        if relay.closing.load(Ordering::Relaxed) && unacked.is_empty() && rx.is_empty() {
            break;
        }
        let Ok(mut request) = ws_url(&target).into_client_request() else { return };
        let Ok(auth) = format!("Bearer {}", target.secret).parse() else { return };
        request.headers_mut().insert("authorization", auth);
        let Ok((mut socket, _)) = tokio_tungstenite::connect_async(request).await else {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(3));
            continue;
        };
        backoff = Duration::from_millis(100);
        let mut resend_ok = true;
        for m in unacked.values() {
            if socket.send(Message::Text(m.to_string().into())).await.is_err() {
                resend_ok = false;
                break;
            }
        }
        if !resend_ok {
            continue;
        }
        let mut beat = tokio::time::interval(heartbeat);
        loop {
            if relay.closing.load(Ordering::Relaxed) {
                while let Ok(m) = rx.try_recv() {
                    let seq = m["seq"].as_u64().unwrap_or(0);
                    unacked.insert(seq, m.clone());
                    let _ = socket.send(Message::Text(m.to_string().into())).await;
                }
                drain(&mut socket, &mut unacked).await;
                open = !unacked.is_empty();
                let _ = socket.close(None).await;
                break;
            }
            tokio::select! {
                next = rx.recv() => match next {
                    Some(m) => {
                        let seq = m["seq"].as_u64().unwrap_or(0);
                        unacked.insert(seq, m.clone());
                        if socket.send(Message::Text(m.to_string().into())).await.is_err() { break; }
                    }
                    None => { open = false; break; }
                },
                _ = beat.tick() => {
                    if relay.silent.load(Ordering::Relaxed) { break; }
                    let seq = relay.seq.fetch_add(1, Ordering::SeqCst) + 1;
                    let m = json!({"seq": seq, "kind": "heartbeat"});
                    if socket.send(Message::Text(m.to_string().into())).await.is_err() { break; }
                }
                answer = socket.next() => match answer {
                    Some(Ok(Message::Text(text))) => {
                        if let Some(seq) = serde_json::from_str::<Value>(&text).ok().and_then(|v| v["ack"].as_u64()) {
                            unacked.remove(&seq);
                        }
                    }
                    Some(Ok(_)) => {}
                    _ => break,
                },
                _ = relay.drop_now.notified() => {
                    if relay.closing.load(Ordering::Relaxed) {
                        continue;
                    }
                    let _ = socket.close(None).await;
                    break;
                }
            }
        }
    }
    relay.closed.notify_waiters();
}

/// Reads acknowledgements until nothing is left unacknowledged (or the arena stops answering).
async fn drain<S>(socket: &mut S, unacked: &mut BTreeMap<u64, Value>)
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    while !unacked.is_empty() {
        match tokio::time::timeout(Duration::from_secs(3), socket.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                if let Some(seq) = serde_json::from_str::<Value>(&text).ok().and_then(|v| v["ack"].as_u64()) {
                    unacked.remove(&seq);
                }
            }
            Ok(Some(Ok(_))) => {}
            _ => return,
        }
    }
}
