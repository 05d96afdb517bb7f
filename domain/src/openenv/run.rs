//! An OpenEnv run's states and events, as the guide names them: `starting` (handed to the
//! cluster), `loading` (the trainer started on the GPU), then `rolling` and `updating` once per
//! optimizer step, then `cleanup` and `completed` or `failed` (`cancelled` when an editor stops it).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvRunState))]
pub enum RunState {
    Starting,
    Loading,
    Rolling,
    Updating,
    Cleanup,
    Completed,
    Failed,
    Cancelled,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Starting => "starting",
            RunState::Loading => "loading",
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

    pub fn terminal(self) -> bool {
        matches!(self, RunState::Completed | RunState::Failed | RunState::Cancelled)
    }

    /// Whether the trainer has started on the GPU (the run's time is being spent).
    pub fn on_gpu(self) -> bool {
        !matches!(self, RunState::Starting) && !self.terminal()
    }

    /// What the state means, in words (the submission page).
    pub fn words(self) -> &'static str {
        match self {
            RunState::Starting => "handed to the training cluster, waiting for a GPU",
            RunState::Loading => "the trainer started on the GPU and is loading the model",
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
        if self.terminal() {
            return false;
        }
        match next {
            Starting => false,
            Loading => self == Starting,
            Rolling => matches!(self, Loading | Rolling | Updating),
            Updating => self == Rolling,
            Cleanup => matches!(self, Loading | Rolling | Updating),
            Completed => self == Cleanup,
            Failed | Cancelled => true,
        }
    }
}

/// One event of a run: the run's state and `policy_version` at that moment, and for
/// `rolling`/`updating` the step's rewards (`null` for an episode without a valid reward).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvRunEvent))]
pub struct RunEvent {
    pub seq: i64,
    pub state: RunState,
    pub policy_version: i64,
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewards: Option<Vec<Option<f64>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A run's failure: its code and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunFailure {
    pub code: Option<String>,
    pub message: Option<String>,
}

/// `GET /api/openenv/runs/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpenEnvRunView {
    pub run_id: String,
    pub submission_id: String,
    pub account: String,
    pub state: RunState,
    /// The state in words.
    pub state_words: String,
    /// Optimizer steps taken.
    pub policy_version: i64,
    /// When the arena handed the run to the cluster.
    pub assigned_at: String,
    /// Whether the trainer has started on the GPU (the run's time counts from then).
    pub started: bool,
    pub ended_at: Option<String>,
    /// Set when the run `failed` (or was `cancelled`): the code and why.
    pub error: Option<RunFailure>,
    /// The run's limit on its H200, in seconds.
    pub time_limit_s: u64,
    /// The mean reward of each step taken: `[policy_version, mean]`.
    pub reward_curve: Vec<(i64, f64)>,
}

/// `GET /api/openenv/runs/{id}/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunEvents {
    pub run_id: String,
    pub events: Vec<RunEvent>,
}

/// The mean reward of each optimizer step (the `updating` events' rewards): (policy_version, mean).
pub fn reward_curve(events: &[RunEvent]) -> Vec<(i64, f64)> {
    events
        .iter()
        .filter(|e| e.state == RunState::Updating)
        .filter_map(|e| {
            let r: Vec<f64> = e.rewards.as_ref()?.iter().filter_map(|r| *r).collect();
            (!r.is_empty()).then(|| (e.policy_version, r.iter().sum::<f64>() / r.len() as f64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::RunState::*;
    use super::*;

    #[test]
    fn states_follow_the_guides_order() {
        let path = [Starting, Loading, Rolling, Updating, Rolling, Updating, Cleanup, Completed];
        assert!(path.windows(2).all(|w| w[0].may_follow_with(w[1])), "{path:?}");
        assert!(!Starting.may_follow_with(Rolling), "the trainer loads first");
        assert!(!Rolling.may_follow_with(Completed), "cleanup comes first");
        assert!(Starting.may_follow_with(Failed) && Rolling.may_follow_with(Cancelled));
        assert!(!Completed.may_follow_with(Failed) && !Failed.may_follow_with(Rolling));
        assert!(!Starting.on_gpu() && Loading.on_gpu() && !Completed.on_gpu());
        assert_eq!(RunState::parse("updating"), Some(Updating));
        assert_eq!(RunState::parse("Updating"), None);
    }

    #[test]
    fn the_reward_curve_is_the_mean_of_each_updating_event() {
        let e = |state, v, rewards: Option<Vec<Option<f64>>>| RunEvent {
            seq: v,
            state,
            policy_version: v,
            at: String::new(),
            rewards,
            message: None,
        };
        let events = [
            e(Rolling, 0, Some(vec![Some(0.0), None, Some(1.0), Some(1.0), Some(0.0)])),
            e(Updating, 0, Some(vec![Some(0.0), Some(1.0), Some(1.0), Some(0.0)])),
            e(Updating, 1, Some(vec![Some(1.0); 4])),
        ];
        assert_eq!(reward_curve(&events), [(0, 0.5), (1, 1.0)]);
    }
}
