//! The container images the stand-in's registries serve, as described by JSON files
//! (`STANDIN_IMAGES`; the format is in `crate::registry`): what the hub holds, apart from the
//! registry routes that read the hub.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Deserialize)]
pub struct Repository {
    /// `ghcr.io/owner/name` or `docker.io/owner/name`.
    pub image: String,
    #[serde(default)]
    pub private: bool,
    pub tags: BTreeMap<String, Tag>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Tag {
    pub kind: String,
    pub images: Vec<Image>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Image {
    pub os: String,
    pub architecture: String,
    #[serde(default)]
    pub entrypoint: Vec<String>,
    #[serde(default)]
    pub cmd: Vec<String>,
    #[serde(default)]
    pub exposed_ports: Vec<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub layers: Vec<LayerSpec>,
    /// The config's `Env` (`KEY=value`), `WorkingDir` and `User`.
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub workdir: String,
    #[serde(default)]
    pub user: String,
    /// What the image's layers would hold, for a sandbox of it on the stand-in: local folders
    /// mounted at the image's paths (`{"mounts": {"/app": "{dir}"}}`; `crate::sandbox`). Not
    /// part of the image's config: a sandbox runs the command its job gives.
    #[serde(default)]
    pub local: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LayerSpec {
    #[serde(default)]
    pub digest: Option<String>,
    pub size: u64,
}

/// Every repository described in `dir` (files ending `.json`), by `host/name`.
pub fn load(dir: &Path) -> std::io::Result<BTreeMap<String, Repository>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path)?;
                // `{dir}` is the folder of the description (scripts beside it).
                let folder = path.parent().unwrap_or(dir).canonicalize()?;
                let text = text.replace("{dir}", &folder.to_string_lossy());
                let repo: Repository = serde_json::from_str(&text).map_err(|e| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))
                })?;
                out.insert(repo.image.clone(), repo);
            }
        }
    }
    Ok(out)
}
