use super::*;
use crate::score::Cell;

fn run(env: &str, id: &str, accepted: bool, delta: f64, se: f64, order: i64) -> RankedRun {
    RankedRun {
        environment_id: env.into(),
        run_id: id.into(),
        accepted,
        delta_pp: delta,
        stderr_pp: se,
        order,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-4
}

/// Worked by hand: A one run (4.0 ± 2), B three runs (2, 4, 6; ± 1 each), C two accepted (5, 4;
/// ± 1.5) and one rejected, D one run (4.0 ± 3). Pooled v over B and C = (8 + 0.5) / (2 + 1).
#[test]
fn the_board_pools_run_to_run_variance_worked_by_hand() {
    let runs = [
        run("A", "a1", true, 4.0, 2.0, 1),
        run("B", "b1", true, 2.0, 1.0, 2),
        run("B", "b2", true, 4.0, 1.0, 3),
        run("B", "b3", true, 6.0, 1.0, 4),
        run("C", "c1", true, 5.0, 1.5, 5),
        run("C", "c2", true, 4.0, 1.5, 6),
        run("C", "c3", false, 20.0, 1.5, 7),
        run("D", "d1", true, 4.0, 3.0, 8),
    ];
    let (rows, sd) = rank(&runs);
    assert!(close(sd.unwrap(), (8.5f64 / 3.0).sqrt()));
    let by: BTreeMap<&str, &Row> = rows.iter().map(|r| (r.environment_id.as_str(), r)).collect();
    assert_eq!(rows[0].environment_id, "C");
    assert_eq!(rows.iter().map(|r| r.rank).collect::<Vec<_>>(), [1, 2, 2, 2], "A, B and D tie at 4.00");
    let v = 8.5 / 3.0;
    assert!(close(by["A"].stderr_pp, 2.0), "its own evaluation variance (4) is above v");
    assert!(close(by["B"].stderr_pp, (v / 3.0f64).sqrt()));
    assert!(close(by["C"].stderr_pp, (v / 2.0f64).sqrt()));
    assert!(close(by["D"].stderr_pp, 3.0));
    assert_eq!((by["C"].verified_runs, by["C"].rejected_runs), (2, 1));
    assert_eq!(by["C"].run_deltas_pp, [5.0, 4.0]);
    assert!(close(by["C"].delta_pp, 4.5), "the mean, not the best run (20 was rejected)");
    assert_eq!(by["B"].latest_run_id, "b3");
}

#[test]
fn before_any_repeat_a_single_run_keeps_its_own_error_and_rejected_only_collections_are_off_the_board() {
    let (rows, sd) = rank(&[run("A", "a1", true, 1.0, 2.5, 1), run("Z", "z1", false, 9.0, 1.0, 2)]);
    assert_eq!(sd, None);
    assert_eq!(rows.len(), 1);
    assert!(close(rows[0].stderr_pp, 2.5));
}

#[test]
fn intervals_that_overlap_the_leaders_are_tied_with_it() {
    assert!(tied_with_leader((3.0, 1.0), (5.0, 1.0)));
    assert!(!tied_with_leader((0.0, 0.5), (5.0, 0.5)));
}

fn outcomes(cells: Vec<Cell>) -> Outcomes {
    Outcomes {
        schema_version: 2,
        run_id: "r".into(),
        metric: "pass@1".into(),
        trials: 1,
        suites: vec![SuiteTasks { name: "s".into(), task_ids: vec!["t1".into(), "t2".into()] }],
        cells,
    }
}

fn cell(task: &str, arm: Arm, trial: u32, reward: Option<f64>) -> Cell {
    Cell {
        suite: "s".into(),
        task_id: task.into(),
        arm,
        trial,
        reward,
        scored: reward.is_some(),
        error_category: None,
    }
}

fn full() -> Vec<Cell> {
    let mut c = Vec::new();
    for t in ["t1", "t2"] {
        c.push(cell(t, Arm::Baseline, 0, Some(0.0)));
        c.push(cell(t, Arm::Final, 0, Some(1.0)));
    }
    c
}

#[test]
fn coverage_must_be_exact() {
    let want = Expected {
        suites: vec![SuiteTasks { name: "s".into(), task_ids: vec!["t1".into(), "t2".into()] }],
        trials: 1,
        arms: vec![Arm::Baseline, Arm::Final],
    };
    assert_eq!(check_coverage(&outcomes(full()), &want), Ok(()));
    let mut missing = full();
    missing.pop();
    assert!(
        matches!(check_coverage(&outcomes(missing), &want), Err(Evidence::Coverage(m)) if m.contains("t2 has no final cell"))
    );
    let mut extra = full();
    extra.push(cell("t9", Arm::Final, 0, Some(1.0)));
    assert!(
        matches!(check_coverage(&outcomes(extra), &want), Err(Evidence::Coverage(m)) if m.contains("t9 is not in s"))
    );
    let mut twice = full();
    twice.push(cell("t1", Arm::Final, 0, Some(1.0)));
    assert!(
        matches!(check_coverage(&outcomes(twice), &want), Err(Evidence::Coverage(m)) if m.contains("2 final cells"))
    );
    let mut infra = full();
    infra[0] = Cell {
        reward: None,
        scored: false,
        error_category: Some("sandbox_start_timeout".into()),
        ..infra[0].clone()
    };
    assert_eq!(
        check_coverage(&outcomes(infra), &want),
        Ok(()),
        "an infrastructure error still covers its cell"
    );
    let wrong_trials = Expected { trials: 3, ..want.clone() };
    assert!(
        matches!(check_coverage(&outcomes(full()), &wrong_trials), Err(Evidence::Coverage(m)) if m.contains("1 trials reported"))
    );
}

#[test]
fn a_baseline_measurement_covers_the_baseline_arm_alone_and_its_report_must_match() {
    let want = Expected {
        suites: vec![SuiteTasks { name: "s".into(), task_ids: vec!["t1".into(), "t2".into()] }],
        trials: 1,
        arms: vec![Arm::Baseline],
    };
    let base: Vec<Cell> = full().into_iter().filter(|c| c.arm == Arm::Baseline).collect();
    assert_eq!(check_coverage(&outcomes(base.clone()), &want), Ok(()));
    assert!(
        matches!(check_coverage(&outcomes(full()), &want), Err(Evidence::Coverage(m)) if m.contains("final arm")),
        "a trained arm has no place in a measurement of the base model"
    );
    let o = outcomes(base);
    let good = BaselineReport { schema_version: 1, metric: "pass@1".into(), reference: score::reference(&o) };
    assert_eq!(check_reference(&good, &o).map(|r| r.pass_rate), Ok(0.0));
    let mut bad = good.clone();
    bad.reference.per_trial[0] = 0.5;
    bad.reference.pass_rate = 0.5;
    assert!(
        matches!(check_reference(&bad, &o), Err(Evidence::Mismatch(m)) if m.starts_with("per_trial[0]")),
        "the first difference is named"
    );
}

#[test]
fn a_report_that_differs_names_its_first_difference() {
    let o = outcomes(full());
    let good = score::score(&o);
    assert_eq!(check_report(&good, &o).map(|s| s.pooled.delta), Ok(1.0));
    let mut bad = good.clone();
    bad.pooled.delta += 0.05;
    assert!(matches!(check_report(&bad, &o), Err(Evidence::Mismatch(m)) if m.starts_with("pooled.delta")));
    let mut suite = good.clone();
    suite.suites[0].final_.pass_rate = 0.5;
    assert!(
        matches!(check_report(&suite, &o), Err(Evidence::Mismatch(m)) if m.starts_with("suites[s].final.pass_rate"))
    );
    let m = measured(&good);
    assert_eq!((m.delta_pp, m.paired_tasks, m.trials), (100.0, 2, 1));
}

#[test]
fn a_review_note_says_what_was_checked() {
    assert!(Review { accepted: true, note: "too short".into() }.check().is_err());
    assert!(Review { accepted: false, note: "Cells cover all 87 tasks; report matches.".into() }
        .check()
        .is_ok());
}
