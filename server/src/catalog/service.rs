//! The public catalogue: challenges with their live health, benchmarks, the budget, the formula.

use domain::catalog::{self, LiveState};
use domain::ids::ChallengeId;
use domain::views::{BenchmarkDetail, BenchmarkList, BudgetView, ChallengeList, ChallengeView, Formula};
use domain::ErrorCode;

use domain::agents::AgentRecord;
use serde::Serialize;
use utoipa::ToSchema;

use crate::changes::Snapshot;
use crate::http::ApiError;
use crate::AppState;

async fn live(s: &AppState) -> Result<LiveState, ApiError> {
    Ok(crate::jobs::repo::live_state(&s.db, &s.registry).await?)
}

/// Every challenge, with health from the ledger.
pub async fn challenges(s: &AppState) -> Result<Snapshot<ChallengeList>, ApiError> {
    s.caches
        .challenges
        .get(&s.changes, (), async {
            let mut list = catalog::challenge_list(&s.registry, &live(s).await?);
            for view in &mut list.challenges {
                if let (Some(health), Some(c)) = (view.health.as_mut(), s.registry.challenge(&view.id)) {
                    health.heldout_unchecked =
                        crate::heldout::unchecked(&s.fingerprints, c).into_iter().map(String::from).collect();
                }
            }
            Ok(list)
        })
        .await
}

pub async fn challenge(s: &AppState, id: &ChallengeId) -> Result<ChallengeView, ApiError> {
    challenges(s).await?.value.challenges.iter().find(|c| c.id == id).cloned().ok_or_else(|| {
        ApiError::new(
            ErrorCode::ChallengeNotFound,
            format!("no challenge `{id}`; GET /api/challenges lists them"),
        )
    })
}

pub fn benchmarks(s: &AppState) -> Snapshot<BenchmarkList> {
    s.caches.benchmarks.clone()
}

pub async fn benchmark(s: &AppState, id: &domain::ids::SuiteId) -> Result<BenchmarkDetail, ApiError> {
    let id = id.as_str();
    let mut boards = std::collections::BTreeMap::new();
    for c in s.registry.challenges_scoring_on(id) {
        if c.spec.challenge.status == domain::registry::ChallengeStatus::Open {
            boards.insert(c.id().to_string(), crate::results::service::benchmark_rows(s, c.id(), id).await?);
        }
    }
    catalog::benchmark_detail(&s.registry, id, |c| boards.get(c).cloned().unwrap_or_default()).ok_or_else(
        || {
            ApiError::new(
                ErrorCode::BenchmarkNotFound,
                format!("no benchmark `{id}`; GET /api/benchmarks lists them"),
            )
        },
    )
}

pub async fn budget(s: &AppState) -> Result<Snapshot<BudgetView>, ApiError> {
    s.caches.budget.get(&s.changes, (), async { Ok(live(s).await?.budget) }).await
}

pub async fn formula(s: &AppState) -> Result<Formula, ApiError> {
    let live = live(s).await?;
    let collections = crate::collections::repo::list(&s.db, None, false, 500)
        .await?
        .into_iter()
        .map(|e| domain::views::CollectionRef { id: e.environment_id, title: e.title })
        .collect();
    Ok(catalog::formula(&s.registry, &live, collections))
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

/// A page of `/api/discover`: agents after `after`, the challenges, the board.
pub async fn discover(
    s: &AppState,
    after: Option<&str>,
    you: Option<String>,
) -> Result<DiscoverView, ApiError> {
    if after.is_some_and(|a| a.len() > 48) {
        return Err(ApiError::new(ErrorCode::InvalidQuery, "`after` is an agent id, at most 48 characters"));
    }
    let (mut agents, agents_total) = crate::agents::service::page(s, after, DISCOVER_PAGE + 1).await?;
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
    let messages = crate::board::service::count(s).await?;
    Ok(DiscoverView {
        agents,
        agents_total,
        agents_next_after,
        challenges,
        board: DiscoverBoard { messages, list: "/api/board/messages".into() },
        you,
    })
}
