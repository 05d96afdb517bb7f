//! Serving layouts: which hardware flavor a job asks for, how its GPUs split between vLLM and the
//! trainer, and whether that split can work for the model and the recipe's context caps.

use serde::{Deserialize, Serialize};

/// Hardware flavors the launcher knows, with their GPU counts (HF Jobs names; Nebius nodes use the
/// same names for the same shapes).
pub const FLAVORS: &[(&str, u32)] = &[
    ("cpu-basic", 0),
    ("cpu-upgrade", 0),
    ("t4-small", 1),
    ("l4x1", 1),
    ("a10g-small", 1),
    ("a100-large", 1),
    ("h200", 1),
    ("h200x2", 2),
    ("h200x4", 4),
    ("h200x8", 8),
];

pub fn flavor_gpus(flavor: &str) -> Option<u32> {
    FLAVORS.iter().find(|(name, _)| *name == flavor).map(|(_, gpus)| *gpus)
}

/// `[meta.serving]` of a model fragment: what the model itself allows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelServing {
    /// The longest context the model serves, in tokens.
    pub max_model_len: u32,
    /// Tensor parallelism must divide the model's attention heads.
    pub attention_heads: u32,
}

/// `[meta.serving]` of a method fragment: the job's hardware and its GPU split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MethodServing {
    pub flavor: String,
    pub vllm_gpus: u32,
    pub trainer_gpus: u32,
    pub tensor_parallel: u32,
    /// Context cap the recipe serves the model with, in tokens.
    pub max_context_tokens: u32,
}

/// The composed serving layout of one challenge's job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServingLayout {
    pub flavor: String,
    pub gpus: u32,
    pub vllm_gpus: u32,
    pub trainer_gpus: u32,
    pub tensor_parallel: u32,
    pub max_context_tokens: u32,
}

/// Why a layout cannot work, as (field of the method's `[meta.serving]`, reason).
pub fn check_layout(
    model: &ModelServing,
    serving: &MethodServing,
    rollout_context_tokens: u32,
    rollout_completion_tokens: u32,
) -> Vec<(&'static str, String)> {
    let mut problems = Vec::new();
    let Some(gpus) = flavor_gpus(&serving.flavor) else {
        let known: Vec<&str> = FLAVORS.iter().map(|(n, _)| *n).collect();
        problems.push((
            "meta.serving.flavor",
            format!("unknown flavor `{}`; known: {}", serving.flavor, known.join(", ")),
        ));
        return problems;
    };
    if serving.vllm_gpus == 0 {
        problems.push(("meta.serving.vllm_gpus", "vLLM needs at least one GPU".to_string()));
    }
    if serving.trainer_gpus == 0 {
        problems.push(("meta.serving.trainer_gpus", "the trainer needs at least one GPU".to_string()));
    }
    if serving.vllm_gpus + serving.trainer_gpus != gpus {
        problems.push((
            "meta.serving.vllm_gpus",
            format!(
                "vllm_gpus ({}) + trainer_gpus ({}) = {} but flavor `{}` has {} GPUs",
                serving.vllm_gpus,
                serving.trainer_gpus,
                serving.vllm_gpus + serving.trainer_gpus,
                serving.flavor,
                gpus
            ),
        ));
    }
    let tp = serving.tensor_parallel;
    if tp == 0 || !tp.is_power_of_two() {
        problems.push(("meta.serving.tensor_parallel", format!("{tp} is not a power of two")));
    } else {
        if !serving.vllm_gpus.is_multiple_of(tp) {
            problems.push((
                "meta.serving.tensor_parallel",
                format!("{tp} does not divide vllm_gpus ({})", serving.vllm_gpus),
            ));
        }
        if !model.attention_heads.is_multiple_of(tp) {
            problems.push((
                "meta.serving.tensor_parallel",
                format!("{tp} does not divide the model's {} attention heads", model.attention_heads),
            ));
        }
    }
    if serving.max_context_tokens > model.max_model_len {
        problems.push((
            "meta.serving.max_context_tokens",
            format!(
                "{} exceeds the model's max_model_len ({})",
                serving.max_context_tokens, model.max_model_len
            ),
        ));
    }
    if rollout_context_tokens > serving.max_context_tokens {
        problems.push((
            "rollout.context_tokens",
            format!(
                "{} exceeds the serving context cap max_context_tokens ({})",
                rollout_context_tokens, serving.max_context_tokens
            ),
        ));
    }
    if rollout_completion_tokens >= rollout_context_tokens {
        problems.push((
            "rollout.completion_tokens",
            format!(
                "{} leaves no room for the prompt within context_tokens ({})",
                rollout_completion_tokens, rollout_context_tokens
            ),
        ));
    }
    problems
}
