//! Results: the checks `result collect` makes of a run's evidence before it stores a result, the
//! review, and the leaderboard's ranking with its pooled run-to-run standard error.

use crate::invalid::Invalid;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::score::{self, Arm, BaselineReport, Dataset, Reference, ScoreV2, SuiteCells, TaskOutcomes};

/// Why collected evidence is refused; each has its own code at the API.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Evidence {
    #[error("the results do not cover the held-out suites: {0}")]
    Coverage(String),
    #[error("the pipeline's report differs from the cells: {0}")]
    Mismatch(String),
}

/// A held-out suite as the run's own bundle names it: its dataset (`[[eval_suites]]` of
/// `config.toml`) and its tasks (`task-lists/eval_suite-{name}.txt`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedSuite {
    pub name: String,
    pub dataset: Dataset,
    pub task_ids: Vec<String>,
}

/// What the run evaluated: its suites and tasks, the trials (`evaluation.trials`), and the arms
/// (both for a collection's run, the baseline alone for a measurement of the base model).
#[derive(Debug, Clone)]
pub struct Expected {
    pub run_id: String,
    pub suites: Vec<ExpectedSuite>,
    pub trials: u32,
    pub arms: Vec<Arm>,
}

/// Where a container path of the run lands in the runs dataset: the pipeline writes absolute
/// paths inside its job (`/tmp/posttrainarena-job-…/job-inputs/RUN/runs/RUN/jobs/…`); the
/// published copy is `runs/RUN/jobs/…`. `None` for a path outside the run's folder.
pub fn dataset_path(container_path: &str, run_id: &str) -> Option<String> {
    let marker = format!("/runs/{run_id}/");
    let at = container_path.find(&marker)?;
    let rest = &container_path[at + marker.len()..];
    (!rest.split('/').any(|p| p == ".." || p.is_empty())).then(|| format!("runs/{run_id}/{rest}"))
}

// Long: the coverage rules in order, each answering the first difference it finds.
/// The cells cover the suites exactly (every expected arm and no other, every suite and trial
/// once, every task of the suite in each and no other, each outcome well formed, each jobs folder
/// inside the run) and answer them as the score's inputs, suite by suite.
pub fn check_coverage(o: &TaskOutcomes, want: &Expected) -> Result<Vec<SuiteCells>, Evidence> {
    let cov = |m: String| Err(Evidence::Coverage(m));
    if o.pass_threshold != score::PASS_THRESHOLD {
        return cov(format!("the pass threshold is {}, not the pipeline's 1.0", o.pass_threshold));
    }
    let mut out: Vec<SuiteCells> = want
        .suites
        .iter()
        .map(|s| SuiteCells {
            name: s.name.clone(),
            dataset: s.dataset.clone(),
            task_ids: s.task_ids.clone(),
            baseline: None,
            final_: None,
        })
        .collect();
    for arm in [Arm::Baseline, Arm::Final] {
        let name = if arm == Arm::Baseline { "baseline" } else { "final" };
        let Some(cells) = o.arm(arm) else {
            if want.arms.contains(&arm) {
                return cov(format!("the {name} arm is missing"));
            }
            continue;
        };
        if !want.arms.contains(&arm) {
            return cov(format!("the {name} arm is there, but this run evaluates only the baseline"));
        }
        let mut seen: BTreeMap<(&str, u32), &BTreeMap<String, score::Outcome>> = BTreeMap::new();
        for c in &cells.cells {
            let Some(suite) = want.suites.iter().find(|s| s.name == c.suite) else {
                return cov(format!(
                    "a {name} cell is of suite `{}`, which the run does not evaluate",
                    c.suite
                ));
            };
            if c.trial < 1 || c.trial > want.trials {
                return cov(format!(
                    "{name} cell {}/trial {} is outside trials 1..={}",
                    c.suite, c.trial, want.trials
                ));
            }
            if dataset_path(&c.jobs_dir, &want.run_id)
                .is_none_or(|p| !p.starts_with(&format!("runs/{}/jobs/", want.run_id)))
            {
                return cov(format!(
                    "{name} cell {}/trial {}: its jobs folder is not inside the run",
                    c.suite, c.trial
                ));
            }
            let Some(outcomes) = &c.outcomes else {
                return cov(format!("{name} cell {}/trial {} has no outcomes (a dry run)", c.suite, c.trial));
            };
            let tasks: BTreeSet<&str> = suite.task_ids.iter().map(String::as_str).collect();
            let reported: BTreeSet<&str> = outcomes.keys().map(String::as_str).collect();
            if let Some(missing) = tasks.difference(&reported).next() {
                return cov(format!(
                    "task {missing} of {} has no {name} outcome in trial {}",
                    c.suite, c.trial
                ));
            }
            if let Some(extra) = reported.difference(&tasks).next() {
                return cov(format!("task {extra} is not in {} ({name} trial {})", c.suite, c.trial));
            }
            if let Some((task, _)) = outcomes.iter().find(|(_, x)| !x.consistent()) {
                return cov(format!(
                    "{}/{task} {name} trial {}: an outcome is neither a scored reward nor an infrastructure error",
                    c.suite, c.trial
                ));
            }
            if seen.insert((c.suite.as_str(), c.trial), outcomes).is_some() {
                return cov(format!("{name} trial {} of {} is reported twice", c.trial, c.suite));
            }
        }
        for suite in out.iter_mut() {
            let mut trials = Vec::new();
            for trial in 1..=want.trials {
                match seen.get(&(suite.name.as_str(), trial)) {
                    Some(o) => trials.push((*o).clone()),
                    None => return cov(format!("{} has no {name} cell for trial {trial}", suite.name)),
                }
            }
            match arm {
                Arm::Baseline => suite.baseline = Some(trials),
                Arm::Final => suite.final_ = Some(trials),
            }
        }
    }
    Ok(out)
}

const TOLERANCE: f64 = 1e-9;

/// The first place two JSON values differ, numbers within `TOLERANCE`. A dataset's `task_list`
/// is the container's absolute path in the report: it only has to end with the bundle's.
fn first_difference(path: &str, reported: &serde_json::Value, ours: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match (reported, ours) {
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
            ((a - b).abs() > TOLERANCE || a.is_nan() != b.is_nan())
                .then(|| format!("{path}: the report says {a}, the cells give {b}"))
        }
        (Value::Object(a), Value::Object(b)) => {
            for (k, bv) in b {
                if k == "stderr_method" {
                    continue;
                }
                let here = format!("{path}.{k}");
                let Some(av) = a.get(k) else { return Some(format!("{here}: missing from the report")) };
                if k == "task_list" {
                    if let (Some(x), Some(y)) = (av.as_str(), bv.as_str()) {
                        if x == y || x.ends_with(&format!("/{y}")) {
                            continue;
                        }
                    }
                }
                if let Some(d) = first_difference(&here, av, bv) {
                    return Some(d);
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Some(format!(
                    "{path}: the report has {} entries, the cells give {}",
                    a.len(),
                    b.len()
                ));
            }
            a.iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| first_difference(&format!("{path}[{i}]"), x, y))
        }
        (a, b) if a == b => None,
        (a, b) => Some(format!("{path}: the report says {a}, the cells give {b}")),
    }
}

/// The pipeline's `score_v2` equals what the cells give; the error names the first difference.
/// `stages` are the arms' stages as the outcomes file names them. Answers the recomputed score.
pub fn check_report(
    reported: &ScoreV2,
    cells: &[SuiteCells],
    trials: u32,
    stages: (&str, Option<&str>),
) -> Result<ScoreV2, Evidence> {
    let ours = score::score_v2(cells, trials, stages.0, stages.1);
    let (a, b) = (serde_json::to_value(reported).expect("JSON"), serde_json::to_value(&ours).expect("JSON"));
    match first_difference("score_v2", &a, &b) {
        Some(d) => Err(Evidence::Mismatch(d)),
        None => Ok(ours),
    }
}

/// A baseline run's own measurement equals what the cells give; the error names the first
/// difference.
pub fn check_reference(reported: &BaselineReport, cells: &TaskOutcomes) -> Result<Reference, Evidence> {
    let ours = score::reference(cells);
    let (a, b) = (
        serde_json::to_value(&reported.reference).expect("JSON"),
        serde_json::to_value(&ours).expect("JSON"),
    );
    match first_difference("baseline", &a, &b) {
        Some(d) => Err(Evidence::Mismatch(d)),
        None => Ok(ours),
    }
}

/// One suite's change, in percentage points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SuiteResult {
    pub suite: String,
    pub delta_pp: f64,
    /// Null when fewer than two tasks paired (the pipeline's `null`).
    pub stderr_pp: Option<f64>,
    pub paired_tasks: u64,
}

/// A result as `result collect` and the run page show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResultView {
    pub run_id: String,
    pub challenge_id: String,
    pub environment_id: String,
    /// `pending` until an editor reviews it, then `accepted` or `rejected`.
    pub status: String,
    #[serde(flatten)]
    pub measured: Measured,
    /// Δ ± 1.96 standard errors (pp); null when the standard error is.
    pub ci95_pp: Option<[f64; 2]>,
    /// The task content it trained on (`sha256:` identities).
    pub task_identities: Vec<String>,
    /// The runs dataset commit the evidence was read at.
    pub read_commit: String,
    pub collected_by: String,
    pub collected_at: String,
    pub review: Option<ReviewView>,
    /// What GRPO's records say each train task gave the model (`null` when GRPO did not run, or
    /// for a result collected before they were read).
    pub training: Option<crate::training::signal::TrainingSignal>,
    /// True when the run's result was collected before: the stored one is returned.
    pub existing: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewView {
    pub accepted: bool,
    pub note: String,
    pub by: String,
    pub at: String,
}

/// A collected result: the pooled paired-task means, Δ and its standard error (pp).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Measured {
    pub baseline_pass_rate: f64,
    pub after_pass_rate: f64,
    pub delta_pp: f64,
    /// Null when fewer than two tasks paired: the pipeline gives no standard error then.
    pub stderr_pp: Option<f64>,
    pub trials: u32,
    pub suites: Vec<SuiteResult>,
    pub paired_tasks: u64,
    pub infra_error_cells: u64,
}

/// The stored result of a recomputed score: pooled over suites; refused when no task was scored
/// in both arms (there is no Δ to rank).
pub fn measured(s: &ScoreV2) -> Result<Measured, Evidence> {
    let none = || Evidence::Coverage("no held-out task was scored in both arms: there is no Δ".into());
    let pooled = s.pooled.delta.as_ref().ok_or_else(none)?;
    let delta = pooled.delta.ok_or_else(none)?;
    let pp = |x: f64| x * 100.0;
    Ok(Measured {
        baseline_pass_rate: pooled.baseline_pass_rate.ok_or_else(none)?,
        after_pass_rate: pooled.final_pass_rate.ok_or_else(none)?,
        delta_pp: pp(delta),
        stderr_pp: pooled.stderr.map(pp),
        trials: s.trials,
        suites: s
            .suites
            .iter()
            .filter_map(|x| {
                let d = x.delta.as_ref()?;
                Some(SuiteResult {
                    suite: x.name.clone(),
                    delta_pp: pp(d.delta?),
                    stderr_pp: d.stderr.map(pp),
                    paired_tasks: d.paired_task_count,
                })
            })
            .collect(),
        paired_tasks: pooled.paired_task_count,
        infra_error_cells: s
            .suites
            .iter()
            .map(|x| {
                x.baseline.as_ref().map_or(0, |a| a.infra_error_cells)
                    + x.final_.as_ref().map_or(0, |a| a.infra_error_cells)
            })
            .sum(),
    })
}

/// The shortest factual note a review takes.
pub const MIN_NOTE: usize = 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Review {
    pub accepted: bool,
    /// What the reviewer checked, in at least 20 characters.
    pub note: String,
}

impl Review {
    pub fn check(&self) -> Result<(), Invalid> {
        let n = self.note.trim().chars().count();
        if n < MIN_NOTE {
            return Err(format!(
                "`note` says what the evidence showed in at least {MIN_NOTE} characters; this one has {n}"
            )
            .into());
        }
        Ok(())
    }
}

pub use crate::ranking::{rank, shown, tied_with_leader, RankedRun, Row};

#[cfg(test)]
mod tests;

/// A collected measurement of the base model (a baseline run's evidence, re-read and recomputed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BaselineMeasurement {
    pub run_id: String,
    pub challenge_id: String,
    /// Fractions in [0, 1]: the mean over trials and one standard error.
    pub pass_rate: f64,
    pub stderr: f64,
    pub trials: u32,
    pub per_trial: Vec<f64>,
    pub tasks: u64,
    pub scored_cells: u64,
    pub infra_error_cells: u64,
    pub harness_note: String,
    /// The runs dataset commit the evidence was read at.
    pub read_commit: String,
    pub collected_by: String,
    pub collected_at: String,
    /// True when it had been collected before: the stored measurement is returned.
    pub existing: bool,
}

impl BaselineMeasurement {
    /// As the challenge's `baseline.reference` shows it (percentages).
    pub fn as_reference(&self) -> crate::registry::Baseline {
        crate::registry::Baseline {
            pass_rate_pct: 100.0 * self.pass_rate,
            stderr_pct: 100.0 * self.stderr,
            trials: self.trials,
            harness_note: self.harness_note.clone(),
        }
    }
}

/// `GET /api/challenges/{id}/baseline`: what the challenge shows, and every collected measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BaselineAnswer {
    pub challenge_id: String,
    pub baseline: Option<crate::views::BaselineView>,
    /// Newest first.
    pub measurements: Vec<BaselineMeasurement>,
}

/// A run's evidence, as read from the runs dataset (or a local copy of it): its bundle's config
/// and held-out task lists, and the pipeline's result files.
#[derive(Debug, Clone, Default)]
pub struct RunEvidence {
    /// `job-inputs/{run}/config.toml`.
    pub config_toml: String,
    /// `job-inputs/{run}/task-lists/eval_suite-{name}.txt`, by the path the config names.
    pub task_lists: BTreeMap<String, String>,
    /// `runs/{run}/reports/eval_task_outcomes.json`.
    pub outcomes: Vec<u8>,
    /// `runs/{run}/reports/score.json`, or `baseline.json` for a baseline measurement.
    pub report: Vec<u8>,
    /// `job-inputs/{run}/task-lists/train_dataset.txt`, read when GRPO ran.
    pub train_list: Option<String>,
    /// GRPO's records in `runs/{run}/jobs/grpo-train/`, as found.
    pub training: crate::training::signal::TrainingFiles,
}

/// Why evidence cannot be read as the pipeline writes it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file} is not what the pipeline writes: {reason}")]
pub struct Unreadable {
    pub file: String,
    pub reason: String,
}

/// What a verification found wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refused {
    #[error(transparent)]
    Unreadable(#[from] Unreadable),
    #[error(transparent)]
    Evidence(#[from] Evidence),
    /// GRPO ran, but its records do not account for the run's train tasks.
    #[error("GRPO's records are not the run's: {0}")]
    Training(String),
}

/// The held-out suites of a run's bundle: each `[[eval_suites]]` entry's name, dataset and task
/// list path, and `evaluation.trials`.
pub fn bundle_suites(config_toml: &str) -> Result<(Vec<(String, Dataset)>, u32), Unreadable> {
    let bad = |reason: String| Unreadable { file: "config.toml".into(), reason };
    let c: crate::pipeline::config::PipelineConfig =
        toml::from_str(config_toml).map_err(|e| bad(e.message().to_string()))?;
    if c.eval_suites.is_empty() {
        return Err(bad("it names no held-out suite".into()));
    }
    let suites = c
        .eval_suites
        .into_iter()
        .map(|s| {
            let dataset =
                Dataset { repo_id: s.repo_id, revision: s.revision, task_list: s.task_list, path: s.path };
            (s.name, dataset)
        })
        .collect();
    Ok((suites, c.evaluation.trials))
}

/// One task id a line, as the pipeline's `read_task_ids` reads a list.
pub fn read_task_ids(text: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if !seen.iter().any(|s: &String| s == line) {
            seen.push(line.to_string());
        }
    }
    seen
}

/// What a verified run measured.
#[derive(Debug, Clone, PartialEq)]
pub enum Verified {
    /// A collection's run: the recomputed `score_v2`, the result it gives, and what GRPO's
    /// records say of each train task (when GRPO ran).
    Scored {
        score: Box<ScoreV2>,
        measured: Measured,
        training: Option<Box<crate::training::signal::Training>>,
    },
    /// A baseline measurement.
    Reference(Reference),
}

/// Every check `result collect` makes of a run's evidence, without I/O: the bundle says what was
/// evaluated; the cells must cover it exactly; the pipeline's report must be what the cells give.
pub fn verify(run_id: &str, baseline: bool, e: &RunEvidence) -> Result<Verified, Refused> {
    let (suites, trials) = bundle_suites(&e.config_toml)?;
    let mut expected = Vec::new();
    for (name, dataset) in suites {
        let text = e.task_lists.get(&dataset.task_list).ok_or_else(|| Unreadable {
            file: dataset.task_list.clone(),
            reason: "the bundle lacks this task list".into(),
        })?;
        expected.push(ExpectedSuite { name, task_ids: read_task_ids(text), dataset });
    }
    let outcomes: TaskOutcomes = serde_json::from_slice(&e.outcomes)
        .map_err(|x| Unreadable { file: "eval_task_outcomes.json".into(), reason: x.to_string() })?;
    let arms = if baseline { vec![Arm::Baseline] } else { vec![Arm::Baseline, Arm::Final] };
    let want = Expected { run_id: run_id.to_string(), suites: expected, trials, arms };
    let cells = check_coverage(&outcomes, &want)?;
    if baseline {
        let report: BaselineReport = serde_json::from_slice(&e.report)
            .map_err(|x| Unreadable { file: "baseline.json".into(), reason: x.to_string() })?;
        return Ok(Verified::Reference(check_reference(&report, &outcomes)?));
    }
    let report: score::ScoreFile = serde_json::from_slice(&e.report)
        .map_err(|x| Unreadable { file: "score.json".into(), reason: x.to_string() })?;
    let stages = (
        outcomes.arms.baseline.as_ref().map_or("baseline_eval", |a| a.stage.as_str()),
        outcomes.arms.final_.as_ref().map(|a| a.stage.as_str()),
    );
    let score = check_report(&report.score_v2, &cells, trials, stages)?;
    let measured = measured(&score)?;
    let training = match report.grpo_ran {
        Some(true) => {
            let list = e.train_list.as_deref().ok_or_else(|| Unreadable {
                file: "task-lists/train_dataset.txt".into(),
                reason: "the bundle lacks the train task list".into(),
            })?;
            let checked = crate::training::signal::check(&read_task_ids(list), &e.training)
                .map_err(|e| Refused::Training(e.0))?;
            Some(Box::new(checked))
        }
        _ => None,
    };
    Ok(Verified::Scored { score: Box::new(score), measured, training })
}
