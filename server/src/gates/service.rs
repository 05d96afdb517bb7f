//! The dynamic gates: the plan an organizer runs, the stored static summary and verdict
//! (`gates get`), and attaching the trials (`gates attach`), which the arena judges itself against
//! the plan it derives again from the pinned commit.

use domain::collection::report::TaskStatus;
use domain::gates::dynamic::{self, EligibleTask, GateResults, Plan, PlanInput, Policy, TaskVerdict};
use domain::ids::{ChallengeId, EnvironmentId};
use domain::ErrorCode;
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::ApiError;
use crate::identity::Identity;
use crate::AppState;

/// A `gate_verdicts` row: the plan's verdicts attached to a collection on a challenge.
#[derive(Debug, Clone, Serialize, ToSchema, sqlx::FromRow)]
pub struct Verdict {
    pub plan_hash: String,
    pub attached_by: String,
    pub attached_at: String,
    #[sqlx(rename = "verdicts", try_from = "crate::db::JsonText<Vec<TaskVerdict>>")]
    pub tasks: Vec<TaskVerdict>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GatesView {
    pub environment_id: String,
    pub challenge_id: String,
    /// The static gates' summary stored at submission (`null` for records stored before it was).
    pub r#static: Option<serde_json::Value>,
    /// `null` until an organizer attaches results.
    pub verdict: Option<Verdict>,
}

/// The plan, derived from the stored validation (made from the pinned commit) and the challenge.
async fn derive(
    s: &AppState,
    challenge_id: &ChallengeId,
    environment_id: &EnvironmentId,
    policy: Policy,
) -> Result<Plan, ApiError> {
    policy.check().map_err(|m| ApiError::new(ErrorCode::InvalidPolicy, m))?;
    let c = s.registry.challenge(challenge_id).ok_or_else(|| {
        ApiError::new(
            ErrorCode::ChallengeNotFound,
            format!("no challenge `{challenge_id}`; GET /api/challenges lists them"),
        )
    })?;
    let (record, report) = crate::collections::service::get(s, environment_id).await?;
    let tasks: Vec<EligibleTask> = report
        .task_list
        .iter()
        .filter(|t| t.status == TaskStatus::Eligible)
        .map(|t| EligibleTask {
            name: t.name.clone(),
            dir: t.dir.clone(),
            identity: t.identity.clone(),
            has_oracle: t.has_oracle,
        })
        .collect();
    let model = &s.registry.models[&c.spec.challenge.model].model;
    let method = &s.registry.methods[&c.spec.challenge.method].method;
    Ok(dynamic::plan(&PlanInput {
        environment_id,
        challenge_id,
        source: &format!("{}:{}", record.repo_type, record.repo_id),
        commit: &record.commit,
        entry_path: &record.entry_path,
        gates_version: &record.gates_version,
        model: &format!("{}@{}", model.repo, model.revision),
        harness: &method.rollout_harness.to_lowercase(),
        tasks: &tasks,
        policy,
    }))
}

/// `gates plan`: the collection's author or an editor.
pub async fn plan(
    s: &AppState,
    challenge_id: &ChallengeId,
    environment_id: &EnvironmentId,
    me: &Identity,
    policy: Policy,
) -> Result<Plan, ApiError> {
    let author = crate::collections::repo::author_id(&s.db, environment_id).await?.ok_or_else(|| {
        ApiError::new(ErrorCode::EnvironmentNotFound, format!("no collection `{environment_id}`"))
    })?;
    if !(me.editor || author == me.id) {
        return Err(ApiError::new(
            ErrorCode::NotAuthorOrEditor,
            "a gate plan is for the collection's author or a BenchFlow editor",
        ));
    }
    derive(s, challenge_id, environment_id, policy).await
}

/// `gates get`: public.
pub async fn get(
    s: &AppState,
    challenge_id: &ChallengeId,
    environment_id: &EnvironmentId,
) -> Result<GatesView, ApiError> {
    s.registry.challenge(challenge_id).ok_or_else(|| {
        ApiError::new(ErrorCode::ChallengeNotFound, format!("no challenge `{challenge_id}`"))
    })?;
    let (record, report) = crate::collections::service::get(s, environment_id).await?;
    let summary = (!record.legacy)
        .then(|| serde_json::to_value(&report.quality_gates.static_.summary).unwrap_or_default());
    let verdict: Option<Verdict> = sqlx::query_as(
        "SELECT plan_hash, verdicts, attached_by, attached_at FROM gate_verdicts WHERE environment_id = $1 AND challenge_id = $2",
    )
    .bind(environment_id)
    .bind(challenge_id)
    .fetch_optional(&s.db.pool)
    .await?;
    Ok(GatesView {
        environment_id: environment_id.into(),
        challenge_id: challenge_id.into(),
        r#static: summary,
        verdict,
    })
}

/// `gates attach`: editors only. The plan is derived again (with the policy the results name) and
/// must be the one the results were made from; the arena judges the trials.
pub async fn attach(
    s: &AppState,
    challenge_id: &ChallengeId,
    environment_id: &EnvironmentId,
    me: &Identity,
    results: GateResults,
) -> Result<GatesView, ApiError> {
    if !me.editor {
        return Err(ApiError::new(ErrorCode::Forbidden, "gate results are attached by BenchFlow editors"));
    }
    if results.environment_id != environment_id {
        return Err(ApiError::new(
            ErrorCode::InvalidGateResults,
            format!("these results are for `{}`", results.environment_id),
        ));
    }
    let plan = derive(s, challenge_id, environment_id, results.policy).await?;
    if plan.plan_hash != results.plan_hash {
        return Err(ApiError::new(
            ErrorCode::PlanChanged,
            format!("the results were made from plan {}, but the plan for this collection is {}: run `gates plan` again and rerun it", results.plan_hash, plan.plan_hash),
        ));
    }
    if let Some(t) = results.tasks.iter().find(|t| !plan.tasks.iter().any(|p| p.task == t.task)) {
        return Err(ApiError::new(
            ErrorCode::InvalidGateResults,
            format!("task `{}` is not in the plan", t.task),
        ));
    }
    let verdicts = dynamic::judge(&plan, &results);
    let now = s.now().text;
    sqlx::query(
        "INSERT INTO gate_verdicts (environment_id, challenge_id, plan_hash, verdicts, attached_by, attached_at) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (environment_id, challenge_id) DO UPDATE SET \
         plan_hash = excluded.plan_hash, verdicts = excluded.verdicts, attached_by = excluded.attached_by, attached_at = excluded.attached_at",
    )
    .bind(environment_id)
    .bind(challenge_id)
    .bind(&plan.plan_hash)
    .bind(serde_json::to_string(&verdicts).map_err(ApiError::internal)?)
    .bind(&me.name)
    .bind(&now)
    .execute(&s.db.writer)
    .await?;
    get(s, challenge_id, environment_id).await
}
