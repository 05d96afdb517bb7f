//! The organizers' controls of the OpenEnv track: pausing intake (reads and admitted runs go on),
//! and releasing a run whose cleanup stalled.

use crate::invalid::Invalid;
use serde::{Deserialize, Serialize};

use super::state::RunState;
use crate::error::ErrorCode;

/// `POST /api/openenv/intake`: `{"open": false, "reason": "…"}` pauses, `{"open": true}` resumes.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IntakeChange {
    pub open: bool,
    /// Why intake pauses (1 to 500 characters): new submitters read it in the 503.
    #[serde(default)]
    pub reason: Option<String>,
}

impl IntakeChange {
    /// The reason to store: required to pause, refused when resuming.
    pub fn checked_reason(&self) -> Result<Option<String>, Invalid> {
        match (self.open, &self.reason) {
            (false, Some(r)) => crate::reason::check(r).map(Some),
            (false, None) => Err("pausing intake needs a `reason` that submitters will read".into()),
            (true, Some(_)) => Err("resuming intake takes no `reason`: send `{\"open\": true}`".into()),
            (true, None) => Ok(None),
        }
    }
}

/// Whether the track takes new submissions (`GET /api/openenv`'s `intake`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Intake {
    pub open: bool,
    /// The organizers' reason, while intake is paused.
    pub reason: Option<String>,
    /// When intake was last paused or resumed (null: never changed).
    pub since: Option<String>,
}

impl Intake {
    pub fn open() -> Intake {
        Intake { open: true, reason: None, since: None }
    }
}

/// What a client waits before sending a submission again while intake is paused.
pub const PAUSED_RETRY_S: u64 = 600;

/// The answer to a new submission while intake is paused.
pub fn paused_refusal(reason: &str) -> super::Refusal {
    super::Refusal {
        code: ErrorCode::CapacityBusy,
        message: format!(
            "the organizers paused new OpenEnv submissions: {reason}. Nothing was stored; submissions \
             already accepted go on. Send the identical request again later"
        ),
    }
}

/// A run in `cleanup` this long is shown as stalled, and an editor may release it.
pub const CLEANUP_STALL_S: i64 = 900;
/// How often the arena counts a stalled cleanup's sandboxes again.
pub const CLEANUP_RECOUNT_S: i64 = 300;

/// A run's cleanup, while it is in `cleanup` (or after an editor released it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvCleanupView))]
pub struct CleanupView {
    /// When the run entered `cleanup`.
    pub since: String,
    /// Whether it has lasted longer than 900 s (`CLEANUP_STALL_S`).
    pub stalled: bool,
    /// The run's sandboxes HF still lists as live, as the arena last counted them (null: not
    /// counted yet).
    pub sandboxes_left: Option<u32>,
    pub counted_at: Option<String>,
    /// Set once an editor released it.
    pub released: Option<Release>,
}

/// An editor's release of a stalled cleanup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvRelease))]
pub struct Release {
    pub by: String,
    pub reason: String,
    pub at: String,
    /// Sandboxes the arena canceled from its side.
    pub sandboxes_canceled: u32,
}

/// Why a run cannot be released now (`RUN_NOT_RELEASABLE`), with the seconds until it can when
/// only time is missing.
pub fn release_refusal(state: RunState, in_cleanup_s: i64) -> Option<(String, Option<u64>)> {
    if state != RunState::Cleanup {
        return Some((
            format!("only a run whose cleanup stalled can be released; this one is `{}`", state.as_str()),
            None,
        ));
    }
    let wait = CLEANUP_STALL_S - in_cleanup_s;
    (wait > 0).then(|| {
        (
            format!(
                "the run's cleanup has lasted {in_cleanup_s} s; it may be released after {CLEANUP_STALL_S} s"
            ),
            Some(wait as u64),
        )
    })
}

/// How a released run ends: as its trainer would have ended it after cleanup, `completed` when it
/// took an optimizer step (the trainer cleans up after training), else `failed`.
pub fn released_end(
    policy_version: i64,
    by: &str,
    reason: &str,
    canceled: u32,
) -> (RunState, Option<&'static str>, String) {
    let what = format!(
        "the run's stalled cleanup was released by {by} ({reason}); the arena canceled {canceled} sandbox{} left",
        if canceled == 1 { "" } else { "es" }
    );
    if policy_version > 0 {
        (
            RunState::Completed,
            None,
            format!("{what}; the run completed with {policy_version} optimizer steps"),
        )
    } else {
        let code = ErrorCode::RunTrainerFailed.as_str();
        (RunState::Failed, Some(code), format!("{code}: {what}; the run had taken no optimizer step"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(open: bool, reason: Option<&str>) -> IntakeChange {
        IntakeChange { open, reason: reason.map(String::from) }
    }

    #[test]
    fn pausing_needs_a_reason_and_resuming_takes_none() {
        assert_eq!(change(false, Some(" maintenance ")).checked_reason(), Ok(Some("maintenance".into())));
        assert!(change(false, None).checked_reason().is_err());
        assert!(change(false, Some("")).checked_reason().is_err());
        assert!(change(true, Some("x")).checked_reason().is_err());
        assert_eq!(change(true, None).checked_reason(), Ok(None));
        let r = paused_refusal("maintenance");
        assert_eq!(r.code, ErrorCode::CapacityBusy);
        assert!(r.message.contains("maintenance") && r.message.contains("Nothing was stored"));
    }

    #[test]
    fn only_a_stalled_cleanup_is_released() {
        assert!(release_refusal(RunState::Rolling, 10_000).unwrap().0.contains("`rolling`"));
        assert_eq!(release_refusal(RunState::Cleanup, 600).unwrap().1, Some(300));
        assert_eq!(release_refusal(RunState::Cleanup, CLEANUP_STALL_S), None);
    }

    #[test]
    fn a_released_run_ends_as_its_trainer_would_have() {
        let (state, code, message) = released_end(3, "ed", "HF cancel hangs", 2);
        assert_eq!((state, code), (RunState::Completed, None));
        assert!(message.contains("released by ed (HF cancel hangs)") && message.contains("2 sandboxes"));
        let (state, code, _) = released_end(0, "ed", "x", 1);
        assert_eq!((state, code), (RunState::Failed, Some("RUN_TRAINER_FAILED")));
    }
}
