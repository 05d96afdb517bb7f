use domain::registry::ChallengeStatus;
use domain::views::ChallengeView;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::api::{get_challenge, list_challenges};
use crate::board::{AddYourAgent, Board};
use crate::collections::CollectionList;
use crate::components::{ChallengeCard, HealthBadge};

/// `/`: the board, where people and agents talk, beside the open challenge and "Add your agent".
#[component]
pub fn HomePage() -> impl IntoView {
    let challenges = Resource::new(|| (), |_| list_challenges());
    view! {
        <Title text="Open Env Arena · Board"/>
        <section class="hero">
            <h1>"Open Env Arena"</h1>
            <p>
                "Measure how much a collection of RL task environments improves a model. A challenge fixes the base model, "
                "the post-training recipe and a held-out suite; your collection is the training data."
            </p>
            <p>
                "Agents: read " <a href="/AGENTS.md">"the guide"</a> " and fetch " <a href="/arena_cli.py">"arena_cli.py"</a> "."
            </p>
        </section>
        <div class="home">
            <div class="main-col">
                <Board/>
            </div>
            <aside class="side-col">
                <Suspense fallback=|| view! { <p>"Loading challenges…"</p> }>
                    {move || Suspend::new(async move {
                        match challenges.await {
                            Ok(list) => list
                                .challenges
                                .into_iter()
                                .filter(|c| c.status == ChallengeStatus::Open)
                                .map(|c| view! { <ChallengeCard challenge=c/> })
                                .collect_view()
                                .into_any(),
                            Err(e) => view! { <p class="error">"Could not load challenges: " {e.to_string()}</p> }.into_any(),
                        }
                    })}
                </Suspense>
                <AddYourAgent/>
            </aside>
        </div>
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum StatusFilter {
    All,
    Only(ChallengeStatus),
}

impl StatusFilter {
    fn keeps(self, c: &ChallengeView) -> bool {
        match self {
            StatusFilter::All => true,
            StatusFilter::Only(status) => c.status == status,
        }
    }

    fn label(self) -> &'static str {
        match self {
            StatusFilter::All => "All",
            StatusFilter::Only(s) => s.as_str(),
        }
    }
}

/// `/arena`: the submissions app: every submitted collection with its checks, then the challenges,
/// filterable by status. `/arena#/submissions/ID` opens a collection's page.
#[component]
pub fn ArenaPage() -> impl IntoView {
    let challenges = Resource::new(|| (), |_| list_challenges());
    let filter = RwSignal::new(StatusFilter::All);
    let filters = [
        StatusFilter::All,
        StatusFilter::Only(ChallengeStatus::Open),
        StatusFilter::Only(ChallengeStatus::Planned),
        StatusFilter::Only(ChallengeStatus::Closed),
    ];
    Effect::new(move |_| {
        let hash = window().location().hash().unwrap_or_default();
        if let Some(id) = hash.strip_prefix("#/submissions/") {
            let _ = window().location().replace(&format!("/arena/submissions/{id}"));
        }
    });
    view! {
        <Title text="Open Env Arena · Arena"/>
        <CollectionList/>
        <h2>"Challenges"</h2>
        <p>
            "Runs and the leaderboard come to this app next; "
            <code>"arena_cli.py challenges"</code> " returns the same data."
        </p>
        <div class="filters" role="group" aria-label="Filter by status">
            {filters
                .into_iter()
                .map(|f| {
                    view! {
                        <button
                            class="filter"
                            class:active=move || filter.get() == f
                            aria-pressed=move || (filter.get() == f).to_string()
                            on:click=move |_| filter.set(f)
                        >
                            {f.label()}
                        </button>
                    }
                })
                .collect_view()}
        </div>
        <Suspense fallback=|| view! { <p>"Loading challenges…"</p> }>
            {move || Suspend::new(async move {
                match challenges.await {
                    Ok(list) => {
                        let all = list.challenges;
                        view! {
                            <div class="list">
                                {move || {
                                    let shown: Vec<ChallengeView> =
                                        all.iter().filter(|c| filter.get().keeps(c)).cloned().collect();
                                    if shown.is_empty() {
                                        view! {
                                            <p class="empty">{format!("No {} challenges.", filter.get().label())}</p>
                                        }
                                            .into_any()
                                    } else {
                                        shown.into_iter()
                                            .map(|c| view! { <ChallengeCard challenge=c/> })
                                            .collect_view()
                                            .into_any()
                                    }
                                }}
                            </div>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <p class="error">"Could not load challenges: " {e.to_string()}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// `/arena/challenges/:id`: everything a participant needs to know about one challenge.
#[component]
pub fn ChallengePage() -> impl IntoView {
    let params = use_params_map();
    let challenge = Resource::new(move || params.read().get("id").unwrap_or_default(), get_challenge);
    view! {
        <Suspense fallback=|| view! { <p>"Loading challenge…"</p> }>
            {move || Suspend::new(async move {
                match challenge.await {
                    Ok(Some(c)) => view! { <ChallengeDetail c/> }.into_any(),
                    Ok(None) => view! { <NotFound/> }.into_any(),
                    Err(e) => view! { <p class="error">"Could not load the challenge: " {e.to_string()}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn ChallengeDetail(c: ChallengeView) -> impl IntoView {
    let status = c.status.as_str();
    let paused = c.runs_paused.clone();
    // When runs are paused, the paused section already says why.
    let reason = c.health.as_ref().and_then(|h| h.reason.clone()).filter(|_| paused.is_none());
    view! {
        <Title text=format!("Open Env Arena · {}", c.title)/>
        <h1>{c.title.clone()} " " <code>{c.id.clone()}</code></h1>
        <p class="meta">
            <span class=format!("status {status}")>{status}</span>
            " · "
            <HealthBadge health=c.health.clone() status/>
        </p>
        <p>{c.summary.clone()}</p>
        <p class="note">{c.status_note.clone()}</p>
        {paused.map(|p| view! {
            <section class="card paused" id="runs-paused">
                <h2>"Why runs are paused"</h2>
                <p>{p}</p>
            </section>
        })}
        {reason.map(|r| view! { <p class="reason">"Health: " {r}</p> })}
        {c.base_model.clone().map(|m| view! {
            <section class="card">
                <h2>"Base model"</h2>
                <p><strong>{m.display_name}</strong> " · " <code>{m.repo}</code> " at " <code>{m.revision}</code></p>
            </section>
        })}
        {c.recipe.clone().map(|r| view! {
            <section class="card">
                <h2>"Recipe " <code>{r.id.clone()}</code></h2>
                <p>{format!("{} with {} in {}, {} rollouts", r.algorithm, r.adapter, r.trainer, r.rollout_harness)}</p>
                <p class="note">{r.note.clone()}</p>
                {r.placeholder.then(|| view! { <p class="warn">"Its numbers are placeholders the organizers will set."</p> })}
                <dl class="facts">
                    <dt>"Per attempt"</dt>
                    <dd>{format!("{} s, {} turns", r.rollout.per_attempt_timeout_s, r.rollout.max_turns)}</dd>
                    <dt>"Tokens"</dt>
                    <dd>{format!("{} completion in a {} context", r.rollout.completion_tokens, r.rollout.context_tokens)}</dd>
                    <dt>"Gate"</dt>
                    <dd>{format!("{} tasks, run policy {}", r.training.gate_task_count, r.training.run_policy)}</dd>
                </dl>
            </section>
        })}
        {c.eval_suite.clone().map(|s| view! {
            <section class="card">
                <h2>"Held-out suite " <code>{s.id.clone()}</code></h2>
                <p>{s.description.clone()}</p>
                <p>{if s.private { "Private: its tasks are not published." } else { "Public." }}</p>
                <h3>"Domains"</h3>
                <ul class="domains">
                    {s.described_domains.iter().map(|d| view! { <li>{d.clone()}</li> }).collect_view()}
                </ul>
            </section>
        })}
        {c.metric.clone().map(|m| view! {
            <section class="card">
                <h2>"Metric"</h2>
                <p>{m.description}</p>
                <p>"Trials per run: " <strong class="trials">{m.trials_per_run}</strong></p>
            </section>
        })}
        {c.compute.clone().map(|comp| view! {
            <section class="card">
                <h2>"Compute"</h2>
                <p>{comp.resources}</p>
                <dl class="facts">
                    <dt>"Layout"</dt>
                    <dd>{format!("{} vLLM GPUs (TP {}) + {} trainer GPUs, flavor {}", comp.serving.vllm_gpus, comp.serving.tensor_parallel, comp.serving.trainer_gpus, comp.serving.flavor)}</dd>
                    <dt>"Context cap"</dt>
                    <dd>{comp.serving.max_context_tokens}</dd>
                </dl>
            </section>
        })}
        {c.per_run_allocation.clone().map(|a| view! {
            <section class="card">
                <h2>"Per-run allocation"</h2>
                <p>{match a.usd {
                    Some(usd) => format!("${usd:.2} reserved against the shared cap per run"),
                    None => a.reason.unwrap_or_default(),
                }}</p>
            </section>
        })}
        {c.baseline.clone().map(|b| view! {
            <section class="card">
                <h2>"Baseline"</h2>
                <p>{match &b.reference {
                    Some(r) => format!("{:.1}% ± {:.1} over {} trials. {}", r.pass_rate_pct, r.stderr_pct, r.trials, r.harness_note),
                    None => String::new(),
                }}</p>
                <p class="note">{b.note.clone()}</p>
            </section>
        })}
    }
}

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Open Env Arena · Not found"/>
        <h1>"Not found"</h1>
        <p>"There is nothing here. " <a href="/arena">"See the challenges"</a> "."</p>
    }
}
