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

/// The largest result file `verify_run` reads (as `result collect` does).
const MAX_EVIDENCE_BYTES: u64 = 64 << 20;

fn read_bounded(path: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_EVIDENCE_BYTES + 1).read_to_end(&mut bytes)?;
    anyhow::ensure!(
        bytes.len() as u64 <= MAX_EVIDENCE_BYTES,
        "{} is over {} MiB",
        path.display(),
        MAX_EVIDENCE_BYTES >> 20
    );
    Ok(bytes)
}

/// `arena verify-run DIR RUN_ID`: a run's evidence from a local copy of the runs dataset, verified
/// as `result collect` verifies it (`domain::results::verify`); answers the recomputed result.
pub fn verify_run(dir: &Path, run_id: &str) -> anyhow::Result<serde_json::Value> {
    use domain::results::{self, RunEvidence, Verified};
    use domain::training::signal;
    anyhow::ensure!(
        !run_id.is_empty() && run_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "`{run_id}` is not a run id"
    );
    let bundle = dir.join(domain::pipeline::bundle_dir(run_id));
    let reports = dir.join(domain::pipeline::run_dir(run_id)).join("reports");
    let text = |p: &Path| -> anyhow::Result<String> {
        String::from_utf8(read_bounded(p)?).map_err(|_| anyhow::anyhow!("{} is not UTF-8", p.display()))
    };
    let config_toml = text(&bundle.join("config.toml"))?;
    let (suites, _) = results::bundle_suites(&config_toml)?;
    let mut task_lists = std::collections::BTreeMap::new();
    for (_, dataset) in suites {
        anyhow::ensure!(
            !dataset.task_list.split('/').any(|p| p == ".." || p.is_empty())
                && !dataset.task_list.starts_with('/'),
            "the bundle names a task list outside it: {}",
            dataset.task_list
        );
        let list = text(&bundle.join(&dataset.task_list))?;
        task_lists.insert(dataset.task_list, list);
    }
    let baseline = !reports.join("score.json").exists() && reports.join("baseline.json").exists();
    // GRPO's records, where the pipeline writes them: whether they must be there is the report's to say.
    let jobs = dir.join(domain::pipeline::run_dir(run_id)).join(signal::JOBS_DIR);
    let found = |p: std::path::PathBuf| p.exists().then(|| read_bounded(&p)).transpose();
    let train_list = bundle.join(domain::pipeline::config::TRAIN_TASK_LIST);
    let evidence = RunEvidence {
        config_toml,
        task_lists,
        outcomes: read_bounded(&reports.join("eval_task_outcomes.json"))?,
        report: read_bounded(&reports.join(if baseline { "baseline.json" } else { "score.json" }))?,
        train_list: train_list.exists().then(|| text(&train_list)).transpose()?,
        training: signal::TrainingFiles {
            task_stats: found(jobs.join(signal::TASK_STATS))?,
            sampler: found(jobs.join(signal::SAMPLER))?,
            diagnostics: found(jobs.join(signal::DIAGNOSTICS))?,
        },
    };
    Ok(match results::verify(run_id, baseline, &evidence)? {
        Verified::Scored { measured: m, training, .. } => serde_json::json!({
            "run_id": run_id,
            "purpose": "collection",
            "delta_pp": m.delta_pp,
            "stderr_pp": m.stderr_pp,
            "baseline_pass_rate": m.baseline_pass_rate,
            "after_pass_rate": m.after_pass_rate,
            "suites": m.suites,
            "trials": m.trials,
            "paired_tasks": m.paired_tasks,
            "infra_error_cells": m.infra_error_cells,
            "training": training.map(|t| t.signal),
        }),
        Verified::Reference(r) => {
            serde_json::json!({"run_id": run_id, "purpose": "baseline", "measurement": r})
        }
    })
}
