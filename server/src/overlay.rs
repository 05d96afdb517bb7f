//! The private overlay on a Space: read at start from the private dataset `ARENA_PRIVATE_REPO`
//! names, through the HF API with the arena's token, into the data directory. Without it the server
//! does not start: a deployment that names its private suites and cannot read them must not run
//! with them unchecked, and a copy left from an earlier start could be stale.

use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, Context};
use domain::collection::request::{repo_part, RepoType, Source};
use domain::views::OverlaySource;

use crate::config::Secret;
use crate::sources::hf::HfDatasets;
use crate::sources::RepoReader;

/// An overlay holds task lists, domain maps and fingerprints: small files.
const MAX_FILE_BYTES: u64 = 16 << 20;
const MAX_FILES: usize = 2_000;

/// Reads the overlay at `main` into `dest` (replacing what was there) and says which commit it read.
pub async fn fetch(
    endpoint: &str,
    token: Option<&Secret>,
    repo: &str,
    dest: &Path,
) -> anyhow::Result<OverlaySource> {
    let context = || format!("reading the private overlay ARENA_PRIVATE_REPO={repo}");
    let token = token.ok_or_else(|| {
        anyhow!("the arena has no HF token (HF_TOKEN) to read it with: set the Space secret")
            .context(context())
    })?;
    let (owner, name) = repo
        .split_once('/')
        .filter(|(o, n)| repo_part(o) && repo_part(n))
        .ok_or_else(|| anyhow!("`{repo}` is not a dataset id (owner/name)"))
        .with_context(context)?;
    let reader = HfDatasets::with_token(endpoint, token);
    let source = Source {
        repo_type: RepoType::Dataset,
        owner: owner.into(),
        name: name.into(),
        revision: "main".into(),
        entry_path: String::new(),
    };
    let commit = reader.resolve(&source).await.map_err(|e| anyhow!("{e}")).with_context(context)?;
    let (entries, _) =
        reader.list(&source, &commit).await.map_err(|e| anyhow!("{e}")).with_context(context)?;
    if entries.len() > MAX_FILES {
        return Err(anyhow!("more than {MAX_FILES} files")).with_context(context);
    }
    // Written beside the destination and moved into place, so a failed read leaves no half overlay.
    let partial = dest.with_extension("partial");
    if partial.exists() {
        std::fs::remove_dir_all(&partial).with_context(|| format!("removing {}", partial.display()))?;
    }
    for entry in &entries {
        let rel = safe_relative(&entry.path)
            .ok_or_else(|| anyhow!("the file `{}` has an unsafe path", entry.path))
            .with_context(context)?;
        let bytes = reader
            .read(&source, &commit, &entry.path, MAX_FILE_BYTES)
            .await
            .map_err(|e| anyhow!("`{}`: {e}", entry.path))
            .with_context(context)?;
        let target = partial.join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, bytes).with_context(|| format!("writing {}", target.display()))?;
    }
    std::fs::create_dir_all(&partial)?;
    if dest.exists() {
        std::fs::remove_dir_all(dest).with_context(|| format!("removing {}", dest.display()))?;
    }
    std::fs::rename(&partial, dest).with_context(|| format!("moving the overlay into {}", dest.display()))?;
    tracing::info!(repo, revision = %commit, files = entries.len(), "read the private overlay");
    Ok(OverlaySource { repo: repo.to_string(), revision: commit })
}

/// A listed path as a relative path with only normal components (no `..`, no root).
pub fn safe_relative(path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    let ok =
        !path.is_empty() && !path.contains('\\') && p.components().all(|c| matches!(c, Component::Normal(_)));
    ok.then(|| p.to_path_buf())
}
