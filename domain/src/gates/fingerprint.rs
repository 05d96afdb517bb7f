//! Held-out suites described by fingerprints: each task's name, its prompt's 13-gram hashes and its
//! files' git blob ids by role. A fingerprint publishes nothing readable of a sealed task. Template
//! text, the phrases and files that three or more of a suite's own tasks share, is recorded
//! separately and never compared, so a task that reuses a benchmark's boilerplate is not flagged.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::text;
use crate::task::Task;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Verifier,
    Solution,
    Data,
    Skill,
    Build,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPrint {
    pub name: String,
    pub shingles: BTreeSet<u64>,
    /// blob id → role.
    pub files: BTreeMap<String, Role>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteFingerprint {
    pub suite: String,
    pub sealed: bool,
    pub tasks: Vec<TaskPrint>,
    pub template_shingles: BTreeSet<u64>,
    pub template_blobs: BTreeSet<String>,
}

/// Shared by this many of a suite's tasks, a shingle or file is template text.
pub const TEMPLATE_SHARE: usize = 3;

/// A file's role in a task, from its path relative to the task directory.
pub fn role(path: &str) -> Role {
    let first = path.split('/').next().unwrap_or("");
    match first {
        "verifier" | "tests" => Role::Verifier,
        "oracle" | "solution" => Role::Solution,
        _ if path.contains("/skills/") || path.starts_with("skills/") => Role::Skill,
        _ if path == "environment/Dockerfile" || path.ends_with("/Dockerfile") => Role::Build,
        _ => Role::Data,
    }
}

/// Builds a suite's fingerprint from its tasks, read like any collection's.
pub fn fingerprint_suite(suite: &str, sealed: bool, tasks: &[Task]) -> SuiteFingerprint {
    let mut prints: Vec<TaskPrint> = tasks
        .iter()
        .map(|t| TaskPrint {
            name: t.name.clone(),
            shingles: text::shingles(&t.prompt),
            files: t
                .files
                .iter()
                .filter(|f| {
                    !f.symlink && f.path != "task.md" && f.path != "task.toml" && f.path != "instruction.md"
                })
                .map(|f| (f.blob.clone(), role(&f.path)))
                .collect(),
        })
        .collect();
    let mut shingle_count: BTreeMap<u64, usize> = BTreeMap::new();
    let mut blob_count: BTreeMap<String, usize> = BTreeMap::new();
    for p in &prints {
        for s in &p.shingles {
            *shingle_count.entry(*s).or_default() += 1;
        }
        for b in p.files.keys() {
            *blob_count.entry(b.clone()).or_default() += 1;
        }
    }
    let template_shingles: BTreeSet<u64> =
        shingle_count.into_iter().filter(|(_, n)| *n >= TEMPLATE_SHARE).map(|(s, _)| s).collect();
    let template_blobs: BTreeSet<String> =
        blob_count.into_iter().filter(|(_, n)| *n >= TEMPLATE_SHARE).map(|(b, _)| b).collect();
    for p in &mut prints {
        p.shingles.retain(|s| !template_shingles.contains(s));
        p.files.retain(|b, _| !template_blobs.contains(b));
    }
    SuiteFingerprint { suite: suite.to_string(), sealed, tasks: prints, template_shingles, template_blobs }
}

/// The suites a validation compares with; `evaluated` marks the open challenge's suite. Shared,
/// not copied: a validation only reads the fingerprints loaded at start.
#[derive(Debug, Clone, Default)]
pub struct HeldOut {
    pub suites: Vec<(Arc<SuiteFingerprint>, bool)>,
}

impl HeldOut {
    pub fn none() -> Self {
        Self::default()
    }
}
