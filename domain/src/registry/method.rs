use serde::{Deserialize, Serialize};

use super::serving::MethodServing;

/// `configs/methods/*.toml`: a post-training recipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MethodFile {
    pub method: Method,
    pub training: Training,
    pub rollout: Rollout,
    pub eval: Eval,
    pub meta: MethodMeta,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Method {
    pub id: String,
    pub name: String,
    pub algorithm: String,
    pub adapter: String,
    pub trainer: String,
    pub rollout_harness: String,
    #[serde(default)]
    pub derived_from: Option<String>,
    /// True while the organizers have not set the recipe's numbers (`OWNER: set` in the file).
    #[serde(default)]
    pub placeholder: bool,
    /// What participants should know about the recipe; shown as `recipe.note`.
    pub note: String,
}

/// `[training]`: GRPO's numbers. Each lands in one key of the pipeline's config
/// (`domain::pipeline::config` says which); a number with no key there is refused by the loader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Training {
    /// `grpo.learning_rate`.
    pub learning_rate: f64,
    /// `grpo.lora_r`.
    pub lora_rank: u32,
    /// `grpo.lora_alpha`.
    pub lora_alpha: u32,
    /// `grpo.lora_dropout` (the pipeline's 0.05 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora_dropout: Option<f64>,
    /// `runtime.num_generations`: rollouts per task in a GRPO group.
    pub generations_per_task: u32,
    /// `grpo.max_steps`: optimizer steps.
    pub max_steps: u32,
    /// `grpo.gate_task_count`: training tasks the GRPO base-model gate evaluates before training.
    pub gate_task_count: u32,
    /// `grpo.run_policy`: `always` (the gate's score never stops training) or `on_reward`
    /// (training runs when the gate's score reaches `gate_threshold`).
    pub run_policy: String,
    /// `grpo.threshold` (the pipeline's 0.05 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_threshold: Option<f64>,
    /// `grpo.generation_batch_size`: a multiple of `generations_per_task`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_batch_size: Option<u32>,
    /// `grpo.gradient_accumulation_steps` (the pipeline's 8 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradient_accumulation_steps: Option<u32>,
    /// `grpo.task_sampler`: `trl` (the default) or `cover`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_sampler: Option<String>,
    /// `grpo.rollout_failure_policy`: `raise` (the default) or `mask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_failure_policy: Option<String>,
    /// `grpo.seed` (42 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u32>,
}

/// `[rollout]`: what one attempt at a task may take, in training and in evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rollout {
    /// `runtime.sandbox`: `daytona` or `docker`.
    pub sandbox: String,
    /// `runtime.sandbox_user`: the agent's user in the sandbox (`none` runs it as root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_user: Option<String>,
    /// `harness.agent_timeout_sec`: one attempt's wall time.
    pub per_attempt_timeout_s: u32,
    /// `harness.agent_idle_timeout_sec`: how long the agent may go without output.
    pub idle_timeout_s: u32,
    /// `harness.sandbox_setup_timeout_sec`: how long a sandbox may take to start.
    pub sandbox_setup_timeout_s: u32,
    /// `runtime.max_completion_length`, and the model bridge's `--max-tokens` (one reply).
    pub completion_tokens: u32,
    /// The model bridge's `--max-context-tokens` and `--max-logprob-context-tokens`.
    pub context_tokens: u32,
}

/// `[eval]`: the held-out evaluation before and after training.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Eval {
    /// `evaluation.trials`: attempts per held-out task before and after training.
    pub trials: u32,
    /// `harness.concurrency`: sandboxes the evaluation and rollouts use at once.
    pub sandbox_concurrency: u32,
    /// `harness.max_infra_error_fraction` (the pipeline's 0.1 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_infra_error_fraction: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MethodMeta {
    pub serving: MethodServing,
}
