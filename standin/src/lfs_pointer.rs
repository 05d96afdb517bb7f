//! The pointer text git keeps in place of an LFS object: written by the stand-in's commits (`lfs`,
//! `writes`) and read back by its trees (`repos`), both looking down at this one module.

const POINTER_HEAD: &str = "version https://git-lfs.github.com/spec/v1\n";

/// The pointer text git keeps for an LFS object.
pub fn pointer(oid: &str, size: u64) -> String {
    format!("{POINTER_HEAD}oid sha256:{oid}\nsize {size}\n")
}

/// The object a pointer names: (sha256, size).
pub fn read_pointer(bytes: &[u8]) -> Option<(String, u64)> {
    let text = std::str::from_utf8(bytes).ok()?.strip_prefix(POINTER_HEAD)?;
    let mut lines = text.lines();
    let oid = lines.next()?.strip_prefix("oid sha256:")?;
    let size = lines.next()?.strip_prefix("size ")?.parse().ok()?;
    (is_oid(oid) && lines.next().is_none()).then(|| (oid.to_string(), size))
}

/// A sha256 in lower-case hex, as LFS names its objects.
pub fn is_oid(oid: &str) -> bool {
    oid.len() == 64 && oid.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
