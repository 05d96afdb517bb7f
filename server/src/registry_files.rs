//! Reads the registry's files from disk and hands them to the domain loader.

use std::path::Path;

use anyhow::Context;
use domain::{Registry, SourceFile};

/// A config file larger than this is refused rather than read.
const MAX_FILE_BYTES: u64 = 1 << 20;

pub fn load(configs_dir: &Path, overlay: Option<&Path>) -> anyhow::Result<Registry> {
    let files = read_tree(configs_dir).with_context(|| format!("reading {}", configs_dir.display()))?;
    let overlay_files = match overlay {
        Some(dir) => {
            read_tree(dir).with_context(|| format!("reading the private overlay {}", dir.display()))?
        }
        None => Vec::new(),
    };
    Registry::load(&files, &overlay_files)
        .map_err(|e| anyhow::anyhow!("the registry in {} is invalid:\n{e}", configs_dir.display()))
}

fn read_tree(root: &Path) -> anyhow::Result<Vec<SourceFile>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() {
                stack.push(path);
                continue;
            }
            let wanted = matches!(path.extension().and_then(|e| e.to_str()), Some("toml" | "txt" | "json"));
            if !kind.is_file() || !wanted {
                continue;
            }
            let len = entry.metadata()?.len();
            anyhow::ensure!(
                len <= MAX_FILE_BYTES,
                "{} is {len} bytes; config files are at most 1 MiB",
                path.display()
            );
            let rel = path
                .strip_prefix(root)?
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            let contents = std::fs::read_to_string(&path)
                .with_context(|| format!("{} is not UTF-8 text", path.display()))?;
            out.push(SourceFile::new(rel, contents));
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
