//! Reads that many requests share, kept in memory per change version (`crate::changes`): one cache
//! per shape of query, each invalidated by its topic.

use domain::board::MessagePage;
use domain::views::{BenchmarkList, BudgetView, ChallengeList, Leaderboard};

use crate::changes::{Cache, Snapshot, Topic};
use domain::collection::record::EnvironmentList;

/// The cached reads, one per shape of query.
pub struct Caches {
    /// Fixed for the life of the process: the registry does not change while it runs.
    pub benchmarks: Snapshot<BenchmarkList>,
    pub challenges: Cache<(), ChallengeList>,
    pub budget: Cache<(), BudgetView>,
    /// By (challenge, legacy, limit); only challenges of the registry are cached.
    pub environments: Cache<(Option<String>, bool, u32), EnvironmentList>,
    /// The board's unfiltered first page, by page size.
    pub board: Cache<u32, MessagePage>,
    /// Each challenge's leaderboard, pooled or on one benchmark.
    pub leaderboards: Cache<(String, Option<String>), Leaderboard>,
    /// The OpenEnv track's leaderboard: made again only when a run completes.
    pub openenv_leaderboard: Cache<(), domain::openenv::evaluation::Leaderboard>,
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
            openenv_leaderboard: Cache::new(Topic::Openenv),
        })
    }
}
