//! The build fingerprint: the commit and build time compiled in, when this process started, and
//! whether the files it serves changed on disk since then (a deploy that forgot to restart).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use domain::views::{OverlaySource, VersionView};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Each served file's length and modification time.
type Snapshot = BTreeMap<PathBuf, (u64, Option<SystemTime>)>;

pub struct BuildInfo {
    commit: String,
    build_time: String,
    started_at: String,
    site_root: PathBuf,
    snapshot: Snapshot,
    overlay: Option<OverlaySource>,
}

impl BuildInfo {
    pub fn capture(site_root: &Path, overlay: Option<OverlaySource>) -> BuildInfo {
        let epoch: i64 = env!("ARENA_BUILD_EPOCH").parse().unwrap_or(0);
        BuildInfo {
            commit: option_env!("ARENA_BUILD_COMMIT").unwrap_or("unknown").to_string(),
            build_time: rfc3339(
                OffsetDateTime::from_unix_timestamp(epoch).unwrap_or(OffsetDateTime::UNIX_EPOCH),
            ),
            started_at: rfc3339(OffsetDateTime::now_utc()),
            site_root: site_root.to_path_buf(),
            snapshot: snapshot(site_root),
            overlay,
        }
    }

    /// Re-reads the served files' metadata; cheap (a few dozen stats), so done on each call.
    pub fn view(&self) -> VersionView {
        VersionView {
            commit: self.commit.clone(),
            build_time: self.build_time.clone(),
            started_at: self.started_at.clone(),
            files_changed: snapshot(&self.site_root) != self.snapshot,
            heldout_unchecked: Vec::new(),
            private_overlay: self.overlay.clone(),
            backup: None,
            backup_details: None,
        }
    }
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

fn snapshot(root: &Path) -> Snapshot {
    let mut out = Snapshot::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                out.insert(entry.path(), (meta.len(), meta.modified().ok()));
            }
        }
    }
    out
}
