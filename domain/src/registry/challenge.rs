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
    /// Where the organizers keep a Trackio dashboard of the runs, if they do.
    #[serde(default)]
    pub tracking: Option<Tracking>,
}

/// `[tracking]`: the challenge's runs log TRL's metrics to this Trackio Space too (the pipeline's
/// `report_to = "trackio"`; the job sets `TRACKIO_SPACE_ID`, which trackio reads when transformers
/// passes no `trackio_space_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Tracking {
    /// `owner/name` of the Space.
    pub trackio_space: String,
}

impl Tracking {
    /// The project transformers logs under: the pipeline passes no `project`, so it is
    /// `TrainingArguments.project`'s default, and no variable changes it.
    pub const PROJECT: &'static str = "huggingface";

    /// Whether `owner/name` is a Space id HF accepts: each part 1 to 96 of `[A-Za-z0-9._-]`, not
    /// starting with `.` or `-`.
    pub fn space_ok(&self) -> bool {
        let mut parts = self.trackio_space.split('/');
        let ok = |p: &str| {
            (1..=96).contains(&p.len())
                && !p.starts_with(['.', '-'])
                && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        };
        matches!((parts.next(), parts.next(), parts.next()), (Some(o), Some(n), None) if ok(o) && ok(n))
    }

    /// A run's own view of the dashboard, as TRL links it: the Space's app host (`owner-name`,
    /// lower-cased, `_` and `.` as `-`) with the project and the pipeline's GRPO run name
    /// (`{run}-grpo`).
    pub fn dashboard_url(&self, run_id: &str) -> String {
        let host: String = self
            .trackio_space
            .chars()
            .map(|c| match c {
                '/' | '_' | '.' => '-',
                c => c.to_ascii_lowercase(),
            })
            .collect();
        format!("https://{host}.hf.space/?project={}&runs={run_id}-grpo&sidebar=collapsed", Self::PROJECT)
    }
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
