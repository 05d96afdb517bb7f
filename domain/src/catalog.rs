//! Builds the read API's views from the registry and the live state the server reads from its
//! database (budget, active jobs, run counts).

use std::collections::BTreeMap;

use crate::budget::cents_ceil;
use crate::registry::{Baseline, Challenge, ChallengeStatus, ProviderStatus, Registry, Suite};
use crate::views::*;

/// What the database says right now; the registry says the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveState {
    pub budget: BudgetView,
    /// The id of the arena job that is active, if any (one runs at a time across the arena).
    pub active_job: Option<String>,
    /// Launched runs per challenge id.
    pub launched_runs: BTreeMap<String, u64>,
    /// Each challenge's latest collected baseline measurement.
    pub baselines: BTreeMap<String, MeasuredBaseline>,
}

/// A baseline measurement the arena collected from one of its baseline runs.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredBaseline {
    pub reference: Baseline,
    pub run_id: String,
    pub measured_at: String,
}

/// The collection-storing tracks. A track cannot run anything.
pub fn tracks() -> TrackList {
    TrackList {
        challenges: vec![TrackView {
            id: "environments".into(),
            name: "Environments".into(),
            description: "Environment collections: task packages under envs/ (or a Harbor tasks/), pinned to one commit."
                .into(),
            can_run: false,
        }],
    }
}

pub fn is_track(id: &str) -> bool {
    tracks().challenges.iter().any(|t| t.id == id)
}

pub fn challenge_list(registry: &Registry, live: &LiveState) -> ChallengeList {
    ChallengeList {
        challenges: registry.challenges.iter().map(|c| challenge_view(registry, c, live)).collect(),
    }
}

pub fn challenge_view(registry: &Registry, challenge: &Challenge, live: &LiveState) -> ChallengeView {
    let header = &challenge.spec.challenge;
    let mut view = ChallengeView {
        id: header.id.clone(),
        title: header.title.clone(),
        status: header.status,
        runs_paused: header.runs_paused.clone(),
        summary: header.summary.clone(),
        status_note: header.status_note.clone(),
        binding: Binding {
            model: header.model.clone(),
            method: header.method.clone(),
            suites: header.suites.clone(),
        },
        health: None,
        base_model: None,
        recipe: None,
        eval_suite: None,
        metric: None,
        compute: None,
        per_run_allocation: None,
        baseline: None,
        pipeline: None,
    };
    if header.status != ChallengeStatus::Open {
        return view;
    }
    let model = &registry.models[&header.model];
    let method = &registry.methods[&header.method];
    let allocation = allocation(registry, challenge);
    view.health = Some(health(challenge, &allocation, live));
    view.base_model = Some(BaseModelView {
        id: model.model.id.clone(),
        repo: model.model.repo.clone(),
        revision: model.model.revision.clone(),
        display_name: model.model.display_name.clone(),
    });
    view.recipe = Some(recipe_view(registry, &header.method));
    view.eval_suite = header.suites.first().map(|id| suite_view(&registry.suites[id]));
    view.metric = Some(MetricView {
        name: "heldout_delta_pp".into(),
        unit: "pp".into(),
        trials_per_run: method.eval.trials,
        score: "score_v2".into(),
        description: format!(
            "Held-out pass rate after training minus before, in percentage points, over {} trial(s) per task; \
             tasks weigh the same and infrastructure-error attempts are left out.",
            method.eval.trials
        ),
    });
    view.compute = Some(compute_view(challenge));
    view.per_run_allocation = Some(allocation);
    view.baseline = Some(baseline_view(challenge, live));
    view.pipeline = Some(challenge.spec.pipeline.clone());
    view
}

/// The compute a run of the challenge gets, with its one-line summary.
fn compute_view(challenge: &Challenge) -> ComputeView {
    let compute = &challenge.spec.compute;
    ComputeView {
        provider: compute.provider.clone(),
        provider_status: compute.provider_status,
        nodes: compute.nodes,
        gpu_type: compute.gpu_type.clone(),
        gpus: compute.gpus,
        max_wall_s: compute.max_wall_s,
        eval_trials: compute.eval_trials,
        sandbox_concurrency: compute.sandbox_concurrency,
        layout: compute.layout.clone(),
        serving: challenge.serving.clone(),
        resources: format!(
            "{} node(s) of {}×{} on {}{}, {} h wall-clock limit, {} sandboxes at once, {} evaluation trial(s)",
            compute.nodes,
            compute.gpus,
            compute.gpu_type,
            compute.provider,
            if compute.provider_status == ProviderStatus::Planned { " (planned)" } else { "" },
            compute.max_wall_s as f64 / 3600.0,
            compute.sandbox_concurrency,
            compute.eval_trials
        ),
    }
}

/// The arena's latest collected measurement of the base model, else what the organizers stated
/// in the config.
fn baseline_view(challenge: &Challenge, live: &LiveState) -> BaselineView {
    let header = &challenge.spec.challenge;
    let context = "The organizers' separate measurement of the base model: context only. Δ uses each run's own held-out before.";
    match (live.baselines.get(&header.id), &challenge.spec.baseline) {
        (Some(m), _) => BaselineView {
            measured: true,
            reference: Some(m.reference.clone()),
            run_id: Some(m.run_id.clone()),
            measured_at: Some(m.measured_at.clone()),
            note: context.into(),
        },
        (None, Some(b)) => BaselineView {
            measured: true,
            reference: Some(b.clone()),
            run_id: None,
            measured_at: None,
            note: context.into(),
        },
        (None, None) => BaselineView {
            measured: false,
            reference: None,
            run_id: None,
            measured_at: None,
            note: "The base model has not been measured on the held-out suite yet.".into(),
        },
    }
}

/// The harness note of a baseline the arena measured: what was evaluated, how, and where.
pub fn harness_note(registry: &Registry, challenge: &Challenge, trials: u32, run_id: &str) -> String {
    let header = &challenge.spec.challenge;
    let model = registry.models.get(&header.model).map_or(header.model.as_str(), |m| m.model.id.as_str());
    let harness =
        registry.methods.get(&header.method).map_or("the recipe's", |m| m.method.rollout_harness.as_str());
    format!(
        "{model} with the {harness} harness on {}, {trials} trial(s), pass@1; measured by the arena in {run_id}",
        header.suites.join(" + ")
    )
}

/// The challenge's hourly price: its own `hourly_price_usd`, else its provider's price for its
/// job's flavor.
pub fn hourly_price(registry: &Registry, challenge: &Challenge) -> Option<f64> {
    let compute = &challenge.spec.compute;
    let listed =
        registry.prices.get(&compute.provider).and_then(|p| p.get(&challenge.serving.flavor)).copied();
    compute.hourly_price_usd.or(listed)
}

/// The reservation a run makes: the hourly price × the hard timeout. The price is the challenge's
/// own `hourly_price_usd` when it states one, else its provider's price for the job's flavor
/// (`[prices.PROVIDER]` in `arena.toml`).
pub fn allocation(registry: &Registry, challenge: &Challenge) -> AllocationView {
    let compute = &challenge.spec.compute;
    if compute.provider_status == ProviderStatus::Planned {
        return AllocationView {
            usd: None,
            reason: Some(format!(
                "provider `{}` is planned: the arena does not launch there yet, so no allocation is quoted",
                compute.provider
            )),
        };
    }
    let flavor = &challenge.serving.flavor;
    match hourly_price(registry, challenge) {
        Some(price) => AllocationView {
            usd: Some(cents_ceil(price * compute.max_wall_s as f64 / 3600.0) as f64 / 100.0),
            reason: None,
        },
        None => AllocationView {
            usd: None,
            reason: Some(format!(
                "no hourly price for flavor `{flavor}` on provider `{}` (arena.toml [prices])",
                compute.provider
            )),
        },
    }
}

fn health(challenge: &Challenge, allocation: &AllocationView, live: &LiveState) -> Health {
    let runs = live.launched_runs.get(challenge.id().as_str()).copied().unwrap_or(0);
    let refuse = |reason: String| Health {
        accepting_runs: false,
        reason: Some(reason),
        runs,
        heldout_unchecked: Vec::new(),
    };
    if let Some(reason) = &challenge.spec.challenge.runs_paused {
        return refuse(format!("runs are paused: {reason}"));
    }
    let Some(usd) = allocation.usd else {
        return refuse(allocation.reason.clone().unwrap_or_default());
    };
    if let Some(job) = &live.active_job {
        return refuse(format!("another arena run is active ({job}); one runs at a time"));
    }
    if usd > live.budget.remaining_usd {
        return refuse(format!(
            "the cap cannot cover a run: ${:.2} remains and a run reserves ${usd:.2}",
            live.budget.remaining_usd
        ));
    }
    Health { accepting_runs: true, reason: None, runs, heldout_unchecked: Vec::new() }
}

pub fn recipe_view(registry: &Registry, method_id: &str) -> RecipeView {
    let m = &registry.methods[method_id];
    RecipeView {
        id: m.method.id.clone(),
        name: m.method.name.clone(),
        algorithm: m.method.algorithm.clone(),
        adapter: m.method.adapter.clone(),
        trainer: m.method.trainer.clone(),
        rollout_harness: m.method.rollout_harness.clone(),
        derived_from: m.method.derived_from.clone(),
        placeholder: m.method.placeholder,
        note: m.method.note.clone(),
        training: m.training.clone(),
        rollout: m.rollout.clone(),
        eval: m.eval.clone(),
    }
}

pub fn suite_view(suite: &Suite) -> SuiteView {
    SuiteView {
        id: suite.id().to_string(),
        name: suite.header.name.clone(),
        description: suite.header.description.clone(),
        private: suite.meta.private,
        sealed: suite.meta.sealed,
        task_count: suite.task_count(),
        described_domains: suite.header.described_domains.clone(),
    }
}

pub fn benchmark_view(registry: &Registry, suite: &Suite) -> BenchmarkView {
    BenchmarkView {
        id: suite.id().to_string(),
        name: suite.header.name.clone(),
        description: suite.header.description.clone(),
        task_count: suite.task_count(),
        sealed: suite.meta.sealed,
        private: suite.meta.private,
        default: suite.meta.default,
        domains: suite.published_domain_counts(),
        described_domains: suite.header.described_domains.clone(),
        challenges: registry.challenges_scoring_on(suite.id()).map(|c| c.id().to_string()).collect(),
    }
}

pub fn benchmark_list(registry: &Registry) -> BenchmarkList {
    BenchmarkList {
        default: registry.default_suite().map(|s| s.id().to_string()),
        benchmarks: registry.suites.values().map(|s| benchmark_view(registry, s)).collect(),
    }
}

/// A benchmark with, for each open challenge scoring on it, that challenge's leaderboard on it
/// alone. No result can be verified before runs exist, so the rows are empty until then.
/// A benchmark with, for each open challenge that scores on it, that challenge's leaderboard on
/// it alone (`board` gives the rows).
pub fn benchmark_detail(
    registry: &Registry,
    id: &str,
    board: impl Fn(&str) -> Vec<crate::views::LeaderboardRow>,
) -> Option<BenchmarkDetail> {
    let suite = registry.suites.get(id)?;
    Some(BenchmarkDetail {
        benchmark: benchmark_view(registry, suite),
        leaderboards: registry
            .challenges_scoring_on(id)
            .filter(|c| c.spec.challenge.status == ChallengeStatus::Open)
            .map(|c| BenchmarkLeaderboard { challenge_id: c.id().to_string(), rows: board(c.id()) })
            .collect(),
    })
}

pub fn formula(registry: &Registry, live: &LiveState, collections: Vec<CollectionRef>) -> Formula {
    Formula {
        models: registry
            .models
            .values()
            .map(|m| FormulaModel {
                id: m.model.id.clone(),
                repo: m.model.repo.clone(),
                revision: m.model.revision.clone(),
                display_name: m.model.display_name.clone(),
                max_model_len: m.meta.serving.max_model_len,
            })
            .collect(),
        suites: registry.suites.values().map(suite_view).collect(),
        recipes: registry.methods.keys().map(|id| recipe_view(registry, id)).collect(),
        challenges: challenge_list(registry, live).challenges,
        collections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{summarize, LedgerEntry, LedgerState};

    fn registry(edit: impl Fn(&str) -> String) -> Registry {
        let files = crate::registry::shipped_files_with("challenges/openenv-9b.toml", edit);
        Registry::load(&files, &[]).unwrap()
    }

    /// The shipped challenge with runs unpaused on a connected provider at $50/h (4 h: $200).
    fn connected(s: &str) -> String {
        let start = s.find("runs_paused = ").unwrap();
        let end = start + s[start..].find('\n').unwrap() + 1;
        format!("{}{}", &s[..start], &s[end..]).replace(
            "provider_status = \"planned\"",
            "provider_status = \"connected\"\nhourly_price_usd = 50.0",
        )
    }

    fn live(cap_cents: i64, entries: &[LedgerEntry], active_job: Option<&str>) -> LiveState {
        LiveState {
            budget: summarize(cap_cents, entries, None),
            active_job: active_job.map(String::from),
            launched_runs: BTreeMap::new(),
            baselines: BTreeMap::new(),
        }
    }

    fn health_of(registry: &Registry, live: &LiveState) -> Health {
        challenge_view(registry, registry.challenge("openenv-9b").unwrap(), live).health.unwrap()
    }

    #[test]
    fn paused_runs_give_the_reason() {
        let r = registry(|s| s.to_string());
        let h = health_of(&r, &live(500_000, &[], None));
        assert!(!h.accepting_runs);
        assert!(h.reason.unwrap().starts_with("runs are paused: The arena has not measured"));
        let view = challenge_view(&r, r.challenge("openenv-9b").unwrap(), &live(500_000, &[], None));
        let allocation = view.per_run_allocation.unwrap();
        assert_eq!(allocation.usd, None);
        assert!(allocation.reason.unwrap().contains("`nebius` is planned"));
    }

    #[test]
    fn a_planned_provider_refuses_even_when_unpaused() {
        let r = registry(|s| {
            connected(s).replace("provider_status = \"connected\"", "provider_status = \"planned\"")
        });
        let h = health_of(&r, &live(500_000, &[], None));
        assert!(!h.accepting_runs);
        assert!(h.reason.unwrap().contains("is planned"));
    }

    #[test]
    fn a_connected_challenge_accepts_runs_until_a_job_is_active_or_the_cap_is_short() {
        let r = registry(connected);
        let c = r.challenge("openenv-9b").unwrap();
        assert_eq!(allocation(&r, c).usd, Some(200.0));
        assert!(health_of(&r, &live(500_000, &[], None)).accepting_runs);

        let busy = health_of(&r, &live(500_000, &[], Some("run-1")));
        assert!(!busy.accepting_runs);
        assert!(busy.reason.unwrap().contains("another arena run is active (run-1)"));

        let spent = [LedgerEntry { amount_cents: 490_000, state: LedgerState::Settled }];
        let short = health_of(&r, &live(500_000, &spent, None));
        assert!(!short.accepting_runs);
        assert!(short.reason.unwrap().contains("$100.00 remains and a run reserves $200.00"));
    }

    #[test]
    fn planned_challenges_list_only_their_binding() {
        let r = registry(|s| s.replace("status = \"open\"", "status = \"planned\""));
        let view = challenge_view(&r, r.challenge("openenv-9b").unwrap(), &live(0, &[], None));
        assert_eq!(view.binding.model, "qwen3.5-9b");
        assert!(view.health.is_none() && view.recipe.is_none() && view.compute.is_none());
        let json = serde_json::to_value(&view).unwrap();
        assert!(json.get("health").is_none());
    }

    #[test]
    fn tracks_cannot_run() {
        assert!(is_track("environments"));
        assert!(!is_track("openenv-9b"));
        assert!(tracks().challenges.iter().all(|t| !t.can_run));
    }
}
