//! The capabilities the server offers, between HTTP and storage: handlers, pages and background
//! work all call these, so a rule or a query lives in one place. Reads that many requests share
//! are kept in memory per change version (`crate::changes`).

pub mod admission;
pub mod baselines;
pub mod board;
pub mod catalog;
pub mod environments;
pub mod gates;
pub mod jobs;
pub mod launch;
pub mod openenv;
pub mod openenv_runs;
pub mod reconcile;
pub mod results;
pub mod runs;

use domain::board::MessagePage;
use domain::views::{BenchmarkList, BudgetView, ChallengeList, Leaderboard};

use crate::changes::{Cache, Snapshot, Topic};
use environments::EnvironmentList;

/// The cached reads, one per shape of query.
pub struct Caches {
    /// Fixed for the life of the process: the registry does not change while it runs.
    benchmarks: Snapshot<BenchmarkList>,
    challenges: Cache<(), ChallengeList>,
    budget: Cache<(), BudgetView>,
    /// By (challenge, legacy, limit); only challenges of the registry are cached.
    environments: Cache<(Option<String>, bool, u32), EnvironmentList>,
    /// The board's unfiltered first page, by page size.
    board: Cache<u32, MessagePage>,
    /// Each challenge's leaderboard, pooled or on one benchmark.
    pub leaderboards: Cache<(String, Option<String>), Leaderboard>,
}

impl Caches {
    pub fn new(registry: &domain::Registry) -> anyhow::Result<Caches> {
        Ok(Caches {
            benchmarks: Snapshot::new(domain::catalog::benchmark_list(registry))?,
            challenges: Cache::new(Topic::Ledger),
            budget: Cache::new(Topic::Ledger),
            environments: Cache::new(Topic::Environments),
            board: Cache::new(Topic::Board),
            leaderboards: Cache::new(Topic::Results),
        })
    }
}
