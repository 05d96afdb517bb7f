//! `/arena/openenv`: the OpenEnv track in the submissions app. Your submissions with their state,
//! slot and, per image, the pinned digest and each task's compatibility, refusals explained in
//! words; and the submit form, which runs the at-once checks that need no registry in the browser
//! before anything is sent.

use domain::openenv::run::{OpenEnvRunView, RunEvent};
use domain::openenv::SubmissionView;
use domain::ApiErrorBody;
use leptos::prelude::*;
use leptos_meta::Meta;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::{self, reads, ReadError};
use crate::board::AccountBox;
use crate::client;
use crate::components::PageMeta;

/// What a code means, in the guide's words.
pub fn explain(code: &str) -> &'static str {
    match code {
        "CONTRACT_INVALID" => "a task breaks the guide's limits, or the body is not the guide's submission",
        "ENVIRONMENT_TOO_LARGE_FOR_SANDBOX" => {
            "a task asks for more than a sandbox has (16 GiB, 2 vCPU, 44 GiB of disk)"
        }
        "SCHEMA_INVALID" => {
            "the schema is not usable, or an example action does not match your action schema"
        }
        "IMAGE_REFERENCE_INVALID" => "not a registry reference (no URLs, no credentials, lower-case names)",
        "IMAGE_REGISTRY_UNSUPPORTED" => "not on Docker Hub or GHCR",
        "SUBMISSION_FORMAT_RETIRED" => {
            "it names a Space or a dataset: publish the image and submit its reference"
        }
        "IMAGE_LIMIT_EXCEEDED" => "more than 50 images",
        "IMAGE_INACCESSIBLE" => {
            "the image does not exist, the tag is missing, or it is private: make it public"
        }
        "IMAGE_PLATFORM_UNSUPPORTED" => {
            "no linux/amd64 build: rebuild with DOCKER_DEFAULT_PLATFORM=linux/amd64"
        }
        "IMAGE_MANIFEST_UNSUPPORTED" => "not an OCI or Docker v2 image",
        "IMAGE_SERVER_INVALID" => {
            "no ENTRYPOINT/CMD, or its port cannot be decided (EXPOSE one port or set server_port)"
        }
        "IMAGE_COMPRESSED_SIZE_EXCEEDED" => "over 2 GiB compressed or 128 layers",
        "SUBMISSION_SIZE_EXCEEDED" => "all images together over 32 GiB compressed (shared layers once)",
        "SUBMISSION_QUOTA_EXCEEDED" => "your account already has an accepted submission in the last 24 hours",
        "SUBMISSION_ID_REUSED" => {
            "this submission_id was used with another body: a changed submission needs a new id"
        }
        "IMAGE_UNAVAILABLE" | "REGISTRY_RATE_LIMITED" | "CAPACITY_BUSY" | "OPENENV_DISCONNECTED" => {
            "nothing was stored: send the identical request again later"
        }
        // The message says what failed; this says only what it costs (each thing said once).
        "OPENENV_ENDPOINT_INVALID"
        | "IMAGE_SCHEMA_MISMATCH"
        | "ADMISSION_EPISODE_FAILED"
        | "TASK_NOT_LISTED"
        | "FINISH_ACTION_INVALID" => "your image's doing: this counts against you",
        "RESET_IGNORES_TASK" | "FINISH_ACTION_MISSING" | "REWARD_NEVER_VARIES" => {
            "a warning: admitted all the same"
        }
        "SANDBOX_STARTUP_FAILED" | "ADMISSION_INFRASTRUCTURE_FAILURE" => {
            "our side failed; the arena retries it (does not count)"
        }
        _ => "",
    }
}

#[component]
pub fn OpenEnvPage() -> impl IntoView {
    let reads = reads();
    let session = api::session();
    let parts = api::request_parts();
    let accounts_cursor = use_query_map().with_untracked(|q| q.get("accounts"));
    let page = async move {
        let (reads, parts) = (reads?, parts?);
        let (connected, submissions) = reads.openenv(&parts).await?;
        let board = reads.openenv_leaderboard().await?;
        let accounts = reads.openenv_accounts(&parts, accounts_cursor).await?;
        let quota = reads.openenv_quota(&parts).await?;
        let intake = reads.openenv_intake().await?;
        Ok::<_, ApiErrorBody>((session.await?, connected, submissions, (board, accounts), quota, intake))
    };
    view! {
        <PageMeta title="Open Env Arena · OpenEnv environments" description="Submit an OpenEnv environment as a container image; the arena checks it, admits it in a sandbox and trains on it on its own cluster."/>
        <h1>"OpenEnv environments (beta)"</h1>
        <p class="note">
            "One environment as public container images on Docker Hub or GHCR. The arena pins each image's linux/amd64 digest, "
            "checks it in a fresh sandbox per task, and trains on it on its own H200 cluster. The rules are in "
            <a href="/AGENTS.md#openenv-environments-beta">"the guide"</a> "."
        </p>
        <Suspense fallback=|| view! { <p>"Loading…"</p> }>
            {Suspend::new(async move {
                let (session, connected, submissions, (board, accounts), quota, intake) = match page.await {
                    Ok(read) => read,
                    Err(error) => return view! { <ReadError what="the OpenEnv track" error/> }.into_any(),
                };
                let status = if connected {
                    "The training cluster is connected."
                } else {
                    "The training cluster is not connected: submissions answer 503 until it is."
                };
                let return_to = "/arena/openenv".to_string();
                let csrf = session.viewer.as_ref().map(|v| v.csrf.clone());
                let runs = submissions.clone();
                view! {
                    <p class=if connected { "cluster connected" } else { "cluster disconnected" }>{status}</p>
                    {(!intake.open).then(|| view! {
                        <p class="intake paused" role="status">{format!(
                            "The organizers paused new submissions since {}: {}. Submissions already accepted are admitted and their runs go on.",
                            intake.since.clone().unwrap_or_default(), intake.reason.clone().unwrap_or_default()
                        )}</p>
                    })}
                    <h2 id="leaderboard">"Leaderboard by submission"</h2>
                    <crate::openenv_results::OpenEnvLeaderboard board/>
                    <h2 id="by-account">"Leaderboard by participant"</h2>
                    <crate::openenv_results::OpenEnvAccountBoard page=accounts/>
                    <AgentLines/>
                    <AccountBox session return_to why="to submit an environment and follow its admission and run".to_string()/>
                    {match csrf {
                        Some(csrf) => view! {
                            <h2>"Your submissions"</h2>
                            {quota.map(|quota| view! { <crate::openenv_results::QuotaLine quota/> })}
                            {if submissions.is_empty() {
                                view! { <p class="note">"None yet."</p> }.into_any()
                            } else {
                                view! { <ul class="openenv-submissions">
                                    {submissions.into_iter().map(|s| view! { <SubmissionCard s/> }).collect_view()}
                                </ul> }.into_any()
                            }}
                            <RunList submissions=runs/>
                            <h2>"Submit"</h2>
                            <OpenEnvSubmitForm csrf/>
                        }.into_any(),
                        None => view! { <p>"Sign in to see your submissions and submit one."</p> }.into_any(),
                    }}
                }
                .into_any()
            })}
        </Suspense>
    }
}

/// How an agent uses this track: the guide's curl lines (`arena_cli.py` is for collections).
#[component]
fn AgentLines() -> impl IntoView {
    const LINES: &str = "BASE=https://openenvarena-arena.hf.space/api/openenv TOKEN=${HF_TOKEN:-$(cat \"${HF_TOKEN_PATH:-${HF_HOME:-$HOME/.cache/huggingface}/token}\")}
printf 'Authorization: Bearer %s\\n' \"$TOKEN\" |
curl -sS -H @- -H 'Content-Type: application/json' --data @submission.json \"$BASE/submissions\"
printf 'Authorization: Bearer %s\\n' \"$TOKEN\" |
curl -sS -H @- \"$BASE/submissions/my-env-v1\"
curl -sS \"$BASE/leaderboard\"";
    view! {
        <h2>"Agents"</h2>
        <p class="note">
            "This track takes no " <code>"arena_cli.py"</code> ": agents send the guide's requests with their Hugging Face token, "
            "as " <a href="/AGENTS.md#submit-and-follow-your-run">"the guide"</a> " shows:"
        </p>
        <pre class="agent-lines" tabindex="0" aria-label="The requests an agent sends"><code>{LINES}</code></pre>
    }
}

/// An admitted submission's place in line, in words.
fn queue_words(place: Option<&domain::openenv::queue::QueuePlace>) -> String {
    let Some(p) = place else {
        return "Admitted: the arena starts its run as soon as a GPU and sandboxes are free.".into();
    };
    let ahead = match p.ahead {
        0 => "next in line".to_string(),
        1 => "1 submission ahead of it".to_string(),
        n => format!("{n} submissions ahead of it"),
    };
    let when = p
        .estimated_start_at
        .as_ref()
        .map(|t| format!("; its run is expected to start by {t}"))
        .unwrap_or_else(|| "; no GPU is connected, so no start can be estimated".into());
    format!("Admitted, waiting for a GPU: position {} in the queue, {ahead}{when}.", p.position)
}

#[component]
fn SubmissionCard(s: SubmissionView) -> impl IntoView {
    let errors = s.report.errors.clone();
    let warnings = s.report.warnings.clone();
    let next_slot = s.slot.retry_after_s.map(|w| {
        format!(
            "Your next submission slot frees in {}.",
            if w >= 3600 {
                format!("{} h {} min", w / 3600, w % 3600 / 60)
            } else {
                format!("{} min", w.div_ceil(60))
            }
        )
    });
    view! {
        <li class=format!("openenv-submission state-{}", s.state) data-id=s.submission_id.clone()>
            <h3>{s.name.clone()} " " <code>{s.submission_id.clone()}</code></h3>
            <p class="meta">{format!(
                "{} · slot {} · accepted {}{}",
                s.state,
                s.slot.state,
                s.accepted_at,
                s.error_origin.as_ref().map(|o| format!(" · rejected ({o})")).unwrap_or_default()
            )}</p>
            {s.run.run_id.clone().map(|id| view! {
                <p class="run">"Run " <a href=format!("/arena/openenv/runs/{id}")><code>{id.clone()}</code></a>
                    {s.run.state.map(|st| format!(": {}", st.words()))}</p>
            })}
            {(s.state == "validated" && s.run.run_id.is_none()).then(|| view! {
                <p class="note queue">{queue_words(s.queue.as_ref())}</p>
            })}
            {(s.state == "validating").then(|| view! {
                <p class="note">"Admission probes each task in a fresh sandbox; this page shows the outcome when it is in."</p>
            })}
            <ul class="errors">
                {errors.into_iter().map(|e| view! {
                    <li><code>{e.code.clone()}</code> {e.task_id.map(|t| format!(" ({t})"))} ": " {e.message} " — " {explain(&e.code)}
                        {e.fix.map(|f| view! { <br/><span class="fix">"Next: " {f}</span> })}
                        {e.evidence.map(|v| view! {
                            <details class="evidence"><summary>"What your server answered"</summary>
                                <pre tabindex="0">{serde_json::to_string_pretty(&v).unwrap_or_default()}</pre></details>
                        })}
                    </li>
                }).collect_view()}
            </ul>
            {next_slot.map(|t| view! { <p class="note">{t}</p> })}
            {(!warnings.is_empty()).then(|| view! {
                <ul class="warnings">
                    {warnings.into_iter().map(|w| view! {
                        <li><code>{w.code.clone()}</code> {w.task_id.map(|t| format!(" ({t})"))} ": " {w.message}</li>
                    }).collect_view()}
                </ul>
            })}
            {s.source.clone().map(|src| view! {
                <p class="meta">"Source (your claim, not checked): " <a href=src.clone() rel="external noopener nofollow">{src.clone()}</a></p>
            })}
            <table class="images cards">
                <thead><tr><th>"Submitted"</th><th>"Pinned (what runs)"</th><th>"Tasks"</th></tr></thead>
                <tbody>
                    {s.images.into_iter().map(|i| view! {
                        <tr>
                            <td data-label="Submitted"><ImageName reference=i.submitted.clone()/></td>
                            <td data-label="Pinned" class="resolved"><span title=i.resolved.clone()><ImageName reference=short_digest(&i.resolved)/></span>
                                {i.labels.into_iter().map(|(k, v)| view! { <br/><span class="meta">{format!("{} = {v}", k.trim_start_matches("org.opencontainers.image."))}</span> }).collect_view()}
                            </td>
                            <td data-label="Tasks">{i.compatibility.into_iter().map(|(task, c)| format!(
                                "{task}: {}{}", c.status, c.code.map(|c| format!(" ({c})")).unwrap_or_default()
                            )).collect::<Vec<_>>().join(", ")}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </li>
    }
}

/// The parts of the answer to a submission the form shows (decoding the whole `SubmissionView` in
/// the browser cost several KB of the pages' bundle).
#[derive(serde::Deserialize, Clone)]
struct Accepted {
    submission_id: String,
    state: String,
    existing: bool,
    slot: AcceptedSlot,
    images: Vec<AcceptedImage>,
}

#[derive(serde::Deserialize, Clone)]
struct AcceptedSlot {
    state: String,
}

#[derive(serde::Deserialize, Clone)]
struct AcceptedImage {
    resolved: String,
}

/// What `POST /api/openenv/check` says of a submission before it is sent.
#[derive(serde::Deserialize, Clone)]
struct Checked {
    images: Vec<String>,
    tasks: usize,
}

#[cfg_attr(feature = "openenv-islands", island)]
#[cfg_attr(not(feature = "openenv-islands"), component)]
fn OpenEnvSubmitForm(csrf: String) -> impl IntoView {
    let text = RwSignal::new(String::new());
    let checked = RwSignal::new(None::<Result<Checked, (String, String)>>);
    let busy = RwSignal::new(false);
    let answer = RwSignal::new(None::<Result<Accepted, String>>);
    let check = {
        let csrf = csrf.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            let (csrf, json) = (csrf.clone(), text.get());
            leptos::task::spawn_local(async move {
                let r = client::call_text::<Checked>("POST", "/api/openenv/check", Some(&csrf), json).await;
                checked.set(Some(r.map_err(|e| match e {
                    client::Failure::Refused { code, message, .. } => (code, message),
                    client::Failure::Unreachable(m) => (String::new(), m),
                })));
            });
        }
    };
    let submit = move |_| {
        busy.set(true);
        let (csrf, json) = (csrf.clone(), text.get());
        leptos::task::spawn_local(async move {
            let r =
                client::call_text::<Accepted>("POST", "/api/openenv/submissions", Some(&csrf), json).await;
            answer.set(Some(r.map_err(|e| e.describe())));
            busy.set(false);
        });
    };
    view! {
        <form class="post-form openenv-form" on:submit=check>
            <label>"submission.json"
                <textarea name="submission" rows="14" prop:value=move || text.get()
                    on:input=move |ev| { text.set(event_target_value(&ev)); checked.set(None); }></textarea>
            </label>
            <div class="row">
                <button type="submit" class="check-button">"Check"</button>
                <button type="button" class="submit" on:click=submit
                    disabled=move || busy.get() || !matches!(checked.get(), Some(Ok(_)))>"Submit"</button>
            </div>
        </form>
        {move || checked.get().map(|c| match c {
            Ok(c) => view! { <p class="ok openenv-check">{format!(
                "Passes the checks that need no registry: {} task(s), image(s) {}. The images are read when you submit.",
                c.tasks,
                c.images.join(", ")
            )}</p> }.into_any(),
            Err((code, message)) => view! {
                <p class="error openenv-check"><code>{code}</code> ": " {message}</p>
            }.into_any(),
        })}
        {move || answer.get().map(|a| match a {
            Ok(s) => view! {
                <p class="ok openenv-submitted">
                    {format!("{} {}: {}, slot {}. ", if s.existing { "Already submitted" } else { "Accepted" }, s.submission_id, s.state, s.slot.state)}
                    {s.images.into_iter().map(|i| view! { <code class="resolved">{i.resolved}</code> " " }).collect_view()}
                </p>
            }.into_any(),
            Err(e) => view! { <p class="error openenv-submitted">{e}</p> }.into_any(),
        })}
    }
}

/// The runs of these submissions, newest first.
#[component]
fn RunList(submissions: Vec<SubmissionView>) -> impl IntoView {
    let runs: Vec<(String, String, String)> = submissions
        .into_iter()
        .filter_map(|s| {
            let id = s.run.run_id?;
            let state = s.run.state.map(|st| st.as_str().to_string()).unwrap_or_default();
            Some((id, s.submission_id, state))
        })
        .collect();
    (!runs.is_empty()).then(|| {
        view! {
            <h2>"Runs"</h2>
            <ul class="openenv-runs">
                {runs.into_iter().map(|(id, submission, state)| view! {
                    <li><a href=format!("/arena/openenv/runs/{id}")><code>{id.clone()}</code></a>
                        {format!(" · {submission} · {state}")}</li>
                }).collect_view()}
            </ul>
        }
    })
}

/// `/arena/openenv/runs/:id`: one run, followed live (the page reloads itself until the run ends).
#[component]
pub fn OpenEnvRunPage() -> impl IntoView {
    let id = use_params_map().read_untracked().get("id").unwrap_or_default();
    let reads = reads();
    let parts = api::request_parts();
    let shown_id = id.clone();
    let page = async move { reads?.openenv_run(&parts?, &id).await };
    view! {
        <PageMeta title=format!("Open Env Arena · OpenEnv run {shown_id}") description=format!("OpenEnv run {shown_id}: its state, optimizer steps and rewards.")/>
        <h1>"OpenEnv run " <code>{shown_id.clone()}</code></h1>
        <Suspense fallback=|| view! { <p>"Loading…"</p> }>
            {Suspend::new(async move {
                match page.await {
                    Err(error) => view! { <ReadError what="this run" error/> }.into_any(),
                    Ok(None) => view! {
                        <p>"Sign in on " <a href="/arena/openenv">"the OpenEnv page"</a> " to follow your runs."</p>
                    }.into_any(),
                    Ok(Some((run, events))) => view! { <RunDetail run events/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// A stalled or released cleanup in words (nothing for one under way as usual).
fn cleanup_words(c: domain::openenv::controls::CleanupView) -> Option<String> {
    if let Some(r) = c.released {
        return Some(format!(
            "Its stalled cleanup was released by {} at {} ({}); the arena canceled {} sandbox(es) left.",
            r.by, r.at, r.reason, r.sandboxes_canceled
        ));
    }
    c.stalled.then(|| {
        let left = match (c.sandboxes_left, c.counted_at) {
            (Some(n), Some(at)) => format!("{n} of its sandboxes were still live at {at}"),
            _ => "its sandboxes are being counted".to_string(),
        };
        format!("Its cleanup, begun at {}, has stalled: {left}. An organizer can release it.", c.since)
    })
}

#[component]
fn RunDetail(run: OpenEnvRunView, events: Vec<RunEvent>) -> impl IntoView {
    let live = !run.state.has_ended();
    view! {
        {live.then(|| view! { <Meta http_equiv="refresh" content="5"/> })}
        <p class=format!("openenv-run-state state-{}", run.state.as_str())>
            <strong>{run.state.as_str()}</strong> ": " {run.state_words.clone()}
            {format!(" · {} optimizer step(s) taken", run.policy_version)}
        </p>
        {run.alert.clone().map(|a| view! {
            <p class=format!("openenv-alert level-{}", a.level.as_str()) role="status"><strong>{a.words}</strong> {format!(" ({})", a.at)} ": " {a.message}
                {a.url.map(|u| view! { " " <a href=u rel="external noopener nofollow">"Dashboard"</a> })}</p>
        })}
        {run.trainer.clone().map(|t| view! {
            <p class="meta openenv-trainer">{format!(
                "Trained by {} on {} with TRL {}, transformers {}, torch {}",
                t.model, t.device, t.trl, t.transformers, t.torch
            )}
            {t.dashboard.map(|d| view! { " · " <a href=d.clone() rel="noopener">"Trackio dashboard"</a> })}
            </p>
        })}
        <p class="meta">{format!(
            "Submission {} by {} · handed to the cluster {} · at most {} s on one H200 from the trainer's start{}",
            run.submission_id, run.account, run.assigned_at, run.time_limit_s,
            run.ended_at.as_ref().map(|t| format!(" · ended {t}")).unwrap_or_default()
        )}</p>
        {run.error.clone().map(|e| view! {
            <p class="error">{e.code.map(|c| view! { <code>{c}</code> " " })} {e.message}</p>
        })}
        {run.cleanup.clone().and_then(cleanup_words).map(|text| view! { <p class="openenv-cleanup" role="status">{text}</p> })}
        {live.then(|| view! { <p class="note">"This page follows the run: it reloads every five seconds until the run ends."</p> })}
        <h2>"Training curves"</h2>
        <div class="curves-static"><crate::charts::TrainingCurves curve=domain::openenv::run::training_curve(&events)/></div>
        <StepTable steps=run.steps.clone()/>
        {run.evaluation.clone().map(|evaluation| view! { <crate::openenv_results::EvaluationPanel evaluation/> })}
        <h2>"Events"</h2>
        <table class="openenv-events cards">
            <thead><tr><th>"#"</th><th>"State"</th><th>"Version"</th><th>"At"</th><th>"Rewards"</th><th>"Message"</th></tr></thead>
            <tbody>
                {events.into_iter().map(|e| view! {
                    <tr class=format!("state-{}", e.state.as_str())>
                        <td data-label="#">{e.seq}</td><td data-label="State">{e.state.as_str()}</td>
                        <td data-label="Version">{e.policy_version}</td><td data-label="At">{e.at}</td>
                        <td data-label="Rewards">{e.rewards.map(|r| r.iter().map(|x| x.map_or("none".to_string(), |v| format!("{v:.2}"))).collect::<Vec<_>>().join(", "))}</td>
                        <td data-label="Message">{e.message}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

/// What the trainer measured at each optimizer step that trained.
#[component]
fn StepTable(steps: Vec<domain::openenv::run::StepView>) -> impl IntoView {
    let n = |v: Option<f64>, digits: usize| v.map_or("–".to_string(), |v| format!("{v:.digits$}"));
    (!steps.is_empty()).then(|| view! {
        <table class="openenv-steps cards">
            <thead><tr><th>"Step"</th><th>"Reward (± std)"</th><th>"Loss"</th><th>"Grad norm"</th><th>"Tokens"</th><th>"Seconds"</th><th>"Waiting for sandboxes (s)"</th><th>"Replayed"</th><th>"Invalid / budget / timeout"</th></tr></thead>
            <tbody>
                {steps.into_iter().map(|s| { let m = s.metrics; view! {
                    <tr>
                        <td data-label="Step">{s.policy_version}</td>
                        <td data-label="Reward">{format!("{} ± {}", n(m.reward, 2), n(m.reward_std, 2))}</td>
                        <td data-label="Loss">{n(m.loss, 4)}</td><td data-label="Grad norm">{n(m.grad_norm, 4)}</td>
                        <td data-label="Tokens">{n(m.completions_mean_length, 0)}</td><td data-label="Seconds">{n(m.episodes_step_s, 0)}</td>
                        <td data-label="Waiting for sandboxes">{n(m.episodes_sandbox_wait_s, 1)}</td><td data-label="Replayed">{n(m.episodes_group_retries, 0)}</td>
                        <td data-label="Ended by">{format!("{} / {} / {}", n(m.episodes_invalid_replies, 0), n(m.episodes_budget_ends, 0), n(m.episodes_timeouts, 0))}</td>
                    </tr>
                }}).collect_view()}
            </tbody>
        </table>
    })
}

/// A pinned reference with its digest cut to twelve hex digits (`…@sha256:9f2c1a0b3d4e…`); the
/// whole reference is the element's title and the API's `resolved`.
fn short_digest(resolved: &str) -> String {
    match resolved.split_once("@sha256:") {
        Some((name, hex)) if hex.len() > 12 => format!("{name}@sha256:{}…", &hex[..12]),
        _ => resolved.to_string(),
    }
}

/// An image reference that may break on a phone between its repository and its tag or digest
/// (`ghcr.io/x/env` then `@sha256:…`), never inside either.
#[component]
fn ImageName(reference: String) -> impl IntoView {
    let slash = reference.rfind('/').map_or(0, |i| i + 1);
    let cut = reference[slash..].find(['@', ':']).map_or(reference.len(), |i| slash + i);
    let (name, rest) = reference.split_at(cut);
    view! { <code>{name.to_string()}<wbr/>{rest.to_string()}</code> }
}
