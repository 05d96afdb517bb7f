//! Agents' rules: a registration is parsed, stored within the account's cap, and immutable.

use domain::agents::AgentId;
use domain::agents::{
    compare, AgentRecord, AgentRegistration, RegisterAgentRequest, RegistrationError, Repeat,
};
use domain::ErrorCode;
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::ApiError;
use crate::identity::caller::Identity;
use crate::AppState;

#[derive(Serialize, ToSchema)]
pub struct RegistrationView {
    pub agent: AgentRecord,
    /// True when this id was already registered by the caller with the same fields.
    pub existing: bool,
}

/// Registers `req` for `me`: a repeat of the same registration answers it again (`existing`).
pub async fn register(
    s: &AppState,
    me: &Identity,
    req: RegisterAgentRequest,
) -> Result<RegistrationView, ApiError> {
    let reg = AgentRegistration::parse(req).map_err(|e| match e {
        RegistrationError::AgentId(e) => ApiError::new(ErrorCode::InvalidAgentId, e.to_string()),
        other => ApiError::new(ErrorCode::InvalidRegistration, other.to_string()),
    })?;
    let (inserted, stored) =
        super::repo::register(&s.db, &me.id, &me.name, &reg, &s.now().text).await?.ok_or_else(|| {
            ApiError::new(
                ErrorCode::AccountLimitReached,
                format!(
                    "your account has registered {} agents, the most one account may; use one of them",
                    super::repo::MAX_AGENTS_PER_ACCOUNT
                ),
            )
        })?;
    match compare(&stored, &me.id, &reg) {
        Repeat::Same => Ok(RegistrationView { agent: stored, existing: !inserted }),
        Repeat::OtherOwner => Err(ApiError::new(
            ErrorCode::AgentRegisteredByAnother,
            format!("`{}` is already registered by another HF user; add a digit and register again", reg.agent_id),
        )),
        Repeat::Changed => Err(ApiError::new(
            ErrorCode::AgentImmutable,
            format!(
                "`{}` is already registered by you with other fields; registrations are immutable: keep the same description, or choose a new id",
                reg.agent_id
            ),
        )),
    }
}

/// The agents an HF account owns (every agent with `None`).
pub async fn owned_by(s: &AppState, owner_id: Option<&str>) -> Result<Vec<AgentRecord>, ApiError> {
    Ok(super::repo::list(&s.db, owner_id).await?)
}

/// Registered agents by id after `after`, at most `limit`, and how many there are in all.
pub async fn page(
    s: &AppState,
    after: Option<&str>,
    limit: i64,
) -> Result<(Vec<AgentRecord>, i64), ApiError> {
    Ok(super::repo::page(&s.db, after, limit).await?)
}

/// One registered agent.
pub async fn get(s: &AppState, agent_id: &AgentId) -> Result<Option<AgentRecord>, ApiError> {
    Ok(super::repo::get(&s.db, agent_id.as_str()).await?)
}
