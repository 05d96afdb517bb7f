//! Backups of the SQLite database to a private dataset (`ARENA_BACKUP_REPO`), so that a Space that
//! loses its disk loses nothing older than the last snapshot:
//! - every `ARENA_BACKUP_EVERY_S`, when the database changed, a consistent snapshot (`VACUUM
//!   INTO`, never a copy of the live file), gzipped, uploaded as one commit that also deletes the
//!   snapshots past the newest `ARENA_BACKUP_KEEP` (`domain::backup` names and prunes them);
//! - at start, when the database file is missing (or `ARENA_RESTORE=1`), the newest snapshot whose
//!   hash checks is put in its place before migrations run.
//!
//! Only one process backs up: the one holding an exclusive lock on a file beside the database (the
//! kernel releases it when the process dies). The work runs on its own task, bounded in time, and
//! never holds a request up.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use domain::backup::{self, Snapshot};
use domain::views::BackupView;
use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::ports::datasets::{DatasetError, DatasetWriter};

/// The largest snapshot a restore downloads (compressed).
const MAX_SNAPSHOT_BYTES: u64 = 2 << 30;
/// One upload's whole time; a slower one is tried again at the next turn.
const UPLOAD_DEADLINE: Duration = Duration::from_secs(300);
/// Snapshots listed at most.
const MAX_LISTED: usize = 10_000;

/// The newest migration this build knows (a snapshot's schema is compared with it).
pub fn known_schema() -> i64 {
    crate::db::SQLITE.migrations.iter().map(|m| m.version).max().unwrap_or(0)
}

/// This process's backups: where to, how often, and how the last one went.
pub struct Backups {
    pub repo: String,
    pub every: Duration,
    pub keep: usize,
    db_path: PathBuf,
    status: Mutex<Status>,
    /// Whether runs launched after the last snapshot may still be found again from HF's jobs:
    /// from the start until a pass finds nothing left waiting.
    finding: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Status {
    view: BackupView,
    /// The database file's state at the last snapshot (sizes and modification times).
    fingerprint: Option<Vec<(u64, Option<SystemTime>)>>,
    /// The lock that makes this process the one that backs up, once it has it.
    lock: Option<std::fs::File>,
}

impl Backups {
    pub fn new(
        repo: String,
        every_s: u64,
        keep: usize,
        db_path: PathBuf,
        restored: Option<String>,
    ) -> Backups {
        let view = BackupView { repo: repo.clone(), every_s, restored_from: restored, ..Default::default() };
        Backups {
            repo,
            every: Duration::from_secs(every_s.max(1)),
            keep: keep.max(1),
            db_path,
            status: Mutex::new(Status { view, ..Default::default() }),
            finding: std::sync::atomic::AtomicBool::new(true),
        }
    }

    pub fn view(&self) -> BackupView {
        self.status.lock().unwrap().view.clone()
    }

    /// Whether runs may still be found again (`runs::recover`).
    pub fn finding_runs(&self) -> bool {
        self.finding.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records a pass of `runs::recover`: what it took back, and what still waits or was skipped.
    /// Finding ends once nothing waits.
    pub fn found_runs(&self, taken_back: Vec<String>, waiting: &[String], skipped: &[String]) {
        let mut status = self.status.lock().unwrap();
        status.view.runs_found_again.extend(taken_back);
        let mut said: Vec<String> = waiting.iter().map(|w| format!("waiting: {w}")).collect();
        said.extend(skipped.iter().map(|w| format!("not rebuilt: {w}")));
        status.view.runs_finding = (!said.is_empty()).then(|| said.join("; "));
        if waiting.is_empty() {
            self.finding.store(false, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The database file and its write-ahead log, as the file system sees them now: a write moves
    /// one of them.
    fn fingerprint(&self) -> Vec<(u64, Option<SystemTime>)> {
        let wal = PathBuf::from(format!("{}-wal", self.db_path.display()));
        [self.db_path.as_path(), wal.as_path()]
            .iter()
            .map(|p| std::fs::metadata(p).map(|m| (m.len(), m.modified().ok())).unwrap_or((0, None)))
            .collect()
    }

    /// Whether this process holds (or now takes) the backup lock.
    fn leased(&self) -> bool {
        let mut status = self.status.lock().unwrap();
        if status.lock.is_some() {
            return true;
        }
        let path = PathBuf::from(format!("{}.backup-lock", self.db_path.display()));
        let Ok(file) = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path)
        else {
            return false;
        };
        match file.try_lock() {
            Ok(()) => {
                status.lock = Some(file);
                true
            }
            Err(_) => false,
        }
    }
}

/// Starts the backup loop on its own task (it ends with the process).
pub fn spawn(state: crate::AppState, backups: Arc<Backups>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(backups.every).await;
            if !backups.leased() {
                continue;
            }
            match tokio::time::timeout(UPLOAD_DEADLINE, once(&state, &backups)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => record_error(&backups, &state, e),
                Err(_) => record_error(&backups, &state, format!("the upload took over {UPLOAD_DEADLINE:?}")),
            }
        }
    });
}

fn record_error(backups: &Backups, state: &crate::AppState, e: String) {
    tracing::warn!(error = %e, "backup failed; tried again at the next turn");
    let mut status = backups.status.lock().unwrap();
    status.view.last_error = Some(e);
    status.view.last_error_at = Some(state.now().text);
}

/// One turn: a snapshot when the database changed, uploaded with the older ones pruned. Answers
/// the snapshot it uploaded (`None`: nothing changed).
pub async fn once(state: &crate::AppState, backups: &Backups) -> Result<Option<Snapshot>, String> {
    let before = backups.fingerprint();
    if backups.status.lock().unwrap().fingerprint.as_ref() == Some(&before) {
        return Ok(None);
    }
    let taken = state.now().text;
    let (bytes, schema) = snapshot(&state.db, &backups.db_path).await?;
    let sha256 = hex(&Sha256::digest(&bytes));
    if backups.status.lock().unwrap().view.snapshot.as_deref().is_some_and(|p| p.contains(&sha256)) {
        // A checkpoint moved the file, not the data.
        backups.status.lock().unwrap().fingerprint = Some(before);
        return Ok(None);
    }
    let snap =
        Snapshot { taken: backup::stamp(&taken).ok_or("the clock's time is not RFC 3339")?, schema, sha256 };
    let datasets = &state.deps.datasets;
    datasets.ensure(&backups.repo).await.map_err(|e| format!("the backup dataset: {e}"))?;
    let listed = datasets
        .list(&backups.repo, backup::DIR, MAX_LISTED)
        .await
        .map_err(|e| format!("listing backups: {e}"))?;
    let existing = backup::newest_first(listed.iter().map(String::as_str));
    let deleted: Vec<String> =
        backup::pruned(&existing, &snap, backups.keep).iter().map(Snapshot::path).collect();
    let summary = format!("Back up the arena's database ({} bytes, schema {schema})", bytes.len());
    let revision = datasets
        .commit_changes(&backups.repo, &summary, &[(snap.path(), bytes)], &deleted)
        .await
        .map_err(|e| format!("uploading the snapshot: {e}"))?;
    let mut status = backups.status.lock().unwrap();
    status.fingerprint = Some(before);
    status.view.last_ok_at = Some(taken);
    status.view.last_error = None;
    status.view.last_error_at = None;
    status.view.revision = Some(revision);
    status.view.snapshot = Some(snap.path());
    Ok(Some(snap))
}

/// A consistent copy of the live database (`VACUUM INTO` reads it in one transaction while
/// writers go on), gzipped, and the schema it is at.
pub async fn snapshot(db: &crate::db::Db, db_path: &Path) -> Result<(Vec<u8>, i64), String> {
    let target = PathBuf::from(format!("{}.snapshot", db_path.display()));
    let _ = std::fs::remove_file(&target);
    let schema: i64 = sqlx::query("SELECT COALESCE(MAX(version), 0) AS v FROM _sqlx_migrations")
        .fetch_one(&db.pool)
        .await
        .and_then(|r| r.try_get("v"))
        .map_err(|e| format!("reading the schema version: {e}"))?;
    let quoted = target.display().to_string().replace('\'', "''");
    sqlx::query(&format!("VACUUM INTO '{quoted}'"))
        .execute(&db.pool)
        .await
        .map_err(|e| format!("VACUUM INTO: {e}"))?;
    let compressed = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        let raw = std::fs::read(&target)?;
        let _ = std::fs::remove_file(&target);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&raw)?;
        gz.finish()
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("compressing the snapshot: {e}"))?;
    Ok((compressed, schema))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a restore at start did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// The dataset holds no snapshot: a fresh start.
    Empty,
    /// Restored this snapshot (its path) at this revision of the dataset; `skipped` are newer
    /// ones that did not check out.
    From { path: String, revision: String, skipped: Vec<String> },
}

/// Restores the database file from the newest snapshot that checks out (its hash, its gzip, a
/// SQLite file of a schema this build knows, `PRAGMA integrity_check`) before the database is
/// opened. Refuses (an error: the server does not start) when the newest is of a newer schema.
pub async fn restore(datasets: &dyn DatasetWriter, repo: &str, db_path: &Path) -> anyhow::Result<Restored> {
    let revision = match datasets.head(repo).await {
        Ok(r) => r,
        Err(DatasetError::NotFound) => return Ok(Restored::Empty),
        Err(e) => {
            anyhow::bail!("the backup dataset {repo} did not answer: {e}; not starting on an empty database")
        }
    };
    let listed = datasets
        .list(repo, backup::DIR, MAX_LISTED)
        .await
        .map_err(|e| anyhow::anyhow!("listing {repo}: {e}"))?;
    let order =
        backup::restore_order(&backup::newest_first(listed.iter().map(String::as_str)), known_schema())?;
    let mut skipped = Vec::new();
    for snap in order {
        let path = snap.path();
        let checked = match datasets.read(repo, &revision, &path, MAX_SNAPSHOT_BYTES).await {
            Ok(bytes) => check_snapshot(&snap, bytes, db_path).await,
            Err(e) => Err(format!("could not be read: {e}")),
        };
        match checked {
            Ok(()) => {
                tracing::info!(repo, revision, snapshot = %path, "restored the database from its backup");
                return Ok(Restored::From { path, revision, skipped });
            }
            Err(why) => {
                tracing::warn!(snapshot = %path, why, "a backup did not check out; trying the one before");
                skipped.push(format!("{path}: {why}"));
            }
        }
    }
    anyhow::ensure!(skipped.is_empty(), "no backup in {repo} checks out: {}", skipped.join("; "));
    Ok(Restored::Empty)
}

/// Checks one downloaded snapshot and, when it holds, puts it in place of the database.
async fn check_snapshot(snap: &Snapshot, bytes: Vec<u8>, db_path: &Path) -> Result<(), String> {
    if hex(&Sha256::digest(&bytes)) != snap.sha256 {
        return Err("its SHA-256 is not the one its name records".into());
    }
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes.as_slice())
        .read_to_end(&mut raw)
        .map_err(|e| format!("not gzip: {e}"))?;
    if !raw.starts_with(b"SQLite format 3\0") {
        return Err("not a SQLite database".into());
    }
    let staged = PathBuf::from(format!("{}.restoring", db_path.display()));
    std::fs::write(&staged, &raw).map_err(|e| e.to_string())?;
    let verdict = verify(&staged, snap.schema).await;
    if verdict.is_err() {
        let _ = std::fs::remove_file(&staged);
        return verdict;
    }
    for stale in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{stale}", db_path.display()));
    }
    std::fs::rename(&staged, db_path).map_err(|e| e.to_string())
}

/// The staged file opens as SQLite, passes its integrity check, and is at the schema its name says.
async fn verify(path: &Path, schema: i64) -> Result<(), String> {
    use sqlx::ConnectOptions;
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path).read_only(true);
    let mut conn = options.connect().await.map_err(|e| format!("does not open: {e}"))?;
    let check: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut conn)
        .await
        .map_err(|e| format!("integrity check: {e}"))?;
    if check != "ok" {
        return Err(format!("integrity check: {check}"));
    }
    let at: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations")
        .fetch_one(&mut conn)
        .await
        .map_err(|e| format!("no migrations table: {e}"))?;
    if at != schema {
        return Err(format!("it is at schema {at}, its name says {schema}"));
    }
    Ok(())
}
