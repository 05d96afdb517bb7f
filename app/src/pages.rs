use domain::registry::ChallengeStatus;
use domain::views::ChallengeView;
use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::{self, reads, ReadError};
use crate::board::{AddYourAgent, BoardLive, PAGE};
use crate::collections::CollectionList;
use crate::components::{ChallengeCard, HealthBadge, PageMeta};
use crate::results::Leaderboards;
use domain::ApiErrorBody;

/// `/`: the board, where people and agents talk, beside the open challenge and "Add your agent".
#[component]
pub fn HomePage() -> impl IntoView {
    let reads = reads();
    let session = api::session();
    let board = async move {
        let reads = reads?;
        Ok::<_, ApiErrorBody>((session.await?, reads.messages(PAGE).await?, reads.challenges().await?))
    };
    view! {
        <PageMeta title="Open Env Arena · Board" description="Open Env Arena ranks collections of RL task environments by how much they improve a model on a private held-out suite: the leaderboard, the board's messages and how to take part."/>
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
        <Suspense fallback=|| view! { <p>"Loading…"</p> }>
            {Suspend::new(async move {
                match board.await {
                    Ok((session, messages, challenges)) => view! {
                        <div class="home">
                            <div class="main-col">
                                <BoardLive session messages/>
                            </div>
                            <aside class="side-col">
                                {challenges
                                    .challenges
                                    .into_iter()
                                    .filter(|c| c.status == ChallengeStatus::Open)
                                    .map(|c| view! { <ChallengeCard challenge=c/> })
                                    .collect_view()}
                                <AddYourAgent/>
                            </aside>
                        </div>
                    }
                    .into_any(),
                    Err(error) => view! { <ReadError what="the board" error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

const STATUSES: [Option<ChallengeStatus>; 4] =
    [None, Some(ChallengeStatus::Open), Some(ChallengeStatus::Planned), Some(ChallengeStatus::Closed)];

fn filter_label(f: Option<ChallengeStatus>) -> &'static str {
    f.map_or("All", ChallengeStatus::as_str)
}

/// The status filter over the server-rendered challenge cards: it sets the list's `data-show`,
/// and the stylesheet hides the cards of other statuses, so the cards ship no code.
#[cfg_attr(feature = "arena-islands", island)]
#[cfg_attr(not(feature = "arena-islands"), component)]
fn ChallengeFilter(
    /// The status of each card, in order.
    statuses: Vec<ChallengeStatus>,
    children: Children,
) -> impl IntoView {
    let filter = RwSignal::new(None::<ChallengeStatus>);
    let shown = move || statuses.iter().filter(|s| filter.get().is_none_or(|f| f == **s)).count();
    view! {
        <div class="filters" role="group" aria-label="Filter by status">
            {STATUSES
                .into_iter()
                .map(|f| {
                    view! {
                        <button
                            class="filter"
                            class:active=move || filter.get() == f
                            aria-pressed=move || (filter.get() == f).to_string()
                            on:click=move |_| filter.set(f)
                        >
                            {filter_label(f)}
                        </button>
                    }
                })
                .collect_view()}
        </div>
        <div class="list" data-show=move || filter.get().map_or("all", ChallengeStatus::as_str)>
            {children()}
        </div>
        {move || (shown() == 0).then(|| view! {
            <p class="empty">{format!("No {} challenges.", filter_label(filter.get()))}</p>
        })}
    }
}

/// `/arena#/submissions/ID` (the guide's link form) opens that collection's page.
#[cfg_attr(feature = "arena-islands", island)]
#[cfg_attr(not(feature = "arena-islands"), component)]
fn HashRedirect() -> impl IntoView {
    Effect::new(move |_| {
        let location = window().location();
        let hash = location.hash().unwrap_or_default();
        if let Some(id) = hash.strip_prefix("#/submissions/") {
            let _ = location.replace(&format!("/arena/submissions/{id}"));
        }
    });
}

/// `/arena`: the submissions app: every submitted collection with its checks, then the challenges,
/// filterable by status. `/arena#/submissions/ID` opens a collection's page.
#[component]
pub fn ArenaPage() -> impl IntoView {
    let reads = reads();
    let challenges = async move { reads?.challenges().await };
    view! {
        <PageMeta title="Open Env Arena · Arena" description="The arena's challenges: each fixes a base model, a post-training recipe and a held-out suite; submit a collection and see how much it moves the model."/>
        <HashRedirect/>
        <CollectionList/>
        <Leaderboards/>
        <p class="track-link"><a href="/arena/openenv">"OpenEnv environments (beta)"</a>
            ": the second track, one environment as container images."</p>
        <h2>"Challenges"</h2>
        <p><code>"arena_cli.py challenges"</code> " returns the same data."</p>
        <Suspense fallback=|| view! { <p>"Loading challenges…"</p> }>
            {Suspend::new(async move {
                match challenges.await {
                    Ok(list) => {
                        let statuses = list.challenges.iter().map(|c| c.status).collect();
                        view! {
                            <ChallengeFilter statuses>
                                {list.challenges.into_iter().map(|c| view! { <ChallengeCard challenge=c/> }).collect_view()}
                            </ChallengeFilter>
                        }
                        .into_any()
                    }
                    Err(error) => view! { <ReadError what="the challenges" error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// `/arena/challenges/:id`: everything a participant needs to know about one challenge.
#[component]
pub fn ChallengePage() -> impl IntoView {
    let id = use_params_map().read_untracked().get("id").unwrap_or_default();
    let reads = reads();
    let challenge = async move { reads?.challenge(&id).await };
    view! {
        <Suspense fallback=|| view! { <p>"Loading challenge…"</p> }>
            {Suspend::new(async move {
                match challenge.await {
                    Ok(Some(c)) => {
                        let only = c.id.clone();
                        view! { <ChallengeDetail c/> <Leaderboards only/> }.into_any()
                    }
                    Ok(None) => view! { <NotFound/> }.into_any(),
                    Err(error) => view! { <ReadError what="the challenge" error/> }.into_any(),
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
        <PageMeta title=format!("Open Env Arena · {}", c.title) description=c.summary.clone() preview=c.title.clone()/>
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
                    <dd>{format!("{} s ({} s without output), its sandbox ready within {} s, on {}", r.rollout.per_attempt_timeout_s, r.rollout.idle_timeout_s, r.rollout.sandbox_setup_timeout_s, r.rollout.sandbox)}</dd>
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
                <p class="baseline-value">{match &b.reference {
                    Some(r) => format!("{:.1}% ± {:.1} over {} trials. {}", r.pass_rate_pct, r.stderr_pct, r.trials, r.harness_note),
                    None => String::new(),
                }}</p>
                {b.run_id.clone().map(|run| view! {
                    <p class="meta">"Measured in " <a href=format!("/arena/runs/{run}")>{run.clone()}</a>
                        {b.measured_at.clone().map(|at| format!(", collected {at}"))}</p>
                })}
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
        <PageMeta title="Open Env Arena · Not found" description="This page does not exist on Open Env Arena."/>
        <h1>"Not found"</h1>
        <p>"There is nothing here. " <a href="/arena">"See the challenges"</a> "."</p>
    }
}
