//! How the reconciler follows runs in this deployment: what `AppState` keeps of it, apart from the
//! reconciler (`super::reconcile`) that reads the state.

use std::time::Duration;

use domain::ids::ChallengeId;
use domain::runs::follow::Limits;
use domain::Registry;

/// The limits of a deployment (configuration).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Overrides every challenge's silence limit (`ARENA_SILENCE_LIMIT_S`).
    pub silence_limit_s: Option<i64>,
    /// A job in SCHEDULING this long is canceled.
    pub scheduling_s: i64,
    /// A relay not heard from for this long is gone.
    pub relay_grace_s: i64,
    /// How long a pass reads a running job's log stream before it stops.
    pub log_read: Duration,
}

impl Settings {
    /// A run's limits: its challenge's silence limit unless the deployment overrides it.
    pub fn limits(&self, registry: &Registry, challenge_id: &ChallengeId) -> Limits {
        let challenge = registry.challenge(challenge_id);
        let stall_s = self.silence_limit_s.unwrap_or_else(|| {
            challenge
                .map(|c| {
                    domain::pipeline::config::silence_limit_s(
                        &registry.methods[&c.spec.challenge.method].rollout,
                    )
                })
                .unwrap_or(3600)
        });
        Limits { stall_s, scheduling_s: self.scheduling_s, relay_grace_s: self.relay_grace_s }
    }
}
