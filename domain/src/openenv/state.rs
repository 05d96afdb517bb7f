//! An OpenEnv run's states and the moves between them (the guide's state machine), and the bound
//! on an event's text: what the run's events, its controls and its evaluation all look down at.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvRunState))]
pub enum RunState {
    Starting,
    Loading,
    Evaluating,
    Rolling,
    Updating,
    Cleanup,
    Completed,
    Failed,
    Cancelled,
}

impl RunState {
    /// Every state a run is in until it ends.
    pub const LIVE: &'static [RunState] = &[
        RunState::Starting,
        RunState::Loading,
        RunState::Evaluating,
        RunState::Rolling,
        RunState::Updating,
        RunState::Cleanup,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Starting => "starting",
            RunState::Loading => "loading",
            RunState::Evaluating => "evaluating",
            RunState::Rolling => "rolling",
            RunState::Updating => "updating",
            RunState::Cleanup => "cleanup",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).ok()
    }

    pub fn has_ended(self) -> bool {
        matches!(self, RunState::Completed | RunState::Failed | RunState::Cancelled)
    }

    /// Whether the trainer has started on the GPU (the run's time is being spent).
    pub fn on_gpu(self) -> bool {
        !matches!(self, RunState::Starting) && !self.has_ended()
    }

    /// What the state means, in words (the submission page).
    pub fn words(self) -> &'static str {
        match self {
            RunState::Starting => "handed to the training cluster, waiting for a GPU",
            RunState::Loading => "the trainer started on the GPU and is loading the model",
            RunState::Evaluating => "playing the held-out benchmark to measure the policy",
            RunState::Rolling => "playing the episodes of an optimizer step",
            RunState::Updating => "updating the policy",
            RunState::Cleanup => "cleaning up",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled by an organizer",
        }
    }

    /// Whether an event of state `next` may follow one of `self` (the cluster reports them in
    /// order; a terminal state takes nothing after it).
    pub fn may_follow_with(self, next: RunState) -> bool {
        use RunState::*;
        if self.has_ended() {
            return false;
        }
        match next {
            Starting => false,
            Loading => self == Starting,
            Evaluating | Rolling => matches!(self, Loading | Evaluating | Rolling | Updating),
            Updating => self == Rolling,
            Cleanup => matches!(self, Loading | Evaluating | Rolling | Updating),
            Completed => self == Cleanup,
            Failed | Cancelled => true,
        }
    }
}

/// The longest text an event's fields may hold.
pub const MAX_TEXT: usize = 2000;

#[cfg(feature = "sqlx")]
crate::text_column!(RunState, "OpenEnv run state");
