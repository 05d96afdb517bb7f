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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Training {
    pub learning_rate: f64,
    pub lora_rank: u32,
    pub lora_alpha: u32,
    pub generations_per_task: u32,
    pub max_steps: u32,
    /// Training tasks the GRPO base-model gate evaluates before training.
    pub gate_task_count: u32,
    /// `always`: the gate's score never stops training.
    pub run_policy: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rollout {
    pub per_attempt_timeout_s: u32,
    pub max_turns: u32,
    pub completion_tokens: u32,
    pub context_tokens: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Eval {
    /// Attempts per held-out task before and after training.
    pub trials: u32,
    /// Sandboxes the evaluation and rollouts use at once.
    pub sandbox_concurrency: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MethodMeta {
    pub serving: MethodServing,
}
