//! What a relay's messages do to its run: a connection admitted by the run's own secret, each
//! message checked and stored once (its stage advanced, its counts kept), the drop recorded.

use domain::ids::RunId;
use domain::runs::follow::{RelayKind, RelayMessage};
use domain::ErrorCode;

use super::repo::NewEvent;
use crate::http::ApiError;
use crate::AppState;

/// A relay connects with its run's own secret, and only while the run has not ended.
pub async fn admit(s: &AppState, run_id: &RunId, secret: Option<&str>) -> Result<(), ApiError> {
    let refused = || ApiError::new(ErrorCode::InvalidToken, "a relay connects with its run's own secret");
    let hash = crate::identity::sha256_hex(secret.ok_or_else(refused)?.trim());
    let stored = super::repo::secret_hash(&s.db, run_id).await?.unwrap_or_default();
    if stored.is_empty() || !crate::identity::same_bytes(hash.as_bytes(), stored.as_bytes()) {
        return Err(refused());
    }
    Ok(())
}

/// The highest sequence number stored for the run's relay (0 for none).
pub async fn last_seq(s: &AppState, run_id: &RunId) -> i64 {
    super::repo::last_relay_seq(&s.db, run_id).await.unwrap_or(0)
}

/// The relay's connection `holder` closed: its run is `reconnecting` until it comes back or its
/// grace ends (unless a newer connection already took over).
pub async fn dropped(s: &AppState, run_id: &RunId, holder: &str) {
    let epoch = s.now().epoch;
    if let Err(e) = super::repo::relay_dropped(&s.db, run_id, holder, epoch).await {
        tracing::error!(run = %run_id, error = %e, "recording a dropped relay failed");
    }
    s.changes.bump(crate::changes::Topic::Runs);
}

/// Why a message was not acknowledged.
pub enum Refused {
    /// It will never be taken (its number, and why): the job drops it.
    Never(u64, String),
    /// It could not be stored now.
    Later,
}

/// Stores one message that came over connection `holder`; answers its sequence number to acknowledge.
pub async fn store(s: &AppState, run_id: &RunId, holder: &str, text: &str) -> Result<u64, Refused> {
    let seq =
        serde_json::from_str::<serde_json::Value>(text).ok().and_then(|v| v["seq"].as_u64()).unwrap_or(0);
    let m: RelayMessage =
        serde_json::from_str(text).map_err(|e| Refused::Never(seq, format!("not a relay message: {e}")))?;
    m.check().map_err(|e| Refused::Never(seq, e.into()))?;
    let internal = |e: sqlx::Error| {
        tracing::error!(run = %run_id, error = %e, "storing a relay message failed");
        Refused::Later
    };
    let domain::time::Timestamp { text: at, epoch } = s.now();
    let run = super::repo::get(&s.db, run_id)
        .await
        .map_err(internal)?
        .ok_or(Refused::Never(seq, "no such run".into()))?;
    let stage = m.stage();
    if m.kind == RelayKind::Progress {
        let planned = m.planned.map(|p| p.min(i64::MAX as u64) as i64);
        super::repo::set_progress(&s.db, run_id, m.done.unwrap_or(0).min(i64::MAX as u64) as i64, planned)
            .await
            .map_err(internal)?;
    }
    if let (RelayKind::Metrics, Some(step), Some(metrics)) = (m.kind, m.done, &m.metrics) {
        let point = domain::training::TrainPoint { step, metrics: metrics.clone() };
        super::repo::add_train_points(&s.db, run_id, &[point], "relay", &at).await.map_err(internal)?;
    }
    let advance = match (m.kind, stage) {
        (RelayKind::Step | RelayKind::Eval | RelayKind::Progress | RelayKind::Metrics, Some(stage)) => {
            let later = run.stage.is_none_or(|current| stage > current);
            later.then_some(stage.as_str())
        }
        _ => None,
    };
    let count = |n: Option<u64>| n.map(|v| v.min(i64::MAX as u64) as i64);
    let detail = match m.kind {
        RelayKind::Step | RelayKind::Eval => m.step.clone().unwrap_or_default(),
        // Anyone reads a run's events: a job's words never name a sealed held-out task.
        _ => domain::runs::redact_tasks(m.detail.as_deref().unwrap_or_default(), &s.sealed_task_ids()),
    };
    // A heartbeat, GRPO's progress and its metrics only update the run: none is an event of its own.
    let kind = match m.kind {
        RelayKind::Progress | RelayKind::Metrics => "heartbeat",
        other => other.as_str(),
    };
    let event = NewEvent {
        run_id,
        at: &at,
        epoch,
        source: "relay",
        kind,
        detail: &detail,
        stage: stage.map(|s| s.as_str()),
        passed: count(m.passed),
        total: count(m.total),
        timeouts: count(m.timeouts),
        errors: count(m.errors),
        relay_seq: Some(m.seq as i64),
    };
    super::repo::relay_message(&s.db, &event, advance, holder).await.map_err(internal)?;
    s.changes.bump(crate::changes::Topic::Runs);
    Ok(m.seq)
}
