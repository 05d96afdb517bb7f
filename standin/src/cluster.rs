//! A simulated OpenEnv training cluster: it connects to the arena's `/api/relay/cluster` with the
//! cluster's credential, says hello with what it has free, and sends a heartbeat until stopped,
//! reconnecting with backoff. It trains nothing yet: it only makes the arena's OpenEnv routes
//! answer, as a real cluster's connection would.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

pub struct Cluster {
    pub gpus_free: u32,
    pub sandboxes_free: u32,
    pub heartbeat: Duration,
}

/// Connects and keeps the connection; abort the handle to disconnect.
pub fn connect(arena_url: &str, secret: &str, cluster: Cluster) -> JoinHandle<()> {
    let base = arena_url.trim_end_matches('/');
    let url = match base.strip_prefix("https://") {
        Some(rest) => format!("wss://{rest}/api/relay/cluster"),
        None => format!("ws://{}/api/relay/cluster", base.trim_start_matches("http://")),
    };
    let secret = secret.to_string();
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            let Ok(mut request) = url.as_str().into_client_request() else { return };
            let Ok(auth) = format!("Bearer {secret}").parse() else { return };
            request.headers_mut().insert("authorization", auth);
            if let Ok((mut socket, _)) = tokio_tungstenite::connect_async(request).await {
                backoff = Duration::from_millis(100);
                let mut kind = "hello";
                loop {
                    let m = json!({"kind": kind, "gpus_free": cluster.gpus_free, "sandboxes_free": cluster.sandboxes_free});
                    if socket.send(Message::Text(m.to_string().into())).await.is_err() {
                        break;
                    }
                    match tokio::time::timeout(Duration::from_secs(5), socket.next()).await {
                        Ok(Some(Ok(Message::Text(_)))) => {}
                        _ => break,
                    }
                    kind = "heartbeat";
                    tokio::time::sleep(cluster.heartbeat).await;
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    })
}
