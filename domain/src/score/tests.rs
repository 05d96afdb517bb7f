use super::*;

fn trial(cells: &[(&str, Option<f64>)]) -> Trial {
    cells.iter().map(|(t, r)| (t.to_string(), r.map_or(Outcome::INFRA, Outcome::scored))).collect()
}

/// Per task, the reward of each trial (None: an infrastructure error).
fn trials(tasks: &[(&str, &[Option<f64>])]) -> Vec<Trial> {
    let n = tasks[0].1.len();
    (0..n).map(|k| trial(&tasks.iter().map(|(t, rs)| (*t, rs[k])).collect::<Vec<_>>())).collect()
}

fn suite(name: &str, baseline: &[(&str, &[Option<f64>])], final_: &[(&str, &[Option<f64>])]) -> SuiteCells {
    SuiteCells {
        name: name.into(),
        dataset: Dataset {
            repo_id: "o/d".into(),
            revision: "r".into(),
            task_list: "l".into(),
            path: "tasks".into(),
        },
        task_ids: baseline.iter().map(|(t, _)| t.to_string()).collect(),
        baseline: Some(trials(baseline)),
        final_: Some(trials(final_)),
    }
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 5e-7)
}

const P: Option<f64> = Some(1.0);
const F: Option<f64> = Some(0.0);

/// The reference's example (§6.5, the held-out branch's test fixture): tb2 a [1,0]→[1,1],
/// b [0,0]→[1,0], c [1,1]→[1,1]; lhtb x [0,0]→[1,0], y [0,1]→[1,1]; pooled Δ 0.4, SE 0.1.
#[test]
fn the_reference_example_gives_its_numbers() {
    let tb2 = suite(
        "tb2",
        &[("a", &[P, F]), ("b", &[F, F]), ("c", &[P, P])],
        &[("a", &[P, P]), ("b", &[P, F]), ("c", &[P, P])],
    );
    let lhtb = suite("lhtb", &[("x", &[F, F]), ("y", &[F, P])], &[("x", &[P, F]), ("y", &[P, P])]);
    let s = score_v2(&[tb2, lhtb], 2, "baseline_eval", Some("posttrain_eval"));
    let t = &s.suites[0];
    let b = t.baseline.as_ref().unwrap();
    assert!(close(b.pass_rate, 0.5) && close(b.stderr, 0.288675));
    assert!(close(b.ci95.map(|c| c[0]), -0.065793) && close(b.ci95.map(|c| c[1]), 1.065793));
    assert!(close(b.trial_pass_rates[0], 0.666667) && close(b.trial_pass_rates[1], 0.333333));
    assert_eq!((b.cells, b.infra_error_cells, b.scored_task_count), (6, 0, 3));
    let f = t.final_.as_ref().unwrap();
    assert!(close(f.pass_rate, 0.833333) && close(f.stderr, 0.166667));
    let d = t.delta.as_ref().unwrap();
    assert!(close(d.delta, 0.333333) && close(d.stderr, 0.166667));
    assert!(close(d.ci95.map(|c| c[0]), 0.006673) && close(d.ci95.map(|c| c[1]), 0.659994));
    assert!(close(d.variance_components.total, 0.083333));
    assert!(close(d.variance_components.trial, 0.166667) && close(d.variance_components.task, 0.0));
    assert!(close(d.stderr_fixed_tasks, 0.235702));
    let l = s.suites[1].delta.as_ref().unwrap();
    assert!(close(l.delta, 0.5) && close(l.stderr, 0.0));
    let p = &s.pooled;
    assert_eq!(p.task_count, 5);
    assert!(
        close(p.baseline.as_ref().unwrap().pass_rate, 0.4) && close(p.baseline.as_ref().unwrap().stderr, 0.2)
    );
    assert!(
        close(p.final_.as_ref().unwrap().pass_rate, 0.8)
            && close(p.final_.as_ref().unwrap().stderr, 0.141421)
    );
    let pd = p.delta.as_ref().unwrap();
    assert!(close(pd.delta, 0.4) && close(pd.stderr, 0.1));
    assert_eq!(pd.paired_task_count, 5);
    assert_eq!(s.primary_suite.as_deref(), Some("tb2"));
}

/// Worked by hand: three tasks, two trials; a scored timeout is a failure (reward 0), an
/// infrastructure cell is left out. Before: t1 [1, 0], t2 [0, infra], t3 [0, 0]: ȳ = .5, 0, 0;
/// after: t1 [1, 1], t2 [timeout 0, 1], t3 [1, 0]: ȳ = 1, .5, .5. d = .5, .5, .5: Δ = .5, SE = 0.
#[test]
fn a_scored_timeout_fails_and_an_infrastructure_cell_is_left_out() {
    let s = score_v2(
        &[suite(
            "s",
            &[("t1", &[P, F]), ("t2", &[F, None]), ("t3", &[F, F])],
            &[("t1", &[P, P]), ("t2", &[F, P]), ("t3", &[P, F])],
        )],
        2,
        "baseline_eval",
        Some("posttrain_eval"),
    );
    let b = s.suites[0].baseline.as_ref().unwrap();
    assert_eq!((b.infra_error_cells, b.cells, b.scored_task_count), (1, 6, 3));
    assert!(close(b.pass_rate, 0.5 / 3.0));
    assert!(close(b.trial_pass_rates[1], 0.0), "t2's infrastructure cell is not in trial 2's rate");
    let d = s.pooled.delta.as_ref().unwrap();
    assert!(close(d.delta, 0.5) && close(d.stderr, 0.0));
}

#[test]
fn one_paired_task_has_a_delta_and_a_null_error() {
    let s = score_v2(
        &[suite("one", &[("t", &[F, F])], &[("t", &[P, F])])],
        2,
        "baseline_eval",
        Some("posttrain_eval"),
    );
    let d = s.suites[0].delta.as_ref().unwrap();
    assert!(close(d.delta, 0.5));
    assert_eq!((d.stderr, d.ci95, d.variance_components.total), (None, None, None));
    let pd = s.pooled.delta.as_ref().unwrap();
    assert!(close(pd.delta, 0.5) && pd.stderr.is_none(), "{pd:?}");
    assert!(s.suites[0].baseline.as_ref().unwrap().stderr.is_none());
}

#[test]
fn a_task_infrastructure_error_in_every_trial_of_an_arm_is_unpaired() {
    let s = score_v2(
        &[suite("s", &[("a", &[P]), ("b", &[F]), ("c", &[F])], &[("a", &[P]), ("b", &[None]), ("c", &[P])])],
        1,
        "baseline_eval",
        Some("posttrain_eval"),
    );
    let d = s.suites[0].delta.as_ref().unwrap();
    assert_eq!(d.excluded_task_ids, ["b"]);
    assert_eq!(s.suites[0].final_.as_ref().unwrap().unscored_task_ids, ["b"]);
    assert_eq!(d.paired_task_count, 2);
}

#[test]
fn no_final_arm_means_no_delta_and_no_pooled_final() {
    let mut c = suite("s", &[("a", &[P])], &[("a", &[P])]);
    c.final_ = None;
    let s = score_v2(&[c], 1, "baseline_eval", None);
    assert!(s.suites[0].final_.is_none() && s.suites[0].delta.is_none());
    assert!(s.pooled.final_.is_none() && s.pooled.delta.is_none());
    assert!(s.pooled.baseline.is_some());
}

/// Worked by hand: two tasks, three trials. Trial 1: 1/2; trial 2: 2/2; trial 3: t2 an
/// infrastructure error, t1 passes (1/1). Per trial [0.5, 1, 1]: mean 5/6, SE = 1/6.
#[test]
fn a_baseline_measurement_is_the_mean_over_trials_with_its_error() {
    let cells = |t: &[(&str, &[Option<f64>])]| -> Vec<Cell> {
        trials(t)
            .into_iter()
            .enumerate()
            .map(|(i, o)| Cell {
                suite: "s".into(),
                trial: i as u32 + 1,
                stage: "baseline_eval".into(),
                jobs_dir: "/j".into(),
                score: None,
                outcomes: Some(o),
            })
            .collect()
    };
    let o = TaskOutcomes {
        schema_version: 1,
        pass_threshold: 1.0,
        arms: Arms {
            baseline: Some(ArmCells {
                stage: "baseline_eval".into(),
                cells: cells(&[("t1", &[P, P, P]), ("t2", &[F, P, None])]),
            }),
            final_: None,
        },
    };
    let r = reference(&o);
    assert_eq!(r.per_trial, [0.5, 1.0, 1.0]);
    assert!((r.pass_rate - 5.0 / 6.0).abs() < 1e-12 && (r.stderr - 1.0 / 6.0).abs() < 1e-12);
    assert_eq!((r.trials, r.tasks, r.scored_cells, r.infra_error_cells), (3, 2, 5, 1));
}

#[test]
fn the_outcomes_file_reads_as_the_pipeline_writes_it() {
    let text = r#"{"schema_version": 1, "pass_threshold": 1.0, "arms": {
      "baseline": {"stage": "baseline_eval", "cells": [
        {"suite": "tb2", "trial": 1, "stage": "baseline_eval", "jobs_dir": "/tmp/x/runs/r/jobs/baseline", "score": 0.0,
         "outcomes": {"a": {"reward": 0.0, "passed": false, "infra_error": false},
                      "b": {"reward": null, "passed": null, "infra_error": true}}}]},
      "final": null}}"#;
    let o: TaskOutcomes = serde_json::from_str(text).unwrap();
    let cell = &o.arms.baseline.as_ref().unwrap().cells[0];
    assert!(cell.outcomes.as_ref().unwrap().values().all(Outcome::consistent));
    assert!(o.arms.final_.is_none());
    assert!(!Outcome { reward: Some(1.0), passed: Some(false), infra_error: false }.consistent());
}
