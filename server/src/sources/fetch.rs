//! One validation's reads: resolve the revision to a commit, list the tree once, then fetch only
//! the files the checks need, each distinct blob once (a collection built from one template holds
//! the same Dockerfile and `test.sh` many times), with at most `concurrency` requests in flight.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use domain::collection::listing::{listed_bytes, Blob, MAX_COLLECTION_BYTES, MAX_FILE_BYTES};
use domain::collection::request::{RepoType, Source};
use domain::collection::{package, Contents, Entry, Report};
use domain::gates::fingerprint::HeldOut;
use futures_util::{stream, StreamExt, TryStreamExt};
use serde::Serialize;
use tokio::sync::Semaphore;
use utoipa::ToSchema;

use super::{RepoReader, SourceError};

/// What one validation cost.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FetchStats {
    /// HTTP requests made to the host (resolve + listing pages + file reads).
    pub requests: u32,
    pub listed_files: usize,
    pub files_read: usize,
    pub bytes_read: u64,
    pub millis: u64,
}

pub struct Fetched {
    pub commit: String,
    pub report: Report,
    pub stats: FetchStats,
}

/// Both hosts, and how much validation may run at once.
pub struct Sources {
    pub hf: Arc<dyn RepoReader>,
    pub github: Arc<dyn RepoReader>,
    pub concurrency: usize,
    /// Validations running at once; more wait their turn (each holds its files in memory).
    pub running: Semaphore,
    /// Stateless checks (`/api/check`, no identity) running at once, apart from validations.
    pub checking: Semaphore,
    /// Checks waiting for their turn; past `CHECK_QUEUE`, more are refused.
    check_waiting: std::sync::atomic::AtomicUsize,
    /// Validations per account (`VALIDATIONS_PER_ACCOUNT`).
    validations: std::sync::Mutex<domain::limits::Windows<String>>,
    pub validations_per_hour: usize,
    started: Instant,
}

/// Validations (and submissions, which validate) one account may run an hour
/// (`ARENA_VALIDATIONS_PER_HOUR`, default 30): each compares its prompts with the sealed held-out
/// suite, so unlimited attempts would make that suite an oracle. Per server; editors are not
/// limited.
pub const VALIDATION_WINDOW_MS: u64 = 3_600_000;

/// Checks that may wait for a turn at once (each holds only its connection while it waits).
pub const CHECK_QUEUE: usize = 16;

impl Sources {
    pub fn new(
        hf: Arc<dyn RepoReader>,
        github: Arc<dyn RepoReader>,
        concurrency: usize,
        validations_per_hour: usize,
    ) -> Self {
        let per_account =
            domain::limits::Window { cap: validations_per_hour, window_ms: VALIDATION_WINDOW_MS };
        Sources {
            hf,
            github,
            concurrency: concurrency.max(1),
            running: Semaphore::new(4),
            checking: Semaphore::new(2),
            check_waiting: std::sync::atomic::AtomicUsize::new(0),
            validations: std::sync::Mutex::new(domain::limits::Windows::new(per_account, 100_000)),
            validations_per_hour,
            started: Instant::now(),
        }
    }

    /// Counts one validation for `account`, or answers the seconds until it may run another.
    pub fn admit_validation(&self, account: &str) -> Result<(), u64> {
        let now = self.started.elapsed().as_millis() as u64;
        let mut windows = self.validations.lock().unwrap_or_else(|p| p.into_inner());
        windows.admit(&account.to_string(), now).map_err(|ms| ms.div_ceil(1000).max(1))
    }

    /// Checks waiting for a turn now.
    pub fn checks_waiting(&self) -> usize {
        self.check_waiting.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A turn for one stateless check: waits behind the ones running, or refuses with
    /// `CAPACITY_BUSY` when `CHECK_QUEUE` are waiting already.
    pub async fn check_turn(&self) -> Result<tokio::sync::SemaphorePermit<'_>, crate::http::ApiError> {
        use std::sync::atomic::Ordering;
        if let Ok(permit) = self.checking.try_acquire() {
            return Ok(permit);
        }
        let busy = || {
            crate::http::ApiError::new(
                domain::ErrorCode::CapacityBusy,
                "the arena is checking other uploads; try again shortly",
            )
            .retry_after(5)
        };
        // Counted out again however the wait ends, a client that hangs up included.
        struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let waiting = Waiting(&self.check_waiting);
        if waiting.0.fetch_add(1, Ordering::SeqCst) >= CHECK_QUEUE {
            return Err(busy());
        }
        let permit = self.checking.acquire().await.map_err(|_| busy());
        drop(waiting);
        permit
    }

    pub async fn validate(&self, source: &Source, heldout: HeldOut) -> Result<Fetched, SourceError> {
        let _turn =
            self.running.acquire().await.map_err(|_| SourceError::Unavailable("shutting down".into()))?;
        match source.repo_type {
            RepoType::Dataset => validate(&self.hf, source, heldout, self.concurrency).await,
            RepoType::Github => validate(&self.github, source, heldout, self.concurrency).await,
        }
    }
}

impl Sources {
    /// Every file of a collection at a commit (for the run's mirror), each distinct blob read once
    /// and within the same bounds as a validation.
    pub async fn snapshot(
        &self,
        source: &Source,
        commit: &str,
    ) -> Result<(Vec<Entry>, Contents), SourceError> {
        let _turn =
            self.running.acquire().await.map_err(|_| SourceError::Unavailable("shutting down".into()))?;
        match source.repo_type {
            RepoType::Dataset => snapshot(&self.hf, source, commit, self.concurrency).await,
            RepoType::Github => snapshot(&self.github, source, commit, self.concurrency).await,
        }
    }
}

async fn snapshot(
    reader: &Arc<dyn RepoReader>,
    source: &Source,
    commit: &str,
    concurrency: usize,
) -> Result<(Vec<Entry>, Contents), SourceError> {
    let (listing, _) = reader.list(source, commit).await?;
    if listing.len() > domain::collection::listing::MAX_FILES {
        return Err(SourceError::TooLarge(format!(
            "more than {} files",
            domain::collection::listing::MAX_FILES
        )));
    }
    let too_large = || {
        SourceError::TooLarge(format!(
            "the collection's files total more than {} MiB, every path counted",
            MAX_COLLECTION_BYTES >> 20
        ))
    };
    // Refused before reading: a collection stored before the bound existed may be larger.
    if listed_bytes(&listing) > MAX_COLLECTION_BYTES {
        return Err(too_large());
    }
    let paths: Vec<String> = listing.iter().filter(|e| !e.symlink).map(|e| e.path.clone()).collect();
    // Every file whole, whatever its size within the collection's bound (a task's 2 MB PDF, a
    // recording), or the mirror fails naming it: a run never trains on a collection missing a
    // file. A host whose files are larger than their listing said stops the reads once past it.
    let reads =
        Reads { per_file: MAX_COLLECTION_BYTES, every_file: true, budget: Some(MAX_COLLECTION_BYTES) };
    let (contents, _, _) = read_blobs(reader, source, commit, &listing, paths, concurrency, reads).await?;
    Ok((listing, contents))
}

/// How `read_blobs` reads.
#[derive(Clone, Copy)]
struct Reads {
    /// The largest file read.
    per_file: u64,
    /// A file that cannot be read (larger than `per_file`, or refused) fails the reads, naming
    /// it; otherwise it is left out, and the checks report it.
    every_file: bool,
    /// The reads stop with `TooLarge` as soon as the paths read so far pass it.
    budget: Option<u64>,
}

/// Reads `paths` of a listing, each distinct blob once into one buffer that every path holding
/// it shares, `concurrency` at a time, as `how` says. Answers the contents, the blobs read and
/// their bytes.
async fn read_blobs(
    reader: &Arc<dyn RepoReader>,
    source: &Source,
    commit: &str,
    listing: &[Entry],
    paths: Vec<String>,
    concurrency: usize,
    how: Reads,
) -> Result<(Contents, usize, u64), SourceError> {
    let budget = how.budget;
    let blob_of: BTreeMap<&str, &str> = listing.iter().map(|e| (e.path.as_str(), e.blob.as_str())).collect();
    let mut by_blob: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in paths {
        if let Some(blob) = blob_of.get(path.as_str()) {
            by_blob.entry(blob.to_string()).or_default().push(path);
        }
    }
    // Owned captures: each read is its own future, independent of this function's borrows.
    let mut reads = stream::iter(by_blob.into_values())
        .map(|paths| {
            let (reader, source, commit) = (reader.clone(), source.clone(), commit.to_string());
            async move {
                match reader.read(&source, &commit, &paths[0], how.per_file).await {
                    Ok(bytes) => Ok((paths, Some(bytes))),
                    Err(SourceError::TooLarge(why) | SourceError::Unreadable(why)) if how.every_file => {
                        Err(SourceError::Unreadable(format!("`{}` could not be read: {why}", paths[0])))
                    }
                    // Larger than the listing said: left unread, the check reports it.
                    Err(SourceError::TooLarge(_) | SourceError::Unreadable(_)) => Ok((paths, None)),
                    Err(e) => Err(e),
                }
            }
        })
        .buffer_unordered(concurrency);
    let mut contents = Contents::new();
    let (mut files_read, mut bytes_read, mut counted) = (0usize, 0u64, 0u64);
    while let Some((paths, bytes)) = reads.try_next().await? {
        files_read += 1;
        let Some(bytes) = bytes else { continue };
        bytes_read += bytes.len() as u64;
        counted += bytes.len() as u64 * paths.len() as u64;
        if budget.is_some_and(|b| counted > b) {
            return Err(SourceError::TooLarge(format!(
                "the files read total more than {} MiB, every path counted",
                budget.unwrap_or(0) >> 20
            )));
        }
        let blob = Blob::new(bytes);
        for p in paths {
            contents.insert(p, blob.clone());
        }
    }
    Ok((contents, files_read, bytes_read))
}

pub async fn validate(
    reader: &Arc<dyn RepoReader>,
    source: &Source,
    heldout: HeldOut,
    concurrency: usize,
) -> Result<Fetched, SourceError> {
    let started = Instant::now();
    let commit = reader.resolve(source).await?;
    let (listing, pages) = reader.list(source, &commit).await?;
    let layout = package::discover(&listing);
    let reads = package::reads(&layout);
    let how = Reads { per_file: MAX_FILE_BYTES, every_file: false, budget: None };
    let (contents, files_read, bytes_read) =
        read_blobs(reader, source, &commit, &listing, reads, concurrency, how).await?;
    let listed_files = listing.len();
    // The checks are CPU work: off the async workers, so one validation never stalls the others.
    let report =
        tokio::task::spawn_blocking(move || domain::collection::check(&listing, &contents, &heldout))
            .await
            .map_err(|e| SourceError::Unavailable(format!("the checks failed: {e}")))?;
    let stats = FetchStats {
        requests: 1 + pages + files_read as u32,
        listed_files,
        files_read,
        bytes_read,
        millis: started.elapsed().as_millis() as u64,
    };
    Ok(Fetched { commit, report, stats })
}
