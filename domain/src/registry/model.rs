use serde::{Deserialize, Serialize};

use super::serving::ModelServing;

/// `configs/models/*.toml`: a base model pinned to a commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFile {
    pub model: Model,
    pub meta: ModelMeta,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    pub id: String,
    /// The Hub repository, e.g. `Qwen/Qwen3.5-9B`.
    pub repo: String,
    /// The pinned commit (a prefix of at least 7 hex digits).
    pub revision: String,
    pub display_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelMeta {
    pub serving: ModelServing,
}
