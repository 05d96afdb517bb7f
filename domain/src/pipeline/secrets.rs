//! The secrets a run's job needs, derived from its config as the pipeline's
//! `default_hf_job_secrets` derives them (reference §1.4), and who provides each: the arena from
//! its own environment, the arena afresh for each run, or the job script once it has started the
//! model server and the bridge.

use super::config::PipelineConfig;

/// Who gives the job a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The arena's environment holds the value (an organizer sets it).
    Arena,
    /// The arena makes a new value for each run (the bridge's key).
    PerRun,
    /// The job script sets it after starting the model server and the bridge.
    JobScript,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    pub name: &'static str,
    pub source: Source,
}

/// Every name the arena may forward from its environment, so that the server reads only these.
/// (The teacher providers' keys are not among them: the arena's recipes turn the teacher off.)
pub const FORWARDABLE: &[&str] = &["HF_TOKEN", "DAYTONA_API_KEY", "WANDB_API_KEY"];

/// The bridge's bearer key, new for each run.
pub const BRIDGE_KEY: &str = "BENCHFLOW_PROVIDER_API_KEY";

/// The pipeline's default secret list for a config, in its order, with who provides each.
pub fn needs(config: &PipelineConfig) -> Vec<Need> {
    let arena = |name| Need { name, source: Source::Arena };
    let mut out = vec![arena("HF_TOKEN")];
    // An unset `runtime.sandbox` means Daytona; the arena always sets it.
    if config.runtime.sandbox == "daytona" {
        out.push(arena("DAYTONA_API_KEY"));
    }
    // The teacher's provider keys come next in the pipeline's list; the arena's configs always
    // turn the teacher off (`teacher.enabled = false`), so there are none.
    for name in ["BENCHFLOW_BASE_MODEL", "BENCHFLOW_ADAPTER_MODEL", "BENCHFLOW_PROVIDER_BASE_URL"] {
        out.push(Need { name, source: Source::JobScript });
    }
    out.push(Need { name: BRIDGE_KEY, source: Source::PerRun });
    out.push(Need { name: "TRL_VLLM_SERVER_BASE_URL", source: Source::JobScript });
    // The pipeline's own list adds W&B's key for any `report_to` but `none`; it is W&B's alone, so
    // the arena asks for it only when the run reports to W&B. Trackio writes to its Space with the
    // job's `HF_TOKEN`, which every job has.
    if config.tracking.report_to == "wandb" {
        out.push(arena("WANDB_API_KEY"));
    }
    out
}

/// The names the arena forwards from its own environment.
pub fn forwarded(config: &PipelineConfig) -> Vec<&'static str> {
    needs(config).into_iter().filter(|n| n.source == Source::Arena).map(|n| n.name).collect()
}
