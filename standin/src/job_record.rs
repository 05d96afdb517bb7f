//! A stand-in job's record: what HF answers of it, the faults it plays and the clock its times
//! are read from. The job table (`crate::jobs`) keeps them; the runners (`crate::runner`,
//! `crate::sandbox`) read them without reaching back into the table's module.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the next jobs do wrong.
///
/// `create_status` answers that many creates (`create_count`, default 1) with the status instead
/// (402: no prepaid credit; 5xx: HF down). The other faults apply to the next `count` jobs
/// (default 1). The stand-in plays those of the world around the container (`scheduling_ms`,
/// `crash_at`, `relay_off`, `relay_drop_at`: see `crate::runner`; `gpus_idle` in the metrics); the
/// simulated programs read the rest from the job's `STANDIN_JOB_FAULTS` (`standin/sim`): fail,
/// hang or die at a stage, end without results, write a disagreeing report, scripted cells, scored
/// timeouts and infrastructure errors, a silent or retrying evaluation, a flood of log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobFaults {
    #[serde(default)]
    pub create_status: Option<u16>,
    #[serde(default)]
    pub create_count: Option<u32>,
    #[serde(default)]
    pub fail_at: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub hang_at: Option<String>,
    #[serde(default)]
    pub no_results: bool,
    #[serde(default)]
    pub mismatch: bool,
    /// Stay in SCHEDULING this long (ms) before running.
    #[serde(default)]
    pub scheduling_ms: Option<u64>,
    /// Never connect the relay: progress shows in the log only.
    #[serde(default)]
    pub relay_off: bool,
    /// Drop the relay's connection when this stage starts (it reconnects and resends).
    #[serde(default)]
    pub relay_drop_at: Option<String>,
    /// Kill the first attempt's processes when this stage starts (a lost node).
    #[serde(default)]
    pub crash_at: Option<String>,
    /// `publish`: the container is killed before the pipeline publishes anything.
    #[serde(default)]
    pub die_at: Option<String>,
    /// Keep the first baseline evaluation silent this many seconds.
    #[serde(default)]
    pub silent_s: Option<f64>,
    /// Have the first baseline evaluation retry its sandbox this long: the log moves, the GPUs
    /// do nothing.
    #[serde(default)]
    pub retry_s: Option<f64>,
    /// HF's metrics read every GPU idle while the job runs (a wedged CUDA context).
    #[serde(default)]
    pub gpus_idle: bool,
    /// Print this many MiB of log during training.
    #[serde(default)]
    pub log_mib: Option<f64>,
    /// A train task GRPO's sampler never draws (it shows as never sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsampled_task: Option<String>,
    /// A train task whose every rollout passes (its groups are all-pass: no signal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_pass_task: Option<String>,
    /// Cell outcomes by task and arm: `{task: {baseline: [outcome per trial], final: […]}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<serde_json::Value>,
    /// `STEP:TASK` cells that time out with a scored verifier result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeout: Vec<String>,
    /// `STEP:TASK` cells with an infrastructure error (no scored row).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub infra: Vec<String>,
    #[serde(default)]
    pub count: Option<u32>,
    /// Answer explicit `null` for the optional fields that hold nothing (see `crate::jobs::answer`), for
    /// every job, until the faults are cleared.
    #[serde(default)]
    pub nulls: bool,
}

impl JobFaults {
    /// Whether any fault is the pipeline's to play (beyond the create's answer and `nulls`).
    pub fn pipeline(&self) -> bool {
        self != &JobFaults {
            create_status: self.create_status,
            create_count: self.create_count,
            nulls: self.nulls,
            ..Default::default()
        }
    }
}

/// A job's ports, as HF takes them: `portsPublic` is reachable without an HF token.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Expose {
    #[serde(default)]
    pub ports: Vec<u16>,
    #[serde(default)]
    pub ports_public: Vec<u16>,
}

/// A job, as HF describes it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub id: String,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub docker_image: Option<String>,
    pub space_id: Option<String>,
    pub command: Vec<String>,
    pub arguments: Vec<String>,
    pub environment: BTreeMap<String, String>,
    /// Names only: values are never shown.
    pub secrets: Vec<String>,
    pub flavor: String,
    pub labels: BTreeMap<String, String>,
    /// Not in HF's answer: the stand-in's own record of `timeoutSeconds`.
    #[serde(skip)]
    pub timeout: u64,
    /// Tries including the first (the create's `attempts`); HF answers `retry`, one less.
    #[serde(skip)]
    pub attempts: u32,
    pub retry: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expose: Option<Expose>,
    pub status: Value,
    pub durations: Value,
    pub owner: Value,
}

pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}
