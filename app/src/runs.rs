//! Runs in the submissions app: a collection's preflight on each open challenge with, for its
//! author or an editor, the button that launches the run; and the collection's runs.

use domain::runs::follow::{RelayState, StageSpan};
use domain::runs::{GpuSample, Preflight, RunDetail, RunEvent, RunRequest, RunState, RunView};
use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use serde::{Deserialize, Serialize};

use crate::api::{reads, ReadError};
use crate::client;
use crate::components::PageMeta;
use crate::results::ResultCard;
use domain::results::ResultView;

fn mark(ok: Option<bool>) -> (&'static str, &'static str) {
    match ok {
        Some(true) => ("ok", "check ok"),
        Some(false) => ("FAIL", "check fail"),
        None => ("skip", "check skip"),
    }
}

/// One challenge's preflight: every check, the reservation, and the launch when allowed.
#[component]
pub fn PreflightView(preflight: Preflight, csrf: Option<String>) -> impl IntoView {
    let quote = match preflight.max_compute_usd {
        Some(usd) => format!("A run reserves ${usd:.2} of the shared cap."),
        None => {
            format!("No allocation is quoted: {}", preflight.max_compute_reason.clone().unwrap_or_default())
        }
    };
    let launch = (preflight.allowed && csrf.is_some()).then(|| {
        view! {
            <LaunchRun
                challenge_id=preflight.challenge_id.clone()
                environment_id=preflight.environment_id.clone()
                csrf=csrf.clone().unwrap_or_default()
            />
        }
    });
    view! {
        <section class="card preflight" data-challenge=preflight.challenge_id.clone()>
            <h3>"Run on " <a href=format!("/arena/challenges/{}", preflight.challenge_id)>{preflight.challenge_id.clone()}</a></h3>
            <ul class="checks">
                {preflight.checks.iter().map(|c| {
                    let (label, class) = mark(c.ok);
                    view! { <li class=class><strong>{label}</strong> " " {c.name.clone()} ": " {c.detail.clone()}</li> }
                }).collect_view()}
            </ul>
            <p class="note">{quote} {format!(" {} eligible task(s) would train.", preflight.eligible_tasks)}</p>
            {match (preflight.allowed, launch) {
                (true, Some(button)) => button.into_any(),
                (true, None) => view! { <p class="note">"Sign in as its author or an editor to launch it."</p> }.into_any(),
                (false, _) => view! { <p class="note">"Not allowed now: the failed check says why."</p> }.into_any(),
            }}
        </section>
    }
}

/// What the launch button reads of the answer to a launch.
#[derive(Deserialize)]
struct Launched {
    run: LaunchedRun,
    existing: bool,
}

#[derive(Deserialize)]
struct LaunchedRun {
    run_id: String,
}

/// Launches the run. The request id is made once and kept, so pressing again after an unclear
/// answer repeats the same request and never starts a second run.
#[cfg_attr(feature = "collection-islands", island)]
#[cfg_attr(not(feature = "collection-islands"), component)]
fn LaunchRun(challenge_id: String, environment_id: String, csrf: String) -> impl IntoView {
    let request_id = StoredValue::new(client::new_request_id("run"));
    let busy = RwSignal::new(false);
    let outcome = RwSignal::new(None::<Result<(String, bool), String>>);
    let launch = move |_| {
        busy.set(true);
        let body = RunRequest {
            request_id: request_id.get_value(),
            environment_id: environment_id.clone(),
            agent_id: None,
        };
        let (csrf, url) = (csrf.clone(), format!("/api/challenges/{challenge_id}/runs"));
        leptos::task::spawn_local(async move {
            let answer = client::call::<Launched>("POST", &url, Some(&csrf), Some(&body)).await;
            outcome.set(Some(answer.map(|l| (l.run.run_id, l.existing)).map_err(|e| {
                if e.maybe_applied() {
                    format!("{}: press Launch again, it repeats the same request", e.describe())
                } else {
                    e.describe()
                }
            })));
            busy.set(false);
        });
    };
    view! {
        <button type="button" class="button launch" on:click=launch prop:disabled=move || busy.get()>"Launch the run"</button>
        {move || outcome.get().map(|o| match o {
            Ok((run, existing)) => view! {
                <p class="ok launched">
                    {if existing { "Already launched: " } else { "Launched: " }}
                    <a href=format!("/arena/runs/{run}")>{run.clone()}</a>
                </p>
            }.into_any(),
            Err(e) => view! { <p class="error">{e}</p> }.into_any(),
        })}
    }
}

/// A collection's runs, with their results once collected.
#[component]
pub fn RunList(runs: Vec<(RunView, Option<ResultView>)>) -> impl IntoView {
    if runs.is_empty() {
        return view! { <p class="empty">"No run yet."</p> }.into_any();
    }
    view! {
        <div class="table-wrap" tabindex="0" role="region" aria-label="Runs">
            <table class="runs cards">
                <thead><tr><th>"Run"</th><th>"Challenge"</th><th>"State"</th><th>"Stage"</th><th>"Job"</th><th>"Reason"</th><th>"Result"</th></tr></thead>
                <tbody>
                    {runs.into_iter().map(|(r, result)| view! {
                        <tr class=format!("run {}", r.state.as_str())>
                            <td data-label="Run"><a href=format!("/arena/runs/{}", r.run_id)>{r.run_id.clone()}</a></td>
                            <td data-label="Challenge">{r.challenge_id.clone()}</td>
                            <td data-label="State" class="state">{r.state.as_str()}</td>
                            <td data-label="Stage">{r.stage.clone().unwrap_or_else(|| "—".into())}</td>
                            <td data-label="Job">{r.status.clone()}</td>
                            <td data-label="Reason">{r.reason.clone().unwrap_or_default()}{r.platform_fault.then_some(" (platform fault)")}</td>
                            <td data-label="Result" class="num">{result.map(|x| format!("{:+.2} pp {} ({})", x.measured.delta_pp, x.measured.stderr_pp.map_or_else(|| "± n/a".to_string(), |se| format!("± {se:.2}")), x.status))}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}

/// What the run page follows live: the part of the run's JSON (`GET …/runs/{id}`) it shows.
/// Decoding only these fields keeps the page's wasm small.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LiveRun {
    state: RunState,
    stage: Option<String>,
    reason: Option<String>,
    status: String,
    platform_fault: bool,
    relay: RelayState,
    stages: Vec<StageSpan>,
    created_epoch: i64,
    now_epoch: i64,
    #[serde(default)]
    training_steps_done: Option<i64>,
    #[serde(default)]
    training_steps_planned: Option<i64>,
    #[serde(default)]
    gpu: Vec<GpuSample>,
    #[serde(default)]
    training_steps_logged: u64,
    events: Vec<RunEvent>,
}

impl LiveRun {
    fn of(d: RunDetail) -> LiveRun {
        LiveRun {
            state: d.run.state,
            stage: d.run.stage,
            reason: d.run.reason,
            status: d.run.status,
            platform_fault: d.run.platform_fault,
            relay: d.relay,
            stages: d.stages,
            created_epoch: d.created_epoch,
            now_epoch: d.now_epoch,
            training_steps_done: d.run.training_steps_done,
            training_steps_planned: d.run.training_steps_planned,
            gpu: d.gpu,
            training_steps_logged: d.training_steps_logged,
            events: d.events,
        }
    }
}

fn state_words(r: &LiveRun) -> String {
    let stage = r.stage.clone().unwrap_or_else(|| "setup".into());
    match r.state {
        RunState::Queued => format!("Queued: waiting for its HF job to start ({}).", r.status),
        RunState::Running => format!("Running: at stage {stage}."),
        RunState::Scored => "Scored: the result can be collected.".to_string(),
        RunState::Failed => format!("Failed at stage {stage}: {}", r.reason.clone().unwrap_or_default()),
        RunState::Canceled => format!("Canceled: {}", r.reason.clone().unwrap_or_default()),
    }
}

/// `/arena/runs/:id`: where the run is, in words, then its stages on one time axis, their pass
/// counts and every event; it follows the run live until it ends.
#[component]
pub fn RunPage() -> impl IntoView {
    let id = use_params_map().read_untracked().get("id").unwrap_or_default();
    let reads = reads();
    let run = async move {
        let reads = reads?;
        let Some(detail) = reads.run(&id).await? else { return Ok(None) };
        let result = reads.result(&id).await?;
        Ok::<_, domain::ApiErrorBody>(Some((detail, result)))
    };
    view! {
        <Suspense fallback=|| view! { <p>"Loading the run…"</p> }>
            {Suspend::new(async move {
                match run.await {
                    Ok(Some((d, result))) => { let curve = d.training.clone(); view! {
                        <PageMeta
                            title=format!("Run {} · Open Env Arena", d.run.run_id)
                            description=format!("Run {} on {}: {}, stage {}.", d.run.run_id, d.run.challenge_id, d.run.state.as_str(), d.run.stage.clone().unwrap_or_else(|| "not started".into()))
                        />
                        <h1>"Run " <code>{d.run.run_id.clone()}</code></h1>
                        <dl class="facts">
                            <dt>"Collection"</dt><dd>{match d.run.environment_id.clone() {
                                Some(env) => view! { <a href=format!("/arena/submissions/{env}")>{env.clone()}</a> }.into_any(),
                                None => view! { <span>"none: this run measures the base model alone (the challenge's baseline)"</span> }.into_any(),
                            }}</dd>
                            <dt>"Challenge"</dt><dd><a href=format!("/arena/challenges/{}", d.run.challenge_id)>{d.run.challenge_id.clone()}</a></dd>
                            <dt>"Launched by"</dt><dd>{d.run.author.clone()} " (request " <code>{d.run.request_key.clone()}</code> ")"</dd>
                            <dt>"Compute"</dt><dd>{format!("{}, timeout {} s, ${:.2} reserved", d.run.flavor, d.run.timeout_s, d.run.max_compute_usd)}</dd>
                            {d.run.dashboard_url.clone().map(|url| view! {
                                <dt>"Trackio"</dt><dd><a href=url rel="noopener">"this run's curves on the organizers' Trackio dashboard"</a></dd>
                            })}
                        </dl>
                        {result.map(|result| view! { <ResultCard result/> })}
                        <p class="note">"Pass counts are per task attempt over every suite and trial of a stage: a timeout the verifier scored is a failure; an infrastructure error (no scored attempt) is left out of the score. The GPU line is the mean utilisation of the job's GPUs at each reconciler pass (0 to 100%), from HF's metrics; GPUs idle with no heartbeat from the job for the challenge's silence limit stall the run. The training curves are TRL's numbers for each GRPO optimizer step (loss, the mean reward of the step's rollouts with its spread, the gradient's norm), drawn to the steps planned while the run trains."</p>
                        <RunLive url=format!("/api/challenges/{}/runs/{}", d.run.challenge_id, d.run.run_id) run=LiveRun::of(d)/>
                        <h2>"Training curves"</h2>
                        <div class="curves-static"><crate::charts::TrainingCurves curve/></div>
                    }
                    .into_any() }
                    Ok(None) => view! {
                        <PageMeta title="Open Env Arena · Not found" description="No run has this id on Open Env Arena."/>
                        <h1>"No such run"</h1>
                    }
                    .into_any(),
                    Err(error) => view! { <ReadError what="the run" error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

const FOLLOW: std::time::Duration = std::time::Duration::from_secs(2);

/// The run's live part: state, timeline and events, refreshed until the run ends.
#[cfg_attr(feature = "run-islands", island)]
#[cfg_attr(not(feature = "run-islands"), component)]
fn RunLive(url: String, run: LiveRun) -> impl IntoView {
    let fetched_at = client::now_seconds();
    let detail = RwSignal::new(run);
    // The arena's clock, moved on by the browser's between answers.
    let offset = RwSignal::new(detail.get_untracked().now_epoch as f64 - fetched_at);
    let now = RwSignal::new(detail.get_untracked().now_epoch);
    Effect::new(move |_| {
        let url = url.clone();
        let tick = move || {
            now.set((client::now_seconds() + offset.get_untracked()) as i64);
            if detail.get_untracked().state.has_ended() {
                return;
            }
            let url = url.clone();
            leptos::task::spawn_local(async move {
                if let Ok(d) = client::call::<LiveRun>("GET", &url, None, None::<&()>).await {
                    // New optimizer steps: the server draws the curves again (the page's wasm
                    // draws nothing), so the page is read again.
                    if d.training_steps_logged != detail.get_untracked().training_steps_logged {
                        client::reload();
                    }
                    offset.set(d.now_epoch as f64 - client::now_seconds());
                    detail.set(d);
                }
            });
        };
        if let Ok(handle) = set_interval_with_handle(tick, FOLLOW) {
            on_cleanup(move || handle.clear());
        }
    });
    view! {
        {move || {
            let d = detail.get();
            view! {
                <p class=format!("run-state {}", d.state.as_str())>
                    <span class=format!("badge state-{}", d.state.as_str())>{d.state.as_str()}</span> " "
                    {state_words(&d)}
                    {d.platform_fault.then(|| view! { " " <span class="badge paused platform">"platform fault"</span> })}
                </p>
                <p class="meta">{format!("HF job: {} · relay: {}", d.status, d.relay.as_str())}</p>
                {d.training_steps_done.map(|done| view! {
                    <p class="grpo">{format!("GRPO: {done} of {} optimizer steps taken.", d.training_steps_planned.unwrap_or(0))}</p>
                })}
                <Sparkline gpu=d.gpu/>
            }
        }}

        <Timeline detail now/>
        <h2>"Events"</h2>
        <ol class="events">
            {move || detail.get().events.into_iter().rev().map(|e| view! {
                <li><time>{e.at.clone()}</time> " · " <strong>{e.what.clone()}</strong> " · "
                    <span class="meta">"from " {e.by.clone()}</span>
                    {(!e.rest().is_empty()).then(|| format!(": {}", e.rest()))}</li>
            }).collect_view()}
        </ol>
    }
}

/// The job's GPUs over the last readings: their mean utilisation (0 to 100%) as the area under a
/// line, one point a reading, drawn by the style before the words (`--readings`, a `clip-path`
/// polygon): an SVG built in the island would cost the pages' wasm 0.8 KB. The words say the same.
#[component]
fn Sparkline(gpu: Vec<GpuSample>) -> impl IntoView {
    (gpu.len() > 1).then(|| {
        let n = gpu.len() as i64 - 1;
        let busy = |g: &GpuSample| i64::from(g.utilization_pct.min(100));
        let points: String =
            gpu.iter().enumerate().map(|(i, g)| format!(",{}% {}%", i as i64 * 100 / n, 100 - busy(g))).collect();
        let last = gpu[gpu.len() - 1];
        let words = format!(
            "GPUs {}% busy over the last {} readings, {} GiB in use (HF's metrics, read each pass; idle GPUs with no heartbeat stall a run)",
            busy(&last),
            gpu.len(),
            last.memory_used_mib / 1024
        );
        view! { <p class="gpu" style=format!("--readings:polygon(0% 100%{points},100% 100%)")>{words}</p> }
    })
}

/// The stages as bars on one time axis, from the run's request to now (or its end).
#[component]
fn Timeline(detail: RwSignal<LiveRun>, now: RwSignal<i64>) -> impl IntoView {
    view! {
        <div class="timeline" role="list">
            {move || {
                let d = detail.get();
                let end = if d.state.has_ended() {
                    d.stages.iter().filter_map(|s| s.finished_epoch.or(s.started_epoch)).max().unwrap_or(d.now_epoch)
                } else {
                    now.get().max(d.now_epoch)
                };
                let (t0, span) = (d.created_epoch, (end - d.created_epoch).max(1) as f64);
                d.stages.into_iter().map(|s| {
                    let pct = |t: i64| ((t - t0) as f64 / span * 100.0).clamp(0.0, 100.0);
                    let bar = s.started_epoch.map(|start| {
                        let stop = s.finished_epoch.unwrap_or(end);
                        let (left, width) = (pct(start), (pct(stop) - pct(start)).max(0.8));
                        format!("left:{left:.1}%;width:{width:.1}%")
                    });
                    let took = match (s.started_epoch, s.finished_epoch) {
                        (Some(a), Some(b)) => format!("{} s", b - a),
                        (Some(a), None) if s.status == "running" => format!("{} s so far", end - a),
                        _ => String::new(),
                    };
                    let counts = match (s.passed, s.total) {
                        (Some(p), Some(t)) => format!(
                            "{p}/{t} passed{}{}",
                            s.timeouts.filter(|n| *n > 0).map(|n| format!(", {n} timed out")).unwrap_or_default(),
                            s.errors.filter(|n| *n > 0).map(|n| format!(", {n} infrastructure errors")).unwrap_or_default()
                        ),
                        _ => String::new(),
                    };
                    view! {
                        <div class=format!("stage {}", s.status) role="listitem" data-stage=s.stage.clone()>
                            <span class="stage-name">{s.stage.clone()}</span>
                            <span class="track">{bar.map(|style| view! { <span class="bar" style=style></span> })}</span>
                            <span class="stage-facts">{took} " " {counts}</span>
                        </div>
                    }
                }).collect_view()
            }}
        </div>
    }
}
