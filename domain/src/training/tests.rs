use super::log::{metrics_line, python_dict, LogState};
use super::signal::{check, sentence, SignalCounts, SignalVerdict, TrainingFiles};
use super::*;

/// `train_task_stats.json` as the real `sampler.train_task_stats` wrote it for a set of records
/// (the closing note of issue 30 has the command), and the GRPO stage's other two records.
const STATS: &str = include_str!("../../../tests/fixtures/training/train_task_stats.json");
const SAMPLER: &str = include_str!("../../../tests/fixtures/training/train_sampler.json");
const DIAGNOSTICS: &str = include_str!("../../../tests/fixtures/training/training_diagnostics.json");

fn ids() -> Vec<String> {
    ["count-log-errors", "parse-invoices", "summarize-csv", "flaky-sandbox", "never-drawn"]
        .map(String::from)
        .to_vec()
}

fn files(stats: &str) -> TrainingFiles {
    TrainingFiles {
        task_stats: Some(stats.as_bytes().to_vec()),
        sampler: Some(SAMPLER.as_bytes().to_vec()),
        diagnostics: Some(DIAGNOSTICS.as_bytes().to_vec()),
    }
}

fn edited(f: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value = serde_json::from_str(STATS).unwrap();
    f(&mut v);
    v.to_string()
}

#[test]
fn trl_lines_are_read_as_transformers_prints_them() {
    // transformers 5.13's ProgressCallback: every float as f"{v:.4g}" in quotes, ints bare.
    let line = "{'loss': '0.01235', 'grad_norm': '0.5341', 'learning_rate': '1e-06', 'num_tokens': '1.235e+05', \
                'completions/mean_length': '187.2', 'rewards/verifier_reward/mean': '0.375', 'reward': '0.375', \
                'reward_std': '0.3535', 'frac_reward_zero_std': '0.5', 'entropy': '0.6123', 'kl': None, 'step_time': '12.35', 'epoch': '0.0125'}";
    let m = metrics_line(line).unwrap();
    assert_eq!((m.loss, m.grad_norm, m.learning_rate), (Some(0.01235), Some(0.5341), Some(1e-6)));
    assert_eq!((m.reward, m.reward_std, m.completions_mean_length), (Some(0.375), Some(0.3535), Some(187.2)));
    assert_eq!(m.frac_reward_zero_std, Some(0.5));
    let line = "{'loss': 0.0213, 'grad_norm': 0.42, 'learning_rate': 1e-06, 'num_tokens': 5120.0, \
                'completions/mean_length': 412.5, 'reward': 0.625, 'reward_std': 0.25, \
                'frac_reward_zero_std': 0.5, 'epoch': 0.33}";
    let m = metrics_line(line).unwrap();
    assert_eq!(m.loss, Some(0.0213));
    assert_eq!(m.learning_rate, Some(1e-6));
    assert_eq!(m.completions_mean_length, Some(412.5));
    assert_eq!(m.reward_std, Some(0.25));
    // After a progress bar's carriage return, with wrapped numbers, strings and a nan.
    let line = " 33%|███▎      | 1/3 [00:10<00:20]\r{'loss': np.float64(0.5), 'grad_norm': nan, 'name': 'a, b', 'reward': tensor(0.25, device='cuda:0'), 'epoch': 1}";
    let m = metrics_line(line).unwrap();
    assert_eq!((m.loss, m.grad_norm, m.reward), (Some(0.5), None, Some(0.25)));
    // The summary at the end is not a step; a line that is not a dict is nothing.
    assert!(metrics_line("{'train_runtime': '1235', 'train_samples_per_second': '0.648', 'train_loss': '0.004321', 'epoch': '1'}").is_none());
    assert_eq!(
        metrics_line("{'loss': 'nan', 'reward': '1'}").map(|m| (m.loss, m.reward)),
        Some((None, Some(1.0)))
    );
    assert!(metrics_line("[posttrainarena] grpo_gate_eval: bench eval run").is_none());
    assert!(python_dict("{'loss': 0.1, 'x': }").is_none());
    assert!(python_dict("{'loss': (0.1}").is_none());
    assert!(python_dict(&format!("{{'loss': {}}}", "1".repeat(20_000))).is_none());
}

#[test]
fn a_step_is_numbered_by_the_rollouts_before_it() {
    let mut state = LogState::default();
    let lines = [
        "{'loss': 0.9}",
        "[posttrainarena] grpo_rollout_000000_000000: bench eval run --include a",
        "[posttrainarena] grpo_rollout_000000_000001: bench eval run --include a",
        "{'loss': 0.5, 'reward': 0.25}",
        "[posttrainarena] grpo_rollout_000001_000000: bench eval run --include b",
        "{'loss': 0.4, 'reward': 0.5}",
    ];
    let points = state.lines(lines);
    // The line before any rollout cannot be numbered; TRL's log_history says step N + 1.
    assert_eq!(points.iter().map(|p| p.step).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(points[1].metrics.reward, Some(0.5));
    assert_eq!(state.rollout_step, Some(1));
    // A reader of the tail alone goes on from what it remembered.
    let mut later = LogState { rollout_step: Some(1) };
    assert_eq!(later.lines(["{'loss': 0.3}"])[0].step, 2);
}

#[test]
fn python_nan_is_read_as_null_outside_strings() {
    assert_eq!(
        python_json(r#"{"a": NaN, "b": "NaN \" Infinity", "c": -Infinity}"#),
        r#"{"a": null, "b": "NaN \" Infinity", "c": null}"#
    );
}

#[test]
fn the_real_samplers_record_gives_each_task_its_verdict() {
    let t = check(&ids(), &files(STATS)).unwrap();
    let verdicts: Vec<(&str, SignalVerdict)> =
        t.signal.tasks.iter().map(|t| (t.task.as_str(), t.verdict)).collect();
    assert_eq!(
        verdicts,
        [
            ("count-log-errors", SignalVerdict::Signal),
            ("parse-invoices", SignalVerdict::AlwaysSolved),
            ("summarize-csv", SignalVerdict::NeverSolved),
            ("flaky-sandbox", SignalVerdict::Masked),
            ("never-drawn", SignalVerdict::NeverSampled),
        ]
    );
    let first = &t.signal.tasks[0];
    assert_eq!((first.rollouts, first.scored_rollouts, first.masked_rollouts, first.passes), (8, 7, 1, 2));
    // The pipeline's own fields, under its names: which errors were the platform's.
    assert_eq!((first.infra_errors, first.trajectory_errors), (1, 0));
    assert!((first.reward_variance.unwrap() - 0.20408163265306126).abs() < 1e-12);
    let masked = &t.signal.tasks[3];
    assert_eq!(
        (masked.task.as_str(), masked.infra_errors, masked.reward_variance),
        ("flaky-sandbox", 4, None)
    );
    assert_eq!((first.groups, first.groups_with_variance, first.all_fail_groups), (2, 1, 1));
    assert_eq!(
        t.signal.summary,
        "1 of 5 tasks gave the model something to learn; 1 was always solved, 1 never, \
         1 had only masked rollouts, 1 was never sampled."
    );
    assert_eq!(t.signal.planned_steps, Some(3));
    // The curve is TRL's log_history: its steps, the NaN grad norm left out, the summary not a step.
    assert_eq!(t.curve.points.iter().map(|p| p.step).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(t.curve.points[1].metrics.grad_norm, None);
    assert_eq!(t.curve.points[0].metrics.reward, Some(0.625));
    assert_eq!(t.curve.planned_steps, Some(3));
}

#[test]
fn records_that_do_not_account_for_the_train_tasks_are_refused() {
    let missing = edited(|v| {
        v["tasks"].as_object_mut().unwrap().remove("never-drawn");
    });
    let e = check(&ids(), &files(&missing)).unwrap_err();
    assert!(e.contains("does not account for train task `never-drawn`"), "{e}");
    let unknown = edited(|v| v["tasks"]["held-out-task"] = v["tasks"]["never-drawn"].clone());
    let e = check(&ids(), &files(&unknown)).unwrap_err();
    assert!(e.contains("names `held-out-task`"), "{e}");
    let totals = edited(|v| v["totals"]["passes"] = 99.into());
    assert!(check(&ids(), &files(&totals)).unwrap_err().contains("totals"));
    let rows = edited(|v| v["tasks"]["parse-invoices"]["rollouts"] = 5.into());
    assert!(check(&ids(), &files(&rows)).unwrap_err().contains("do not add up"));
    let unsampled = edited(|v| v["unsampled_task_ids"] = serde_json::json!([]));
    assert!(check(&ids(), &files(&unsampled)).unwrap_err().contains("unsampled"));
    let mut none = files(STATS);
    none.diagnostics = None;
    assert!(check(&ids(), &none).unwrap_err().contains("training_diagnostics.json is missing"));
    let e = check(&ids(), &files("{\"schema_version\": 1")).unwrap_err();
    assert!(e.contains("not what the pipeline writes"), "{e}");
}

#[test]
fn the_sentence_counts_each_verdict() {
    let c = SignalCounts { tasks: 8, signal: 5, always_solved: 2, never_solved: 1, ..Default::default() };
    assert_eq!(
        sentence(&c),
        "5 of 8 tasks gave the model something to learn; 2 were always solved, 1 never."
    );
    let c = SignalCounts { tasks: 1, signal: 1, ..Default::default() };
    assert_eq!(sentence(&c), "1 of 1 task gave the model something to learn.");
    let c = SignalCounts { tasks: 3, never_solved: 3, ..Default::default() };
    assert_eq!(sentence(&c), "0 of 3 tasks gave the model something to learn; 3 were never solved.");
}

#[test]
fn metrics_refuse_what_is_not_a_measurement() {
    assert!(TrainMetrics { loss: Some(f64::INFINITY), ..Default::default() }.check().is_err());
    assert!(TrainMetrics { loss: Some(0.1), ..Default::default() }.check().is_ok());
    let curve = TrainingCurve { planned_steps: Some(10), points: vec![] };
    assert_eq!(curve.last_step(), 10);
}
