//! The public catalogue: challenges with their live health, benchmarks, the budget, the formula.

use domain::catalog::{self, LiveState};
use domain::views::{BenchmarkDetail, BenchmarkList, BudgetView, ChallengeList, ChallengeView, Formula};
use domain::ErrorCode;

use crate::changes::Snapshot;
use crate::http::ApiError;
use crate::{repo, AppState};

async fn live(s: &AppState) -> Result<LiveState, ApiError> {
    Ok(repo::budget::live_state(&s.db, &s.registry).await?)
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

pub async fn challenge(s: &AppState, id: &str) -> Result<ChallengeView, ApiError> {
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

pub async fn benchmark(s: &AppState, id: &str) -> Result<BenchmarkDetail, ApiError> {
    let mut boards = std::collections::BTreeMap::new();
    for c in s.registry.challenges_scoring_on(id) {
        if c.spec.challenge.status == domain::registry::ChallengeStatus::Open {
            boards.insert(c.id().to_string(), super::results::benchmark_rows(s, c.id(), id).await?);
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
    let collections = repo::environments::list(&s.db, None, false, 500)
        .await?
        .into_iter()
        .map(|e| domain::views::CollectionRef { id: e.environment_id, title: e.title })
        .collect();
    Ok(catalog::formula(&s.registry, &live, collections))
}
