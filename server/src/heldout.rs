//! Held-out suite fingerprints (`fingerprint_suite`'s JSON), loaded at start from
//! `ARENA_FINGERPRINTS_DIR` (default: `fingerprints/` in the private overlay). A validation compares
//! with every loaded suite; the ones the challenge scores on are "evaluated".

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use domain::gates::fingerprint::{HeldOut, SuiteFingerprint};
use domain::registry::{Challenge, Registry};

pub fn load(dir: Option<&Path>) -> anyhow::Result<Vec<Arc<SuiteFingerprint>>> {
    let Some(dir) = dir else { return Ok(Vec::new()) };
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    for p in paths {
        let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        let fp: SuiteFingerprint = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a suite fingerprint", p.display()))?;
        out.push(Arc::new(fp));
    }
    Ok(out)
}

/// Every fingerprint: the ones in `dir` (the private overlay's, or `ARENA_FINGERPRINTS_DIR`) and
/// each public suite's that its `[meta]` names beside its task list in the registry.
pub fn load_all(
    dir: Option<&Path>,
    registry: &Registry,
    configs_dir: &Path,
) -> anyhow::Result<Vec<Arc<SuiteFingerprint>>> {
    let mut all = load(dir)?;
    for suite in registry.suites.values() {
        let Some(name) = &suite.meta.fingerprints else { continue };
        let path = configs_dir.join("fixture/task-lists").join(name);
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let fp: SuiteFingerprint = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a suite fingerprint", path.display()))?;
        anyhow::ensure!(
            fp.suite == suite.id(),
            "{} fingerprints suite `{}`, not `{}`",
            path.display(),
            fp.suite,
            suite.id()
        );
        anyhow::ensure!(
            !all.iter().any(|f| f.suite == fp.suite),
            "suite `{}` has two fingerprints: {} and one in the fingerprints directory",
            fp.suite,
            path.display()
        );
        all.push(Arc::new(fp));
    }
    Ok(all)
}

/// The suites a collection for `challenge` is compared with.
pub fn for_challenge(all: &[Arc<SuiteFingerprint>], challenge: Option<&Challenge>) -> HeldOut {
    let evaluated =
        |suite: &str| challenge.is_some_and(|c| c.spec.challenge.suites.iter().any(|s| s == suite));
    HeldOut { suites: all.iter().map(|s| (Arc::clone(s), evaluated(&s.suite))).collect() }
}

/// Suites the challenge scores on that have no fingerprint here: overlap with them is unchecked.
pub fn unchecked<'a>(all: &[Arc<SuiteFingerprint>], challenge: &'a Challenge) -> Vec<&'a str> {
    challenge
        .spec
        .challenge
        .suites
        .iter()
        .filter(|s| !all.iter().any(|f| &f.suite == *s))
        .map(String::as_str)
        .collect()
}
