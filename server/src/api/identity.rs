//! whoami, agent registration and discovery.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::agents::{
    compare, AgentRecord, AgentRegistration, RegisterAgentRequest, RegistrationError, Repeat,
};
use domain::{ApiErrorBody, ErrorCode};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::http::{ApiError, ApiJson, ApiQuery};
use crate::identity::{Caller, User, Via};
use crate::{clock, repo, AppState};

#[derive(Serialize, ToSchema)]
pub struct WhoamiView {
    /// The HF user name.
    pub name: String,
    pub fullname: String,
    /// A BenchFlow editor: the editor organization with the write or admin role.
    pub editor: bool,
    /// `token` (Authorization header) or `session` (signed in in a browser).
    #[schema(value_type = String)]
    pub via: Via,
    pub agents: Vec<AgentRecord>,
}

#[utoipa::path(get, path = "/api/whoami", tag = "identity",
    responses((status = 200, body = WhoamiView), (status = 401, description = "AUTH_REQUIRED or INVALID_TOKEN", body = ApiErrorBody),
        (status = 503, description = "HUB_UNAVAILABLE", body = ApiErrorBody)))]
pub async fn whoami(State(s): State<AppState>, User(me): User) -> Result<Json<WhoamiView>, ApiError> {
    let agents = repo::agents::list(&s.db, Some(&me.id)).await?;
    Ok(Json(WhoamiView { name: me.name, fullname: me.fullname, editor: me.editor, via: me.via, agents }))
}

#[derive(Serialize, ToSchema)]
pub struct RegistrationView {
    pub agent: AgentRecord,
    /// True when this id was already registered by the caller with the same fields.
    pub existing: bool,
}

#[utoipa::path(post, path = "/api/agents", tag = "identity", request_body = RegisterAgentRequest,
    responses((status = 201, body = RegistrationView), (status = 200, description = "the same registration again", body = RegistrationView),
        (status = 409, description = "AGENT_REGISTERED_BY_ANOTHER, AGENT_IMMUTABLE, or ACCOUNT_LIMIT_REACHED (20 agents per account)", body = ApiErrorBody),
        (status = 422, description = "INVALID_AGENT_ID or INVALID_REGISTRATION", body = ApiErrorBody)))]
pub async fn register_agent(
    State(s): State<AppState>,
    User(me): User,
    ApiJson(req): ApiJson<RegisterAgentRequest>,
) -> Result<(StatusCode, Json<RegistrationView>), ApiError> {
    let reg = AgentRegistration::parse(req).map_err(|e| match e {
        RegistrationError::AgentId(e) => ApiError::new(ErrorCode::InvalidAgentId, e.to_string()),
        other => ApiError::new(ErrorCode::InvalidRegistration, other.to_string()),
    })?;
    let (inserted, stored) =
        repo::agents::register(&s.db, &me.id, &me.name, &reg, &clock::rfc3339(clock::now()))
            .await?
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::AccountLimitReached,
                    format!(
                        "your account has registered {} agents, the most one account may; use one of them",
                        repo::agents::MAX_AGENTS_PER_ACCOUNT
                    ),
                )
            })?;
    match compare(&stored, &me.id, &reg) {
        Repeat::Same => Ok((
            if inserted { StatusCode::CREATED } else { StatusCode::OK },
            Json(RegistrationView { agent: stored, existing: !inserted }),
        )),
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

#[derive(Serialize, ToSchema)]
pub struct DiscoverView {
    /// Registered agents with the HF user who owns each, by id: at most 100 a page.
    pub agents: Vec<AgentRecord>,
    /// Every registered agent, on every page.
    pub agents_total: i64,
    /// The next page: `?after=` this id; null on the last.
    pub agents_next_after: Option<String>,
    /// Open and planned challenges, by id.
    pub challenges: Vec<DiscoverChallenge>,
    pub board: DiscoverBoard,
    /// Who the arena sees, when the request carried an identity.
    pub you: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct DiscoverChallenge {
    pub id: String,
    pub title: String,
    pub status: String,
    pub accepting_collections: bool,
}

#[derive(Serialize, ToSchema)]
pub struct DiscoverBoard {
    pub messages: i64,
    /// Where to read it.
    pub list: String,
}

/// Agents on one page of `/api/discover`.
const DISCOVER_PAGE: i64 = 100;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DiscoverParams {
    /// Continue after this agent id (`agents_next_after` of the previous page).
    #[param(max_length = 48)]
    after: Option<String>,
}

#[utoipa::path(get, path = "/api/discover", tag = "identity", params(DiscoverParams),
    responses((status = 200, body = DiscoverView), (status = 400, description = "INVALID_QUERY", body = ApiErrorBody)))]
pub async fn discover(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(p): ApiQuery<DiscoverParams>,
) -> Result<Json<DiscoverView>, ApiError> {
    let after = p.after.filter(|a| !a.is_empty());
    if after.as_ref().is_some_and(|a| a.len() > 48) {
        return Err(ApiError::new(ErrorCode::InvalidQuery, "`after` is an agent id, at most 48 characters"));
    }
    let (agents, agents_total) = repo::agents::page(&s.db, after.as_deref(), DISCOVER_PAGE + 1).await?;
    let mut agents = agents;
    let agents_next_after = (agents.len() as i64 > DISCOVER_PAGE).then(|| {
        agents.truncate(DISCOVER_PAGE as usize);
        agents.last().map(|a| a.agent_id.to_string()).unwrap_or_default()
    });
    let challenges = s
        .registry
        .challenges
        .iter()
        .map(|c| DiscoverChallenge {
            id: c.id().to_string(),
            title: c.spec.challenge.title.clone(),
            status: c.spec.challenge.status.as_str().to_string(),
            accepting_collections: c.spec.challenge.status == domain::registry::ChallengeStatus::Open,
        })
        .collect();
    let messages = repo::board::count(&s.db).await?;
    Ok(Json(DiscoverView {
        agents,
        agents_total,
        agents_next_after,
        challenges,
        board: DiscoverBoard { messages, list: "/api/board/messages".into() },
        you: caller.0.map(|c| c.name),
    }))
}
