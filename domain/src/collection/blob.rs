//! Git blob ids: `sha1("blob " + <byte length> + "\0" + <bytes>)`, as HF's tree listing (`oid`) and
//! GitHub's (`sha`) report them. Gates compare files by this id without reading them twice.

use sha1::{Digest, Sha1};

pub fn git_blob_id(bytes: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", bytes.len()).as_bytes());
    hasher.update(bytes);
    crate::digest::hex(hasher.finalize())
}

/// A git blob id is 40 lowercase hex digits.
pub fn is_blob_id(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_git_hash_object() {
        // `printf '' | git hash-object --stdin` and `echo hello | git hash-object --stdin`.
        assert_eq!(git_blob_id(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        assert_eq!(git_blob_id(b"hello\n"), "ce013625030ba8dba906f756967f9e9ca394464a");
        assert!(is_blob_id(&git_blob_id(b"x")));
        assert!(!is_blob_id("E69DE29BB2D1D6434B8B29AE775AD8C2E48C5391"));
    }
}
