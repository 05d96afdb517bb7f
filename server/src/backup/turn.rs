//! The backup pass: each tick it asks whether a turn is due and, when this process holds the backup
//! lock, takes a snapshot and uploads it. Apart from the snapshots themselves (`super`), which the
//! server's state holds.

use anyhow::Context;
use domain::backup::{self, Snapshot};

use super::{not_after, sign, snapshot, Backups, MAX_LISTED, UPLOAD_DEADLINE};

/// The feature: no routes, one pass.
pub const FEATURE: crate::features::Feature =
    crate::features::Feature { router: utoipa_axum::router::OpenApiRouter::new, passes: &[PASS] };

const PASS: crate::features::Pass = crate::features::Pass::new("backup", 1, |s| Box::pin(turn(s)));

async fn turn(state: &crate::AppState) {
    let Some(backups) = &state.backups else { return };
    if !backups.due() || !backups.leased() {
        return;
    }
    match tokio::time::timeout(UPLOAD_DEADLINE, once(state, backups)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => record_error(backups, state, format!("{e:#}")),
        Err(_) => record_error(backups, state, format!("the upload took over {UPLOAD_DEADLINE:?}")),
    }
}

fn record_error(backups: &Backups, state: &crate::AppState, e: String) {
    tracing::warn!(error = %e, "backup failed; tried again at the next turn");
    let mut status = backups.status.lock().unwrap();
    status.view.last_error = Some(e);
    status.view.last_error_at = Some(state.now().text);
}

/// One turn: a snapshot when the database changed, uploaded with the older ones pruned. Answers
/// the snapshot it uploaded (`None`: nothing changed).
pub async fn once(state: &crate::AppState, backups: &Backups) -> anyhow::Result<Option<Snapshot>> {
    let before = backups.fingerprint();
    if backups.status.lock().unwrap().fingerprint.as_ref() == Some(&before) {
        return Ok(None);
    }
    let now = state.now();
    let taken = backup::stamp(&now.text).context("the clock's time is not RFC 3339")?;
    let (bytes, schema) = snapshot(&state.db, &backups.db_path).await?;
    // The same bytes under the same name sign the same: compare what the signature covers
    // without the stamp (a checkpoint moves the file, not the data).
    let content = backups.key.sign(&[&schema.to_be_bytes(), &bytes]);
    if backups.status.lock().unwrap().content.as_deref() == Some(content.as_str()) {
        backups.status.lock().unwrap().fingerprint = Some(before);
        return Ok(None);
    }
    let signature = sign(&backups.key, &backup::signed_name(&taken, schema), &bytes);
    let snap = Snapshot { taken, schema, signature };
    let datasets = &state.deps.datasets;
    datasets.ensure(&backups.repo).await.context("the backup dataset")?;
    let listed = datasets.list(&backups.repo, backup::DIR, MAX_LISTED).await.context("listing backups")?;
    let existing = backup::newest_first(listed.iter().map(String::as_str));
    let deleted: Vec<String> = backup::pruned(&existing, &snap, backups.keep, &not_after(now.epoch))
        .iter()
        .map(Snapshot::path)
        .collect();
    // The title names the snapshot: a restore finds it in the history even once it is deleted.
    let summary =
        format!("Back up the arena's database ({} bytes, schema {schema}): {}", bytes.len(), snap.path());
    let revision = datasets
        .commit_changes(&backups.repo, &summary, &[(snap.path(), bytes)], &deleted)
        .await
        .context("uploading the snapshot")?;
    let mut status = backups.status.lock().unwrap();
    status.fingerprint = Some(before);
    status.content = Some(content);
    status.view.last_ok_at = Some(now.text);
    status.view.last_error = None;
    status.view.last_error_at = None;
    status.view.revision = Some(revision);
    status.view.snapshot = Some(snap.path());
    Ok(Some(snap))
}
