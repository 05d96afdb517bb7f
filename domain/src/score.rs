//! The pipeline's held-out score, `score_v2` (reference §6.5–7, the held-out branch's
//! `heldout.py`), recomputed from its cells in `reports/eval_task_outcomes.json` (§6.6), and the
//! shapes of both files as the pipeline writes them. `result collect` and `arena verify-run`
//! recompute the report and refuse one that differs.
//!
//! A cell is one (suite, trial) evaluation; each task in it passes when its reward is at least
//! 1.0. A task with no scored row is an infrastructure error: left out, never scored 0 (a timeout
//! the verifier scored is a scored failure). Per task, ȳ is the mean over its scored trials; an
//! arm's pass rate is the mean ȳ over the tasks scored at least once, its standard error
//! sqrt(s²/n) (null under two tasks). Δ pairs the tasks scored in both arms: dᵢ = ȳᵢ(final) −
//! ȳᵢ(baseline), Δ = mean dᵢ, SE = sqrt(s_d²/n) (task-clustered, paired; null under two tasks).
//! Suites pool as strata weighted by their task counts; a null estimate makes the pooled one null,
//! a null standard error keeps the estimate with a null error.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const PASS_THRESHOLD: f64 = 1.0;
pub const Z95: f64 = 1.959963984540054;

// ---------------------------------------------------------------- eval_task_outcomes.json

/// One task's outcome in one cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub reward: Option<f64>,
    pub passed: Option<bool>,
    pub infra_error: bool,
}

impl Outcome {
    pub fn scored(reward: f64) -> Outcome {
        Outcome { reward: Some(reward), passed: Some(reward >= PASS_THRESHOLD), infra_error: false }
    }

    pub const INFRA: Outcome = Outcome { reward: None, passed: None, infra_error: true };

    /// Whether the fields agree with each other as the pipeline writes them.
    pub fn consistent(&self) -> bool {
        match (self.infra_error, self.reward, self.passed) {
            (true, None, None) => true,
            (false, Some(r), Some(p)) => r.is_finite() && p == (r >= PASS_THRESHOLD),
            _ => false,
        }
    }
}

/// One (suite, trial) evaluation of an arm. `trial` counts from 1; `outcomes` is null in a dry
/// run; `jobs_dir` is the absolute path in the job's container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub suite: String,
    pub trial: u32,
    pub stage: String,
    pub jobs_dir: String,
    pub score: Option<f64>,
    pub outcomes: Option<BTreeMap<String, Outcome>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmCells {
    pub stage: String,
    pub cells: Vec<Cell>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Arms {
    pub baseline: Option<ArmCells>,
    #[serde(rename = "final")]
    pub final_: Option<ArmCells>,
}

/// `reports/eval_task_outcomes.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskOutcomes {
    pub schema_version: u32,
    pub pass_threshold: f64,
    pub arms: Arms,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arm {
    Baseline,
    Final,
}

impl TaskOutcomes {
    pub fn arm(&self, arm: Arm) -> Option<&ArmCells> {
        match arm {
            Arm::Baseline => self.arms.baseline.as_ref(),
            Arm::Final => self.arms.final_.as_ref(),
        }
    }
}

// ---------------------------------------------------------------- score.json

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dataset {
    pub repo_id: String,
    pub revision: String,
    pub task_list: String,
    pub path: String,
}

/// An arm of one suite (exactly these ten keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmScore {
    pub task_count: u64,
    pub scored_task_count: u64,
    pub unscored_task_ids: Vec<String>,
    pub cells: u64,
    pub infra_error_cells: u64,
    pub pass_rate: Option<f64>,
    pub stderr: Option<f64>,
    pub ci95: Option<[f64; 2]>,
    pub mean_reward: Option<f64>,
    pub trial_pass_rates: Vec<Option<f64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VarianceComponents {
    pub total: Option<f64>,
    pub trial: Option<f64>,
    pub task: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeltaScore {
    pub paired_task_count: u64,
    pub excluded_task_ids: Vec<String>,
    pub baseline_pass_rate: Option<f64>,
    pub final_pass_rate: Option<f64>,
    pub delta: Option<f64>,
    pub stderr: Option<f64>,
    pub ci95: Option<[f64; 2]>,
    pub variance_components: VarianceComponents,
    pub stderr_fixed_tasks: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteScore {
    pub name: String,
    pub dataset: Dataset,
    pub task_count: u64,
    pub baseline: Option<ArmScore>,
    #[serde(rename = "final")]
    pub final_: Option<ArmScore>,
    pub delta: Option<DeltaScore>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PooledArm {
    pub task_count: u64,
    pub scored_task_count: u64,
    pub cells: u64,
    pub infra_error_cells: u64,
    pub pass_rate: Option<f64>,
    pub stderr: Option<f64>,
    pub ci95: Option<[f64; 2]>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PooledDelta {
    pub paired_task_count: u64,
    pub baseline_pass_rate: Option<f64>,
    pub final_pass_rate: Option<f64>,
    pub delta: Option<f64>,
    pub stderr: Option<f64>,
    pub ci95: Option<[f64; 2]>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pooled {
    pub task_count: u64,
    pub baseline: Option<PooledArm>,
    #[serde(rename = "final")]
    pub final_: Option<PooledArm>,
    pub delta: Option<PooledDelta>,
}

/// `score_v2`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreV2 {
    pub schema_version: u32,
    pub metric: String,
    pub pass_threshold: f64,
    pub trials: u32,
    pub primary_suite: Option<String>,
    pub baseline_stage: String,
    pub final_stage: Option<String>,
    pub suites: Vec<SuiteScore>,
    pub pooled: Pooled,
    pub stderr_method: String,
}

/// `reports/score.json`: the v1 fields the arena reads, and `score_v2`; the rest is kept unread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreFile {
    pub schema_version: u32,
    pub run_name: String,
    pub baseline_score: Option<f64>,
    pub score_after_posttrain: Option<f64>,
    pub delta_score: Option<f64>,
    #[serde(default)]
    pub grpo_ran: Option<bool>,
    pub score_v2: ScoreV2,
}

// ---------------------------------------------------------------- the math

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// The sample variance (n − 1); null under two values.
fn variance(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    Some(xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64)
}

fn interval(estimate: Option<f64>, se: Option<f64>) -> Option<[f64; 2]> {
    Some([estimate? - Z95 * se?, estimate? + Z95 * se?])
}

/// One task over the trials of an arm.
struct TaskStats {
    scored: usize,
    mean: Option<f64>,
    variance: Option<f64>,
    reward: Option<f64>,
}

type Trial = BTreeMap<String, Outcome>;

fn outcome<'a>(trial: &'a Trial, task: &str) -> &'a Outcome {
    trial.get(task).unwrap_or(&Outcome::INFRA)
}

fn task_stats(task: &str, trials: &[Trial]) -> TaskStats {
    let kept: Vec<&Outcome> = trials.iter().map(|t| outcome(t, task)).filter(|o| !o.infra_error).collect();
    let passes: Vec<f64> = kept.iter().map(|o| if o.passed == Some(true) { 1.0 } else { 0.0 }).collect();
    let rewards: Vec<f64> = kept.iter().map(|o| o.reward.unwrap_or(0.0)).collect();
    TaskStats { scored: kept.len(), mean: mean(&passes), variance: variance(&passes), reward: mean(&rewards) }
}

pub fn arm_score(tasks: &[String], trials: &[Trial]) -> ArmScore {
    let stats: Vec<TaskStats> = tasks.iter().map(|t| task_stats(t, trials)).collect();
    let means: Vec<f64> = stats.iter().filter_map(|s| (s.scored > 0).then_some(s.mean).flatten()).collect();
    let pass_rate = mean(&means);
    let stderr = variance(&means).map(|v| (v / means.len() as f64).sqrt());
    ArmScore {
        task_count: tasks.len() as u64,
        scored_task_count: means.len() as u64,
        unscored_task_ids: tasks
            .iter()
            .zip(&stats)
            .filter(|(_, s)| s.scored == 0)
            .map(|(t, _)| t.clone())
            .collect(),
        cells: (tasks.len() * trials.len()) as u64,
        infra_error_cells: trials
            .iter()
            .flat_map(|t| tasks.iter().map(move |k| outcome(t, k)))
            .filter(|o| o.infra_error)
            .count() as u64,
        pass_rate,
        stderr,
        ci95: interval(pass_rate, stderr),
        mean_reward: mean(
            &stats.iter().filter(|s| s.scored > 0).filter_map(|s| s.reward).collect::<Vec<_>>(),
        ),
        trial_pass_rates: trials
            .iter()
            .map(|t| {
                let kept: Vec<f64> = tasks
                    .iter()
                    .map(|k| outcome(t, k))
                    .filter(|o| !o.infra_error)
                    .map(|o| if o.passed == Some(true) { 1.0 } else { 0.0 })
                    .collect();
                mean(&kept)
            })
            .collect(),
    }
}

pub fn delta_score(tasks: &[String], baseline: &[Trial], final_: &[Trial]) -> DeltaScore {
    let before: Vec<TaskStats> = tasks.iter().map(|t| task_stats(t, baseline)).collect();
    let after: Vec<TaskStats> = tasks.iter().map(|t| task_stats(t, final_)).collect();
    let paired: Vec<usize> =
        (0..tasks.len()).filter(|&i| before[i].scored > 0 && after[i].scored > 0).collect();
    let d: Vec<f64> =
        paired.iter().map(|&i| after[i].mean.unwrap_or(0.0) - before[i].mean.unwrap_or(0.0)).collect();
    let n = paired.len();
    let total = variance(&d);
    let stderr = total.map(|v| (v / n as f64).sqrt());
    let trial = (n > 0
        && paired.iter().all(|&i| before[i].variance.is_some() && after[i].variance.is_some()))
    .then(|| {
        paired
            .iter()
            .map(|&i| {
                before[i].variance.unwrap_or(0.0) / before[i].scored as f64
                    + after[i].variance.unwrap_or(0.0) / after[i].scored as f64
            })
            .sum::<f64>()
            / n as f64
    });
    let delta = mean(&d);
    DeltaScore {
        paired_task_count: n as u64,
        excluded_task_ids: (0..tasks.len())
            .filter(|i| !paired.contains(i))
            .map(|i| tasks[i].clone())
            .collect(),
        baseline_pass_rate: mean(&paired.iter().filter_map(|&i| before[i].mean).collect::<Vec<_>>()),
        final_pass_rate: mean(&paired.iter().filter_map(|&i| after[i].mean).collect::<Vec<_>>()),
        delta,
        stderr,
        ci95: interval(delta, stderr),
        variance_components: VarianceComponents {
            total,
            trial,
            task: match (total, trial) {
                (Some(a), Some(b)) => Some((a - b).max(0.0)),
                _ => None,
            },
        },
        stderr_fixed_tasks: trial.map(|t| (t / n as f64).sqrt()),
    }
}

/// Suites as strata: (n_s, estimate_s, SE_s) → the pooled estimate and SE.
fn strata(parts: &[(u64, Option<f64>, Option<f64>)]) -> (Option<f64>, Option<f64>) {
    let parts: Vec<_> = parts.iter().filter(|p| p.0 > 0).collect();
    let n: u64 = parts.iter().map(|p| p.0).sum();
    if n == 0 || parts.iter().any(|p| p.1.is_none()) {
        return (None, None);
    }
    let n = n as f64;
    let estimate = parts.iter().map(|p| p.0 as f64 * p.1.unwrap_or(0.0)).sum::<f64>() / n;
    if parts.iter().any(|p| p.2.is_none()) {
        return (Some(estimate), None);
    }
    let se = parts.iter().map(|p| (p.0 as f64 / n).powi(2) * p.2.unwrap_or(0.0).powi(2)).sum::<f64>().sqrt();
    (Some(estimate), Some(se))
}

fn pooled_arm(arms: &[&ArmScore]) -> PooledArm {
    let (pass_rate, stderr) =
        strata(&arms.iter().map(|a| (a.scored_task_count, a.pass_rate, a.stderr)).collect::<Vec<_>>());
    PooledArm {
        task_count: arms.iter().map(|a| a.task_count).sum(),
        scored_task_count: arms.iter().map(|a| a.scored_task_count).sum(),
        cells: arms.iter().map(|a| a.cells).sum(),
        infra_error_cells: arms.iter().map(|a| a.infra_error_cells).sum(),
        pass_rate,
        stderr,
        ci95: interval(pass_rate, stderr),
    }
}

fn pooled_delta(ds: &[&DeltaScore]) -> PooledDelta {
    let parts = |f: fn(&DeltaScore) -> Option<f64>| {
        ds.iter().map(|d| (d.paired_task_count, f(d), None)).collect::<Vec<_>>()
    };
    let (delta, stderr) =
        strata(&ds.iter().map(|d| (d.paired_task_count, d.delta, d.stderr)).collect::<Vec<_>>());
    PooledDelta {
        paired_task_count: ds.iter().map(|d| d.paired_task_count).sum(),
        baseline_pass_rate: strata(&parts(|d| d.baseline_pass_rate)).0,
        final_pass_rate: strata(&parts(|d| d.final_pass_rate)).0,
        delta,
        stderr,
        ci95: interval(delta, stderr),
    }
}

/// One suite's inputs: its tasks in order and each arm's outcome maps, one per trial.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteCells {
    pub name: String,
    pub dataset: Dataset,
    pub task_ids: Vec<String>,
    pub baseline: Option<Vec<Trial>>,
    pub final_: Option<Vec<Trial>>,
}

pub const STDERR_METHOD: &str = "Per suite: SE(delta) = sqrt(s_d^2 / n), s_d^2 the sample variance over paired tasks of d_i = mean over trials of pass@1 after minus before (task-clustered, paired; includes task and trial variation). Pooled: suites as strata, SE = sqrt(sum_s (n_s/N)^2 SE_s^2). Infra-error cells are excluded, not scored 0. ci95 = delta +/- 1.96 SE.";

/// `score_v2` from the suites' cells.
pub fn score_v2(
    suites: &[SuiteCells],
    trials: u32,
    baseline_stage: &str,
    final_stage: Option<&str>,
) -> ScoreV2 {
    let rows: Vec<SuiteScore> = suites
        .iter()
        .map(|s| {
            let present = |a: &Option<Vec<Trial>>| a.as_ref().filter(|t| !t.is_empty()).cloned();
            let (b, f) = (present(&s.baseline), present(&s.final_));
            SuiteScore {
                name: s.name.clone(),
                dataset: s.dataset.clone(),
                task_count: s.task_ids.len() as u64,
                baseline: b.as_ref().map(|t| arm_score(&s.task_ids, t)),
                final_: f.as_ref().map(|t| arm_score(&s.task_ids, t)),
                delta: match (&b, &f) {
                    (Some(b), Some(f)) => Some(delta_score(&s.task_ids, b, f)),
                    _ => None,
                },
            }
        })
        .collect();
    let all = |f: fn(&SuiteScore) -> Option<&ArmScore>| rows.iter().map(f).collect::<Option<Vec<_>>>();
    let baselines = all(|r| r.baseline.as_ref());
    let finals = all(|r| r.final_.as_ref());
    let deltas: Option<Vec<&DeltaScore>> = rows.iter().map(|r| r.delta.as_ref()).collect();
    ScoreV2 {
        schema_version: 2,
        metric: "pass@1".into(),
        pass_threshold: PASS_THRESHOLD,
        trials,
        primary_suite: rows.first().map(|r| r.name.clone()),
        baseline_stage: baseline_stage.into(),
        final_stage: final_stage.map(String::from),
        pooled: Pooled {
            task_count: rows.iter().map(|r| r.task_count).sum(),
            baseline: baselines.filter(|v| !v.is_empty()).map(|v| pooled_arm(&v)),
            final_: finals.filter(|v| !v.is_empty()).map(|v| pooled_arm(&v)),
            delta: deltas.filter(|v| !v.is_empty()).map(|v| pooled_delta(&v)),
        },
        suites: rows,
        stderr_method: STDERR_METHOD.into(),
    }
}

// ---------------------------------------------------------------- the baseline measurement

/// A measurement of the base model alone (a baseline run: baseline-arm cells only): per trial,
/// the pass rate over every task scored in that trial, pooled over suites; then the mean over
/// trials ± one standard error over trials (with a single trial, over that trial's tasks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    pub pass_rate: f64,
    pub stderr: f64,
    /// The trials with at least one scored cell.
    pub trials: u32,
    pub per_trial: Vec<f64>,
    /// Tasks scored at least once.
    pub tasks: u64,
    pub scored_cells: u64,
    pub infra_error_cells: u64,
}

/// `reports/baseline.json`: the job script's own measurement, in a baseline run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineReport {
    pub schema_version: u32,
    pub metric: String,
    #[serde(flatten)]
    pub reference: Reference,
}

fn se_of_mean(xs: &[f64]) -> f64 {
    variance(xs).map(|v| (v / xs.len() as f64).sqrt()).unwrap_or(0.0)
}

pub fn reference(o: &TaskOutcomes) -> Reference {
    let mut by_trial: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let mut tasks = std::collections::BTreeSet::new();
    let (mut scored, mut infra) = (0, 0);
    for cell in o.arms.baseline.iter().flat_map(|a| &a.cells) {
        for (task, x) in cell.outcomes.iter().flatten() {
            if x.infra_error {
                infra += 1;
                continue;
            }
            scored += 1;
            tasks.insert((cell.suite.clone(), task.clone()));
            by_trial.entry(cell.trial).or_default().push(if x.passed == Some(true) { 1.0 } else { 0.0 });
        }
    }
    let per_trial: Vec<f64> = by_trial.values().filter_map(|v| mean(v)).collect();
    let stderr = match by_trial.len() {
        1 => se_of_mean(by_trial.values().next().expect("one trial")),
        _ => se_of_mean(&per_trial),
    };
    Reference {
        pass_rate: mean(&per_trial).unwrap_or(0.0),
        stderr,
        trials: per_trial.len() as u32,
        per_trial,
        tasks: tasks.len() as u64,
        scored_cells: scored,
        infra_error_cells: infra,
    }
}

#[cfg(test)]
mod tests;
