use serde::{Deserialize, Serialize};

/// `configs/challenges/*.toml`: one challenge, binding a model, a method and suites.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChallengeFile {
    pub challenge: ChallengeHeader,
    pub pipeline: Pipeline,
    pub compute: Compute,
    #[serde(default)]
    pub baseline: Option<Baseline>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ChallengeStatus {
    /// Takes collections and, unless runs are paused, runs.
    Open,
    /// Listed with its binding; refuses collections and runs.
    Planned,
    /// Listed; refuses collections and runs.
    Closed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChallengeHeader {
    pub id: String,
    pub title: String,
    pub status: ChallengeStatus,
    /// Present when runs are refused; the text is the reason participants read.
    #[serde(default)]
    pub runs_paused: Option<String>,
    pub model: String,
    pub method: String,
    pub suites: Vec<String>,
    /// Participant text: what the challenge is about.
    pub summary: String,
    /// Participant text: the recipe's per-attempt limits and anything else current.
    pub status_note: String,
}

/// The training pipeline commit this challenge's runs use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Pipeline {
    pub repo: String,
    pub commit: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ProviderStatus {
    /// The arena launches jobs on this provider.
    Connected,
    /// Not connected yet: the challenge quotes no allocation and refuses runs.
    Planned,
}

/// `[compute]`: the resources every run gets, stated so participants can read them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compute {
    pub provider: String,
    pub provider_status: ProviderStatus,
    pub nodes: u32,
    pub gpu_type: String,
    pub gpus: u32,
    /// Hard wall-clock limit of one run's job, in seconds.
    pub max_wall_s: u32,
    pub eval_trials: u32,
    pub sandbox_concurrency: u32,
    /// Price of the node per hour; the allocation is this times the hard limit.
    #[serde(default)]
    pub hourly_price_usd: Option<f64>,
    /// How many times the job's command may start: HF Jobs starts it again, in the same job,
    /// after a crash (a kill, a lost node), and the job script then resumes the run from the
    /// state it checkpointed. Leave out for one attempt.
    #[serde(default)]
    pub attempts: Option<u32>,
    pub layout: Layout,
}

/// `[compute.layout]`: how the node's GPUs split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Layout {
    pub vllm_gpus: u32,
    pub trainer_gpus: u32,
}

/// `[baseline]`: the organizers' separate measurement of the base model on the suite (context only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Baseline {
    pub pass_rate_pct: f64,
    pub stderr_pct: f64,
    pub trials: u32,
    pub harness_note: String,
}

impl ChallengeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ChallengeStatus::Open => "open",
            ChallengeStatus::Planned => "planned",
            ChallengeStatus::Closed => "closed",
        }
    }
}
