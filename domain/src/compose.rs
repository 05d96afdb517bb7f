//! Composes a challenge's run config from its fragments: what `compose.py` renders for the
//! pipeline. The submission part is added when a run is launched.

use serde::{Deserialize, Serialize};

use crate::registry::{Challenge, Eval, Pipeline, Registry, Rollout, ServingLayout, Training};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub challenge: String,
    pub pipeline: Pipeline,
    pub model: RunModel,
    pub recipe: RunRecipe,
    pub suites: Vec<RunSuite>,
    pub serving: ServingLayout,
    pub compute: RunCompute,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunModel {
    pub repo: String,
    pub revision: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecipe {
    pub id: String,
    pub algorithm: String,
    pub adapter: String,
    pub trainer: String,
    pub rollout_harness: String,
    pub placeholder: bool,
    pub training: Training,
    pub rollout: Rollout,
    pub eval: Eval,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSuite {
    pub id: String,
    pub private: bool,
    pub sealed: bool,
    pub trials: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunCompute {
    pub provider: String,
    pub max_wall_s: u32,
    pub sandbox_concurrency: u32,
}

/// Composes a loaded challenge. The registry has already checked the binding, so this cannot fail.
pub fn compose(registry: &Registry, challenge: &Challenge) -> RunConfig {
    let header = &challenge.spec.challenge;
    let model = &registry.models[&header.model];
    let method = &registry.methods[&header.method];
    RunConfig {
        challenge: header.id.clone(),
        pipeline: challenge.spec.pipeline.clone(),
        model: RunModel { repo: model.model.repo.clone(), revision: model.model.revision.clone() },
        recipe: RunRecipe {
            id: method.method.id.clone(),
            algorithm: method.method.algorithm.clone(),
            adapter: method.method.adapter.clone(),
            trainer: method.method.trainer.clone(),
            rollout_harness: method.method.rollout_harness.clone(),
            placeholder: method.method.placeholder,
            training: method.training.clone(),
            rollout: method.rollout.clone(),
            eval: method.eval.clone(),
        },
        suites: header
            .suites
            .iter()
            .map(|id| {
                let s = &registry.suites[id];
                RunSuite {
                    id: id.clone(),
                    private: s.meta.private,
                    sealed: s.meta.sealed,
                    trials: method.eval.trials,
                }
            })
            .collect(),
        serving: challenge.serving.clone(),
        compute: RunCompute {
            provider: challenge.spec.compute.provider.clone(),
            max_wall_s: challenge.spec.compute.max_wall_s,
            sandbox_concurrency: challenge.spec.compute.sandbox_concurrency,
        },
    }
}

/// The composed config as the TOML the pipeline reads.
pub fn render_toml(config: &RunConfig) -> String {
    toml::to_string_pretty(config).expect("a run config always serializes to TOML")
}
