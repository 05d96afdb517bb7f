//! A task package as the checks read it, whatever its format: the types that both the collection
//! reader (`collection::package`, which makes them) and the gates (which judge them) use. It
//! depends on neither, so neither depends on the other through it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::collection::credit::Credit;
use crate::collection::listing::Entry;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Benchflow,
    Posttrain,
    Harbor,
}

/// A task read as a BenchFlow-native package.
#[derive(Debug, Clone)]
pub struct Task {
    pub name: String,
    pub dir: String,
    pub format: Format,
    /// The frontmatter (for Harbor, the converted `task.toml`).
    pub meta: Value,
    pub prompt: String,
    pub files: Vec<Entry>,
    /// The texts read, by path relative to the task directory (shared with every other path
    /// holding the same blob).
    pub texts: BTreeMap<String, std::sync::Arc<str>>,
    pub credit: Credit,
}

impl Task {
    pub fn text(&self, rel: &str) -> Option<&str> {
        self.texts.get(rel).map(|t| &**t)
    }

    pub fn has(&self, rel: &str) -> bool {
        self.files.iter().any(|f| f.path == rel)
    }

    /// `verifier/` (BenchFlow, PostTrain) or `tests/` (Harbor).
    pub fn verifier_dir(&self) -> &'static str {
        if self.format == Format::Harbor {
            "tests"
        } else {
            "verifier"
        }
    }

    pub fn test_sh_path(&self) -> String {
        format!("{}/test.sh", self.verifier_dir())
    }

    /// The reference solution's path, if the task has one.
    pub fn oracle_path(&self) -> Option<&'static str> {
        ["oracle/solve.sh", "solution/solve.sh"].into_iter().find(|p| self.has(p))
    }

    /// The verifier's Python files with their texts.
    pub fn verifier_sources(&self) -> impl Iterator<Item = (&str, &str)> {
        let dir = self.verifier_dir();
        self.texts
            .iter()
            .filter(move |(p, _)| {
                p.starts_with(dir) && p.as_bytes().get(dir.len()) == Some(&b'/') && p.ends_with(".py")
            })
            .map(|(p, t)| (p.as_str(), &**t))
    }

    /// The task turns the network off (`allow_internet: false` or `network_mode: no-network`).
    pub fn network_off(&self) -> bool {
        ["sandbox", "environment"].iter().any(|k| {
            let section = &self.meta[*k];
            section["allow_internet"] == Value::Bool(false) || section["network_mode"] == "no-network"
        })
    }

    /// Root-relative path of a file of this task, for messages.
    pub fn path(&self, rel: &str) -> String {
        format!("{}/{}", self.dir, rel)
    }
}
