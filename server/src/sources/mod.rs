//! Reading collections from HF datasets and public GitHub repositories at a pinned commit: the
//! port (`RepoReader`), its two HTTP adapters, and the bounded fetch that turns a request into a
//! validation report. Clients refuse redirects, and every address is built from the endpoint the
//! arena is configured with plus a checked `owner/name`, never from anything a request supplies.

pub mod fetch;
pub mod github;
pub mod hf;

use domain::collection::request::Source;
use domain::collection::Entry;

/// What can go wrong reading a repository.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("the repository was not found")]
    RepoNotFound,
    #[error("the revision `{0}` was not found")]
    RevisionNotFound(String),
    #[error("the repository is private")]
    Private,
    #[error("the repository is gated")]
    Gated,
    #[error("GitHub's hourly API limit for the arena ({limit} calls) is used up until {reset_epoch}")]
    RateLimited { limit: u64, reset_epoch: u64 },
    #[error("{0}")]
    TooLarge(String),
    /// One file cannot be read as it is listed (LFS storage): the check reports it.
    #[error("{0}")]
    Unreadable(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("`entry_path` `{0}` is not a directory at that commit")]
    NotADirectory(String),
}

/// A path of the listing (relative to the entry path) as a path in the repository.
pub fn in_repo(source: &Source, path: &str) -> String {
    if source.entry_path.is_empty() {
        path.to_string()
    } else {
        format!("{}/{path}", source.entry_path)
    }
}

/// A host of collections (HF datasets, GitHub): the port dataset and repository reads go
/// through. `list` answers paths relative to `dir` (the entry path).
#[async_trait::async_trait]
pub trait RepoReader: Send + Sync {
    async fn resolve(&self, source: &Source) -> Result<String, SourceError>;
    async fn list(&self, source: &Source, commit: &str) -> Result<(Vec<Entry>, u32), SourceError>;
    async fn read(&self, source: &Source, commit: &str, path: &str, max: u64)
        -> Result<Vec<u8>, SourceError>;
}

/// Percent-encodes each segment of a repository path.
/// Where HF's answer for an LFS file redirects: its storage, an `https` address. Followed once,
/// without the token, within the read's bounds; anything else is not followed. A Hub that is
/// itself a plain-HTTP loopback address (the local stand-in) keeps its storage on another
/// loopback port, which is followed too.
pub fn storage_redirect(resp: &reqwest::Response, endpoint: &str) -> Option<String> {
    let location = resp.headers().get(reqwest::header::LOCATION)?.to_str().ok()?;
    let to = resp.url().join(location).ok()?;
    let loopback = |u: &url::Url| match u.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    let local_hub = url::Url::parse(endpoint).is_ok_and(|e| e.scheme() == "http" && loopback(&e));
    (to.scheme() == "https" || (local_hub && to.scheme() == "http" && loopback(&to))).then(|| to.to_string())
}

pub fn encode_path(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            seg.bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Reads a body up to `max` bytes; more is an error, never a longer read.
pub async fn bounded_body(mut resp: reqwest::Response, max: u64) -> Result<Vec<u8>, SourceError> {
    if resp.content_length().is_some_and(|n| n > max) {
        return Err(SourceError::TooLarge(format!("a file is larger than {max} bytes")));
    }
    let mut out = Vec::new();
    while let Some(chunk) =
        resp.chunk().await.map_err(|e| SourceError::Unavailable(format!("reading a file failed: {e}")))?
    {
        if (out.len() + chunk.len()) as u64 > max {
            return Err(SourceError::TooLarge(format!("a file is larger than {max} bytes")));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Keeps the part of a listing under `dir`, relative to it.
pub fn under(entries: Vec<Entry>, dir: &str) -> Vec<Entry> {
    if dir.is_empty() {
        return entries;
    }
    let prefix = format!("{dir}/");
    entries
        .into_iter()
        .filter_map(|e| e.path.strip_prefix(&prefix).map(|p| Entry { path: p.to_string(), ..e.clone() }))
        .collect()
}
