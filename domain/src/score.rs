//! score_v2: the pipeline's held-out score, recomputed from every cell of the evaluation. The
//! simulated pipeline writes its report with this code, and `result collect` recomputes it from
//! the cells to check the pipeline's own report.
//!
//! A cell is one (task, trial) attempt in one arm; it passes when its reward is at least 1.0. An
//! unscored cell is an infrastructure error: left out, never scored 0. Per task, ȳ is the mean
//! over its scored trials; an arm's pass rate is the mean of ȳ over the tasks scored at least once.
//! Δ pairs the tasks scored in both arms: dᵢ = ȳᵢ(final) − ȳᵢ(baseline), Δ = mean dᵢ,
//! SE = sqrt(s²/n) with the sample variance (n − 1). Over suites (n_s paired tasks each, N in all):
//! Δ = Σ n_s Δ_s / N, SE = sqrt(Σ (n_s/N)² SE_s²), ci95 = Δ ± 1.959964·SE.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const Z95: f64 = 1.959964;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arm {
    Baseline,
    Final,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub suite: String,
    pub task_id: String,
    pub arm: Arm,
    pub trial: u32,
    pub reward: Option<f64>,
    pub scored: bool,
    #[serde(default)]
    pub error_category: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteTasks {
    pub name: String,
    pub task_ids: Vec<String>,
}

/// `reports/eval_task_outcomes.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcomes {
    pub schema_version: u32,
    pub run_id: String,
    pub metric: String,
    pub trials: u32,
    pub suites: Vec<SuiteTasks>,
    pub cells: Vec<Cell>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmScore {
    pub pass_rate: f64,
    pub stderr: f64,
    pub scored_cells: u64,
    pub infra_error_cells: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeltaScore {
    pub paired_task_count: u64,
    pub delta: f64,
    pub stderr: f64,
    pub ci95: [f64; 2],
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteScore {
    pub name: String,
    pub baseline: ArmScore,
    #[serde(rename = "final")]
    pub final_: ArmScore,
    pub delta: DeltaScore,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pooled {
    pub paired_task_count: u64,
    pub baseline_pass_rate: f64,
    pub final_pass_rate: f64,
    pub delta: f64,
    pub stderr: f64,
    pub ci95: [f64; 2],
}

/// `reports/score.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreReport {
    pub schema_version: u32,
    pub metric: String,
    pub trials: u32,
    pub primary_suite: String,
    pub suites: Vec<SuiteScore>,
    pub pooled: Pooled,
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// The standard error of a mean: sqrt(s² / n), with s² the sample variance; 0 below two values.
fn stderr(xs: &[f64]) -> f64 {
    let n = xs.len();
    if n < 2 {
        return 0.0;
    }
    let m = mean(xs);
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    (var / n as f64).sqrt()
}

/// Per task of one suite and arm: the mean over its scored trials, and the cell counts.
fn task_means(cells: &[&Cell], arm: Arm) -> (BTreeMap<String, f64>, u64, u64) {
    let mut by_task: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let (mut scored, mut infra) = (0, 0);
    for c in cells.iter().filter(|c| c.arm == arm) {
        if c.scored {
            scored += 1;
            let pass = if c.reward.unwrap_or(0.0) >= 1.0 { 1.0 } else { 0.0 };
            by_task.entry(c.task_id.clone()).or_default().push(pass);
        } else {
            infra += 1;
        }
    }
    (by_task.into_iter().map(|(t, v)| (t, mean(&v))).collect(), scored, infra)
}

fn ci(delta: f64, se: f64) -> [f64; 2] {
    [delta - Z95 * se, delta + Z95 * se]
}

/// The score of every suite and the pooled score, from the cells.
pub fn score(o: &Outcomes) -> ScoreReport {
    let mut suites = Vec::new();
    let mut strata = Vec::new();
    for suite in &o.suites {
        let cells: Vec<&Cell> = o.cells.iter().filter(|c| c.suite == suite.name).collect();
        let (base, base_scored, base_infra) = task_means(&cells, Arm::Baseline);
        let (fin, fin_scored, fin_infra) = task_means(&cells, Arm::Final);
        let arm = |m: &BTreeMap<String, f64>, scored, infra| {
            let ys: Vec<f64> = m.values().copied().collect();
            ArmScore {
                pass_rate: mean(&ys),
                stderr: stderr(&ys),
                scored_cells: scored,
                infra_error_cells: infra,
            }
        };
        let paired: Vec<(f64, f64)> = base.iter().filter_map(|(t, b)| fin.get(t).map(|f| (*b, *f))).collect();
        let d: Vec<f64> = paired.iter().map(|(b, f)| f - b).collect();
        let (delta, se) = (mean(&d), stderr(&d));
        strata.push((
            paired.len() as f64,
            mean(&paired.iter().map(|p| p.0).collect::<Vec<_>>()),
            mean(&paired.iter().map(|p| p.1).collect::<Vec<_>>()),
            delta,
            se,
        ));
        suites.push(SuiteScore {
            name: suite.name.clone(),
            baseline: arm(&base, base_scored, base_infra),
            final_: arm(&fin, fin_scored, fin_infra),
            delta: DeltaScore {
                paired_task_count: paired.len() as u64,
                delta,
                stderr: se,
                ci95: ci(delta, se),
            },
        });
    }
    let n: f64 = strata.iter().map(|s| s.0).sum();
    let weighted = |f: fn(&(f64, f64, f64, f64, f64)) -> f64| {
        if n == 0.0 {
            0.0
        } else {
            strata.iter().map(|s| s.0 * f(s)).sum::<f64>() / n
        }
    };
    let delta = weighted(|s| s.3);
    let se = if n == 0.0 {
        0.0
    } else {
        strata.iter().map(|s| (s.0 / n).powi(2) * s.4.powi(2)).sum::<f64>().sqrt()
    };
    ScoreReport {
        schema_version: 2,
        metric: o.metric.clone(),
        trials: o.trials,
        primary_suite: o.suites.first().map(|s| s.name.clone()).unwrap_or_default(),
        suites,
        pooled: Pooled {
            paired_task_count: n as u64,
            baseline_pass_rate: weighted(|s| s.1),
            final_pass_rate: weighted(|s| s.2),
            delta,
            stderr: se,
            ci95: ci(delta, se),
        },
    }
}

/// A measurement of the base model alone (a baseline run: baseline-arm cells only): per trial, the
/// pass rate over every task scored in that trial, pooled over suites; then the mean over trials
/// ± one standard error over trials (with a single trial, over that trial's tasks).
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

/// `reports/baseline.json`: the pipeline's own measurement, in a baseline run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineReport {
    pub schema_version: u32,
    pub metric: String,
    #[serde(flatten)]
    pub reference: Reference,
}

pub fn reference(o: &Outcomes) -> Reference {
    let mut by_trial: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let mut tasks = std::collections::BTreeSet::new();
    let (mut scored, mut infra) = (0, 0);
    for c in o.cells.iter().filter(|c| c.arm == Arm::Baseline) {
        if c.scored {
            scored += 1;
            tasks.insert((c.suite.as_str(), c.task_id.as_str()));
            let pass = if c.reward.unwrap_or(0.0) >= 1.0 { 1.0 } else { 0.0 };
            by_trial.entry(c.trial).or_default().push(pass);
        } else {
            infra += 1;
        }
    }
    let per_trial: Vec<f64> = by_trial.values().map(|v| mean(v)).collect();
    let se = match by_trial.len() {
        1 => stderr(by_trial.values().next().expect("one trial")),
        _ => stderr(&per_trial),
    };
    Reference {
        pass_rate: mean(&per_trial),
        stderr: se,
        trials: per_trial.len() as u32,
        per_trial,
        tasks: tasks.len() as u64,
        scored_cells: scored,
        infra_error_cells: infra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(suite: &str, task: &str, arm: Arm, trial: u32, reward: Option<f64>) -> Cell {
        Cell {
            suite: suite.into(),
            task_id: task.into(),
            arm,
            trial,
            reward,
            scored: reward.is_some(),
            error_category: reward.is_none().then(|| "sandbox_start_timeout".into()),
        }
    }

    fn outcomes(suites: &[(&str, &[&str])], cells: Vec<Cell>) -> Outcomes {
        Outcomes {
            schema_version: 2,
            run_id: "run-1".into(),
            metric: "pass@1".into(),
            trials: 2,
            suites: suites
                .iter()
                .map(|(n, t)| SuiteTasks {
                    name: n.to_string(),
                    task_ids: t.iter().map(|s| s.to_string()).collect(),
                })
                .collect(),
            cells,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn one_suite_worked_by_hand() {
        use Arm::*;
        // t1: before 0,0 after 1,1 → d = 1; t2: before 1,0 after 1,1 → d = 0.5; t3: 0,0 → 0,1 → d = 0.5.
        let o = outcomes(
            &[("s", &["t1", "t2", "t3"])],
            vec![
                cell("s", "t1", Baseline, 0, Some(0.0)),
                cell("s", "t1", Baseline, 1, Some(0.0)),
                cell("s", "t1", Final, 0, Some(1.0)),
                cell("s", "t1", Final, 1, Some(1.0)),
                cell("s", "t2", Baseline, 0, Some(1.0)),
                cell("s", "t2", Baseline, 1, Some(0.5)),
                cell("s", "t2", Final, 0, Some(1.0)),
                cell("s", "t2", Final, 1, Some(1.0)),
                cell("s", "t3", Baseline, 0, Some(0.0)),
                cell("s", "t3", Baseline, 1, Some(0.0)),
                cell("s", "t3", Final, 0, Some(0.0)),
                cell("s", "t3", Final, 1, Some(1.0)),
            ],
        );
        let r = score(&o);
        let s = &r.suites[0];
        assert!(close(s.baseline.pass_rate, 0.5 / 3.0));
        assert!(close(s.final_.pass_rate, 2.5 / 3.0));
        assert!(close(s.delta.delta, 2.0 / 3.0));
        // d = [1, .5, .5]: mean 2/3, s² = ((1/3)² + 2·(1/6)²)/2 = 1/12, SE = sqrt(1/36) = 1/6.
        assert!(close(s.delta.stderr, 1.0 / 6.0));
        assert!(close(r.pooled.delta, 2.0 / 3.0) && close(r.pooled.stderr, 1.0 / 6.0));
        assert!(close(s.delta.ci95[0], 2.0 / 3.0 - Z95 / 6.0));
        assert_eq!((s.baseline.scored_cells, s.baseline.infra_error_cells), (6, 0));
    }

    #[test]
    fn infrastructure_errors_are_left_out_and_a_task_missing_in_one_arm_is_unpaired() {
        use Arm::*;
        let o = outcomes(
            &[("s", &["t1", "t2"])],
            vec![
                cell("s", "t1", Baseline, 0, Some(0.0)),
                cell("s", "t1", Baseline, 1, None),
                cell("s", "t1", Final, 0, Some(1.0)),
                cell("s", "t1", Final, 1, Some(1.0)),
                // t2 never scored after training: only its baseline counts, and it is not paired.
                cell("s", "t2", Baseline, 0, Some(1.0)),
                cell("s", "t2", Final, 0, None),
                cell("s", "t2", Final, 1, None),
            ],
        );
        let r = score(&o);
        let s = &r.suites[0];
        assert_eq!((s.baseline.infra_error_cells, s.final_.infra_error_cells), (1, 2));
        assert!(close(s.baseline.pass_rate, 0.5), "t1 0 (one scored trial), t2 1");
        assert_eq!(s.delta.paired_task_count, 1);
        assert!(close(s.delta.delta, 1.0) && close(s.delta.stderr, 0.0));
    }

    #[test]
    fn suites_pool_weighting_every_paired_task_the_same() {
        use Arm::*;
        let mut cells = Vec::new();
        // Suite a: 1 task, d = 1. Suite b: 3 tasks, d = 0, 0, 1 (Δ_b = 1/3, SE_b = 1/3).
        cells.extend([cell("a", "x", Baseline, 0, Some(0.0)), cell("a", "x", Final, 0, Some(1.0))]);
        for (t, before, after) in [("p", 0.0, 0.0), ("q", 1.0, 1.0), ("r", 0.0, 1.0)] {
            cells.extend([cell("b", t, Baseline, 0, Some(before)), cell("b", t, Final, 0, Some(after))]);
        }
        let r = score(&outcomes(&[("a", &["x"]), ("b", &["p", "q", "r"])], cells));
        assert!(close(r.pooled.delta, (1.0 * 1.0 + 3.0 * (1.0 / 3.0)) / 4.0));
        // SE = sqrt((1/4)²·0 + (3/4)²·(1/3)²) = 1/4.
        assert!(close(r.suites[1].delta.stderr, 1.0 / 3.0));
        assert!(close(r.pooled.stderr, 0.25));
        assert_eq!(r.pooled.paired_task_count, 4);
        assert!(close(r.pooled.baseline_pass_rate, 0.25) && close(r.pooled.final_pass_rate, 0.75));
        assert_eq!(r.primary_suite, "a");
    }

    /// Worked by hand: two tasks, three trials. Trial 0: 1/2; trial 1: 2/2; trial 2: t2 an
    /// infrastructure error, t1 passes (1/1). Per trial [0.5, 1, 1]: mean 5/6, SE =
    /// sqrt(var/3) with var = ((1/3)² + 2·(1/6)²)/2 = 1/12, so SE = 1/6. Final cells are ignored.
    #[test]
    fn a_baseline_measurement_is_the_mean_over_trials_with_its_error() {
        let b = |t, trial, r| cell("s", t, Arm::Baseline, trial, r);
        let cells = vec![
            b("t1", 0, Some(1.0)),
            b("t2", 0, Some(0.0)),
            b("t1", 1, Some(1.0)),
            b("t2", 1, Some(1.0)),
            b("t1", 2, Some(1.0)),
            b("t2", 2, None),
            cell("s", "t1", Arm::Final, 0, Some(0.0)),
        ];
        let r = reference(&outcomes(&[("s", &["t1", "t2"])], cells.clone()));
        assert_eq!(r.per_trial, [0.5, 1.0, 1.0]);
        assert!((r.pass_rate - 5.0 / 6.0).abs() < 1e-12);
        assert!((r.stderr - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!((r.trials, r.tasks, r.scored_cells, r.infra_error_cells), (3, 2, 5, 1));
        // One trial: the error is over that trial's tasks (0, 1: mean 0.5, SE 0.5).
        let one = reference(&outcomes(&[("s", &["t1", "t2"])], cells[..2].to_vec()));
        assert_eq!((one.pass_rate, one.stderr, one.trials), (0.5, 0.5, 1));
    }
}
