//! The pipeline's steps as it names them (reference §5): the `[posttrainarena] {name}: {command}`
//! line it prints before each subprocess, and the arena job script's own `[arena-job] {stage}: …`
//! lines around it. One mapping from a step to the guide's stage serves the job's log and the
//! relay (where the job script reports the same names).

use crate::runs::stage::Stage;

/// What a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind<'a> {
    /// A held-out or gate evaluation: one (suite, trial) cell of an arm. `suite` is `None` for the
    /// primary suite's first trial, whose step keeps the legacy bare name.
    Eval {
        arm: EvalArm,
        suite: Option<&'a str>,
        trial: u32,
    },
    /// One GRPO rollout attempt: `grpo_rollout_{global_step:06d}_{rollout_index:06d}`; TRL's
    /// global step counts from 0.
    Rollout {
        global_step: u64,
        index: u64,
    },
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalArm {
    Baseline,
    Gate,
    Sft,
    Final,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step<'a> {
    pub name: &'a str,
    pub stage: Stage,
    pub kind: StepKind<'a>,
}

/// `baseline_eval.tb2.t02` → (`tb2`, 2).
fn suite_trial(rest: &str) -> Option<(&str, u32)> {
    let (suite, trial) = rest.strip_prefix('.')?.rsplit_once(".t")?;
    let trial: u32 = trial.parse().ok().filter(|t| *t >= 1)?;
    (!suite.is_empty()).then_some((suite, trial))
}

fn eval<'a>(name: &'a str, prefix: &str, arm: EvalArm, stage: Stage) -> Option<Step<'a>> {
    let rest = name.strip_prefix(prefix)?;
    let (suite, trial) =
        if rest.is_empty() { (None, 1) } else { suite_trial(rest).map(|(s, t)| (Some(s), t))? };
    Some(Step { name, stage, kind: StepKind::Eval { arm, suite, trial } })
}

/// A step name's stage, and what it is; `None` for a name the pipeline does not print.
pub fn step(name: &str) -> Option<Step<'_>> {
    let other = |stage| Some(Step { name, stage, kind: StepKind::Other });
    if let Some(s) = eval(name, "baseline_eval", EvalArm::Baseline, Stage::Baseline) {
        return Some(s);
    }
    if let Some(s) = eval(name, "posttrain_eval", EvalArm::Final, Stage::Heldout) {
        return Some(s);
    }
    if let Some(s) = eval(name, "sft_eval", EvalArm::Sft, Stage::Training) {
        return Some(s);
    }
    if name == "grpo_gate_eval" {
        return Some(Step {
            name,
            stage: Stage::Gate,
            kind: StepKind::Eval { arm: EvalArm::Gate, suite: None, trial: 1 },
        });
    }
    if let Some(rest) = name.strip_prefix("grpo_rollout_") {
        let (step, index) = rest.split_once('_')?;
        let ok = |s: &str| s.len() >= 6 && s.bytes().all(|b| b.is_ascii_digit());
        if !(ok(step) && ok(index)) {
            return None;
        }
        return Some(Step {
            name,
            stage: Stage::Training,
            kind: StepKind::Rollout { global_step: step.parse().ok()?, index: index.parse().ok()? },
        });
    }
    if name == "snapshot_train_tasks"
        || name == "snapshot_eval_tasks"
        || (name.starts_with("snapshot_eval-") && name.ends_with("_tasks"))
    {
        return other(Stage::Snapshot);
    }
    if name.starts_with("collect_verified_teacher_rollouts")
        || name == "convert_verified_sft_data"
        || name == "validate_verified_sft_data"
    {
        return other(Stage::Training);
    }
    if name == "compare_eval_lift"
        || ["snapshot_benchmark_", "baseline_benchmark_", "final_benchmark_", "compare_benchmark_"]
            .iter()
            .any(|p| name.starts_with(p))
    {
        return other(Stage::Collect);
    }
    None
}

/// A log line's step: the pipeline's `[posttrainarena] {name}: …`, or the job script's
/// `[arena-job] {stage}: …` (its name is the stage itself).
pub fn parse_line(line: &str) -> Option<Step<'_>> {
    if let Some(rest) = line.split("[posttrainarena] ").nth(1) {
        let (name, _) = rest.split_once(": ")?;
        return step(name.trim());
    }
    let rest = line.split("[arena-job] ").nth(1)?;
    let (name, _) = rest.split_once(": ")?;
    let name = name.trim();
    let stage = Stage::parse(name)?;
    Some(Step { name, stage, kind: StepKind::Other })
}
