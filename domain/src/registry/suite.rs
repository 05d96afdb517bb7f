use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `configs/suites/*.toml`: a benchmark, i.e. a held-out suite a collection can be scored on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteFile {
    pub suite: SuiteHeader,
    #[serde(default)]
    pub meta: SuiteMeta,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteHeader {
    pub id: String,
    pub name: String,
    pub description: String,
    /// The areas of work the suite covers, as published (a private suite publishes only these).
    #[serde(default)]
    pub described_domains: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteMeta {
    /// The suite the board opens on.
    #[serde(default)]
    pub default: bool,
    /// Source, task list, domains and fingerprints live in the private overlay, never here.
    #[serde(default)]
    pub private: bool,
    /// Participants never see a sealed suite's tasks; only aggregate pass rates are published.
    #[serde(default)]
    pub sealed: bool,
    /// Task list file in `fixture/task-lists/` (public suites only).
    #[serde(default)]
    pub task_list: Option<String>,
    /// Task-to-domain map beside the task list (public suites only).
    #[serde(default)]
    pub domains: Option<String>,
    /// Prompt 13-grams and file blob ids beside the task list, written by `fingerprint_suite`.
    #[serde(default)]
    pub fingerprints: Option<String>,
    /// Where a run snapshots the suite's tasks (public suites; a private suite's is in the overlay).
    #[serde(default)]
    pub dataset: Option<SuiteDataset>,
}

/// The HF dataset a run evaluates a suite from: `[[eval_suites]]`'s `repo_id`, `revision` and
/// `path` in the pipeline's config (the task list is the suite's own).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteDataset {
    pub repo_id: String,
    /// A full 40-hex commit: a run's held-out tasks never move.
    pub revision: String,
    /// The folder of the task packages in the dataset (`""` for its root).
    pub path: String,
}

/// What the registry knows of a suite's tasks, from the repository (public) or the overlay (private).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SuiteTasks {
    pub names: Vec<String>,
    /// Task name to domain, when the suite publishes (or the overlay holds) a domain map.
    pub domains: Option<BTreeMap<String, String>>,
}

/// A loaded suite: its header, meta, and what is known of its tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    pub header: SuiteHeader,
    pub meta: SuiteMeta,
    /// `None` for a private suite whose overlay this deployment does not have.
    pub tasks: Option<SuiteTasks>,
    /// Where runs snapshot its tasks; `None` when neither `[meta.dataset]` nor the overlay says.
    pub dataset: Option<SuiteDataset>,
}

impl Suite {
    pub fn id(&self) -> &str {
        &self.header.id
    }

    pub fn task_count(&self) -> Option<usize> {
        self.tasks.as_ref().map(|t| t.names.len())
    }

    /// Task counts per domain, only where the suite publishes them (never for private or sealed ones).
    pub fn published_domain_counts(&self) -> Option<BTreeMap<String, usize>> {
        if self.meta.private || self.meta.sealed {
            return None;
        }
        let domains = self.tasks.as_ref()?.domains.as_ref()?;
        let mut counts = BTreeMap::new();
        for domain in domains.values() {
            *counts.entry(domain.clone()).or_insert(0) += 1;
        }
        Some(counts)
    }
}
