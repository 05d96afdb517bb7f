//! A task's content hash: `sha256:` over its files' paths (relative to the task directory, sorted)
//! and git blob ids, computed from the repository listing alone. A result can then name exactly
//! which task content it trained on.

use sha2::{Digest, Sha256};

/// `files` are (path relative to the task directory, git blob id); order does not matter.
pub fn task_identity<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut entries: Vec<(&str, &str)> = files.into_iter().collect();
    entries.sort_unstable();
    let mut hasher = Sha256::new();
    for (path, blob) in entries {
        // One line per file; a path cannot hold a newline in a listing the arena accepts.
        hasher.update(path.as_bytes());
        hasher.update(b"\0");
        hasher.update(blob.as_bytes());
        hasher.update(b"\n");
    }
    let hex = crate::digest::hex(hasher.finalize());
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "ce013625030ba8dba906f756967f9e9ca394464a";
    const B: &str = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";

    #[test]
    fn is_independent_of_listing_order() {
        let one = task_identity([("task.md", A), ("oracle/solve.sh", B)]);
        let two = task_identity([("oracle/solve.sh", B), ("task.md", A)]);
        assert_eq!(one, two);
        assert!(one.starts_with("sha256:") && one.len() == 7 + 64);
    }

    #[test]
    fn changes_with_any_path_or_content() {
        let base = task_identity([("task.md", A), ("oracle/solve.sh", B)]);
        assert_ne!(base, task_identity([("task.md", B), ("oracle/solve.sh", B)]));
        assert_ne!(base, task_identity([("TASK.md", A), ("oracle/solve.sh", B)]));
        assert_ne!(base, task_identity([("task.md", A)]));
        // Moving bytes between path and id cannot collide thanks to the separators.
        assert_ne!(task_identity([("ab", "c")]), task_identity([("a", "bc")]));
    }
}
