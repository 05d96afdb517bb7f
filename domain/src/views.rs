//! Wire types of the read API. The server serializes them, the pages deserialize them: one
//! definition, so the two cannot disagree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::registry::{
    Baseline, ChallengeStatus, Eval, Layout, Pipeline, ProviderStatus, Rollout, ServingLayout, Training,
};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ChallengeList {
    /// Open challenges first, then planned, then closed.
    pub challenges: Vec<ChallengeView>,
}

/// A challenge as participants see it. The detail fields are present for open challenges only;
/// planned and closed ones are listed with their binding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ChallengeView {
    pub id: String,
    pub title: String,
    pub status: ChallengeStatus,
    /// The reason runs are refused, when the organizers paused them.
    pub runs_paused: Option<String>,
    pub summary: String,
    pub status_note: String,
    pub binding: Binding,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<Health>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_model: Option<BaseModelView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe: Option<RecipeView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_suite: Option<SuiteView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<MetricView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<ComputeView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_run_allocation: Option<AllocationView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<Pipeline>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Binding {
    pub model: String,
    pub method: String,
    pub suites: Vec<String>,
}

/// Whether a run would be accepted right now, and if not, why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Health {
    pub accepting_runs: bool,
    pub reason: Option<String>,
    /// Launched runs on this challenge.
    pub runs: u64,
    /// Suites this challenge scores on that this deployment has no fingerprint of: overlap with
    /// them is not checked at validation (the deployment's matter, said here and by `/api/version`).
    #[serde(default)]
    pub heldout_unchecked: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BaseModelView {
    pub id: String,
    pub repo: String,
    pub revision: String,
    pub display_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct RecipeView {
    pub id: String,
    pub name: String,
    pub algorithm: String,
    pub adapter: String,
    pub trainer: String,
    pub rollout_harness: String,
    pub derived_from: Option<String>,
    /// True while the numbers are placeholders the organizers will set.
    pub placeholder: bool,
    pub note: String,
    pub training: Training,
    pub rollout: Rollout,
    pub eval: Eval,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct SuiteView {
    pub id: String,
    pub name: String,
    pub description: String,
    pub private: bool,
    pub sealed: bool,
    /// `null` when the suite is private and this deployment does not hold its overlay.
    pub task_count: Option<usize>,
    pub described_domains: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct MetricView {
    pub name: String,
    pub unit: String,
    pub trials_per_run: u32,
    pub score: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ComputeView {
    pub provider: String,
    pub provider_status: ProviderStatus,
    pub nodes: u32,
    pub gpu_type: String,
    pub gpus: u32,
    pub max_wall_s: u32,
    pub eval_trials: u32,
    pub sandbox_concurrency: u32,
    pub layout: Layout,
    pub serving: ServingLayout,
    /// The per-run resources in one sentence.
    pub resources: String,
}

/// The reservation a run makes against the cap: flavor price × hard timeout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct AllocationView {
    /// `null` when no allocation can be quoted; `reason` says why.
    pub usd: Option<f64>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BaselineView {
    pub measured: bool,
    /// The organizers' measurement, when there is one.
    pub reference: Option<Baseline>,
    /// The arena's baseline run it was collected from (`null` when the organizers stated it in
    /// the challenge's configuration).
    pub run_id: Option<String>,
    pub measured_at: Option<String>,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BenchmarkList {
    /// The benchmark the board opens on.
    pub default: Option<String>,
    pub benchmarks: Vec<BenchmarkView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BenchmarkView {
    pub id: String,
    pub name: String,
    pub description: String,
    pub task_count: Option<usize>,
    pub sealed: bool,
    pub private: bool,
    pub default: bool,
    /// Task counts per domain, where the benchmark publishes them.
    pub domains: Option<BTreeMap<String, usize>>,
    pub described_domains: Vec<String>,
    /// Challenges that score on this benchmark.
    pub challenges: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BenchmarkDetail {
    #[serde(flatten)]
    pub benchmark: BenchmarkView,
    /// For each open challenge that scores on it, its leaderboard on this benchmark alone.
    pub leaderboards: Vec<BenchmarkLeaderboard>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BenchmarkLeaderboard {
    pub challenge_id: String,
    /// Verified results ranked by mean Δ on this benchmark; empty until a run's result is accepted.
    pub rows: Vec<LeaderboardRow>,
}

/// `GET /api/challenges/{id}/leaderboard`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Leaderboard {
    pub challenge_id: String,
    /// The benchmark ranked; `null` for a multi-suite challenge's pooled score.
    pub benchmark: Option<String>,
    /// The benchmarks the challenge scores.
    pub benchmarks: Vec<String>,
    /// The run-to-run standard deviation of Δ pooled over collections with repeat runs (pp).
    pub per_run_sd_pp: Option<f64>,
    /// Collected results still awaiting review.
    pub pending_count: u64,
    pub rows: Vec<LeaderboardRow>,
}

/// A collection on the leaderboard: ranked on the mean Δ over all of its accepted runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct LeaderboardRow {
    /// Collections with equal Δ (to a hundredth of a point) share a rank.
    pub rank: u32,
    pub environment_id: String,
    pub title: String,
    pub author: String,
    /// The mean Δ over accepted runs (pp).
    pub delta_pp: f64,
    /// sqrt(v / n): v the run-to-run variance pooled over collections with repeat runs, never
    /// below one run's own evaluation variance.
    /// Null when no run of the row has a standard error and no collection has repeats (see `results::rank`).
    pub stderr_pp: Option<f64>,
    pub verified_runs: u32,
    pub rejected_runs: u32,
    pub run_deltas_pp: Vec<f64>,
    pub run_ids: Vec<String>,
    /// Whether its 95% interval overlaps the leader's.
    pub tied_with_leader: bool,
    /// From the latest accepted run.
    pub latest_run_id: String,
    pub baseline_pass_rate: f64,
    pub after_pass_rate: f64,
    pub trials: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct TrackList {
    /// Tracks, listed under their older name.
    pub challenges: Vec<TrackView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct TrackView {
    pub id: String,
    pub name: String,
    pub description: String,
    /// A track stores collections; it cannot run anything.
    pub can_run: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Formula {
    pub models: Vec<FormulaModel>,
    pub suites: Vec<SuiteView>,
    pub recipes: Vec<RecipeView>,
    pub challenges: Vec<ChallengeView>,
    /// Submitted collections (id and title).
    pub collections: Vec<CollectionRef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct FormulaModel {
    pub id: String,
    pub repo: String,
    pub revision: String,
    pub display_name: String,
    pub max_model_len: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct CollectionRef {
    pub id: String,
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BudgetView {
    pub cap_usd: f64,
    /// The figure the launch guard enforces: max(ledger, HF records + live reservations).
    pub committed_usd: f64,
    pub remaining_usd: f64,
    /// Settled costs plus live reservations in the arena's ledger.
    pub ledger_usd: f64,
    pub live_reservations_usd: f64,
    pub live_reservations: u64,
    /// What HF's job records say was spent; `null` until job records are read.
    pub hf_recorded_usd: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct VersionView {
    /// The commit the running binary was built from.
    pub commit: String,
    /// When the binary was built (RFC 3339).
    pub build_time: String,
    /// When this server process started (RFC 3339).
    pub started_at: String,
    /// True when served files changed on disk after the server started.
    pub files_changed: bool,
    /// Held-out suites a challenge scores on that this deployment has no fingerprint of
    /// (`challenge/suite`): validation could not check overlap with them. A deployment matter, said
    /// here once, not a warning on every collection (a participant cannot fix it).
    #[serde(default)]
    pub heldout_unchecked: Vec<String>,
    /// The private overlay this process read at start from its private dataset
    /// (`ARENA_PRIVATE_REPO`); null when it reads a local directory or none.
    #[serde(default)]
    pub private_overlay: Option<OverlaySource>,
    /// Whether the SQLite database's backups to a private dataset (`ARENA_BACKUP_REPO`) are
    /// going well; null when off. Where they go and what failed are the editors'.
    #[serde(default)]
    pub backup: Option<BackupHealth>,
    /// The backups in full, for editors only (null for everyone else, and when off).
    #[serde(default)]
    pub backup_details: Option<BackupView>,
}

/// The backups' health as anyone may see it: no repository, error or run id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BackupHealth {
    /// `ok` while no try has failed since the last upload (or none was due yet); `failing` while
    /// the last try failed.
    pub state: BackupState,
    /// When that was: the last upload (`ok`; null before the first) or the last failed try.
    pub at: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum BackupState {
    Ok,
    Failing,
}

impl BackupView {
    pub fn health(&self) -> BackupHealth {
        match &self.last_error {
            Some(_) => BackupHealth { state: BackupState::Failing, at: self.last_error_at.clone() },
            None => BackupHealth { state: BackupState::Ok, at: self.last_ok_at.clone() },
        }
    }
}

/// How this server's backups go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BackupView {
    /// The private dataset snapshots go to.
    pub repo: String,
    /// Seconds between snapshots (taken only when the database changed).
    pub every_s: u64,
    /// When the last snapshot was uploaded (RFC 3339).
    pub last_ok_at: Option<String>,
    /// Why the last try failed, while it has not succeeded since; it is tried again.
    pub last_error: Option<String>,
    pub last_error_at: Option<String>,
    /// The dataset's commit of the last upload, and the snapshot's path.
    pub revision: Option<String>,
    pub snapshot: Option<String>,
    /// The snapshot this process restored the database from at start (`path@revision`).
    pub restored_from: Option<String>,
    /// Newer snapshots that restore passed over, and why (a signature or an integrity check that
    /// failed, a stamp later than the clock allows).
    #[serde(default)]
    pub restore_skipped: Vec<String>,
    /// Runs this process found again from their HF jobs (launched after the last snapshot).
    #[serde(default)]
    pub runs_found_again: Vec<String>,
    /// While runs are still to be found again (HF did not answer, or another run holds the live
    /// reservation until it ends), or a job's run could not be rebuilt: why.
    pub runs_finding: Option<String>,
}

/// A dataset at a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct OverlaySource {
    pub repo: String,
    pub revision: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct LegacyList {
    pub legacy: bool,
    pub items: Vec<serde_json::Value>,
    pub note: String,
}

/// The signed-in person as the pages need them (from the browser session).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Viewer {
    pub name: String,
    pub fullname: String,
    pub editor: bool,
    /// Sent back in `X-CSRF-Token` with every write the page makes.
    pub csrf: String,
    /// The viewer's registered agents, to post as.
    pub agents: Vec<String>,
}

/// Who is looking at the page, and whether they could sign in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionView {
    pub viewer: Option<Viewer>,
    /// Whether sign-in is configured on this deployment.
    pub sign_in: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct JobRow {
    pub job_id: String,
    /// `challenge-run`, `baseline`, or `other` for a PostTrain job the arena did not start.
    pub purpose: String,
    pub run_id: Option<String>,
    pub challenge_id: Option<String>,
    pub flavor: String,
    pub stage: String,
    pub created_at: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub running_s: f64,
    pub cost_usd: f64,
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct RelayRow {
    pub run_id: String,
    pub state: crate::runs::relay::RelayState,
    pub seen_epoch: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct JobsView {
    pub jobs: Vec<JobRow>,
    /// Exactly what the launch guard enforces: committed = max(ledger, HF's records + live).
    pub budget: BudgetView,
    /// HF's current prices per hour, by flavor.
    pub prices_usd_per_hour: BTreeMap<String, f64>,
    /// Runs whose job is connected to this arena (or reconnecting): a deploy would cut them.
    pub relays: Vec<RelayRow>,
    /// OpenEnv runs on the training cluster, not yet ended (`run_id`, `state`): a deploy would cut
    /// their events (the cluster's idle connection does not count).
    #[serde(default)]
    pub openenv_runs: Vec<(String, String)>,
    /// The OpenEnv cluster's nodes, queue and last day's use (`GET /api/openenv/capacity`).
    #[serde(default)]
    pub openenv_capacity: Option<crate::openenv::queue::CapacityView>,
    /// Held-out suites a challenge scores on without a fingerprint here (`challenge/suite`).
    #[serde(default)]
    pub heldout_unchecked: Vec<String>,
    /// The secrets the open challenges' jobs need from the arena, and whether it has each (a
    /// launch is refused naming the missing ones). Names only: values never leave the server.
    #[serde(default)]
    pub job_secrets: Vec<JobSecretRow>,
    /// Committed spend after each reservation, in the order they were made.
    pub committed_history: Vec<SpendPoint>,
    /// The database's backups (`/api/version`'s `backup`); null when off.
    #[serde(default)]
    pub backup: Option<BackupView>,
    /// Whether the OpenEnv track takes new submissions (the page pauses and resumes it).
    #[serde(default = "crate::openenv::controls::Intake::open")]
    pub intake: crate::openenv::controls::Intake,
    /// Board messages editors hid, with why and by whom.
    #[serde(default)]
    pub hidden_messages: Vec<crate::board::HiddenMessage>,
    /// The newest board messages shown (the page offers to hide each).
    #[serde(default)]
    pub recent_messages: Vec<crate::board::Message>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct JobSecretRow {
    pub name: String,
    /// The open challenges whose jobs need it.
    pub needed_by: Vec<String>,
    /// Whether the arena has a value for it.
    pub configured: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct SpendPoint {
    pub at: String,
    pub committed_usd: f64,
}

/// A reservation of the ledger, with the run it is for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Reservation {
    pub run_id: Option<String>,
    pub challenge_id: String,
    pub amount_usd: f64,
    /// `live` (reserved before the job starts), `settled` (at what HF billed) or `released`.
    pub state: String,
    /// The run's state, when the reservation belongs to a run the arena knows.
    pub run_state: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}
