//! What training learned: the trainer's per-step metrics (the curves) and, after a run, what
//! each train task gave the model (the per-task signal), both from the pipeline's own records.
//!
//! - While it trains, TRL logs every optimizer step (`logging_steps = 1`) as a Python dict on
//!   the job's output (`{'loss': 0.01, 'grad_norm': 0.4, …}`); `log` reads those lines, and
//!   numbers each by the rollout lines before it (`grpo_rollout_{global_step}_…`: the step that
//!   follows collection at `global_step` N is optimizer step N + 1, as TRL's `log_history` says).
//! - After it, the GRPO stage's jobs folder holds `train_task_stats.json` (`sampler.train_task_stats`),
//!   `train_sampler.json` and `training_diagnostics.json` (`training_log` = TRL's `log_history`);
//!   `signal` checks them against the run's own train task list and says, per task, whether its
//!   groups differed (what GRPO learns from), were always or never solved, or were never sampled.

pub mod log;
pub mod signal;

use serde::{Deserialize, Serialize};

crate::metric_table::metric_table! {
    /// TRL's numbers for one optimizer step, under the names `grpo_trainer.py` logs them. Every
    /// one is optional: an older TRL leaves some out, and OpenEnv's trainer logs a subset.
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    #[serde(deny_unknown_fields)]
    pub struct TrainMetrics {
        /// GRPO's loss.
        loss: "loss",
        /// The mean reward of the step's rollouts.
        reward: "reward",
        /// Their spread: zero means every group agreed and nothing was learned.
        reward_std: "reward_std",
        /// The gradient's norm before clipping.
        grad_norm: "grad_norm",
        learning_rate: "learning_rate",
        /// The mean completion length in tokens.
        completions_mean_length: "completions/mean_length" or "completion_length",
        /// The share of groups whose rewards were all equal.
        frac_reward_zero_std: "frac_reward_zero_std",
    }
}

/// One optimizer step's metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TrainPoint {
    /// The optimizer step (1 for the first), as TRL's `log_history` numbers it.
    pub step: u64,
    pub metrics: TrainMetrics,
}

/// A run's curves: every step logged so far, and the steps planned (the axis's end).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TrainingCurve {
    /// The optimizer steps the trainer plans (GRPO's `train_sampler.json`, or the OpenEnv
    /// trainer's cap), when known.
    pub planned_steps: Option<u64>,
    /// Ordered by step, one per step.
    pub points: Vec<TrainPoint>,
}

impl TrainingCurve {
    /// The axis's end: the planned steps, or the last step when more were taken or none planned.
    pub fn last_step(&self) -> u64 {
        let seen = self.points.iter().map(|p| p.step).max().unwrap_or(0);
        self.planned_steps.unwrap_or(0).max(seen).max(1)
    }
}

/// Python's `json.dumps` writes `NaN` and `Infinity` (its default `allow_nan=True`), which are
/// not JSON: outside strings they are read as `null`, so a diverged loss does not make a whole
/// report unreadable.
pub fn python_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut in_string = false;
    while let Some(c) = rest.chars().next() {
        if in_string {
            if c == '\\' {
                let escaped: String = rest.chars().take(2).collect();
                out.push_str(&escaped);
                rest = &rest[escaped.len()..];
                continue;
            }
            in_string = c != '"';
        } else if c == '"' {
            in_string = true;
        } else {
            let token = ["-Infinity", "Infinity", "NaN"].into_iter().find(|t| rest.starts_with(t));
            if let Some(t) = token {
                out.push_str("null");
                rest = &rest[t.len()..];
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests;
