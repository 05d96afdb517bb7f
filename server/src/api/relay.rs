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
use domain::runs::follow::{stage_index, RelayKind, RelayMessage};
use domain::ErrorCode;

use crate::http::ApiError;
use crate::repo::runs::NewEvent;
use crate::{repo, service, AppState};

/// The largest message a job may send.
const MAX_MESSAGE: usize = 16 * 1024;

pub async fn relay(
    State(s): State<AppState>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let refused = || ApiError::new(ErrorCode::InvalidToken, "a relay connects with its run's own secret");
    let secret = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(refused)?;
    let hash = crate::identity::sha256_hex(secret.trim());
    let stored = repo::runs::secret_hash(&s.db, &run_id).await?.unwrap_or_default();
    if stored.is_empty() || !crate::identity::same_bytes(hash.as_bytes(), stored.as_bytes()) {
        return Err(refused());
    }
    Ok(ws.max_message_size(MAX_MESSAGE).on_upgrade(move |socket| serve(s, run_id, socket)))
}

async fn serve(s: AppState, run_id: String, mut socket: WebSocket) {
    tracing::info!(run = %run_id, "relay connected");
    let last = repo::runs::last_relay_seq(&s.db, &run_id).await.unwrap_or(0);
    if socket.send(Message::Text(serde_json::json!({ "last_seq": last }).to_string().into())).await.is_err() {
        return;
    }
    while let Some(Ok(frame)) = socket.recv().await {
        let text = match frame {
            Message::Text(t) => t.to_string(),
            Message::Close(_) => break,
            _ => continue,
        };
        let answer = match handle(&s, &run_id, &text).await {
            Ok(seq) => serde_json::json!({ "ack": seq }),
            Err(Refused::Never(seq, message)) => serde_json::json!({ "error": message, "seq": seq }),
            // Not stored this time: closing makes the job reconnect and send it again.
            Err(Refused::Later) => break,
        };
        if socket.send(Message::Text(answer.to_string().into())).await.is_err() {
            break;
        }
    }
    let (_, epoch) = service::runs::now(&s);
    if let Err(e) = repo::runs::relay_dropped(&s.db, &run_id, &s.server_id, epoch).await {
        tracing::error!(run = %run_id, error = %e, "recording a dropped relay failed");
    }
    s.changes.bump(crate::changes::Topic::Runs);
    tracing::info!(run = %run_id, "relay closed");
}

/// Why a message was not acknowledged.
enum Refused {
    /// It will never be taken (its number, and why): the job drops it.
    Never(u64, String),
    /// It could not be stored now.
    Later,
}

/// Stores one message; answers its sequence number to acknowledge.
async fn handle(s: &AppState, run_id: &str, text: &str) -> Result<u64, Refused> {
    let seq =
        serde_json::from_str::<serde_json::Value>(text).ok().and_then(|v| v["seq"].as_u64()).unwrap_or(0);
    let m: RelayMessage =
        serde_json::from_str(text).map_err(|e| Refused::Never(seq, format!("not a relay message: {e}")))?;
    m.check().map_err(|e| Refused::Never(seq, e))?;
    let internal = |e: sqlx::Error| {
        tracing::error!(run = %run_id, error = %e, "storing a relay message failed");
        Refused::Later
    };
    let (at, epoch) = service::runs::now(s);
    let run = repo::runs::get(&s.db, run_id)
        .await
        .map_err(internal)?
        .ok_or(Refused::Never(seq, "no such run".into()))?;
    let stage = m.stage();
    if m.kind == RelayKind::Progress {
        let planned = m.planned.map(|p| p.min(i64::MAX as u64) as i64);
        repo::runs::set_progress(&s.db, run_id, m.done.unwrap_or(0).min(i64::MAX as u64) as i64, planned)
            .await
            .map_err(internal)?;
    }
    let advance = match (m.kind, stage) {
        (RelayKind::Step | RelayKind::Eval | RelayKind::Progress, Some(stage)) => {
            let later = match run.stage.as_deref().and_then(stage_index) {
                Some(current) => stage_index(stage).is_some_and(|i| i > current),
                None => true,
            };
            later.then_some(stage)
        }
        _ => None,
    };
    let count = |n: Option<u64>| n.map(|v| v.min(i64::MAX as u64) as i64);
    let detail = match m.kind {
        RelayKind::Step | RelayKind::Eval => m.step.clone().unwrap_or_default(),
        // Anyone reads a run's events: a job's words never name a sealed held-out task.
        _ => domain::runs::redact_tasks(
            m.detail.as_deref().unwrap_or_default(),
            &crate::service::runs::sealed_task_ids(s),
        ),
    };
    // A heartbeat and GRPO's progress only update the run: neither is an event of its own.
    let kind = if m.kind == RelayKind::Progress { "heartbeat" } else { m.kind.as_str() };
    let event = NewEvent {
        run_id,
        at: &at,
        epoch,
        source: "relay",
        kind,
        detail: &detail,
        stage,
        passed: count(m.passed),
        total: count(m.total),
        timeouts: count(m.timeouts),
        errors: count(m.errors),
        relay_seq: Some(m.seq as i64),
    };
    repo::runs::relay_message(&s.db, &event, advance, &s.server_id).await.map_err(internal)?;
    s.changes.bump(crate::changes::Topic::Runs);
    Ok(m.seq)
}
