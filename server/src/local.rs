//! Reads a collection (or a held-out suite) from a local directory into a listing with git blob
//! ids, as a repository host would list it. Symbolic links are listed, never followed; `.git/`
//! directories are skipped.

use std::path::Path;

use domain::collection::listing::MAX_FILES;
use domain::collection::{Contents, Entry};

pub fn read_dir(root: &Path) -> std::io::Result<(Vec<Entry>, Contents)> {
    let mut files: Vec<(String, Vec<u8>, bool)> = Vec::new();
    walk(root, "", &mut files)?;
    let (listing, contents) =
        domain::collection::listing::from_files(files.iter().map(|(p, b, s)| (p.as_str(), b.as_slice(), *s)));
    Ok((listing, contents))
}

fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>, bool)>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if out.len() > MAX_FILES {
            return Ok(());
        }
        let name = e.file_name().to_string_lossy().to_string();
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
        let kind = e.file_type()?;
        if kind.is_symlink() {
            let target = std::fs::read_link(e.path())?;
            out.push((path, target.to_string_lossy().as_bytes().to_vec(), true));
        } else if kind.is_dir() {
            if name != ".git" {
                walk(&e.path(), &path, out)?;
            }
        } else if kind.is_file() {
            out.push((path, std::fs::read(e.path())?, false));
        }
    }
    Ok(())
}

/// Builds a suite's fingerprint from a local directory holding `envs/` (or `tasks/`).
pub fn fingerprint_dir(
    root: &Path,
    suite: &str,
    sealed: bool,
) -> anyhow::Result<domain::gates::fingerprint::SuiteFingerprint> {
    let (listing, contents) = read_dir(root)?;
    let layout = domain::collection::package::discover(&listing);
    if let Some(e) = layout.errors.first() {
        anyhow::bail!("{}: {}", e.code, e.message);
    }
    let mut issues = Vec::new();
    let tasks: Vec<_> = layout
        .tasks
        .iter()
        .filter_map(|t| domain::collection::package::read_task(t, &contents, &mut issues))
        .collect();
    if let Some(i) = issues.first() {
        anyhow::bail!("{} {}: {}", i.code, i.file.as_deref().unwrap_or(""), i.message);
    }
    Ok(domain::gates::fingerprint::fingerprint_suite(suite, sealed, &tasks))
}
