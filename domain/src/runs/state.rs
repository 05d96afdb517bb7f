//! A run's state and purpose, and which failures are the arena's own: what the run's other
//! modules read (kept apart from `runs.rs` so that they look down at it, never back up).

use serde::{Deserialize, Serialize};

use super::stage::Stage;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    Queued,
    Running,
    Scored,
    Failed,
    Canceled,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Scored => "scored",
            RunState::Failed => "failed",
            RunState::Canceled => "canceled",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        [RunState::Queued, RunState::Running, RunState::Scored, RunState::Failed, RunState::Canceled]
            .into_iter()
            .find(|r| r.as_str() == s)
    }

    pub fn has_ended(self) -> bool {
        matches!(self, RunState::Scored | RunState::Failed | RunState::Canceled)
    }

    /// Failed and canceled runs do not count against the daily limit.
    pub fn counts(self) -> bool {
        !matches!(self, RunState::Failed | RunState::Canceled)
    }
}

#[cfg(feature = "sqlx")]
crate::text_column!(RunState, "run state");

/// What a run is for: training on a collection, or measuring the base model alone on the held-out
/// suite (the challenge's `baseline`, launched by an editor, no collection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    Collection,
    Baseline,
}

impl Purpose {
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Collection => "collection",
            Purpose::Baseline => "baseline",
        }
    }

    pub fn parse(s: &str) -> Option<Purpose> {
        [Purpose::Collection, Purpose::Baseline].into_iter().find(|p| p.as_str() == s)
    }

    /// The stages a run of this purpose goes through: a baseline measurement snapshots the
    /// held-out suite, evaluates the base model and publishes, nothing more.
    pub fn stages(self) -> &'static [Stage] {
        match self {
            Purpose::Collection => &Stage::ALL,
            Purpose::Baseline => &[Stage::Setup, Stage::Snapshot, Stage::Baseline, Stage::Collect],
        }
    }

    /// The `arena-purpose` label of the HF job, as `/api/jobs` reports it.
    pub fn job_purpose(self) -> &'static str {
        match self {
            Purpose::Collection => "challenge-run",
            Purpose::Baseline => "baseline",
        }
    }
}

#[cfg(feature = "sqlx")]
crate::text_column!(Purpose, "run purpose");

/// Whether a failure's reason names the arena's side (serving, sandboxes, the agent handshake,
/// HF's credit) rather than the collection. HTTP 402 counts only as a number of its own: reasons
/// quote paths and ids (`run-6dfc60ff6d01402d`) whose hex may hold those digits.
pub fn is_platform_fault(reason: &str) -> bool {
    let r = reason.to_ascii_lowercase();
    ["nccl", "vllm", "daytona", "acp initialize timed out", "prepaid credit", "sandbox"]
        .iter()
        .any(|needle| r.contains(needle))
        || r.split(|c: char| !c.is_ascii_alphanumeric()).any(|word| word == "402")
}
