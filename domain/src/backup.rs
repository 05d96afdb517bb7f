//! Backups of the SQLite database to a private dataset: what a snapshot is called (its time, the
//! schema it was taken at and the SHA-256 of its compressed bytes, all in its path, so that a
//! listing says everything a restore needs), which ones a new commit keeps, and which one a
//! restore tries first. Pure: the server takes, uploads and downloads them.

/// Where snapshots live in the backup dataset.
pub const DIR: &str = "backups";

/// One snapshot, as its path names it:
/// `backups/arena-{YYYYMMDDTHHMMSSZ}-s{schema}-{sha256}.sqlite.gz`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Snapshot {
    /// UTC, `20261202T015500Z`: sorts as time does.
    pub taken: String,
    /// The newest migration applied to the database it was taken of.
    pub schema: i64,
    /// SHA-256 of the compressed file, lower-case hex.
    pub sha256: String,
}

impl Snapshot {
    pub fn path(&self) -> String {
        format!("{DIR}/arena-{}-s{}-{}.sqlite.gz", self.taken, self.schema, self.sha256)
    }

    /// Reads a path of the dataset; `None` for anything that is not a snapshot.
    pub fn parse(path: &str) -> Option<Snapshot> {
        let name =
            path.strip_prefix(DIR)?.strip_prefix('/')?.strip_prefix("arena-")?.strip_suffix(".sqlite.gz")?;
        let (taken, rest) = name.split_once("-s")?;
        let (schema, sha256) = rest.split_once('-')?;
        let stamp_ok = taken.len() == 16
            && taken.as_bytes()[8] == b'T'
            && taken.ends_with('Z')
            && taken.bytes().enumerate().all(|(i, b)| i == 8 || i == 15 || b.is_ascii_digit());
        let hex_ok =
            sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let schema: i64 = schema.parse().ok().filter(|s| *s >= 0)?;
        (stamp_ok && hex_ok).then(|| Snapshot { taken: taken.into(), schema, sha256: sha256.into() })
    }
}

/// `2026-12-02T01:55:00Z` (RFC 3339, UTC) as a snapshot's stamp.
pub fn stamp(rfc3339: &str) -> Option<String> {
    let digits: String = rfc3339.chars().take(19).filter(char::is_ascii_digit).collect();
    (digits.len() == 14 && rfc3339.len() >= 19).then(|| format!("{}T{}Z", &digits[..8], &digits[8..]))
}

/// The snapshots in a listing, newest first.
pub fn newest_first<'a>(paths: impl IntoIterator<Item = &'a str>) -> Vec<Snapshot> {
    let mut all: Vec<Snapshot> = paths.into_iter().filter_map(Snapshot::parse).collect();
    all.sort_by(|a, b| b.cmp(a));
    all.dedup();
    all
}

/// What a commit that adds `new` deletes so that `keep` snapshots remain, `new` among them.
pub fn pruned(existing: &[Snapshot], new: &Snapshot, keep: usize) -> Vec<Snapshot> {
    let mut all: Vec<&Snapshot> = existing.iter().filter(|s| *s != new).collect();
    all.sort_by(|a, b| b.cmp(a));
    all.into_iter().skip(keep.max(1) - 1).cloned().collect()
}

/// Why a restore refuses to go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the newest backup ({path}) was taken at schema {found}, newer than this build's {known}: start the build that took it (a rollback would lose its data)"
)]
pub struct NewerSchema {
    pub path: String,
    pub found: i64,
    pub known: i64,
}

/// The snapshots a restore tries, in order: newest first (a corrupt one falls back to the one
/// before). The newest from a schema this build does not know stops it: going back past it would
/// silently lose what it holds.
pub fn restore_order(listing: &[Snapshot], known_schema: i64) -> Result<Vec<Snapshot>, NewerSchema> {
    let mut order = listing.to_vec();
    order.sort_by(|a, b| b.cmp(a));
    match order.first() {
        Some(newest) if newest.schema > known_schema => {
            Err(NewerSchema { path: newest.path(), found: newest.schema, known: known_schema })
        }
        _ => Ok(order.into_iter().filter(|s| s.schema <= known_schema).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(taken: &str, schema: i64, c: char) -> Snapshot {
        Snapshot { taken: taken.into(), schema, sha256: c.to_string().repeat(64) }
    }

    #[test]
    fn a_snapshot_path_says_when_which_schema_and_its_hash() {
        let s = snap("20261202T015500Z", 13, 'a');
        assert_eq!(s.path(), format!("backups/arena-20261202T015500Z-s13-{}.sqlite.gz", "a".repeat(64)));
        assert_eq!(Snapshot::parse(&s.path()), Some(s));
        for bad in [
            "backups/arena-20261202T015500Z-s13-abc.sqlite.gz",
            "backups/arena-2026120T0155000Z-s13-aaaa.sqlite.gz",
            "other/arena-20261202T015500Z-s13-aaaa.sqlite.gz",
            "backups/README.md",
        ] {
            assert_eq!(Snapshot::parse(bad), None, "{bad}");
        }
        assert_eq!(stamp("2026-12-02T01:55:00.123Z").as_deref(), Some("20261202T015500Z"));
        assert_eq!(stamp("soon"), None);
    }

    #[test]
    fn a_commit_keeps_the_newest_n_with_the_new_one() {
        let old: Vec<Snapshot> = (0..5).map(|i| snap(&format!("2026120{i}T000000Z"), 13, 'b')).collect();
        let new = snap("20261209T000000Z", 13, 'c');
        let gone = pruned(&old, &new, 3);
        assert_eq!(
            gone.iter().map(|s| s.taken.as_str()).collect::<Vec<_>>(),
            ["20261202T000000Z", "20261201T000000Z", "20261200T000000Z"]
        );
        assert!(pruned(&old[..1], &new, 3).is_empty());
    }

    #[test]
    fn a_restore_tries_the_newest_first_and_refuses_a_newer_schema() {
        let list = newest_first([
            "backups/x",
            &snap("20261201T000000Z", 12, 'a').path(),
            &snap("20261202T000000Z", 13, 'b').path(),
        ]);
        assert_eq!(restore_order(&list, 13).unwrap().iter().map(|s| s.schema).collect::<Vec<_>>(), [13, 12]);
        let e = restore_order(&list, 12).unwrap_err();
        assert_eq!((e.found, e.known), (13, 12));
        assert!(e.to_string().contains("newer than this build's 12"));
        assert!(restore_order(&[], 12).unwrap().is_empty(), "an empty dataset is a fresh start");
    }
}
