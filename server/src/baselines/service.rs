//! The base model's baseline: an editor launches a measurement run (purpose `baseline`, through
//! the runs' launcher and cap), collects it with the same evidence checks as a collection's result,
//! and the challenge's `baseline` then shows the latest measurement.

use domain::ids::{ChallengeId, RunId};
use domain::results::{self, BaselineAnswer, BaselineMeasurement};
use domain::runs::{Purpose, RunState};
use domain::ErrorCode;

use crate::changes::Topic;
use crate::http::ApiError;
use crate::identity::Identity;
use crate::AppState;

/// `POST /api/challenges/{id}/baseline/{run_id}/collect`: editors only; idempotent.
pub async fn collect(
    s: &AppState,
    challenge_id: &ChallengeId,
    run_id: &RunId,
    me: &Identity,
) -> Result<BaselineMeasurement, ApiError> {
    if !me.editor {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "baseline measurements are collected by BenchFlow editors",
        ));
    }
    let run = crate::runs::service::find(s, run_id).await?;
    if run.challenge_id != challenge_id {
        return Err(ApiError::new(ErrorCode::RunNotFound, format!("no run `{run_id}` on `{challenge_id}`")));
    }
    if run.purpose != Purpose::Baseline {
        return Err(ApiError::new(
            ErrorCode::WrongRunPurpose,
            format!("{run_id} trained a collection; collect it with `result collect`"),
        ));
    }
    if let Some(stored) = crate::baselines::repo::get(&s.db, run_id).await? {
        return Ok(stored);
    }
    if run.state != RunState::Scored {
        return Err(ApiError::new(
            ErrorCode::RunNotScored,
            format!(
                "{run_id} is {}; a measurement is collected once its state is scored",
                run.state.as_str()
            ),
        ));
    }
    let challenge = s
        .registry
        .challenge(challenge_id)
        .ok_or_else(|| ApiError::new(ErrorCode::ChallengeNotFound, "no such challenge"))?;
    // Editors only collect a baseline: they see the details.
    let (verified, commit) = crate::results::service::verify_run(s, &run, true).await?;
    let results::Verified::Reference(r) = verified else {
        return Err(ApiError::internal("a baseline run verified as a collection's"));
    };
    let domain::time::Timestamp { text: now, epoch } = s.now();
    let measurement = BaselineMeasurement {
        run_id: run_id.to_string(),
        challenge_id: challenge_id.to_string(),
        harness_note: domain::catalog::harness_note(&s.registry, challenge, r.trials, run_id),
        pass_rate: r.pass_rate,
        stderr: r.stderr,
        trials: r.trials,
        per_trial: r.per_trial,
        tasks: r.tasks,
        scored_cells: r.scored_cells,
        infra_error_cells: r.infra_error_cells,
        read_commit: commit,
        collected_by: me.name.clone(),
        collected_at: now,
        existing: false,
    };
    let (inserted, stored) = crate::baselines::repo::insert(&s.db, &measurement, epoch).await?;
    // The challenges' `baseline` is cached under the ledger's topic.
    s.changes.bump(Topic::Ledger);
    Ok(BaselineMeasurement { existing: !inserted, ..stored })
}

/// `GET /api/challenges/{id}/baseline`: public.
pub async fn get(s: &AppState, challenge_id: &ChallengeId) -> Result<BaselineAnswer, ApiError> {
    let challenge = s.registry.challenge(challenge_id).ok_or_else(|| {
        ApiError::new(
            ErrorCode::ChallengeNotFound,
            format!("no challenge `{challenge_id}`; GET /api/challenges lists them"),
        )
    })?;
    let live = crate::jobs::repo::live_state(&s.db, &s.registry).await?;
    let view = domain::catalog::challenge_view(&s.registry, challenge, &live);
    Ok(BaselineAnswer {
        challenge_id: challenge_id.to_string(),
        baseline: view.baseline,
        measurements: crate::baselines::repo::list(&s.db, Some(challenge_id)).await?,
    })
}
