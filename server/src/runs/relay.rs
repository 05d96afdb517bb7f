//! The relay: a run's job connects here (`GET /api/relay/runs/{run_id}`, a WebSocket) with its own
//! secret as `Authorization: Bearer` (only while the run has not ended), and reports the
//! pipeline's steps, each evaluation's pass counts, GRPO's progress, errors and a heartbeat
//! (`domain::runs::follow::RelayMessage`). Nothing else is accepted on it. The arena first says
//! `{"last_seq": N}`, the highest sequence number it stored, so that a job whose command started
//! again numbers on from there; it answers `{"ack": seq}` once a message is stored, so the job
//! resends what was not acknowledged after a reconnect, and a repeat is stored once.

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::relay_messages::{self, Refused};
use crate::http::ApiError;
use crate::AppState;

/// The largest message a job may send.
const MAX_MESSAGE: usize = 16 * 1024;

pub async fn relay(
    State(s): State<AppState>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let secret = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    // A path that is no run id names no run: refused as an unknown run's relay is.
    let run_id = domain::ids::RunId::parse(&run_id).map_err(|_| {
        ApiError::new(domain::ErrorCode::InvalidToken, "a relay connects with its run's own secret")
    })?;
    relay_messages::admit(&s, &run_id, secret).await?;
    Ok(ws.max_message_size(MAX_MESSAGE).on_upgrade(move |socket| serve(s, run_id, socket)))
}

async fn serve(s: AppState, run_id: domain::ids::RunId, mut socket: WebSocket) {
    // This connection's own name: a replaced connection that closes late leaves its successor be.
    let holder = s.lease_holder();
    tracing::info!(run = %run_id, "relay connected");
    let last = relay_messages::last_seq(&s, &run_id).await;
    if socket.send(Message::Text(serde_json::json!({ "last_seq": last }).to_string().into())).await.is_err() {
        return;
    }
    while let Some(Ok(frame)) = socket.recv().await {
        let text = match frame {
            Message::Text(t) => t.to_string(),
            Message::Close(_) => break,
            _ => continue,
        };
        let answer = match relay_messages::store(&s, &run_id, &holder, &text).await {
            Ok(seq) => serde_json::json!({ "ack": seq }),
            Err(Refused::Never(seq, message)) => serde_json::json!({ "error": message, "seq": seq }),
            // Not stored this time: closing makes the job reconnect and send it again.
            Err(Refused::Later) => break,
        };
        if socket.send(Message::Text(answer.to_string().into())).await.is_err() {
            break;
        }
    }
    relay_messages::dropped(&s, &run_id, &holder).await;
    tracing::info!(run = %run_id, "relay closed");
}
