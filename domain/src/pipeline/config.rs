//! The pipeline config a run's bundle carries (`config.toml`), composed from the challenge's
//! fragments in the loader's own schema (`keys`): `[model]`, `[train_dataset]` (the collection as
//! mirrored into the runs dataset), `[[eval_suites]]`, `[runtime]`, `[harness]`, `[evaluation]`,
//! `[teacher]`, `[sft]`, `[grpo]`, `[tracking]` and `[output]`.
//!
//! Where each fragment number lands:
//!
//! | fragment | pipeline |
//! |---|---|
//! | `training.learning_rate`, `lora_rank`, `lora_alpha`, `lora_dropout` | `grpo.learning_rate`, `lora_r`, `lora_alpha`, `lora_dropout` |
//! | `training.generations_per_task` | `runtime.num_generations` |
//! | `training.max_steps`, `gate_task_count`, `run_policy`, `gate_threshold` | `grpo.max_steps`, `gate_task_count`, `run_policy`, `threshold` |
//! | `training.generation_batch_size`, `gradient_accumulation_steps`, `task_sampler`, `rollout_failure_policy`, `seed` | the `grpo` keys of those names |
//! | `rollout.sandbox`, `sandbox_user` | `runtime.sandbox`, `sandbox_user` |
//! | `rollout.per_attempt_timeout_s`, `idle_timeout_s`, `sandbox_setup_timeout_s` | `harness.agent_timeout_sec`, `agent_idle_timeout_sec`, `sandbox_setup_timeout_sec` |
//! | `rollout.completion_tokens` | `runtime.max_completion_length` (and the bridge's `--max-tokens`, `setup`) |
//! | `rollout.context_tokens` | the bridge's `--max-context-tokens` and `--max-logprob-context-tokens` (`setup`) |
//! | `eval.trials`, `sandbox_concurrency`, `max_infra_error_fraction` | `evaluation.trials`, `harness.concurrency`, `harness.max_infra_error_fraction` |
//! | `[meta.serving]` flavor, GPUs, tensor parallelism, context cap | the job's flavor and the model server's flags (`setup`) |
//!
//! The recipe trains with GRPO alone: the teacher and SFT are off, tracking is `none`, the model
//! server is synchronised with the pinned base weights before the baseline.

use serde::{Deserialize, Serialize};

use crate::registry::{Challenge, Registry};

/// The served model aliases the job script gives the pipeline (`BENCHFLOW_BASE_MODEL`,
/// `BENCHFLOW_ADAPTER_MODEL`): the bridge serves whichever weights vLLM holds under any name, and
/// OpenCode wants `provider/model`.
pub const BASE_ALIAS: &str = "vllm/base";
pub const STUDENT_ALIAS: &str = "vllm/student";

/// The bundle's task lists, relative to `config.toml`.
pub const TRAIN_TASK_LIST: &str = "task-lists/train_dataset.txt";

pub fn suite_task_list(suite: &str) -> String {
    format!("task-lists/eval_suite-{suite}.txt")
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineConfig {
    pub model: ModelTable,
    /// Absent in a baseline measurement's bundle, which trains nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_dataset: Option<DatasetTable>,
    pub runtime: RuntimeTable,
    pub harness: HarnessTable,
    pub evaluation: EvaluationTable,
    pub teacher: Enabled,
    pub sft: Enabled,
    pub grpo: GrpoTable,
    pub tracking: TrackingTable,
    pub output: OutputTable,
    pub eval_suites: Vec<SuiteTable>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelTable {
    pub id: String,
    pub revision: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetTable {
    pub repo_id: String,
    pub revision: String,
    pub path: String,
    pub task_list: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteTable {
    pub name: String,
    pub repo_id: String,
    pub revision: String,
    pub path: String,
    pub task_list: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeTable {
    pub sandbox: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_user: Option<String>,
    pub max_completion_length: u32,
    pub num_generations: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HarnessTable {
    pub agent: String,
    pub skill_mode: String,
    pub usage_tracking: String,
    pub concurrency: u32,
    pub sandbox_setup_timeout_sec: u32,
    pub agent_idle_timeout_sec: u32,
    pub agent_timeout_sec: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_infra_error_fraction: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvaluationTable {
    pub sync_base_to_vllm: bool,
    pub trials: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Enabled {
    pub enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrpoTable {
    pub enabled: bool,
    pub run_policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    pub gate_task_count: u32,
    pub max_steps: u32,
    pub learning_rate: f64,
    pub lora_r: u32,
    pub lora_alpha: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora_dropout: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_batch_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradient_accumulation_steps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_sampler: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_failure_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrackingTable {
    pub report_to: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputTable {
    pub root: String,
}

/// The collection a run trains on, as the launch mirrored it into the runs dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrainDataset {
    pub repo_id: String,
    /// The commit of the mirror.
    pub revision: String,
    /// The folder of the task packages in the runs dataset.
    pub path: String,
}

/// Why a challenge cannot be composed into a runnable config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComposeError {
    #[error("held-out suite `{0}` names no dataset to evaluate from: a public suite's `[meta.dataset]`, or `suites/{0}/dataset.toml` in the private overlay")]
    SuiteWithoutDataset(String),
    #[error("held-out suite `{0}` has no task list here (the private overlay's `suites/{0}/tasks.txt`)")]
    SuiteWithoutTasks(String),
}

/// The held-out suites a run evaluates on, with their tasks, as the bundle lists them.
pub fn eval_suites(
    registry: &Registry,
    challenge: &Challenge,
) -> Result<Vec<(SuiteTable, Vec<String>)>, ComposeError> {
    challenge
        .spec
        .challenge
        .suites
        .iter()
        .map(|id| {
            let suite = &registry.suites[id];
            let dataset =
                suite.dataset.as_ref().ok_or_else(|| ComposeError::SuiteWithoutDataset(id.clone()))?;
            let tasks = suite.tasks.as_ref().ok_or_else(|| ComposeError::SuiteWithoutTasks(id.clone()))?;
            Ok((
                SuiteTable {
                    name: id.clone(),
                    repo_id: dataset.repo_id.clone(),
                    revision: dataset.revision.clone(),
                    path: dataset.path.clone(),
                    task_list: suite_task_list(id),
                },
                tasks.names.clone(),
            ))
        })
        .collect()
}

/// Composes a challenge's pipeline config; `train` is the mirrored collection (none for a
/// baseline measurement). Fails only when a held-out suite lacks its dataset or task list.
pub fn compose(
    registry: &Registry,
    challenge: &Challenge,
    train: Option<&TrainDataset>,
) -> Result<PipelineConfig, ComposeError> {
    let header = &challenge.spec.challenge;
    let model = &registry.models[&header.model].model;
    let method = &registry.methods[&header.method];
    let (t, r, e) = (&method.training, &method.rollout, &method.eval);
    Ok(PipelineConfig {
        model: ModelTable { id: model.repo.clone(), revision: model.revision.clone() },
        train_dataset: train.map(|d| DatasetTable {
            repo_id: d.repo_id.clone(),
            revision: d.revision.clone(),
            path: d.path.clone(),
            task_list: TRAIN_TASK_LIST.into(),
        }),
        runtime: RuntimeTable {
            sandbox: r.sandbox.clone(),
            sandbox_user: r.sandbox_user.clone(),
            max_completion_length: r.completion_tokens,
            num_generations: t.generations_per_task,
        },
        harness: HarnessTable {
            agent: "opencode".into(),
            skill_mode: "no-skill".into(),
            usage_tracking: "required".into(),
            concurrency: e.sandbox_concurrency,
            sandbox_setup_timeout_sec: r.sandbox_setup_timeout_s,
            agent_idle_timeout_sec: r.idle_timeout_s,
            agent_timeout_sec: r.per_attempt_timeout_s,
            max_infra_error_fraction: e.max_infra_error_fraction,
        },
        evaluation: EvaluationTable { sync_base_to_vllm: true, trials: e.trials },
        teacher: Enabled { enabled: false },
        sft: Enabled { enabled: false },
        grpo: GrpoTable {
            enabled: true,
            run_policy: t.run_policy.clone(),
            threshold: t.gate_threshold,
            gate_task_count: t.gate_task_count,
            max_steps: t.max_steps,
            learning_rate: t.learning_rate,
            lora_r: t.lora_rank,
            lora_alpha: t.lora_alpha,
            lora_dropout: t.lora_dropout,
            generation_batch_size: t.generation_batch_size,
            gradient_accumulation_steps: t.gradient_accumulation_steps,
            task_sampler: t.task_sampler.clone(),
            rollout_failure_policy: t.rollout_failure_policy.clone(),
            seed: t.seed,
        },
        // A challenge with a Trackio Space reports there too; TRL's lines reach the arena either way.
        tracking: TrackingTable {
            report_to: if challenge.spec.tracking.is_some() { "trackio" } else { "none" }.into(),
        },
        output: OutputTable { root: "runs".into() },
        eval_suites: eval_suites(registry, challenge)?.into_iter().map(|(s, _)| s).collect(),
    })
}

impl PipelineConfig {
    /// The TOML the bundle carries.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a pipeline config always serializes to TOML")
    }
}

/// How long a run's job may print nothing before the arena, with no relay to hear from, calls it
/// stalled: the longest step the recipe allows (one attempt's wall time plus its sandbox's start,
/// as a real evaluation can be silent for all of it), a quarter more, and five minutes.
pub fn silence_limit_s(rollout: &crate::registry::Rollout) -> i64 {
    let step = i64::from(rollout.per_attempt_timeout_s) + i64::from(rollout.sandbox_setup_timeout_s);
    step + step / 4 + 300
}
