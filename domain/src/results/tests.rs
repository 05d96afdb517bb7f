use super::*;
use crate::score::{ArmCells, Arms, Cell, Outcome};

fn run(env: &str, id: &str, accepted: bool, delta: f64, se: f64, order: i64) -> RankedRun {
    RankedRun {
        environment_id: env.into(),
        run_id: id.into(),
        accepted,
        delta_pp: delta,
        stderr_pp: Some(se),
        order,
    }
}

fn close(a: impl Into<Option<f64>>, b: f64) -> bool {
    a.into().is_some_and(|a| (a - b).abs() < 1e-4)
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
    assert!(tied_with_leader((3.0, Some(1.0)), (5.0, Some(1.0))));
    assert!(!tied_with_leader((0.0, Some(0.5)), (5.0, Some(0.5))));
    assert!(!tied_with_leader((4.0, None), (5.0, None)), "no error, no width");
}

#[test]
fn a_run_without_a_standard_error_is_ranked_by_its_delta_and_adds_no_variance() {
    let none = RankedRun { stderr_pp: None, ..run("N", "n1", true, 7.0, 0.0, 1) };
    let (rows, _) = rank(&[none.clone(), run("A", "a1", true, 3.0, 2.0, 2)]);
    assert_eq!(rows[0].environment_id, "N");
    assert_eq!(rows[0].stderr_pp, None);
    let (rows, _) = rank(&[none, RankedRun { order: 3, ..run("N", "n2", true, 5.0, 1.0, 3) }]);
    assert!(
        close(rows[0].stderr_pp, (2.0f64 / 2.0).sqrt()),
        "the pooled run-to-run variance (2) over its two runs"
    );
}

const RUN: &str = "run-1";

fn expected(arms: Vec<Arm>) -> Expected {
    Expected {
        run_id: RUN.into(),
        suites: vec![ExpectedSuite {
            name: "s".into(),
            dataset: Dataset {
                repo_id: "o/s".into(),
                revision: "c".into(),
                task_list: "task-lists/eval_suite-s.txt".into(),
                path: "tasks".into(),
            },
            task_ids: vec!["t1".into(), "t2".into()],
        }],
        trials: 1,
        arms,
    }
}

fn cell(stage: &str, rewards: &[(&str, Option<f64>)]) -> Cell {
    Cell {
        suite: "s".into(),
        trial: 1,
        stage: stage.into(),
        jobs_dir: format!("/tmp/posttrainarena-job-x/job-inputs/{RUN}/runs/{RUN}/jobs/{stage}"),
        score: Some(0.0),
        outcomes: Some(
            rewards.iter().map(|(t, r)| (t.to_string(), r.map_or(Outcome::INFRA, Outcome::scored))).collect(),
        ),
    }
}

fn outcomes(baseline: Vec<Cell>, final_: Option<Vec<Cell>>) -> TaskOutcomes {
    TaskOutcomes {
        schema_version: 1,
        pass_threshold: 1.0,
        arms: Arms {
            baseline: Some(ArmCells { stage: "baseline_eval".into(), cells: baseline }),
            final_: final_.map(|cells| ArmCells { stage: "posttrain_eval".into(), cells }),
        },
    }
}

fn full() -> TaskOutcomes {
    outcomes(
        vec![cell("baseline", &[("t1", Some(0.0)), ("t2", Some(0.0))])],
        Some(vec![cell("posttrain", &[("t1", Some(1.0)), ("t2", Some(1.0))])]),
    )
}

fn coverage_error(o: &TaskOutcomes, want: &Expected) -> String {
    match check_coverage(o, want) {
        Err(Evidence::Coverage(m)) => m,
        other => panic!("expected a coverage error, got {other:?}"),
    }
}

#[test]
fn coverage_must_be_exact() {
    let want = expected(vec![Arm::Baseline, Arm::Final]);
    let cells = check_coverage(&full(), &want).unwrap();
    assert_eq!(cells[0].baseline.as_ref().unwrap().len(), 1);
    let mut missing = full();
    missing.arms.final_.as_mut().unwrap().cells[0].outcomes.as_mut().unwrap().remove("t2");
    assert!(coverage_error(&missing, &want).contains("task t2 of s has no final outcome"));
    let mut extra = full();
    extra.arms.final_.as_mut().unwrap().cells[0]
        .outcomes
        .as_mut()
        .unwrap()
        .insert("t9".into(), Outcome::scored(1.0));
    assert!(coverage_error(&extra, &want).contains("task t9 is not in s"));
    let mut twice = full();
    let again = twice.arms.final_.as_ref().unwrap().cells[0].clone();
    twice.arms.final_.as_mut().unwrap().cells.push(again);
    assert!(coverage_error(&twice, &want).contains("reported twice"));
    let mut no_final = full();
    no_final.arms.final_ = None;
    assert!(coverage_error(&no_final, &want).contains("the final arm is missing"));
    let mut infra = full();
    infra.arms.baseline.as_mut().unwrap().cells[0]
        .outcomes
        .as_mut()
        .unwrap()
        .insert("t1".into(), Outcome::INFRA);
    assert!(check_coverage(&infra, &want).is_ok(), "an infrastructure error still covers its cell");
    let mut bad = full();
    bad.arms.baseline.as_mut().unwrap().cells[0]
        .outcomes
        .as_mut()
        .unwrap()
        .insert("t1".into(), Outcome { reward: Some(0.0), passed: Some(true), infra_error: false });
    assert!(coverage_error(&bad, &want).contains("neither a scored reward"));
    let three = Expected { trials: 3, ..want.clone() };
    assert!(coverage_error(&full(), &three).contains("s has no baseline cell for trial 2"));
    let mut outside = full();
    outside.arms.baseline.as_mut().unwrap().cells[0].jobs_dir = "/etc/jobs".into();
    assert!(coverage_error(&outside, &want).contains("not inside the run"));
    let mut dry = full();
    dry.arms.baseline.as_mut().unwrap().cells[0].outcomes = None;
    assert!(coverage_error(&dry, &want).contains("a dry run"));
}

#[test]
fn container_paths_map_into_the_runs_dataset() {
    let p = "/tmp/posttrainarena-job-ab/job-inputs/run-1/runs/run-1/jobs/baseline-suites/tb2/trial-02";
    assert_eq!(dataset_path(p, "run-1").as_deref(), Some("runs/run-1/jobs/baseline-suites/tb2/trial-02"));
    assert_eq!(dataset_path("/tmp/x/runs/run-2/jobs/a", "run-1"), None);
    assert_eq!(dataset_path("/tmp/x/runs/run-1/../../etc", "run-1"), None);
}

#[test]
fn a_baseline_measurement_covers_the_baseline_arm_alone_and_its_report_must_match() {
    let want = expected(vec![Arm::Baseline]);
    let base = outcomes(vec![cell("baseline", &[("t1", Some(0.0)), ("t2", Some(1.0))])], None);
    assert!(check_coverage(&base, &want).is_ok());
    assert!(
        coverage_error(&full(), &want).contains("the final arm is there"),
        "no trained arm in a measurement of the base model"
    );
    let good =
        BaselineReport { schema_version: 1, metric: "pass@1".into(), reference: score::reference(&base) };
    assert_eq!(check_reference(&good, &base).map(|r| r.pass_rate), Ok(0.5));
    let mut bad = good.clone();
    bad.reference.per_trial[0] = 0.25;
    bad.reference.pass_rate = 0.25;
    assert!(
        matches!(check_reference(&bad, &base), Err(Evidence::Mismatch(m)) if m.starts_with("baseline.pass_rate")),
        "the first difference is named"
    );
}

#[test]
fn a_report_that_differs_names_its_first_difference() {
    let want = expected(vec![Arm::Baseline, Arm::Final]);
    let cells = check_coverage(&full(), &want).unwrap();
    let stages = ("baseline_eval", Some("posttrain_eval"));
    let good = score::score_v2(&cells, 1, stages.0, stages.1);
    assert_eq!(check_report(&good, &cells, 1, stages).map(|s| s.pooled.delta.unwrap().delta), Ok(Some(1.0)));
    let mut bad = good.clone();
    bad.pooled.delta.as_mut().unwrap().delta = Some(1.05);
    assert!(
        matches!(check_report(&bad, &cells, 1, stages), Err(Evidence::Mismatch(m)) if m.starts_with("score_v2.pooled.delta.delta"))
    );
    let mut suite = good.clone();
    suite.suites[0].final_.as_mut().unwrap().pass_rate = Some(0.5);
    assert!(
        matches!(check_report(&suite, &cells, 1, stages), Err(Evidence::Mismatch(m)) if m.starts_with("score_v2.suites[0].final.pass_rate"))
    );
    let mut nulled = good.clone();
    nulled.suites[0].delta.as_mut().unwrap().stderr = None;
    assert!(
        matches!(check_report(&nulled, &cells, 1, stages), Err(Evidence::Mismatch(m)) if m.contains("delta.stderr: the report says null")),
        "null where the cells give a number differs"
    );
    let mut absolute = good.clone();
    absolute.suites[0].dataset.task_list =
        "/tmp/posttrainarena-job-x/job-inputs/run-1/task-lists/eval_suite-s.txt".into();
    assert!(
        check_report(&absolute, &cells, 1, stages).is_ok(),
        "the container's absolute task list path is the bundle's"
    );
    let m = measured(&good).unwrap();
    assert_eq!((m.delta_pp, m.paired_tasks, m.trials, m.stderr_pp), (100.0, 2, 1, Some(0.0)));
}

#[test]
fn a_review_note_says_what_was_checked() {
    assert!(Review { accepted: true, note: "too short".into() }.check().is_err());
    assert!(Review { accepted: false, note: "Cells cover all 87 tasks; report matches.".into() }
        .check()
        .is_ok());
}
