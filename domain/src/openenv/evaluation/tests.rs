use super::*;

fn plan() -> Plan {
    let t = |id: &str, d: &str| PlannedTask { task_id: id.into(), domain: d.into() };
    Plan {
        benchmark: "b".into(),
        trials: 2,
        phase_allowance_s: 600,
        tasks: vec![t("w1", "words"), t("w2", "words"), t("c1", "count")],
    }
}

fn rec(task: &str, trial: u32, reward: Option<f64>) -> EpisodeRecord {
    EpisodeRecord { task_id: task.into(), trial, reward, replays: 0 }
}

/// Every cell of the plan, rewards from `f(task, trial)`.
fn records(f: impl Fn(&str, u32) -> Option<f64>) -> Vec<EpisodeRecord> {
    plan()
        .tasks
        .iter()
        .flat_map(|t| (0..2).map(|k| rec(&t.task_id, k, f(&t.task_id, k))).collect::<Vec<_>>())
        .collect()
}

fn ended() -> Progress {
    Progress { ended: true, trained: true, ..Default::default() }
}

#[test]
fn records_must_account_for_every_planned_episode_once() {
    let all = records(|_, _| Some(0.5));
    assert!(check_coverage(&plan(), &all).is_ok());
    assert!(check_coverage(&plan(), &all[1..]).unwrap_err().contains("5 of 6"));
    let mut twice = all.clone();
    twice[1] = twice[0].clone();
    assert!(check_coverage(&plan(), &twice).unwrap_err().contains("twice"));
    let mut extra = all.clone();
    extra.push(rec("w1", 2, Some(1.0)));
    assert!(check_coverage(&plan(), &extra).unwrap_err().contains("does not plan"));
    let mut stranger = all;
    stranger[0].task_id = "elsewhere".into();
    assert!(check_coverage(&plan(), &stranger).is_err());
}

#[test]
fn delta_is_paired_by_task_and_each_task_weighs_the_same() {
    // Before: w1 0, w2 0.5, c1 1 → after: w1 1, w2 0.5, c1 1: Δ per task 100, 0, 0.
    let before = records(|t, _| {
        Some(match t {
            "w1" => 0.0,
            "w2" => 0.5,
            _ => 1.0,
        })
    });
    let after = records(|t, _| Some(if t == "w2" { 0.5 } else { 1.0 }));
    let v = view(&plan(), &before, &after, &ended(), false);
    assert_eq!(v.state, EvaluationState::Complete);
    let f = &v.figures;
    assert_eq!(f.paired_tasks, 3);
    assert!((f.delta_pp.unwrap() - 100.0 / 3.0).abs() < 1e-9);
    // sd of (100, 0, 0) = 57.735; / √3 = 33.333.
    assert!((f.stderr_pp.unwrap() - 33.333_333).abs() < 1e-3, "{f:?}");
    assert!((f.before.as_ref().unwrap().mean_reward - 0.5).abs() < 1e-12);
    assert_eq!(f.before.as_ref().unwrap().solved_rate, 1.0 / 3.0);
    assert!((f.solved_delta_pp.unwrap() - 100.0 / 3.0).abs() < 1e-9);
    assert_eq!(f.before.as_ref().unwrap().episodes, 6);
    // Per domain: words Δ 50 (two tasks), count Δ 0 (one task: no error).
    assert_eq!(v.domains.len(), 2);
    assert_eq!(v.domains[0].domain, "words");
    assert_eq!(v.domains[0].figures.delta_pp, Some(50.0));
    assert_eq!(v.domains[1].figures.delta_pp, Some(0.0));
    assert_eq!(v.domains[1].figures.stderr_pp, None);
    assert!(v.tasks.is_none(), "participants never see held-out tasks");
    let editor = view(&plan(), &before, &after, &ended(), true);
    assert_eq!(editor.tasks.unwrap()[0].task_id, "w1");
}

#[test]
fn an_episode_lost_to_the_platform_is_left_out_not_scored_zero() {
    let before = records(|_, _| Some(0.5));
    // w1's trial 0 lost after its replay: its mean is trial 1's alone.
    let mut after = records(|_, _| Some(1.0));
    after[0].reward = None;
    after[0].replays = 1;
    let v = view(&plan(), &before, &after, &ended(), false);
    assert_eq!(v.figures.delta_pp, Some(50.0));
    assert_eq!(v.figures.after.as_ref().unwrap().lost, 1);
    assert_eq!(v.figures.after.as_ref().unwrap().episodes, 5);
    assert_eq!(v.replays, 1);
    // A task lost in a whole phase is not paired.
    let none = records(|t, _| if t == "c1" { None } else { Some(1.0) });
    let v = view(&plan(), &before, &none, &ended(), false);
    assert_eq!(v.figures.paired_tasks, 2);
}

#[test]
fn a_run_that_ended_without_both_phases_is_incomplete_with_its_reason() {
    let before = records(|_, _| Some(0.5));
    let v = view(&plan(), &before, &[], &ended(), false);
    assert_eq!(v.state, EvaluationState::Incomplete);
    assert!(v.reason.unwrap().contains("both evaluation phases"));
    let said = Progress { incomplete: Some("the after phase ran out of its 600 s".into()), ..ended() };
    assert_eq!(
        view(&plan(), &before, &[], &said, false).reason.unwrap(),
        "the after phase ran out of its 600 s"
    );
    let running =
        Progress { phase: Some(Phase::Before), running: true, done: 2, planned: 6, ..Default::default() };
    let v = view(&plan(), &[], &[], &running, false);
    assert_eq!((v.state, v.done, v.planned), (EvaluationState::Running, 2, 6));
    assert_eq!(view(&plan(), &[], &[], &Progress::default(), false).state, EvaluationState::Pending);
}

#[test]
fn a_run_that_took_no_optimizer_step_is_never_ranked_whatever_it_scored() {
    let before = records(|_, _| Some(0.2));
    let after = records(|_, _| Some(0.9));
    assert_eq!(view(&plan(), &before, &after, &ended(), false).state, EvaluationState::Complete);
    let untrained = Progress { trained: false, ..ended() };
    let v = view(&plan(), &before, &after, &untrained, false);
    assert_eq!((v.state, v.reason.as_deref()), (EvaluationState::Incomplete, Some(UNTRAINED)));
}

#[test]
fn a_run_without_a_complete_evaluation_is_listed_apart_with_its_reason() {
    let before = records(|_, _| Some(0.2));
    let after = records(|_, _| Some(0.9));
    let untrained = Progress { trained: false, ..ended() };
    let run = |id: &str, order: i64, progress: &Progress| EvaluatedRun {
        account: "alice".into(),
        submission_id: id.into(),
        name: id.into(),
        run_id: format!("run-{id}"),
        order,
        evaluation: view(&plan(), &before, &after, progress, false),
    };
    let runs = [run("good", 1, &ended()), run("flat", 2, &untrained), run("flat-2", 3, &untrained)];
    let (rows, _) = leaderboard(&runs, &[]);
    assert_eq!(rows.iter().map(|r| r.submission_id.as_str()).collect::<Vec<_>>(), ["good"]);
    let apart = unranked(&runs);
    assert_eq!(apart.iter().map(|u| u.submission_id.as_str()).collect::<Vec<_>>(), ["flat-2", "flat"]);
    assert!(apart.iter().all(|u| u.reason == UNTRAINED));
}

fn evaluated(sub: &str, order: i64, d: &[f64]) -> EvaluatedRun {
    // Tasks w1, w2, c1 with these Δs (reward fractions) over a before of 0.
    let before = records(|_, _| Some(0.0));
    let after = records(|t, _| {
        Some(match t {
            "w1" => d[0],
            "w2" => d[1],
            _ => d[2],
        })
    });
    EvaluatedRun {
        account: "alice".into(),
        submission_id: sub.into(),
        name: sub.into(),
        run_id: format!("oe-{sub}"),
        order,
        evaluation: view(&plan(), &before, &after, &ended(), false),
    }
}

#[test]
fn the_leaderboard_ranks_by_delta_with_intervals_tie_groups_and_a_reference() {
    let runs = [
        evaluated("a", 1, &[0.2, 0.3, 0.1]),
        evaluated("b", 2, &[0.9, 0.8, 1.0]),
        evaluated("c", 3, &[0.25, 0.3, 0.1]),
    ];
    let domains = plan().domains();
    let (rows, reference) = leaderboard(&runs, &domains);
    assert_eq!(rows.iter().map(|r| r.submission_id.as_str()).collect::<Vec<_>>(), ["b", "c", "a"]);
    assert_eq!(rows[0].rank, 1);
    assert!((rows[0].delta_pp - 90.0).abs() < 1e-9);
    let ci = rows[0].ci95_pp.unwrap();
    assert!(ci[0] < 90.0 && ci[1] > 90.0);
    // b is clear of the rest; a and c overlap each other.
    assert_eq!(rows.iter().map(|r| r.tie_group).collect::<Vec<_>>(), [1, 2, 2]);
    assert_eq!(rows[0].domains[0].domain, "words");
    assert!((rows[0].domains[0].delta_pp.unwrap() - 85.0).abs() < 1e-9);
    let reference = reference.unwrap();
    assert_eq!((reference.mean_reward_pct, reference.runs), (0.0, 3));
    // A run whose evaluation is not complete is not ranked.
    let mut open = evaluated("d", 4, &[1.0, 1.0, 1.0]);
    open.evaluation.state = EvaluationState::Incomplete;
    assert_eq!(leaderboard(&[open], &domains).0.len(), 0);
}
