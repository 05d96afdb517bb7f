//! Results: the checks `result collect` makes of a run's evidence before it stores a result, the
//! review, and the leaderboard's ranking with its pooled run-to-run standard error.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::score::{self, Arm, BaselineReport, Outcomes, Reference, ScoreReport, SuiteTasks};

/// Why collected evidence is refused; each has its own code at the API.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Evidence {
    #[error("the results do not cover the held-out suites: {0}")]
    Coverage(String),
    #[error("the pipeline's report differs from the cells: {0}")]
    Mismatch(String),
}

/// What the challenge scores on: its suites and their tasks, the trials per run, and the arms
/// evaluated (both for a collection's run, the baseline alone for a measurement of the base model).
#[derive(Debug, Clone)]
pub struct Expected {
    pub suites: Vec<SuiteTasks>,
    pub trials: u32,
    pub arms: Vec<Arm>,
}

/// The cells cover the suites exactly: every suite, every task (none missing, none extra), every
/// expected arm and no other, every trial once (scored, or marked an infrastructure error).
pub fn check_coverage(o: &Outcomes, want: &Expected) -> Result<(), Evidence> {
    let cov = |m: String| Err(Evidence::Coverage(m));
    if o.trials != want.trials {
        return cov(format!("{} trials reported; the challenge runs {}", o.trials, want.trials));
    }
    let named: BTreeSet<&str> = o.suites.iter().map(|s| s.name.as_str()).collect();
    let expected: BTreeSet<&str> = want.suites.iter().map(|s| s.name.as_str()).collect();
    if named != expected {
        return cov(format!(
            "suites {} reported; the challenge scores {}",
            named.iter().copied().collect::<Vec<_>>().join(", "),
            expected.iter().copied().collect::<Vec<_>>().join(", ")
        ));
    }
    let mut seen: BTreeMap<(&str, &str, Arm, u32), usize> = BTreeMap::new();
    for c in &o.cells {
        if c.scored == c.reward.is_none() {
            return cov(format!(
                "cell {}/{} trial {} is neither scored with a reward nor an infrastructure error",
                c.suite, c.task_id, c.trial
            ));
        }
        if !want.arms.contains(&c.arm) {
            return cov(format!(
                "cell {}/{} trial {} is in the {:?} arm, which this run does not evaluate",
                c.suite, c.task_id, c.trial, c.arm
            )
            .to_lowercase());
        }
        *seen.entry((c.suite.as_str(), c.task_id.as_str(), c.arm, c.trial)).or_insert(0) += 1;
    }
    for suite in &want.suites {
        let tasks: BTreeSet<&str> = suite.task_ids.iter().map(String::as_str).collect();
        let reported: BTreeSet<&str> =
            o.cells.iter().filter(|c| c.suite == suite.name).map(|c| c.task_id.as_str()).collect();
        if let Some(missing) = tasks.difference(&reported).next() {
            return cov(format!("task {missing} of {} has no cell", suite.name));
        }
        if let Some(extra) = reported.difference(&tasks).next() {
            return cov(format!("task {extra} is not in {}", suite.name));
        }
        for task in &tasks {
            for &arm in &want.arms {
                for trial in 0..want.trials {
                    match seen.get(&(suite.name.as_str(), task, arm, trial)).copied().unwrap_or(0) {
                        1 => {}
                        0 => {
                            return cov(format!(
                                "{}/{task} has no {arm:?} cell for trial {trial}",
                                suite.name
                            )
                            .to_lowercase())
                        }
                        n => {
                            return cov(format!(
                                "{}/{task} has {n} {arm:?} cells for trial {trial}",
                                suite.name
                            )
                            .to_lowercase())
                        }
                    }
                }
            }
        }
    }
    if let Some(c) = o.cells.iter().find(|c| c.trial >= want.trials) {
        return cov(format!(
            "{}/{} has a cell for trial {}, beyond the {} trials",
            c.suite, c.task_id, c.trial, want.trials
        ));
    }
    Ok(())
}

const TOLERANCE: f64 = 1e-9;

fn differ(path: &str, reported: f64, recomputed: f64) -> Result<(), Evidence> {
    if (reported - recomputed).abs() > TOLERANCE {
        Err(Evidence::Mismatch(format!("{path}: the report says {reported}, the cells give {recomputed}")))
    } else {
        Ok(())
    }
}

/// The pipeline's report equals what the cells give; the error names the first difference.
pub fn check_report(reported: &ScoreReport, cells: &Outcomes) -> Result<ScoreReport, Evidence> {
    let ours = score::score(cells);
    if reported.trials != ours.trials {
        return Err(Evidence::Mismatch(format!(
            "trials: the report says {}, the cells {}",
            reported.trials, ours.trials
        )));
    }
    if reported.suites.len() != ours.suites.len() {
        return Err(Evidence::Mismatch(format!(
            "the report scores {} suites, the cells {}",
            reported.suites.len(),
            ours.suites.len()
        )));
    }
    for (r, o) in reported.suites.iter().zip(&ours.suites) {
        if r.name != o.name {
            return Err(Evidence::Mismatch(format!("suite `{}` where the cells have `{}`", r.name, o.name)));
        }
        let p = |field: &str| format!("suites[{}].{field}", r.name);
        for (field, a, b) in [
            ("baseline.pass_rate", r.baseline.pass_rate, o.baseline.pass_rate),
            ("baseline.stderr", r.baseline.stderr, o.baseline.stderr),
            ("final.pass_rate", r.final_.pass_rate, o.final_.pass_rate),
            ("final.stderr", r.final_.stderr, o.final_.stderr),
            ("delta.delta", r.delta.delta, o.delta.delta),
            ("delta.stderr", r.delta.stderr, o.delta.stderr),
        ] {
            differ(&p(field), a, b)?;
        }
        for (field, a, b) in [
            ("baseline.scored_cells", r.baseline.scored_cells, o.baseline.scored_cells),
            ("baseline.infra_error_cells", r.baseline.infra_error_cells, o.baseline.infra_error_cells),
            ("final.scored_cells", r.final_.scored_cells, o.final_.scored_cells),
            ("final.infra_error_cells", r.final_.infra_error_cells, o.final_.infra_error_cells),
            ("delta.paired_task_count", r.delta.paired_task_count, o.delta.paired_task_count),
        ] {
            if a != b {
                return Err(Evidence::Mismatch(format!(
                    "{}: the report says {a}, the cells give {b}",
                    p(field)
                )));
            }
        }
    }
    let (r, o) = (&reported.pooled, &ours.pooled);
    for (field, a, b) in [
        ("pooled.baseline_pass_rate", r.baseline_pass_rate, o.baseline_pass_rate),
        ("pooled.final_pass_rate", r.final_pass_rate, o.final_pass_rate),
        ("pooled.delta", r.delta, o.delta),
        ("pooled.stderr", r.stderr, o.stderr),
    ] {
        differ(field, a, b)?;
    }
    if r.paired_task_count != o.paired_task_count {
        return Err(Evidence::Mismatch(format!(
            "pooled.paired_task_count: the report says {}, the cells give {}",
            r.paired_task_count, o.paired_task_count
        )));
    }
    Ok(ours)
}

/// The pipeline's baseline report equals what the cells give; the error names the first difference.
pub fn check_reference(reported: &BaselineReport, cells: &Outcomes) -> Result<Reference, Evidence> {
    let ours = score::reference(cells);
    let r = &reported.reference;
    let count = |field: &str, a: u64, b: u64| {
        if a == b {
            Ok(())
        } else {
            Err(Evidence::Mismatch(format!("{field}: the report says {a}, the cells give {b}")))
        }
    };
    count("trials", r.trials.into(), ours.trials.into())?;
    count("tasks", r.tasks, ours.tasks)?;
    count("scored_cells", r.scored_cells, ours.scored_cells)?;
    count("infra_error_cells", r.infra_error_cells, ours.infra_error_cells)?;
    for (i, (a, b)) in r.per_trial.iter().zip(&ours.per_trial).enumerate() {
        differ(&format!("per_trial[{i}]"), *a, *b)?;
    }
    count("per_trial length", r.per_trial.len() as u64, ours.per_trial.len() as u64)?;
    differ("pass_rate", r.pass_rate, ours.pass_rate)?;
    differ("stderr", r.stderr, ours.stderr)?;
    Ok(ours)
}

/// One suite's change, in percentage points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SuiteResult {
    pub suite: String,
    pub delta_pp: f64,
    pub stderr_pp: f64,
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
    /// Δ ± 1.96 standard errors (pp).
    pub ci95_pp: [f64; 2],
    /// The task content it trained on (`sha256:` identities).
    pub task_identities: Vec<String>,
    /// The runs dataset commit the evidence was read at.
    pub read_commit: String,
    pub collected_by: String,
    pub collected_at: String,
    pub review: Option<ReviewView>,
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
    pub stderr_pp: f64,
    pub trials: u32,
    pub suites: Vec<SuiteResult>,
    pub paired_tasks: u64,
    pub infra_error_cells: u64,
}

pub fn measured(s: &ScoreReport) -> Measured {
    Measured {
        baseline_pass_rate: s.pooled.baseline_pass_rate,
        after_pass_rate: s.pooled.final_pass_rate,
        delta_pp: s.pooled.delta * 100.0,
        stderr_pp: s.pooled.stderr * 100.0,
        trials: s.trials,
        suites: s
            .suites
            .iter()
            .map(|x| SuiteResult {
                suite: x.name.clone(),
                delta_pp: x.delta.delta * 100.0,
                stderr_pp: x.delta.stderr * 100.0,
                paired_tasks: x.delta.paired_task_count,
            })
            .collect(),
        paired_tasks: s.pooled.paired_task_count,
        infra_error_cells: s
            .suites
            .iter()
            .map(|x| x.baseline.infra_error_cells + x.final_.infra_error_cells)
            .sum(),
    }
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
    pub fn check(&self) -> Result<(), String> {
        let n = self.note.trim().chars().count();
        if n < MIN_NOTE {
            return Err(format!(
                "`note` says what the evidence showed in at least {MIN_NOTE} characters; this one has {n}"
            ));
        }
        Ok(())
    }
}

/// An accepted (or rejected) run of a collection, as the leaderboard reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedRun {
    pub environment_id: String,
    pub run_id: String,
    pub accepted: bool,
    /// The run's Δ and its own evaluation standard error (pp), on what is ranked.
    pub delta_pp: f64,
    pub stderr_pp: f64,
    /// Order of review: the latest accepted run gives the row's other fields.
    pub order: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub environment_id: String,
    pub rank: u32,
    pub delta_pp: f64,
    pub stderr_pp: f64,
    pub verified_runs: u32,
    pub rejected_runs: u32,
    pub run_deltas_pp: Vec<f64>,
    pub run_ids: Vec<String>,
    pub latest_run_id: String,
}

/// Δ as shown and compared for ties: to a hundredth of a point.
pub fn shown(pp: f64) -> f64 {
    (pp * 100.0).round() / 100.0
}

/// The board: each collection on the mean Δ of its accepted runs. Its standard error is
/// sqrt(v / n), v the run-to-run variance pooled over every collection with two or more accepted
/// runs, never less than a run's own evaluation variance (the row's mean of its runs' squared
/// standard errors); before any collection has repeat runs, v is that evaluation variance, so a
/// single run keeps its own standard error. Ties (equal Δ as shown) share a rank. Answers the rows
/// and the pooled per-run standard deviation.
pub fn rank(runs: &[RankedRun]) -> (Vec<Row>, Option<f64>) {
    let mut by_env: BTreeMap<&str, Vec<&RankedRun>> = BTreeMap::new();
    for r in runs {
        by_env.entry(r.environment_id.as_str()).or_default().push(r);
    }
    // Pooled within-collection variance over collections with repeats.
    let (mut ss, mut dof) = (0.0, 0usize);
    for rs in by_env.values() {
        let d: Vec<f64> = rs.iter().filter(|r| r.accepted).map(|r| r.delta_pp).collect();
        if d.len() >= 2 {
            let m = d.iter().sum::<f64>() / d.len() as f64;
            ss += d.iter().map(|x| (x - m).powi(2)).sum::<f64>();
            dof += d.len() - 1;
        }
    }
    let pooled = (dof > 0).then(|| ss / dof as f64);
    let mut rows: Vec<Row> = by_env
        .into_iter()
        .filter_map(|(env, rs)| {
            let mut accepted: Vec<&&RankedRun> = rs.iter().filter(|r| r.accepted).collect();
            if accepted.is_empty() {
                return None;
            }
            accepted.sort_by_key(|r| r.order);
            let n = accepted.len() as f64;
            let mean = accepted.iter().map(|r| r.delta_pp).sum::<f64>() / n;
            let eval_var = accepted.iter().map(|r| r.stderr_pp.powi(2)).sum::<f64>() / n;
            let v = pooled.map_or(eval_var, |p| p.max(eval_var));
            Some(Row {
                environment_id: env.to_string(),
                rank: 0,
                delta_pp: mean,
                stderr_pp: (v / n).sqrt(),
                verified_runs: accepted.len() as u32,
                rejected_runs: rs.iter().filter(|r| !r.accepted).count() as u32,
                run_deltas_pp: accepted.iter().map(|r| r.delta_pp).collect(),
                run_ids: accepted.iter().map(|r| r.run_id.clone()).collect(),
                latest_run_id: accepted.last().map(|r| r.run_id.clone()).unwrap_or_default(),
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        shown(b.delta_pp).total_cmp(&shown(a.delta_pp)).then(a.environment_id.cmp(&b.environment_id))
    });
    let mut rank = 0;
    for i in 0..rows.len() {
        if i == 0 || shown(rows[i].delta_pp) != shown(rows[i - 1].delta_pp) {
            rank = i as u32 + 1;
        }
        rows[i].rank = rank;
    }
    (rows, pooled.map(f64::sqrt))
}

/// Whether a row's 95% interval overlaps the leader's: the difference is not clear.
pub fn tied_with_leader(row: (f64, f64), leader: (f64, f64)) -> bool {
    let z = crate::score::Z95;
    row.0 + z * row.1 >= leader.0 - z * leader.1
}

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
