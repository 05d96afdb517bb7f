//! A collection as the arena sees it before reading any file: a listing of paths (relative to the
//! collection root, `/`-separated) with their git blob ids and sizes, as HF's tree and GitHub's
//! git/trees report them. Everything is bounded here so a hostile repository costs a finding,
//! never a crash or an unbounded download.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

/// At most this many tasks in one collection (the guide's limit).
pub const MAX_TASKS: usize = 200;
/// At most this many files in a collection's listing.
pub const MAX_FILES: usize = 20_000;
/// A file the checks read is read only up to this size; larger ones are a finding.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// At most this many bytes read for one validation, whatever the number of files: every path
/// read counts, however many of them hold the same blob.
pub const MAX_READ_BYTES: u64 = 48 << 20;
/// A collection's files may total at most this many bytes, every listed path counted: a run's
/// mirror copies each path, so a collection that validates can always be launched.
pub const MAX_COLLECTION_BYTES: u64 = 48 << 20;
/// A path longer than this is refused.
pub const MAX_PATH_LEN: usize = 512;

/// One file of the listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub path: String,
    /// The git blob id (40 hex).
    pub blob: String,
    pub size: u64,
    /// A symbolic link: never followed, always refused inside a task.
    #[serde(default)]
    pub symlink: bool,
}

/// The bytes read for some of the listing's paths; paths with the same blob share one [`Blob`].
pub type Contents = BTreeMap<String, Blob>;

/// A file's bytes as read, shared by every path that holds the same blob (a collection made from
/// one template repeats its files), with its text decoded once, when first asked for.
#[derive(Clone)]
pub struct Blob(Arc<BlobInner>);

struct BlobInner {
    bytes: Box<[u8]>,
    text: OnceLock<Option<Arc<str>>>,
    lossy: OnceLock<Arc<str>>,
}

impl Blob {
    pub fn new(bytes: impl Into<Box<[u8]>>) -> Blob {
        Blob(Arc::new(BlobInner { bytes: bytes.into(), text: OnceLock::new(), lossy: OnceLock::new() }))
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0.bytes
    }

    pub fn len(&self) -> usize {
        self.0.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.bytes.is_empty()
    }

    /// Its text: UTF-8 without NUL, else `None`.
    pub fn text(&self) -> Option<Arc<str>> {
        self.0
            .text
            .get_or_init(|| {
                std::str::from_utf8(&self.0.bytes).ok().filter(|t| !t.contains('\0')).map(Arc::from)
            })
            .clone()
    }

    /// Its text read loosely: invalid sequences replaced.
    pub fn lossy(&self) -> Arc<str> {
        self.0.lossy.get_or_init(|| Arc::from(String::from_utf8_lossy(&self.0.bytes))).clone()
    }

    /// Whether both are the one buffer.
    pub fn shares(&self, other: &Blob) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Blob({} bytes)", self.len())
    }
}

impl PartialEq for Blob {
    fn eq(&self, other: &Blob) -> bool {
        self.bytes() == other.bytes()
    }
}

/// What the listing's files total, every path counted (symbolic links are never read).
pub fn listed_bytes(listing: &[Entry]) -> u64 {
    listing.iter().filter(|e| !e.symlink).map(|e| e.size).sum()
}

/// Why a path cannot be accepted, if it cannot: `..`, `.`, empty or absolute components,
/// backslashes and control characters could escape the task or confuse a checker.
pub fn unsafe_path(path: &str) -> Option<&'static str> {
    if path.is_empty() || path.len() > MAX_PATH_LEN {
        return Some("is empty or longer than 512 characters");
    }
    if path.starts_with('/') {
        return Some("is absolute");
    }
    if path.contains('\\') || path.chars().any(char::is_control) {
        return Some("holds a backslash or a control character");
    }
    if path.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Some("has an empty, `.` or `..` component");
    }
    None
}

/// Builds a listing from files held in memory (uploads, tests, the browser checker): the blob id
/// is computed, as git would.
pub fn from_files<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8], bool)>) -> (Vec<Entry>, Contents) {
    let mut listing = Vec::new();
    let mut contents = Contents::new();
    let mut by_blob: BTreeMap<String, Blob> = BTreeMap::new();
    for (path, bytes, symlink) in files {
        let blob = super::blob::git_blob_id(bytes);
        let shared = by_blob.entry(blob.clone()).or_insert_with(|| Blob::new(bytes)).clone();
        listing.push(Entry { path: path.to_string(), blob, size: bytes.len() as u64, symlink });
        contents.insert(path.to_string(), shared);
    }
    listing.sort_by(|a, b| a.path.cmp(&b.path));
    (listing, contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_paths_that_could_escape() {
        for bad in ["", "/etc/passwd", "envs/../x", "envs/./x", "envs//x", "a\\b", "a\nb", "envs/x/.."] {
            assert!(unsafe_path(bad).is_some(), "{bad:?}");
        }
        for good in ["envs/x/task.md", ".gitattributes", "envs/x/..hidden", "tasks/a b/c.txt"] {
            assert!(unsafe_path(good).is_none(), "{good:?}");
        }
    }
}
