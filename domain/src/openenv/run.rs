//! An OpenEnv run's states and events, as the guide names them: `starting` (handed to the
//! cluster), `loading` (the trainer started on the GPU), then `rolling` and `updating` once per
//! optimizer step, then `cleanup` and `completed` or `failed` (`cancelled` when an editor stops it).
//! `evaluating` comes before the first step and after the last, while the policy is played on the
//! track's held-out benchmark (`super::evaluation`).

use crate::invalid::Invalid;
use serde::{Deserialize, Serialize};

pub use super::state::{RunState, MAX_TEXT};

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
    /// On an `updating` event that trained: what the trainer measured over the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<StepMetrics>,
    /// Something that went wrong and did not end the run, said as it happened; such an event may
    /// repeat the run's state (`RunEvent::may_follow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert: Option<Alert>,
    /// On `loading`: the trainer's versions, model and device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trainer: Option<TrainerInfo>,
    /// On `evaluating`: the phase and its progress (the records the cluster sends on a phase's
    /// last event are kept apart: an event never shows them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<super::evaluation::EvaluationReport>,
    /// On `rolling` and `updating`: the train task the step plays (kept only when it is one of
    /// the submission's own train tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// What the cluster wrote, as it wrote it: shown to editors only (participants read the
    /// arena's own sentence in `message`, `super::wording`). Never taken from the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported: Option<Reported>,
    /// On `updating` (and a `RUN_NO_TRAINING_SIGNAL` failure): how the step's episodes ended
    /// (over the stretch, for the failure), in numbers the arena words for the participant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends: Option<EpisodeEnds>,
}

/// How episodes ended, counted: their own `done`, the finish action or `{"finish": true}` with a
/// valid reward, an invalid reply, a token budget or `tool_calls_total`, a wall, no valid reward
/// (a finish action that gave none), or a sandbox that never served; and the rewards in the order
/// the episodes ended (`null`: none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvEpisodeEnds))]
pub struct EpisodeEnds {
    #[serde(default)]
    pub done: u32,
    #[serde(default)]
    pub finished: u32,
    #[serde(default)]
    pub invalid_reply: u32,
    #[serde(default)]
    pub budget: u32,
    #[serde(default)]
    pub timeout: u32,
    #[serde(default)]
    pub no_reward: u32,
    #[serde(default)]
    pub sandbox: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<Option<f64>>,
    /// Up to three of the model's own replies that ended episodes as invalid, each cut: what the
    /// participant needs to see why (their train task's episodes only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replies: Vec<String>,
}

/// The model's invalid replies an `ends` quotes at most, and each one's characters.
pub const MAX_REPLIES: usize = 3;
pub const MAX_REPLY_CHARS: usize = 120;

impl EpisodeEnds {
    /// Episodes counted.
    pub fn total(&self) -> u32 {
        self.done
            + self.finished
            + self.invalid_reply
            + self.budget
            + self.timeout
            + self.no_reward
            + self.sandbox
    }

    /// The counts in words: "2 ended by an invalid reply; 3 ended without a valid reward (…)".
    pub fn words(&self) -> String {
        let parts = [
            (self.done, "ended by themselves"),
            (self.finished, "were ended by the finish action"),
            (self.invalid_reply, "ended by an invalid reply"),
            (self.budget, "ran out of a budget (tokens or tool calls)"),
            (self.timeout, "hit a wall"),
            (self.no_reward, "ended without a valid reward (none, or one outside [0, 1])"),
            (self.sandbox, "lost their sandbox"),
        ];
        let said: Vec<String> =
            parts.iter().filter(|(n, _)| *n > 0).map(|(n, w)| format!("{n} {w}")).collect();
        if said.is_empty() {
            "no episode was counted".into()
        } else {
            said.join("; ")
        }
    }

    /// The rewards in the order they ended: "[none, none, 0, 0, 0]".
    pub fn scores_words(&self) -> String {
        let shown: Vec<String> =
            self.scores.iter().map(|s| s.map_or("none".into(), |r| format!("{r}"))).collect();
        format!("[{}]", shown.join(", "))
    }

    fn check(&self) -> Result<(), Invalid> {
        // A failure's counts cover a stretch of steps; a step's, its five (and their replays).
        if self.total() > 10_000 || self.scores.len() > 2 * super::episode::EPISODES_PER_STEP {
            return Err("`ends` counts more episodes than a run plays".into());
        }
        if self.scores.iter().flatten().any(|r| !r.is_finite()) {
            return Err("`ends.scores` holds a number that is not finite".into());
        }
        if self.replies.len() > MAX_REPLIES
            || self.replies.iter().any(|r| r.chars().count() > MAX_REPLY_CHARS)
        {
            return Err(format!(
                "`ends.replies` holds more than {MAX_REPLIES} replies or one over {MAX_REPLY_CHARS} characters"
            )
            .into());
        }
        Ok(())
    }
}

/// The cluster's own words for an event, kept for editors: its message and, on `evaluating`, why
/// the phase is incomplete.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvReported))]
pub struct Reported {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

impl RunEvent {
    /// Whether this event may follow a run in `current`: the guide's order, or an alert that keeps
    /// the state it happened in.
    pub fn may_follow(&self, current: RunState) -> bool {
        current.may_follow_with(self.state)
            || (self.alert.is_some() && self.state == current && !current.has_ended())
    }

    /// What the arena will not store: texts past their bounds, a dashboard that is not a Space,
    /// metrics that are not finite numbers.
    pub fn check(&self) -> Result<(), Invalid> {
        if self.message.as_ref().is_some_and(|m| m.len() > MAX_TEXT) {
            return Err(format!("`message` is over {MAX_TEXT} bytes").into());
        }
        if self.rewards.as_ref().is_some_and(|r| r.len() > super::episode::EPISODES_PER_STEP) {
            return Err("more rewards than a step has episodes".into());
        }
        if let Some(t) = &self.trainer {
            t.check()?;
        }
        match (&self.evaluation, self.state) {
            (Some(e), RunState::Evaluating) => e.check()?,
            (Some(_), _) => return Err("`evaluation` on an event that is not `evaluating`".into()),
            (None, RunState::Evaluating) => return Err("an `evaluating` event without `evaluation`".into()),
            (None, _) => {}
        }
        if let Some(m) = &self.metrics {
            m.check()?;
        }
        if let Some(ends) = &self.ends {
            ends.check()?;
        }
        Ok(())
    }
}

/// What went wrong during a run without ending it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvRunAlert))]
pub enum Alert {
    /// A sandbox's image never served `/health` within `reset_wall_s`: that episode has no reward.
    SandboxFailed,
    /// An episode was played again in a fresh sandbox.
    EpisodeRetried,
    /// Fewer than four episodes of a step ended with a valid reward: the step trained nothing.
    NoUpdate,
    /// A sandbox could not be stopped, or the run's cleanup stalled.
    CleanupFailed,
    /// The trainer stopped without ending the run and was started again from its checkpoint.
    TrainerRestarted,
    /// The trainer resumed from its last checkpoint.
    Resumed,
}

impl Alert {
    pub fn words(self) -> &'static str {
        match self {
            Alert::SandboxFailed => "a sandbox never served",
            Alert::EpisodeRetried => "an episode was played again",
            Alert::NoUpdate => "a step trained nothing",
            Alert::CleanupFailed => "a sandbox could not be stopped",
            Alert::TrainerRestarted => "the trainer was restarted",
            Alert::Resumed => "the trainer resumed from its checkpoint",
        }
    }
}

crate::metric_table::metric_table! {
    /// What the trainer measured over one optimizer step, under the names it logs them to
    /// Trackio (`train/reward`, `train/episodes/step_s`, …): TRL's own, and the episodes' counts
    /// it adds through TRL's `log_metric`.
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    #[cfg_attr(feature = "openapi", schema(as = OpenEnvStepMetrics))]
    pub struct StepMetrics {
        /// The mean reward of the four episodes that trained.
        reward: "reward" or "reward_mean",
        /// Their standard deviation (zero: no signal, the update changes nothing).
        reward_std: "reward_std",
        /// GRPO's loss over the step.
        loss: "loss",
        /// The gradient's norm before clipping.
        grad_norm: "grad_norm",
        /// The model's own tokens per episode (observations not counted), on average.
        completions_mean_length: "completions/mean_length" or "completion_tokens",
        /// Seconds the step's five episodes took.
        episodes_step_s: "episodes/step_s" or "step_s",
        /// Of the step's five episodes, how many ended by a reply that was not one valid JSON action…
        episodes_invalid_replies: "episodes/invalid_replies" or "invalid_replies",
        /// …by a token budget or `tool_calls_total`…
        episodes_budget_ends: "episodes/budget_ends" or "budget_ends",
        /// …and by their walls.
        episodes_timeouts: "episodes/timeouts" or "timeouts",
        /// The norm of the adapter's LoRA B matrices after the step (zero before the first): it
        /// moves at every step that changed the weights.
        lora_b_norm: "lora_b_norm",
        /// Episodes of the step lost to the platform and played again in a fresh sandbox.
        episodes_group_retries: "episodes/group_retries" or "group_retries",
        /// Seconds the step's episodes waited for their sandboxes to serve, after what was started
        /// during the previous update.
        episodes_sandbox_wait_s: "episodes/sandbox_wait_s" or "sandbox_wait_s",
    }
}

/// What trains the run: the trainer's versions, the model and the device, and the run's Trackio
/// dashboard when the cluster keeps one on a Space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvTrainerInfo))]
pub struct TrainerInfo {
    pub trl: String,
    pub transformers: String,
    pub torch: String,
    /// The model in words, e.g. `Qwen/Qwen3.5-9B at c202236`.
    pub model: String,
    /// `cuda` or `cpu`.
    pub device: String,
    /// `https://huggingface.co/spaces/…`: the Trackio dashboard of the cluster's runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dashboard: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trackio_project: Option<String>,
}

impl TrainerInfo {
    fn check(&self) -> Result<(), Invalid> {
        let texts = [&self.trl, &self.transformers, &self.torch, &self.model, &self.device];
        if texts.iter().any(|t| t.len() > 200) || self.trackio_project.as_ref().is_some_and(|p| p.len() > 200)
        {
            return Err("a trainer field over 200 bytes".into());
        }
        if let Some(d) = &self.dashboard {
            let space = d.strip_prefix("https://huggingface.co/spaces/").unwrap_or_default();
            let ok = d.len() <= 200
                && space.split('/').count() == 2
                && space.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b));
            if !ok {
                return Err("`trainer.dashboard` must be a Space's address on huggingface.co".into());
            }
        }
        Ok(())
    }
}

/// The latest alert of a run (the run page shows it beside the state).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvRunAlertView))]
pub struct AlertView {
    pub alert: Alert,
    /// `info` (it goes on by itself), `warning` (something was lost: an episode, a step's update)
    /// or `error` (something is left to mend: a sandbox still running).
    pub level: AlertLevel,
    /// The alert in words.
    pub words: String,
    pub message: Option<String>,
    /// Where to look: the run's dashboard, when its trainer reported one.
    pub url: Option<String>,
    pub at: String,
}

/// How much an alert matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvAlertLevel))]
pub enum AlertLevel {
    Info,
    Warning,
    Error,
}

impl AlertLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            AlertLevel::Info => "info",
            AlertLevel::Warning => "warning",
            AlertLevel::Error => "error",
        }
    }
}

impl Alert {
    pub fn level(self) -> AlertLevel {
        match self {
            Alert::EpisodeRetried | Alert::Resumed => AlertLevel::Info,
            Alert::SandboxFailed | Alert::NoUpdate | Alert::TrainerRestarted => AlertLevel::Warning,
            Alert::CleanupFailed => AlertLevel::Error,
        }
    }
}

/// One optimizer step that trained: its `policy_version` after the step and its metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvStepView))]
pub struct StepView {
    pub policy_version: i64,
    pub metrics: StepMetrics,
    /// Whether the step could teach the model anything (`had_signal`): its rewards differed and
    /// its update moved the weights.
    pub signal: bool,
}

/// Whether an `updating` event's optimizer step could teach the model anything. GRPO's
/// advantages are each reward minus the group's mean: four equal rewards give zero advantages
/// and an update that changes nothing, whatever the optimizer then reports; and a step whose
/// gradient norm the trainer measured at zero moved nothing either.
pub fn had_signal(e: &RunEvent) -> bool {
    if e.state != RunState::Updating {
        return false;
    }
    let valid: Vec<f64> = e.rewards.iter().flatten().flatten().copied().collect();
    let differ = valid.iter().any(|r| (r - valid[0]).abs() > f64::EPSILON);
    let moved = e.metrics.as_ref().and_then(|m| m.grad_norm).is_none_or(|g| g > 0.0);
    differ && moved
}

/// A run's steps as the curves both tracks draw: each `updating` event that trained is a step
/// (its policy version after the update), its reward the mean of its valid rewards, with the
/// trainer's loss, spread, gradient norm and tokens when it reported them (the simulated cluster
/// reports rewards only).
pub fn training_curve(events: &[RunEvent]) -> crate::training::TrainingCurve {
    let steps = steps(events);
    let metrics = |v: i64| steps.iter().find(|s| s.policy_version == v).map(|s| &s.metrics);
    let points = reward_curve(events)
        .into_iter()
        .map(|(version, mean)| {
            let m = metrics(version);
            crate::training::TrainPoint {
                step: version.max(0) as u64,
                metrics: crate::training::TrainMetrics {
                    loss: m.and_then(|m| m.loss),
                    reward: Some(mean),
                    reward_std: m.and_then(|m| m.reward_std),
                    grad_norm: m.and_then(|m| m.grad_norm),
                    completions_mean_length: m.and_then(|m| m.completions_mean_length),
                    ..Default::default()
                },
            }
        })
        .collect();
    crate::training::TrainingCurve { planned_steps: None, points }
}

/// The trainer, the latest alert and the steps' metrics, from a run's events.
pub fn trainer_of(events: &[RunEvent]) -> Option<TrainerInfo> {
    events.iter().rev().find_map(|e| e.trainer.clone())
}

/// The latest alert of a run. A run that ended keeps only the alerts that still need someone (a
/// sandbox left running): the others ("the run goes on with its next step…") were about a run that
/// no longer goes on.
pub fn latest_alert(events: &[RunEvent]) -> Option<AlertView> {
    let url = trainer_of(events).and_then(|t| t.dashboard);
    let ended = events.last().is_some_and(|e| e.state.has_ended());
    events.iter().rev().find_map(|e| {
        e.alert.filter(|a| !ended || *a == Alert::CleanupFailed).map(|a| AlertView {
            alert: a,
            level: a.level(),
            words: a.words().into(),
            message: e.message.clone(),
            url: url.clone(),
            at: e.at.clone(),
        })
    })
}

pub fn steps(events: &[RunEvent]) -> Vec<StepView> {
    events
        .iter()
        .filter(|e| e.state == RunState::Updating)
        .filter_map(|e| {
            Some(StepView {
                policy_version: e.policy_version,
                metrics: e.metrics.clone()?,
                signal: had_signal(e),
            })
        })
        .collect()
}

/// A run's failure: its code and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunFailure {
    pub code: Option<String>,
    pub message: Option<String>,
    /// What the cluster wrote of it: editors only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported: Option<String>,
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
    /// Each optimizer step that trained, with what the trainer measured.
    pub steps: Vec<StepView>,
    /// What trains the run (from its `loading` event), once the trainer has started.
    pub trainer: Option<TrainerInfo>,
    /// The latest thing that went wrong without ending the run.
    pub alert: Option<AlertView>,
    /// The held-out evaluation before and after training (null: the run has no benchmark plan).
    pub evaluation: Option<super::evaluation::EvaluationView>,
    /// Its cleanup, once it began: whether it stalled, the sandboxes left, an editor's release.
    pub cleanup: Option<super::controls::CleanupView>,
    /// The cluster node it was assigned to: editors only (null for everyone else).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
}

/// `GET /api/openenv/runs/{id}/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunEvents {
    pub run_id: String,
    pub events: Vec<RunEvent>,
}

/// The mean reward of each optimizer step (the `updating` events' rewards): (policy_version after
/// the step, mean).
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
    fn a_step_has_a_training_signal_only_when_its_rewards_differ_and_its_update_moved() {
        let step = |rewards: Vec<Option<f64>>, grad_norm: Option<f64>| RunEvent {
            rewards: Some(rewards),
            metrics: grad_norm.map(|g| StepMetrics { grad_norm: Some(g), ..Default::default() }),
            ..event(Updating, None)
        };
        let learns = step(vec![Some(0.0), Some(1.0), Some(0.0), Some(0.5)], Some(0.3));
        assert!(had_signal(&learns));
        assert!(
            had_signal(&step(vec![Some(0.0), Some(1.0), Some(0.0), Some(0.5)], None)),
            "simulated: no metrics"
        );
        assert!(!had_signal(&step(vec![Some(0.0); 4], Some(0.0))), "four equal rewards");
        assert!(!had_signal(&step(vec![Some(0.5); 4], None)), "four equal rewards, whatever is reported");
        assert!(
            !had_signal(&step(vec![Some(0.0), Some(1.0), Some(0.0), Some(0.5)], Some(0.0))),
            "a zero gradient"
        );
        assert!(!had_signal(&step(vec![], None)), "a step that trained nothing");
        assert!(!had_signal(&RunEvent { rewards: learns.rewards.clone(), ..event(Rolling, None) }));
        let steps = [learns.clone(), step(vec![Some(1.0); 4], None), learns];
        assert_eq!(steps.iter().filter(|e| had_signal(e)).count(), 2);
    }

    #[test]
    fn states_follow_the_guides_order() {
        let path = [Starting, Loading, Rolling, Updating, Rolling, Updating, Cleanup, Completed];
        let evaluated =
            [Starting, Loading, Evaluating, Evaluating, Rolling, Updating, Evaluating, Cleanup, Completed];
        assert!(evaluated.windows(2).all(|w| w[0].may_follow_with(w[1])), "{evaluated:?}");
        assert!(!Starting.may_follow_with(Evaluating) && !Evaluating.may_follow_with(Updating));
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
            metrics: None,
            alert: None,
            trainer: None,
            evaluation: None,
            task_id: None,
            reported: None,
            ends: None,
        };
        let events = [
            e(Rolling, 0, Some(vec![Some(0.0), None, Some(1.0), Some(1.0), Some(0.0)])),
            e(Updating, 0, Some(vec![Some(0.0), Some(1.0), Some(1.0), Some(0.0)])),
            e(Updating, 1, Some(vec![Some(1.0); 4])),
        ];
        assert_eq!(reward_curve(&events), [(0, 0.5), (1, 1.0)]);
        // The curves both tracks draw: a point per step, its mean reward, with or without metrics.
        let curve = training_curve(&events);
        assert_eq!(
            curve.points.iter().map(|p| (p.step, p.metrics.reward)).collect::<Vec<_>>(),
            [(0, Some(0.5)), (1, Some(1.0))]
        );
    }

    fn event(state: RunState, alert: Option<Alert>) -> RunEvent {
        RunEvent {
            seq: 1,
            state,
            policy_version: 0,
            at: String::new(),
            rewards: None,
            message: None,
            metrics: None,
            alert,
            trainer: None,
            evaluation: None,
            task_id: None,
            reported: None,
            ends: None,
        }
    }

    #[test]
    fn an_alert_may_repeat_the_state_it_happened_in_and_nothing_else_may() {
        assert!(event(Rolling, Some(Alert::SandboxFailed)).may_follow(Rolling));
        assert!(event(Updating, Some(Alert::CleanupFailed)).may_follow(Updating));
        assert!(event(Starting, Some(Alert::TrainerRestarted)).may_follow(Starting));
        assert!(!event(Updating, None).may_follow(Updating), "an update follows a rollout");
        assert!(!event(Loading, Some(Alert::Resumed)).may_follow(Rolling), "an alert does not go back");
        assert!(!event(Completed, Some(Alert::NoUpdate)).may_follow(Completed));
        let alerted = |at: &str, alert| RunEvent {
            at: at.into(),
            message: Some(format!("{alert:?}")),
            ..event(Rolling, Some(alert))
        };
        let events =
            [alerted("1", Alert::SandboxFailed), event(Updating, None), alerted("2", Alert::NoUpdate)];
        let latest = latest_alert(&events).unwrap();
        assert_eq!(
            (latest.alert, latest.at.as_str(), latest.words.as_str()),
            (Alert::NoUpdate, "2", "a step trained nothing")
        );
    }

    #[test]
    fn the_arena_stores_only_bounded_finite_events_with_a_space_as_dashboard() {
        let info = |dashboard: &str| TrainerInfo {
            trl: "1.16.0".into(),
            transformers: "5.24.0".into(),
            torch: "2.15.0".into(),
            model: "m".into(),
            device: "cpu".into(),
            dashboard: Some(dashboard.into()),
            trackio_project: None,
        };
        let with = |t: TrainerInfo| RunEvent { trainer: Some(t), ..event(Loading, None) };
        assert!(with(info("https://huggingface.co/spaces/org/dash")).check().is_ok());
        for bad in [
            "https://evil.example/spaces/a/b",
            "https://huggingface.co/spaces/a",
            "javascript:alert(1)",
            "https://huggingface.co/spaces/a/b?x=<script>",
        ] {
            assert!(with(info(bad)).check().is_err(), "{bad}");
        }
        let nan = RunEvent {
            metrics: Some(StepMetrics { loss: Some(f64::NAN), ..Default::default() }),
            ..event(Updating, None)
        };
        assert!(nan.check().is_err());
        let long = RunEvent { message: Some("x".repeat(MAX_TEXT + 1)), ..event(Rolling, None) };
        assert!(long.check().is_err());
    }
}
