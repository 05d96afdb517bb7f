//! Backups of the SQLite database to a private dataset: what a snapshot is called (its time, the
//! schema it was taken at and the arena's signature of it, all in its path, so that a listing says
//! everything a restore needs), which ones a new commit keeps, and which ones a restore tries.
//! Pure: the server signs, takes, uploads and downloads them.
//!
//! The signature is HMAC-SHA-256 with the arena's backup key over [`Snapshot::signed_name`] and
//! the compressed bytes: whoever can write the dataset but does not hold the key cannot make a
//! snapshot a restore believes, nor re-stamp a genuine one.

/// Where snapshots live in the backup dataset.
pub const DIR: &str = "backups";

/// How far past the clock a snapshot's stamp may be and still be the arena's own (replicas'
/// clocks differ by seconds, not minutes). Later ones were not written by this arena.
pub const CLOCK_ALLOWANCE_S: i64 = 300;

/// One snapshot, as its path names it:
/// `backups/arena-{YYYYMMDDTHHMMSSZ}-s{schema}-{signature}.sqlite.gz`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Snapshot {
    /// UTC, `20261202T015500Z`: sorts as time does.
    pub taken: String,
    /// The newest migration applied to the database it was taken of.
    pub schema: i64,
    /// The arena's HMAC-SHA-256 of the signed name and the compressed bytes, lower-case hex.
    pub signature: String,
}

impl Snapshot {
    pub fn path(&self) -> String {
        format!("{DIR}/{}-{}.sqlite.gz", self.signed_name(), self.signature)
    }

    /// What the signature covers besides the bytes: the stamp and the schema.
    pub fn signed_name(&self) -> String {
        signed_name(&self.taken, self.schema)
    }

    /// Reads a path of the dataset; `None` for anything that is not a snapshot.
    pub fn parse(path: &str) -> Option<Snapshot> {
        let name =
            path.strip_prefix(DIR)?.strip_prefix('/')?.strip_prefix("arena-")?.strip_suffix(".sqlite.gz")?;
        let (taken, rest) = name.split_once("-s")?;
        let (schema, signature) = rest.split_once('-')?;
        let stamp_ok = taken.len() == 16
            && taken.as_bytes()[8] == b'T'
            && taken.ends_with('Z')
            && taken.bytes().enumerate().all(|(i, b)| i == 8 || i == 15 || b.is_ascii_digit());
        let hex_ok = signature.len() == 64
            && signature.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let schema: i64 = schema.parse().ok().filter(|s| *s >= 0)?;
        (stamp_ok && hex_ok).then(|| Snapshot { taken: taken.into(), schema, signature: signature.into() })
    }
}

/// The part of a snapshot's name its signature covers.
pub fn signed_name(taken: &str, schema: i64) -> String {
    format!("arena-{taken}-s{schema}")
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
/// Snapshots stamped after `not_after` (the clock plus [`CLOCK_ALLOWANCE_S`]) are not the
/// arena's: they go whatever `keep` says, rather than sit forever as the newest.
pub fn pruned(existing: &[Snapshot], new: &Snapshot, keep: usize, not_after: &str) -> Vec<Snapshot> {
    let (future, mut ours): (Vec<&Snapshot>, Vec<&Snapshot>) =
        existing.iter().filter(|s| *s != new).partition(|s| s.taken.as_str() > not_after);
    ours.sort_by(|a, b| b.cmp(a));
    future.into_iter().chain(ours.into_iter().skip(keep.max(1) - 1)).cloned().collect()
}

/// Why a restore refuses to go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the newest verified backup ({path}) was taken at schema {found}, newer than this build's {known}: start the build that took it (a rollback would lose its data)"
)]
pub struct NewerSchema {
    pub path: String,
    pub found: i64,
    pub known: i64,
}

/// The snapshots a restore tries, newest first, and those it passes over without reading, with
/// why: a stamp later than `not_after` (the clock plus [`CLOCK_ALLOWANCE_S`]) was not written by
/// this arena. Each tried one must then verify; one that does not is passed over in turn.
pub fn restore_order(listing: &[Snapshot], not_after: &str) -> (Vec<Snapshot>, Vec<String>) {
    let mut order = listing.to_vec();
    order.sort_by(|a, b| b.cmp(a));
    let (future, order): (Vec<Snapshot>, Vec<Snapshot>) =
        order.into_iter().partition(|s| s.taken.as_str() > not_after);
    let skipped = future
        .iter()
        .map(|s| format!("{}: stamped {}, later than the clock allows ({not_after})", s.path(), s.taken))
        .collect();
    (order, skipped)
}

/// A verified snapshot from a schema this build does not know stops the restore: going back past
/// it would silently lose what it holds.
pub fn check_schema(snapshot: &Snapshot, known_schema: i64) -> Result<(), NewerSchema> {
    if snapshot.schema > known_schema {
        return Err(NewerSchema { path: snapshot.path(), found: snapshot.schema, known: known_schema });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(taken: &str, schema: i64, c: char) -> Snapshot {
        Snapshot { taken: taken.into(), schema, signature: c.to_string().repeat(64) }
    }

    #[test]
    fn a_snapshot_path_says_when_which_schema_and_its_signature() {
        let s = snap("20261202T015500Z", 13, 'a');
        assert_eq!(s.path(), format!("backups/arena-20261202T015500Z-s13-{}.sqlite.gz", "a".repeat(64)));
        assert_eq!(s.signed_name(), "arena-20261202T015500Z-s13");
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
    fn a_commit_keeps_the_newest_n_with_the_new_one_and_drops_what_is_stamped_in_the_future() {
        let old: Vec<Snapshot> = (0..5).map(|i| snap(&format!("2026120{i}T000000Z"), 13, 'b')).collect();
        let new = snap("20261209T000000Z", 13, 'c');
        let now = "20261209T000500Z";
        let gone = pruned(&old, &new, 3, now);
        assert_eq!(
            gone.iter().map(|s| s.taken.as_str()).collect::<Vec<_>>(),
            ["20261202T000000Z", "20261201T000000Z", "20261200T000000Z"]
        );
        assert!(pruned(&old[..1], &new, 3, now).is_empty());
        let mut with_future = old[..1].to_vec();
        with_future.push(snap("29991231T000000Z", 13, 'f'));
        let gone = pruned(&with_future, &new, 3, now);
        assert_eq!(gone.iter().map(|s| s.taken.as_str()).collect::<Vec<_>>(), ["29991231T000000Z"]);
    }

    #[test]
    fn a_restore_tries_the_newest_first_passes_over_the_future_and_refuses_a_newer_schema() {
        let list = newest_first([
            "backups/x",
            &snap("20261201T000000Z", 12, 'a').path(),
            &snap("20261202T000000Z", 13, 'b').path(),
            &snap("29990101T000000Z", 13, 'c').path(),
        ]);
        let (order, skipped) = restore_order(&list, "20261203T000000Z");
        assert_eq!(order.iter().map(|s| s.schema).collect::<Vec<_>>(), [13, 12]);
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].contains("29990101T000000Z") && skipped[0].contains("later than the clock"));
        assert!(check_schema(&order[0], 13).is_ok());
        let e = check_schema(&order[0], 12).unwrap_err();
        assert_eq!((e.found, e.known), (13, 12));
        assert!(e.to_string().contains("newer than this build's 12"));
        assert!(restore_order(&[], "20261203T000000Z").0.is_empty(), "an empty dataset is a fresh start");
    }
}
