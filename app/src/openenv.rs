//! `/arena/openenv`: the OpenEnv track in the submissions app. Your submissions with their state,
//! slot and, per image, the pinned digest and each task's compatibility, refusals explained in
//! words; and the submit form, which runs the at-once checks that need no registry in the browser
//! before anything is sent.

use domain::openenv::SubmissionView;
use domain::ApiErrorBody;
use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{self, reads, ReadError};
use crate::board::AccountBox;
use crate::client;

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
        "OPENENV_ENDPOINT_INVALID" => "the server failed `openenv validate --url` (counts against you)",
        "IMAGE_SCHEMA_MISMATCH" => "the image's /schema differs from the submission's (counts against you)",
        "ADMISSION_EPISODE_FAILED" => {
            "the example actions did not end the episode with a reward in [0, 1] (counts against you)"
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
    let page = async move {
        let reads = reads?;
        let (connected, submissions) = reads.openenv(&parts?).await?;
        Ok::<_, ApiErrorBody>((session.await?, connected, submissions))
    };
    view! {
        <Title text="Open Env Arena · OpenEnv environments"/>
        <h1>"OpenEnv environments (beta)"</h1>
        <p class="note">
            "One environment as public container images on Docker Hub or GHCR. The arena pins each image's linux/amd64 digest, "
            "checks it in a fresh sandbox per task, and trains on it on its own H200 cluster. The rules are in "
            <a href="/AGENTS.md#openenv-environments-beta">"the guide"</a> "."
        </p>
        <Suspense fallback=|| view! { <p>"Loading…"</p> }>
            {Suspend::new(async move {
                let (session, connected, submissions) = match page.await {
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
                view! {
                    <p class=if connected { "cluster connected" } else { "cluster disconnected" }>{status}</p>
                    <AccountBox session return_to/>
                    {match csrf {
                        Some(csrf) => view! {
                            <h2>"Your submissions"</h2>
                            {if submissions.is_empty() {
                                view! { <p class="note">"None yet."</p> }.into_any()
                            } else {
                                view! { <ul class="openenv-submissions">
                                    {submissions.into_iter().map(|s| view! { <SubmissionCard s/> }).collect_view()}
                                </ul> }.into_any()
                            }}
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

#[component]
fn SubmissionCard(s: SubmissionView) -> impl IntoView {
    let errors = s.report.errors.clone();
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
            {(s.state == "validating").then(|| view! {
                <p class="note">"Admission probes each task in a fresh sandbox; this page shows the outcome when it is in."</p>
            })}
            <ul class="errors">
                {errors.into_iter().map(|e| view! {
                    <li><code>{e.code.clone()}</code> {e.task_id.map(|t| format!(" ({t})"))} ": " {e.message} " — " {explain(&e.code)}</li>
                }).collect_view()}
            </ul>
            {s.source.clone().map(|src| view! {
                <p class="meta">"Source (your claim, not checked): " <a href=src.clone() rel="external noopener nofollow">{src.clone()}</a></p>
            })}
            <table class="images">
                <thead><tr><th>"Submitted"</th><th>"Pinned (what runs)"</th><th>"Tasks"</th></tr></thead>
                <tbody>
                    {s.images.into_iter().map(|i| view! {
                        <tr>
                            <td><code>{i.submitted}</code></td>
                            <td class="resolved"><code>{i.resolved}</code>
                                {i.labels.into_iter().map(|(k, v)| view! { <br/><span class="meta">{format!("{} = {v}", k.trim_start_matches("org.opencontainers.image."))}</span> }).collect_view()}
                            </td>
                            <td>{i.compatibility.into_iter().map(|(task, c)| format!(
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

#[island]
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
