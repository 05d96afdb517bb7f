//! Backups of the SQLite database to a private dataset (`ARENA_BACKUP_REPO`), so that a Space that
//! loses its disk loses nothing older than the last snapshot:
//! - every `ARENA_BACKUP_EVERY_S`, when the database changed, a consistent snapshot (`VACUUM
//!   INTO`, never a copy of the live file), gzipped, uploaded as one commit that also deletes the
//!   snapshots past the newest `ARENA_BACKUP_KEEP` (`domain::backup` names and prunes them);
//! - at start, when the database file is missing (or `ARENA_RESTORE=1`), the newest snapshot the
//!   arena signed (HMAC-SHA-256 with `ARENA_BACKUP_KEY`, `crate::signing`) and whose contents check
//!   out is put in its place before migrations run. A dataset that cannot be read stops the start
//!   rather than start on older or empty data; only a snapshot that fails its signature or its
//!   checks is passed over, and the log and `/api/version` (for editors) say which and why.
//!
//! A snapshot holds no secret: sign-in sessions and hand-offs are removed from the copy before it
//! is compressed (a signed-in person signs in again after a restore).
//!
//! Only one process backs up: the one holding an exclusive lock on a file beside the database (the
//! kernel releases it when the process dies). The work runs on its own task, bounded in time, and
//! never holds a request up.

pub mod turn;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use domain::backup::{self, Snapshot};
use domain::ids::JobId;
use domain::views::BackupView;
use sqlx::Row;

use crate::ports::datasets::{DatasetError, DatasetWriter};
use crate::signing::SigningKey;

/// The largest snapshot a restore downloads (compressed).
const MAX_SNAPSHOT_BYTES: u64 = 2 << 30;
/// Tables that hold secrets (sign-in sessions, OAuth hand-offs): left out of every snapshot.
pub const SECRET_TABLES: &[&str] = &["tower_sessions", "auth_handoffs"];
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
    /// Signs each snapshot.
    pub key: SigningKey,
    db_path: PathBuf,
    status: Mutex<Status>,
    /// Whether runs launched after the last snapshot may still be found again from HF's jobs:
    /// from the start until a pass finds nothing left waiting.
    finding: std::sync::atomic::AtomicBool,
    /// When the backup pass next takes a turn.
    next_turn: Mutex<std::time::Instant>,
}

#[derive(Default)]
struct Status {
    view: BackupView,
    /// The database file's state at the last snapshot (sizes and modification times).
    fingerprint: Option<Vec<(u64, Option<SystemTime>)>>,
    /// A keyed hash of the last snapshot's schema and bytes: an unchanged database is not sent again.
    content: Option<String>,
    /// Jobs `runs::recover` will not take back, and why.
    left_alone: std::collections::BTreeMap<JobId, String>,
    /// The lock that makes this process the one that backs up, once it has it.
    lock: Option<std::fs::File>,
}

impl Backups {
    pub fn new(
        repo: String,
        every_s: u64,
        keep: usize,
        key: SigningKey,
        db_path: PathBuf,
        restored: Option<Restored>,
    ) -> Backups {
        let (restored_from, restore_skipped) = match restored {
            Some(Restored::From { path, revision, skipped }) => (Some(format!("{path}@{revision}")), skipped),
            Some(Restored::Empty) | None => (None, Vec::new()),
        };
        let view =
            BackupView { repo: repo.clone(), every_s, restored_from, restore_skipped, ..Default::default() };
        Backups {
            repo,
            every: Duration::from_secs(every_s.max(1)),
            keep: keep.max(1),
            key,
            db_path,
            status: Mutex::new(Status { view, ..Default::default() }),
            finding: std::sync::atomic::AtomicBool::new(true),
            next_turn: Mutex::new(std::time::Instant::now() + Duration::from_secs(every_s.max(1))),
        }
    }

    /// Whether a turn is due (one every `every`, the first `every` after the start); answering
    /// yes schedules the next.
    fn due(&self) -> bool {
        let mut next = self.next_turn.lock().unwrap();
        let now = std::time::Instant::now();
        if now < *next {
            return false;
        }
        *next = now + self.every;
        true
    }

    pub fn view(&self) -> BackupView {
        self.status.lock().unwrap().view.clone()
    }

    /// Whether a job was left alone by an earlier pass (`found_runs`): not read again.
    pub fn left_alone(&self, job: &JobId) -> bool {
        self.status.lock().unwrap().left_alone.contains_key(job)
    }

    /// Whether runs may still be found again (`runs::recover`).
    pub fn finding_runs(&self) -> bool {
        self.finding.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records a pass of `runs::recover`: what it took back, what still waits, and the jobs it
    /// left alone for good (their job id, and why), which later passes do not read again.
    /// Finding ends once nothing waits.
    pub fn found_runs(&self, taken_back: Vec<String>, waiting: &[String], skipped: Vec<(JobId, String)>) {
        let mut status = self.status.lock().unwrap();
        status.view.runs_found_again.extend(taken_back);
        status.left_alone.extend(skipped);
        let mut said: Vec<String> = waiting.iter().map(|w| format!("waiting: {w}")).collect();
        said.extend(status.left_alone.values().map(|w| format!("not rebuilt: {w}")));
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

/// A snapshot's signature: the arena's HMAC of its signed name and its compressed bytes.
pub fn sign(key: &SigningKey, signed_name: &str, bytes: &[u8]) -> String {
    key.sign(&[signed_name.as_bytes(), b"\n", bytes])
}

/// The latest stamp the arena's own snapshots can carry: the clock plus its allowance.
fn not_after(epoch: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(epoch + backup::CLOCK_ALLOWANCE_S)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    backup::stamp(&crate::clock::rfc3339(t)).unwrap_or_default()
}

/// A consistent copy of the live database (`VACUUM INTO` reads it in one transaction while
/// writers go on) without its secrets, gzipped, and the schema it is at.
pub async fn snapshot(db: &crate::db::Db, db_path: &Path) -> anyhow::Result<(Vec<u8>, i64)> {
    let target = PathBuf::from(format!("{}.snapshot", db_path.display()));
    let _ = std::fs::remove_file(&target);
    let schema: i64 = sqlx::query("SELECT COALESCE(MAX(version), 0) AS v FROM _sqlx_migrations")
        .fetch_one(&db.pool)
        .await
        .and_then(|r| r.try_get("v"))
        .context("reading the schema version")?;
    let quoted = target.display().to_string().replace('\'', "''");
    sqlx::query(&format!("VACUUM INTO '{quoted}'")).execute(&db.pool).await.context("VACUUM INTO")?;
    if let Err(e) = scrub(&target).await {
        let _ = std::fs::remove_file(&target);
        return Err(e);
    }
    let compressed = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        let raw = std::fs::read(&target)?;
        let _ = std::fs::remove_file(&target);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&raw)?;
        gz.finish()
    })
    .await?
    .context("compressing the snapshot")?;
    Ok((compressed, schema))
}

/// Empties the secret tables of the copy at `path`, then rewrites it (`VACUUM`) so that no freed
/// page still holds what they held.
async fn scrub(path: &Path) -> anyhow::Result<()> {
    use sqlx::{ConnectOptions, Connection};
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
    let mut conn = options.connect().await.context("opening the snapshot")?;
    for table in SECRET_TABLES {
        let exists: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?")
                .bind(table)
                .fetch_one(&mut conn)
                .await
                .context("reading the snapshot's tables")?;
        if exists > 0 {
            sqlx::query(&format!("DELETE FROM \"{table}\""))
                .execute(&mut conn)
                .await
                .with_context(|| format!("removing {table} from the snapshot"))?;
        }
    }
    sqlx::query("VACUUM").execute(&mut conn).await.context("compacting the snapshot")?;
    conn.close().await.context("closing the snapshot")
}

/// What a restore at start did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// The dataset holds no snapshot: a fresh start.
    Empty,
    /// Restored this snapshot (its path) at this revision of the dataset; `skipped` are newer
    /// ones passed over, each with why.
    From { path: String, revision: String, skipped: Vec<String> },
}

/// How a restore reads and checks the backup dataset.
pub struct Restore<'a> {
    pub datasets: &'a dyn DatasetWriter,
    pub repo: &'a str,
    pub key: &'a SigningKey,
    /// The clock now (seconds since the epoch): later stamps are not the arena's.
    pub now_epoch: i64,
    /// The largest database a snapshot may decompress to.
    pub max_database_bytes: u64,
    /// A snapshot an editor named to restore on purpose (`ARENA_RESTORE_SNAPSHOT`).
    pub named: Option<&'a str>,
}

/// Restores the database file from the newest snapshot that the arena signed and that checks out
/// (its gzip within the bound, a SQLite file of a schema this build knows, `PRAGMA
/// integrity_check`) before the database is opened. Stops the start (an error) when the dataset
/// cannot be read, is public, or its newest verified snapshot is of a newer schema.
pub async fn restore(r: &Restore<'_>, db_path: &Path) -> anyhow::Result<Restored> {
    let repo = r.repo;
    let unreadable = |what: &str, e: DatasetError| match e {
        DatasetError::NotFound => anyhow::anyhow!(
            "{what}: the backup dataset {repo} is not there, or the arena's HF_TOKEN cannot read it; \
             create it as a private dataset (or give the token access), or unset ARENA_BACKUP_REPO to start \
             without backups. Not starting on an empty database"
        ),
        other => anyhow::anyhow!(
            "{what}: the backup dataset {repo} could not be read ({other}); not starting on older or empty \
             data. Start again once HF answers"
        ),
    };
    match r.datasets.is_private(repo).await {
        Ok(true) => {}
        Ok(false) => anyhow::bail!(
            "the backup dataset {repo} is public, and every snapshot of the database would be published \
             there: make it private"
        ),
        Err(e) => return Err(unreadable("reading its settings", e)),
    }
    let revision = r.datasets.head(repo).await.map_err(|e| unreadable("reading its head", e))?;
    if let Some(named) = r.named {
        return restore_named(r, named, &revision, db_path).await;
    }
    let listed =
        r.datasets.list(repo, backup::DIR, MAX_LISTED).await.map_err(|e| unreadable("listing it", e))?;
    let not_after = not_after(r.now_epoch);
    let (order, mut skipped) =
        backup::restore_order(&backup::newest_first(listed.iter().map(String::as_str)), &not_after);
    for why in &skipped {
        tracing::warn!(why, "a backup was passed over");
    }
    let mut history = History::default();
    for snap in order {
        let path = snap.path();
        let bytes = r
            .datasets
            .read(repo, &revision, &path, MAX_SNAPSHOT_BYTES)
            .await
            .map_err(|e| unreadable(&format!("reading {path}"), e))?;
        let checked = if !signed(r.key, &snap, &bytes) {
            Err(anyhow::anyhow!(
                "its signature is not the arena's (ARENA_BACKUP_KEY): not written by this arena, or altered"
            ))
        } else {
            // Signed and still on main: a corrupt one is the arena's own (a disk, a bug), which a
            // fall-back may pass over; only a newer one gone from main is a rollback.
            history.on_main.push(snap.clone());
            backup::check_schema(&snap, known_schema())?;
            // Nothing newer the arena signed may have been deleted or altered: that would be a
            // rollback by whoever can write the dataset.
            history.refuse_newer(r, &snap, &not_after).await?;
            check_snapshot(&snap, bytes, db_path, r.max_database_bytes).await
        };
        match checked {
            Ok(()) => {
                tracing::info!(repo, revision, snapshot = %path, "restored the database from its backup");
                return Ok(Restored::From { path, revision, skipped });
            }
            Err(why) => {
                let why = format!("{why:#}");
                tracing::warn!(snapshot = %path, why, "a backup did not check out; trying the one before");
                skipped.push(format!("{path}: {why}"));
            }
        }
    }
    anyhow::ensure!(skipped.is_empty(), "no backup in {repo} checks out: {}", skipped.join("; "));
    // An empty dataset whose history holds a snapshot the arena signed was emptied by someone.
    let empty = Snapshot { taken: String::new(), schema: 0, signature: String::new() };
    history.refuse_newer(r, &empty, &not_after).await?;
    Ok(Restored::Empty)
}

fn signed(key: &SigningKey, snap: &Snapshot, bytes: &[u8]) -> bool {
    key.verify(&[snap.signed_name().as_bytes(), b"\n", bytes], &snap.signature)
}

/// Commits of the backup dataset read at most, looking for a newer snapshot (a snapshot a minute
/// at most: days of history).
const MAX_COMMITS: usize = 5_000;
/// Snapshots named in the history that a restore reads to verify, at most; past it, it stops
/// rather than guess.
const MAX_VERIFIED: usize = 32;

/// What a restore learned of the dataset's history: every snapshot its commits' titles name (the
/// arena's own titles name their snapshot; deleted or not, a commit keeps it).
#[derive(Default)]
struct History {
    named: Option<Vec<(Snapshot, String)>>,
    /// Snapshots this restore read from main with the arena's signature.
    on_main: Vec<Snapshot>,
}

impl History {
    /// Stops the restore when the history holds a snapshot the arena signed that is newer than
    /// `restoring`: restoring would go back past it.
    async fn refuse_newer(
        &mut self,
        r: &Restore<'_>,
        restoring: &Snapshot,
        not_after: &str,
    ) -> anyhow::Result<()> {
        if self.named.is_none() {
            let mut named = Vec::new();
            r.datasets
                .commits(r.repo, MAX_COMMITS, &mut |page| {
                    named.extend(page.iter().filter_map(|c| Some((snapshot_in(&c.title)?, c.id.clone()))));
                    true
                })
                .await
                .with_context(|| format!("reading the history of the backup dataset {}", r.repo))?;
            self.named = Some(named);
        }
        let mut newer: Vec<&(Snapshot, String)> = self
            .named
            .iter()
            .flatten()
            .filter(|(s, _)| s.taken > restoring.taken && s.taken.as_str() <= not_after)
            .filter(|(s, _)| !self.on_main.contains(s))
            .collect();
        newer.sort_by(|a, b| b.0.cmp(&a.0));
        newer.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
        // Titles are anyone's to write: a name is believed only once its bytes at that commit verify.
        for (snap, commit) in newer.iter().take(MAX_VERIFIED) {
            match r.datasets.read(r.repo, commit, &snap.path(), MAX_SNAPSHOT_BYTES).await {
                Ok(bytes) if signed(r.key, snap, &bytes) => anyhow::bail!(
                    "the backup dataset {} no longer offers its newest snapshot: {} (written at commit {commit}, \
                     signed by this arena) is newer than {} and is deleted or altered on main. Restoring would roll \
                     the database back. Not starting; to restore an older snapshot on purpose, an editor names it in \
                     ARENA_RESTORE_SNAPSHOT",
                    r.repo,
                    snap.path(),
                    if restoring.taken.is_empty() { "anything main holds".to_string() } else { restoring.path() },
                ),
                Ok(_) => tracing::warn!(snapshot = %snap.path(), commit, "a commit names a snapshot the arena did not sign"),
                Err(e) => tracing::warn!(snapshot = %snap.path(), commit, error = %e, "a snapshot the history names cannot be read"),
            }
        }
        anyhow::ensure!(
            newer.len() <= MAX_VERIFIED,
            "the backup dataset {}'s history names {} snapshots newer than the one to restore, more than the {MAX_VERIFIED} \
             a restore verifies: not starting rather than guess; an editor names the snapshot in ARENA_RESTORE_SNAPSHOT",
            r.repo,
            newer.len()
        );
        Ok(())
    }
}

/// The snapshot a commit title names (`…: backups/arena-….sqlite.gz`).
fn snapshot_in(title: &str) -> Option<Snapshot> {
    title.split_whitespace().find_map(Snapshot::parse)
}

/// Restores the snapshot an editor named, from `main` or, once deleted, from the commit that wrote
/// it: signed by the arena and checked as any restore, but newer ones are left behind on purpose.
async fn restore_named(r: &Restore<'_>, named: &str, head: &str, db_path: &Path) -> anyhow::Result<Restored> {
    let snap = Snapshot::parse(named).with_context(|| {
        format!("ARENA_RESTORE_SNAPSHOT is `{named}`, not a snapshot's path (backups/arena-….sqlite.gz)")
    })?;
    let mut at = head.to_string();
    if r.datasets.list(r.repo, backup::DIR, MAX_LISTED).await.map_or(true, |l| !l.contains(&snap.path())) {
        let mut found = None;
        r.datasets
            .commits(r.repo, MAX_COMMITS, &mut |page| {
                found =
                    page.iter().find(|c| snapshot_in(&c.title).as_ref() == Some(&snap)).map(|c| c.id.clone());
                found.is_none()
            })
            .await
            .context("reading the backup dataset's history")?;
        at = found.with_context(|| format!("{named} is neither on main nor in the history of {}", r.repo))?;
    }
    let bytes = r.datasets.read(r.repo, &at, &snap.path(), MAX_SNAPSHOT_BYTES).await.context("reading it")?;
    anyhow::ensure!(signed(r.key, &snap, &bytes), "{named}: its signature is not the arena's");
    backup::check_schema(&snap, known_schema())?;
    check_snapshot(&snap, bytes, db_path, r.max_database_bytes).await?;
    tracing::warn!(repo = r.repo, revision = at, snapshot = named, "restored the snapshot an editor named");
    Ok(Restored::From {
        path: snap.path(),
        revision: at,
        skipped: vec![format!("named on purpose: {named}")],
    })
}

/// Checks one verified snapshot and, when it holds, puts it in place of the database.
async fn check_snapshot(snap: &Snapshot, bytes: Vec<u8>, db_path: &Path, max: u64) -> anyhow::Result<()> {
    let staged = PathBuf::from(format!("{}.restoring", db_path.display()));
    let unpacked = {
        let staged = staged.clone();
        tokio::task::spawn_blocking(move || unpack(&bytes, &staged, max)).await?
    };
    let verdict = match unpacked {
        Ok(()) => verify(&staged, snap.schema).await,
        Err(e) => Err(e),
    };
    if verdict.is_err() {
        let _ = std::fs::remove_file(&staged);
        return verdict;
    }
    for stale in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{stale}", db_path.display()));
    }
    std::fs::rename(&staged, db_path).context("putting the restored database in place")
}

/// Decompresses `gz` into `to`, streaming, and refuses it past `max` bytes (a bomb stops there).
fn unpack(gz: &[u8], to: &Path, max: u64) -> anyhow::Result<()> {
    let mut file = std::fs::File::create(to).context("staging the snapshot")?;
    let mut reader = flate2::read::GzDecoder::new(gz).take(max + 1);
    let written = std::io::copy(&mut reader, &mut file).context("not gzip")?;
    anyhow::ensure!(written <= max, "it decompresses past the database's bound of {max} bytes");
    file.sync_all().context("staging the snapshot")?;
    let mut head = [0u8; 16];
    let n =
        std::fs::File::open(to).and_then(|mut f| f.read(&mut head)).context("reading the staged snapshot")?;
    anyhow::ensure!(n == 16 && &head == b"SQLite format 3\0", "not a SQLite database");
    Ok(())
}

/// The staged file opens as SQLite, passes its integrity check, and is at the schema its name says.
async fn verify(path: &Path, schema: i64) -> anyhow::Result<()> {
    use sqlx::ConnectOptions;
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path).read_only(true);
    let mut conn = options.connect().await.context("does not open")?;
    let check: String =
        sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut conn).await.context("integrity check")?;
    anyhow::ensure!(check == "ok", "integrity check: {check}");
    let at: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations")
        .fetch_one(&mut conn)
        .await
        .context("no migrations table")?;
    anyhow::ensure!(at == schema, "it is at schema {at}, its name says {schema}");
    Ok(())
}
