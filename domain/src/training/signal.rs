//! What each train task gave GRPO, from the GRPO stage's own records (`runs/RUN/jobs/grpo-train/`:
//! `train_task_stats.json`, `train_sampler.json`, `training_diagnostics.json`), checked against
//! the run's train task list: every train task accounted for, none that is not one, and the
//! counts adding up as `sampler.train_task_stats` adds them.

use crate::invalid::Invalid;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{python_json, TrainMetrics, TrainPoint, TrainingCurve};

/// Where the GRPO stage writes its records, relative to the run's folder.
pub const JOBS_DIR: &str = "jobs/grpo-train";
pub const TASK_STATS: &str = "train_task_stats.json";
pub const SAMPLER: &str = "train_sampler.json";
pub const DIAGNOSTICS: &str = "training_diagnostics.json";

/// One task's row of `train_task_stats.json`.
#[derive(Debug, Clone, Deserialize)]
struct TaskRow {
    sampled_steps: Vec<u64>,
    groups: u64,
    rollouts: u64,
    scored_rollouts: u64,
    passes: u64,
    pass_rate: Option<f64>,
    reward_mean: Option<f64>,
    #[serde(default)]
    reward_variance: Option<f64>,
    infra_errors: u64,
    trajectory_errors: u64,
    truncated_rollouts: u64,
    failed_attempts: u64,
    groups_with_variance: u64,
    all_pass_groups: u64,
    all_fail_groups: u64,
    fully_masked_groups: u64,
}

#[derive(Debug, Clone, Deserialize)]
struct Totals {
    groups: u64,
    rollouts: u64,
    scored_rollouts: u64,
    passes: u64,
    infra_errors: u64,
    trajectory_errors: u64,
    groups_with_variance: u64,
    all_pass_groups: u64,
    all_fail_groups: u64,
    fully_masked_groups: u64,
}

#[derive(Debug, Clone, Deserialize)]
struct TaskStatsFile {
    schema_version: u32,
    num_generations: u64,
    task_count: u64,
    sampled_task_count: u64,
    unsampled_task_ids: Vec<String>,
    totals: Totals,
    tasks: BTreeMap<String, TaskRow>,
}

/// `train_sampler.json`: `sampler.sampler_plan` (with `planned_steps` the `cover` sampler's
/// schedule, one list of tasks per step, or `null` under TRL's own sampler) plus what was drawn.
#[derive(Debug, Clone, Deserialize)]
struct SamplerFile {
    task_ids: Vec<String>,
    #[serde(default)]
    planned_steps: Option<Vec<Vec<String>>>,
    #[serde(default)]
    max_steps: Option<u64>,
}

impl SamplerFile {
    /// The optimizer steps planned: the schedule's length, else `grpo.max_steps`.
    fn planned(&self) -> Option<u64> {
        self.planned_steps.as_ref().map(|s| s.len() as u64).or(self.max_steps)
    }
}

#[derive(Debug, Clone, Deserialize)]
struct DiagnosticsFile {
    #[serde(default)]
    training_log: Vec<serde_json::Map<String, serde_json::Value>>,
}

/// What a task's groups said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SignalVerdict {
    /// At least one group's rollouts differed in reward: GRPO learned from it.
    Signal,
    /// Every scored group passed: nothing to learn.
    AlwaysSolved,
    /// Every scored group failed: nothing to learn.
    NeverSolved,
    /// Groups agreed within themselves, some passing and some failing, or on a partial reward.
    NoSignal,
    /// Every rollout was masked (infrastructure or trajectory errors): no reward at all.
    Masked,
    /// The sampler never drew it.
    NeverSampled,
}

impl SignalVerdict {
    pub fn words(self) -> &'static str {
        match self {
            SignalVerdict::Signal => "gave signal",
            SignalVerdict::AlwaysSolved => "always solved",
            SignalVerdict::NeverSolved => "never solved",
            SignalVerdict::NoSignal => "no signal",
            SignalVerdict::Masked => "only masked rollouts",
            SignalVerdict::NeverSampled => "never sampled",
        }
    }
}

/// One train task during training.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskSignal {
    pub task: String,
    pub verdict: SignalVerdict,
    /// Optimizer steps (TRL's global steps) it was sampled in.
    pub sampled_steps: u64,
    pub rollouts: u64,
    /// Rollouts with a verifier reward (the rest were masked).
    pub scored_rollouts: u64,
    pub passes: u64,
    /// Passes over scored rollouts (reward ≥ 1.0), `null` with none scored.
    pub pass_rate: Option<f64>,
    pub reward_mean: Option<f64>,
    /// The population variance of the scored rewards (p(1-p) for pass/fail rewards), `null` with
    /// none scored.
    #[serde(default)]
    pub reward_variance: Option<f64>,
    pub groups: u64,
    pub groups_with_variance: u64,
    pub all_pass_groups: u64,
    pub all_fail_groups: u64,
    pub fully_masked_groups: u64,
    /// Rollouts the platform lost: the sandbox, the agent or the verifier failed. Masked (left out
    /// of the loss and of the group's baseline), never scored 0. Results collected before the
    /// arena kept the two kinds apart have 0 here and their count in `masked_rollouts`.
    #[serde(default)]
    pub infra_errors: u64,
    /// Rollouts that were scored but whose trajectory the pipeline could not turn into training
    /// tokens: masked too, the pipeline's side.
    #[serde(default)]
    pub trajectory_errors: u64,
    /// `infra_errors` + `trajectory_errors`: the rollouts left out of the loss.
    pub masked_rollouts: u64,
    pub truncated_rollouts: u64,
    pub failed_attempts: u64,
}

/// How many tasks got each verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SignalCounts {
    pub tasks: u64,
    pub signal: u64,
    pub always_solved: u64,
    pub never_solved: u64,
    pub no_signal: u64,
    pub masked: u64,
    pub never_sampled: u64,
}

/// What training learned from a collection's train tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TrainingSignal {
    /// Rollouts per group (`runtime.num_generations`).
    pub num_generations: u64,
    /// The optimizer steps GRPO planned (the `cover` schedule's length, else `max_steps`).
    pub planned_steps: Option<u64>,
    pub counts: SignalCounts,
    /// One sentence: "5 of 8 tasks gave the model something to learn; 2 were always solved, 1 never."
    pub summary: String,
    /// Every train task of the run, in the run's order.
    pub tasks: Vec<TaskSignal>,
}

/// The three records as read (`None`: the file is not there).
#[derive(Debug, Clone, Default)]
pub struct TrainingFiles {
    pub task_stats: Option<Vec<u8>>,
    pub sampler: Option<Vec<u8>>,
    pub diagnostics: Option<Vec<u8>>,
}

/// Checked records: the per-task signal and the curve TRL logged.
#[derive(Debug, Clone, PartialEq)]
pub struct Training {
    pub signal: TrainingSignal,
    pub curve: TrainingCurve,
}

fn parse<T: serde::de::DeserializeOwned>(file: &str, bytes: &[u8]) -> Result<T, Invalid> {
    let text = std::str::from_utf8(bytes).map_err(|_| format!("{file} is not UTF-8"))?;
    serde_json::from_str(&python_json(text))
        .map_err(|e| format!("{file} is not what the pipeline writes: {e}").into())
}

/// Reads and checks the GRPO stage's records against the run's train tasks (in the bundle's
/// order). `Err` names the first problem.
pub fn check(train_ids: &[String], files: &TrainingFiles) -> Result<Training, Invalid> {
    let need = |f: &Option<Vec<u8>>, name: &str| {
        f.clone().ok_or_else(|| format!("GRPO ran but {JOBS_DIR}/{name} is missing"))
    };
    let stats: TaskStatsFile = parse(TASK_STATS, &need(&files.task_stats, TASK_STATS)?)?;
    let sampler: SamplerFile = parse(SAMPLER, &need(&files.sampler, SAMPLER)?)?;
    let diagnostics: DiagnosticsFile = parse(DIAGNOSTICS, &need(&files.diagnostics, DIAGNOSTICS)?)?;
    let tasks = check_stats(train_ids, &stats)?;
    let wanted: BTreeSet<&str> = train_ids.iter().map(String::as_str).collect();
    let scheduled = sampler.planned_steps.iter().flatten().flatten();
    if let Some(t) = sampler.task_ids.iter().chain(scheduled).find(|t| !wanted.contains(t.as_str())) {
        return Err(format!("{SAMPLER} samples `{t}`, which is not a train task of the run").into());
    }
    let counts = count(&tasks);
    let signal = TrainingSignal {
        num_generations: stats.num_generations,
        planned_steps: sampler.planned(),
        summary: sentence(&counts),
        counts,
        tasks,
    };
    let curve = TrainingCurve { planned_steps: sampler.planned(), points: log_points(&diagnostics) };
    Ok(Training { signal, curve })
}

fn check_stats(train_ids: &[String], stats: &TaskStatsFile) -> Result<Vec<TaskSignal>, Invalid> {
    let bad = |what: String| Err(format!("{TASK_STATS} {what}").into());
    if stats.schema_version != 1 {
        return bad(format!("has schema_version {}; the arena reads 1", stats.schema_version));
    }
    if let Some(t) = stats.tasks.keys().find(|t| !train_ids.contains(t)) {
        return bad(format!("names `{t}`, which is not a train task of the run"));
    }
    if let Some(t) = train_ids.iter().find(|t| !stats.tasks.contains_key(*t)) {
        return bad(format!("does not account for train task `{t}`"));
    }
    if stats.task_count != train_ids.len() as u64 {
        return bad(format!("counts {} tasks; the run trains on {}", stats.task_count, train_ids.len()));
    }
    let mut out = Vec::with_capacity(train_ids.len());
    for id in train_ids {
        let r = &stats.tasks[id];
        let masked = r.infra_errors + r.trajectory_errors;
        let judged = r.groups_with_variance + r.all_pass_groups + r.all_fail_groups;
        if r.rollouts != r.scored_rollouts + masked
            || r.passes > r.scored_rollouts
            || judged > r.groups
            || r.fully_masked_groups > r.groups
            || (r.rollouts == 0 && !r.sampled_steps.is_empty())
        {
            return bad(format!("has counts for `{id}` that do not add up"));
        }
        out.push(TaskSignal {
            task: id.clone(),
            verdict: verdict(r),
            sampled_steps: r.sampled_steps.len() as u64,
            rollouts: r.rollouts,
            scored_rollouts: r.scored_rollouts,
            passes: r.passes,
            pass_rate: r.pass_rate.filter(|p| p.is_finite()),
            reward_mean: r.reward_mean.filter(|p| p.is_finite()),
            reward_variance: r.reward_variance.filter(|v| v.is_finite() && *v >= 0.0),
            groups: r.groups,
            groups_with_variance: r.groups_with_variance,
            all_pass_groups: r.all_pass_groups,
            all_fail_groups: r.all_fail_groups,
            fully_masked_groups: r.fully_masked_groups,
            infra_errors: r.infra_errors,
            trajectory_errors: r.trajectory_errors,
            masked_rollouts: masked,
            truncated_rollouts: r.truncated_rollouts,
            failed_attempts: r.failed_attempts,
        });
    }
    let unsampled: Vec<&str> = out.iter().filter(|t| t.rollouts == 0).map(|t| t.task.as_str()).collect();
    let listed: BTreeSet<&str> = stats.unsampled_task_ids.iter().map(String::as_str).collect();
    if listed != unsampled.iter().copied().collect() {
        return bad("lists unsampled tasks that are not the ones with no rollouts".into());
    }
    if stats.sampled_task_count != (out.len() - unsampled.len()) as u64 {
        return bad(format!(
            "says {} tasks were sampled; its rows say {}",
            stats.sampled_task_count,
            out.len() - unsampled.len()
        ));
    }
    let sum = |f: fn(&TaskRow) -> u64| stats.tasks.values().map(f).sum::<u64>();
    let t = &stats.totals;
    let totals_agree = t.groups == sum(|r| r.groups)
        && t.rollouts == sum(|r| r.rollouts)
        && t.scored_rollouts == sum(|r| r.scored_rollouts)
        && t.passes == sum(|r| r.passes)
        && t.infra_errors == sum(|r| r.infra_errors)
        && t.trajectory_errors == sum(|r| r.trajectory_errors)
        && t.groups_with_variance == sum(|r| r.groups_with_variance)
        && t.all_pass_groups == sum(|r| r.all_pass_groups)
        && t.all_fail_groups == sum(|r| r.all_fail_groups)
        && t.fully_masked_groups == sum(|r| r.fully_masked_groups);
    if !totals_agree {
        return bad("has totals that are not the sums of its tasks".into());
    }
    Ok(out)
}

fn verdict(r: &TaskRow) -> SignalVerdict {
    if r.rollouts == 0 {
        SignalVerdict::NeverSampled
    } else if r.groups_with_variance > 0 {
        SignalVerdict::Signal
    } else if r.scored_rollouts == 0 {
        SignalVerdict::Masked
    } else if r.all_pass_groups > 0 && r.all_fail_groups == 0 {
        SignalVerdict::AlwaysSolved
    } else if r.all_fail_groups > 0 && r.all_pass_groups == 0 {
        SignalVerdict::NeverSolved
    } else {
        SignalVerdict::NoSignal
    }
}

pub fn count(tasks: &[TaskSignal]) -> SignalCounts {
    let n = |v: SignalVerdict| tasks.iter().filter(|t| t.verdict == v).count() as u64;
    SignalCounts {
        tasks: tasks.len() as u64,
        signal: n(SignalVerdict::Signal),
        always_solved: n(SignalVerdict::AlwaysSolved),
        never_solved: n(SignalVerdict::NeverSolved),
        no_signal: n(SignalVerdict::NoSignal),
        masked: n(SignalVerdict::Masked),
        never_sampled: n(SignalVerdict::NeverSampled),
    }
}

/// "5 of 8 tasks gave the model something to learn; 2 were always solved, 1 never."
pub fn sentence(c: &SignalCounts) -> String {
    let were = |n: u64| if n == 1 { "was" } else { "were" };
    let mut rest = Vec::new();
    if c.always_solved > 0 {
        rest.push(format!("{} {} always solved", c.always_solved, were(c.always_solved)));
    }
    if c.never_solved > 0 {
        rest.push(match c.always_solved {
            0 => format!("{} {} never solved", c.never_solved, were(c.never_solved)),
            _ => format!("{} never", c.never_solved),
        });
    }
    if c.no_signal > 0 {
        rest.push(format!("{} had equal rewards within every group", c.no_signal));
    }
    if c.masked > 0 {
        rest.push(format!("{} had only masked rollouts", c.masked));
    }
    if c.never_sampled > 0 {
        rest.push(format!("{} {} never sampled", c.never_sampled, were(c.never_sampled)));
    }
    let noun = if c.tasks == 1 { "task" } else { "tasks" };
    let head = format!("{} of {} {noun} gave the model something to learn", c.signal, c.tasks);
    match rest.is_empty() {
        true => format!("{head}."),
        false => format!("{head}; {}.", rest.join(", ")),
    }
}

/// TRL's `log_history` entries for optimizer steps: those with `step` and `loss`.
fn log_points(d: &DiagnosticsFile) -> Vec<TrainPoint> {
    let mut by_step = BTreeMap::new();
    for entry in &d.training_log {
        let (Some(step), true) = (entry.get("step").and_then(|s| s.as_u64()), entry.contains_key("loss"))
        else {
            continue;
        };
        let pairs = entry.iter().filter_map(|(k, v)| Some((k.as_str(), v.as_f64()?)));
        by_step.insert(step, TrainMetrics::from_pairs(pairs));
    }
    by_step.into_iter().map(|(step, metrics)| TrainPoint { step, metrics }).collect()
}
