//! A collection as the arena sees it before reading any file: a listing of paths (relative to the
//! collection root, `/`-separated) with their git blob ids and sizes, as HF's tree and GitHub's
//! git/trees report them. Everything is bounded here so a hostile repository costs a finding,
//! never a crash or an unbounded download.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// At most this many tasks in one collection (the guide's limit).
pub const MAX_TASKS: usize = 200;
/// At most this many files in a collection's listing.
pub const MAX_FILES: usize = 20_000;
/// A file the checks read is read only up to this size; larger ones are a finding.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// At most this many bytes read for one validation, whatever the number of files.
pub const MAX_READ_BYTES: u64 = 48 << 20;
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

/// The bytes read for some of the listing's paths.
pub type Contents = BTreeMap<String, Vec<u8>>;

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
    for (path, bytes, symlink) in files {
        listing.push(Entry {
            path: path.to_string(),
            blob: super::blob::git_blob_id(bytes),
            size: bytes.len() as u64,
            symlink,
        });
        contents.insert(path.to_string(), bytes.to_vec());
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
