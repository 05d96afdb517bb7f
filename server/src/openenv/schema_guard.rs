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

/// The bounds of one check: its wall time, the child's address space, and checks at once.
#[derive(Debug, Clone)]
pub struct Bounds {
    pub deadline: Duration,
    pub memory_mib: u64,
    pub at_once: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds { deadline: Duration::from_secs(2), memory_mib: 1024, at_once: 2 }
    }
}

/// Why a check gave no verdict.
#[derive(Debug, thiserror::Error)]
pub enum Unchecked {
    /// The child ran out of time or memory, or died (a stack overflow aborts it).
    #[error("{0}")]
    TooComplex(String),
    /// Every checker is busy past the wait.
    #[error("every schema checker is busy")]
    Busy,
    /// The checker could not be started (the arena's fault).
    #[error("the schema checker could not run: {0}")]
    Broken(String),
}

/// Runs [`SchemaCheck`]s in child processes of `exe` (this binary; tests name the built `arena`).
pub struct SchemaGuard {
    exe: PathBuf,
    bounds: Bounds,
    permits: tokio::sync::Semaphore,
}

impl SchemaGuard {
    pub fn new(exe: PathBuf, bounds: Bounds) -> SchemaGuard {
        let permits = tokio::sync::Semaphore::new(bounds.at_once.max(1));
        SchemaGuard { exe, bounds, permits }
    }

    /// The check's verdict: `Ok(Ok(()))` the schemas and actions pass, `Ok(Err(why))` they break
    /// a rule, `Err` no verdict.
    pub async fn check(&self, c: &SchemaCheck) -> Result<Result<(), Invalid>, Unchecked> {
        // A queue no longer than one deadline per checker: past it the caller is told to retry.
        let wait = self.bounds.deadline * 2;
        let _permit = tokio::time::timeout(wait, self.permits.acquire())
            .await
            .map_err(|_| Unchecked::Busy)?
            .map_err(|_| Unchecked::Busy)?;
        let input = serde_json::to_vec(c).map_err(|e| Unchecked::Broken(e.to_string()))?;
        let mut child = tokio::process::Command::new(&self.exe)
            .arg("check-schemas")
            .env_clear()
            .env("ARENA_SCHEMA_CHECK_MEMORY_MIB", self.bounds.memory_mib.to_string())
            .env("ARENA_SCHEMA_CHECK_CPU_S", (self.bounds.deadline.as_secs() + 1).to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
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
