//! A submission's JSON Schemas are compiled and its actions validated in a process of their own.
//! The schemas are participant data handed to a third-party compiler (`jsonschema`), whose bugs
//! are not ours to find one request at a time: a schema that sent it into unbounded recursion
//! overflowed a tokio worker's stack and aborted the arena with every run it was following. A
//! stack overflow aborts the whole process whatever thread it happens on, so no thread can
//! contain one; a child process can. The child (`arena check-schemas`, this binary) reads one
//! [`SchemaCheck`] on stdin, runs it (`domain::openenv::schema`) under an address-space and CPU
//! limit, and writes its verdict on stdout; it is killed at the deadline. Whatever happens to it,
//! the arena answers: the verdict, or `SCHEMA_INVALID` saying the schema is too complex to check.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use domain::invalid::Invalid;
use domain::openenv::schema::SchemaCheck;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the child answers on stdout.
#[derive(Debug, Serialize, Deserialize)]
struct Verdict {
    /// The rule the schemas or actions break; none: they pass.
    refused: Option<String>,
}

/// The bounds of one check: its wall time, the child's address space, and checks at once; and
/// each account's share: one check at a time, `per_minute` started in any minute, and at most
/// `waiting` checks waiting for a checker in all (beyond, the server is busy at once).
#[derive(Debug, Clone)]
pub struct Bounds {
    pub deadline: Duration,
    pub memory_mib: u64,
    pub at_once: usize,
    pub per_minute: usize,
    pub waiting: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds { deadline: Duration::from_secs(2), memory_mib: 1024, at_once: 2, per_minute: 20, waiting: 8 }
    }
}

/// Why a check gave no verdict.
#[derive(Debug, thiserror::Error)]
pub enum Unchecked {
    /// The child ran out of time or memory, or died (a stack overflow aborts it).
    #[error("{0}")]
    TooComplex(String),
    /// Every checker is busy past the wait, or the wait list is full.
    #[error("every schema checker is busy")]
    Busy,
    /// The account has a check under way, or started its minute's share: it may send again in
    /// this many seconds.
    #[error("{why}")]
    Throttled { why: String, retry_after_s: u64 },
    /// The checker could not be started (the arena's fault).
    #[error("the schema checker could not run: {0}")]
    Broken(String),
}

/// Runs [`SchemaCheck`]s in child processes of `exe` (this binary; tests name the built `arena`),
/// shared fairly: an account has one check under way at most and a share a minute, so one
/// account's flood of slow schemas holds one checker and leaves the others to everyone else.
pub struct SchemaGuard {
    exe: PathBuf,
    bounds: Bounds,
    permits: tokio::sync::Semaphore,
    accounts: std::sync::Mutex<std::collections::HashMap<String, Share>>,
    waiting: std::sync::atomic::AtomicUsize,
}

/// An account's use of the checkers: its checks one at a time (`turn`), how many of them are under
/// way or waiting for their turn, and when its checks of the last minute started.
struct Share {
    turn: std::sync::Arc<tokio::sync::Semaphore>,
    queued: usize,
    started: std::collections::VecDeque<std::time::Instant>,
}

impl Default for Share {
    fn default() -> Self {
        Share {
            turn: std::sync::Arc::new(tokio::sync::Semaphore::new(1)),
            queued: 0,
            started: Default::default(),
        }
    }
}

/// An account's check, under way or waiting for its turn: its place is given back however the
/// check ends.
struct Holding<'a> {
    guard: &'a SchemaGuard,
    account: String,
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        let mut accounts = self.guard.accounts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(share) = accounts.get_mut(&self.account) {
            share.queued = share.queued.saturating_sub(1);
        }
    }
}

/// A place on the wait list, given back on drop.
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The accounts a guard remembers at most (their last minute's starts); idle ones are forgotten.
const MAX_ACCOUNTS: usize = 10_000;
/// An account's checks under way or waiting for their turn at most; more are refused at once.
const PER_ACCOUNT_QUEUE: usize = 4;

impl SchemaGuard {
    pub fn new(exe: PathBuf, bounds: Bounds) -> SchemaGuard {
        let permits = tokio::sync::Semaphore::new(bounds.at_once.max(1));
        SchemaGuard { exe, bounds, permits, accounts: Default::default(), waiting: Default::default() }
    }

    /// Takes a place in `account`'s line, before anything is parsed or started; refused when the
    /// account has PER_ACCOUNT_QUEUE checks under way or waiting, or started its minute's share.
    /// Answers the place and the account's turn to wait for.
    fn hold(
        &self,
        account: &str,
    ) -> Result<(Holding<'_>, std::sync::Arc<tokio::sync::Semaphore>), Unchecked> {
        let now = std::time::Instant::now();
        let minute = Duration::from_secs(60);
        let mut accounts = self.accounts.lock().unwrap_or_else(|e| e.into_inner());
        if accounts.len() >= MAX_ACCOUNTS {
            accounts.retain(|_, s| {
                s.queued > 0 || s.started.back().is_some_and(|t| now.duration_since(*t) < minute)
            });
        }
        let share = accounts.entry(account.to_string()).or_default();
        while share.started.front().is_some_and(|t| now.duration_since(*t) >= minute) {
            share.started.pop_front();
        }
        if share.queued >= PER_ACCOUNT_QUEUE {
            return Err(Unchecked::Throttled {
                why: format!(
                    "{} schema checks of your account are under way or waiting: they run one at a time",
                    share.queued
                ),
                retry_after_s: self.bounds.deadline.as_secs().max(1),
            });
        }
        if share.started.len() >= self.bounds.per_minute.max(1) {
            let frees =
                share.started.front().map_or(minute, |t| minute.saturating_sub(now.duration_since(*t)));
            return Err(Unchecked::Throttled {
                why: format!("your account started {} schema checks in the last minute", share.started.len()),
                retry_after_s: frees.as_secs().max(1),
            });
        }
        share.queued += 1;
        share.started.push_back(now);
        Ok((Holding { guard: self, account: account.to_string() }, share.turn.clone()))
    }

    /// The check's verdict: `Ok(Ok(()))` the schemas and actions pass, `Ok(Err(why))` they break
    /// a rule, `Err` no verdict. `account` is whose share it takes: its checks run one at a time,
    /// so an account holds one checker at most and the others stay free for everyone else.
    pub async fn check(&self, account: &str, c: &SchemaCheck) -> Result<Result<(), Invalid>, Unchecked> {
        let (_holding, turn) = self.hold(account)?;
        // The account's own checks wait for each other first (as long as theirs take at most).
        let wait = self.bounds.deadline * (PER_ACCOUNT_QUEUE as u32 + 1);
        let _turn = tokio::time::timeout(wait, turn.acquire_owned())
            .await
            .map_err(|_| Unchecked::Busy)?
            .map_err(|_| Unchecked::Busy)?;
        // Then a bounded wait list for a checker, and a wait no longer than one deadline per
        // checker: past either, the caller is told to retry.
        if self.waiting.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= self.bounds.waiting.max(1) {
            self.waiting.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            return Err(Unchecked::Busy);
        }
        let waiting = Waiting(&self.waiting);
        let _permit = tokio::time::timeout(self.bounds.deadline * 2, self.permits.acquire())
            .await
            .map_err(|_| Unchecked::Busy)?
            .map_err(|_| Unchecked::Busy)?;
        drop(waiting);
        let input = serde_json::to_vec(c).map_err(|e| Unchecked::Broken(e.to_string()))?;
        let mut command = tokio::process::Command::new(&self.exe);
        command
            .arg("check-schemas")
            .env_clear()
            .env("ARENA_SCHEMA_CHECK_MEMORY_MIB", self.bounds.memory_mib.to_string())
            .env("ARENA_SCHEMA_CHECK_CPU_S", (self.bounds.deadline.as_secs() + 1).to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut child = spawn_when_not_busy(&mut command)
            .await
            .map_err(|e| Unchecked::Broken(format!("{}: {e}", self.exe.display())))?;
        let mut stdin = child.stdin.take().ok_or_else(|| Unchecked::Broken("no stdin".into()))?;
        let mut stdout = child.stdout.take().ok_or_else(|| Unchecked::Broken("no stdout".into()))?;
        let talk = async {
            // A child that dies before reading all of it closes the pipe: its exit says why.
            let _ = stdin.write_all(&input).await;
            drop(stdin);
            let mut out = Vec::new();
            let _ = (&mut stdout).take(MAX_VERDICT_BYTES).read_to_end(&mut out).await;
            (child.wait().await, out)
        };
        let (status, out) = match tokio::time::timeout(self.bounds.deadline, talk).await {
            Ok(done) => done,
            Err(_) => {
                return Err(Unchecked::TooComplex(format!(
                    "checking it took longer than {} s",
                    self.bounds.deadline.as_secs_f32()
                )))
            }
        };
        let status = status.map_err(|e| Unchecked::Broken(e.to_string()))?;
        match serde_json::from_slice::<Verdict>(&out) {
            Ok(v) if status.success() => Ok(v.refused.map_or(Ok(()), |why| Err(Invalid(why)))),
            _ => Err(Unchecked::TooComplex(format!(
                "checking it needed more than {} MiB of memory or a deeper stack than the checker has ({status})",
                self.bounds.memory_mib
            ))),
        }
    }
}

/// Spawns `command`, trying again while its program is busy being written (`ETXTBSY`): a file
/// just written is executable only once every descriptor open on it for writing is closed, and a
/// `fork` on another thread (any child this process starts) holds a copy of such a descriptor
/// until that child's `exec`, so a freshly installed binary can be refused for a moment.
async fn spawn_when_not_busy(
    command: &mut tokio::process::Command,
) -> std::io::Result<tokio::process::Child> {
    let mut pause = Duration::from_millis(5);
    for _ in 0..SPAWN_TRIES {
        match command.spawn() {
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ETXTBSY as i32) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            other => return other,
        }
    }
    command.spawn()
}

/// Spawn attempts while the program is busy (about 2 s in all).
const SPAWN_TRIES: usize = 16;

/// A verdict is a sentence; more is not one.
const MAX_VERDICT_BYTES: u64 = 64 << 10;
/// The checking thread's stack.
const CHECK_STACK_BYTES: usize = 8 << 20;
/// The most a check's input may be (a body is 64 KiB).
const MAX_INPUT_BYTES: u64 = 1 << 20;

/// `arena check-schemas`: the child's side. Limits itself (address space and CPU from the
/// environment the guard sets), reads one check on stdin, prints its verdict. No tokio runtime
/// and no tracing: a fresh process that does one thing.
pub fn child_main() -> anyhow::Result<()> {
    use nix::sys::resource::{setrlimit, Resource};
    use std::io::{Read, Write};
    let limit = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    if let Some(mib) = limit("ARENA_SCHEMA_CHECK_MEMORY_MIB") {
        setrlimit(Resource::RLIMIT_AS, mib << 20, mib << 20)?;
    }
    if let Some(s) = limit("ARENA_SCHEMA_CHECK_CPU_S") {
        setrlimit(Resource::RLIMIT_CPU, s, s)?;
    }
    let mut input = Vec::new();
    std::io::stdin().take(MAX_INPUT_BYTES).read_to_end(&mut input)?;
    let check: SchemaCheck = serde_json::from_slice(&input)?;
    // On a thread with a stack of its own size, whatever `ulimit -s` the arena was started
    // under: a compiler that recurses too deep overflows it and aborts this child only.
    let refused = std::thread::Builder::new()
        .name("check-schemas".into())
        .stack_size(CHECK_STACK_BYTES)
        .spawn(move || check.run().err().map(|e| e.0))?
        .join()
        .map_err(|_| anyhow::anyhow!("the schema check panicked"))?;
    let verdict = Verdict { refused };
    std::io::stdout().write_all(&serde_json::to_vec(&verdict)?)?;
    Ok(())
}
