//! A run's cleanup that does not finish. After `CLEANUP_STALL_S` in `cleanup`, the arena counts the
//! run's sandboxes HF still lists as live (every `CLEANUP_RECOUNT_S`), and the run shows its
//! cleanup as stalled with that count. An editor may then release it: the arena cancels what is
//! left from its side, the run ends as its trainer would have ended it, its last event names the
//! release and who made it, and the cluster is told to stop.

use anyhow::Context;
use domain::ids::OpenEnvRunId;
use domain::job_labels;
use domain::openenv::controls::{self, Release};
use domain::openenv::run::OpenEnvRunView;
use domain::ErrorCode;

use crate::http::ApiError;
use crate::identity::Identity;
use crate::ports::jobs::Job;
use crate::AppState;

/// The most sandboxes one release cancels (a run plays five episodes at a time).
const MAX_CANCELS: usize = 100;

/// The run's sandboxes HF lists as live: training and evaluation sandboxes carry its label.
async fn live_sandboxes(s: &AppState, run_id: &str) -> anyhow::Result<Vec<Job>> {
    let jobs =
        s.deps.sandboxes.as_ref().context("the arena has no sandbox namespace (ARENA_SANDBOX_NAMESPACE)")?;
    let listed = jobs
        .find_by_label(job_labels::RUN, &job_labels::value(run_id))
        .await
        .context("listing the run's sandboxes failed")?;
    let ours = |j: &Job| {
        j.labels.get(job_labels::PURPOSE).is_some_and(|p| p == job_labels::TRAIN || p == job_labels::EVAL)
    };
    Ok(listed.into_iter().filter(|j| j.status.stage.is_live() && ours(j)).collect())
}

/// The worker's pass: stalled cleanups counted again.
pub async fn sweep(s: &AppState) -> anyhow::Result<usize> {
    crate::engine::pass(s, &StalledCleanups).await
}

/// Stalled cleanups, counted on the engine (`crate::engine`).
pub struct StalledCleanups;

#[async_trait::async_trait]
impl crate::engine::Track for StalledCleanups {
    type Key = String;
    const RECORD: &'static str = "OpenEnv run's cleanup";

    fn at_once(&self) -> usize {
        2
    }

    fn lease_s(&self, _: &AppState) -> i64 {
        60
    }

    async fn due(&self, s: &AppState) -> anyhow::Result<Vec<String>> {
        Ok(crate::openenv::runs::repo::stalled_cleanups(&s.db, s.now().epoch).await?)
    }

    const LEASE: crate::engine::RowLease = crate::openenv::runs::repo::LEASE;

    fn key_values(id: &String) -> Vec<&str> {
        vec![id.as_str()]
    }

    /// Counts the run's live sandboxes; one that cannot be listed is saved as unknown, and the
    /// next count comes `CLEANUP_RECOUNT_S` later.
    async fn step(&self, s: &AppState, id: &String) -> anyhow::Result<bool> {
        let left = match live_sandboxes(s, id).await {
            Ok(jobs) => Some(jobs.len() as i64),
            Err(why) => {
                tracing::warn!(run = %id, why = format!("{why:#}"), "counting a stalled cleanup's sandboxes");
                None
            }
        };
        let now = s.now();
        crate::openenv::runs::repo::save_count(&s.db, id, left, now.epoch, &now.text)
            .await
            .context("saving the count")
    }
}

/// `POST /api/openenv/runs/{id}/release`: an editor releases a stalled cleanup. Sent again after
/// it worked, it answers the run as it is.
pub async fn release(
    s: &AppState,
    me: &Identity,
    run_id: &OpenEnvRunId,
    reason: &str,
) -> Result<OpenEnvRunView, ApiError> {
    let run = crate::openenv::runs::repo::get(&s.db, run_id)
        .await?
        .filter(|r| me.editor || r.account_id == me.id)
        .ok_or_else(|| {
            ApiError::new(ErrorCode::RunNotFound, format!("you have no OpenEnv run `{run_id}`"))
        })?;
    if !me.editor {
        return Err(ApiError::new(ErrorCode::Forbidden, "only a BenchFlow editor releases a run's cleanup"));
    }
    let reason = domain::reason::check(reason).map_err(|why| ApiError::new(ErrorCode::InvalidReason, why))?;
    if run.released.is_some() {
        return crate::openenv::runs::service::view(s, me, run_id).await;
    }
    let now = s.now();
    let in_cleanup_s = run.cleanup_epoch.map_or(0, |at| now.epoch - at);
    if let Some((why, wait)) = controls::release_refusal(run.state, in_cleanup_s) {
        let refused = ApiError::new(ErrorCode::RunNotReleasable, why);
        return Err(match wait {
            Some(w) => refused.retry_after(w),
            None => refused,
        });
    }
    // What is left is canceled first: a run is released only once the arena has tried.
    let left = live_sandboxes(s, run_id).await.map_err(|why| {
        ApiError::new(
            ErrorCode::HubUnavailable,
            format!("{why:#}; nothing was changed: send the request again"),
        )
        .retry_after(30)
    })?;
    let mut canceled = 0u32;
    for job in left.iter().take(MAX_CANCELS) {
        match s.deps.sandboxes.as_ref().expect("listed above").cancel(&job.id).await {
            Ok(()) => canceled += 1,
            Err(e) => {
                tracing::warn!(run = %run_id, job = %job.id, error = %e, "canceling a sandbox on release")
            }
        }
    }
    let release = Release {
        by: me.name.clone(),
        reason: reason.clone(),
        at: now.text.clone(),
        sandboxes_canceled: canceled,
    };
    let (state, code, message) = controls::released_end(run.policy_version, &me.name, &reason, canceled);
    crate::openenv::runs::repo::end_released(&s.db, run_id, state, code, &message, &release).await?;
    s.changes.bump(crate::changes::Topic::Openenv);
    tracing::info!(run = %run_id, by = %me.name, canceled, "an OpenEnv run's stalled cleanup was released");
    crate::openenv::runs::service::view(s, me, run_id).await
}
