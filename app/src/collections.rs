//! Collections in the submissions app: the list `/arena` opens on, a collection's page, the submit
//! form (validate, read the findings, then submit), and a checker that runs the same checks on a
//! local folder inside the browser (the wasm build of `domain`), uploading nothing.

use domain::collection::record::{EnvironmentRecord, SubmissionDetail};
use domain::collection::report::{Report, TaskStatus};
use domain::gates::{Finding, Severity, CATALOGUE};
use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::{self, reads, ReadError};
use crate::board::AccountBox;
use crate::client;
use crate::components::PageMeta;
use crate::results::TrainingSignalView;
use crate::runs::{PreflightView, RunList};
use domain::collection::request::EnvironmentRequest;
use domain::registry::ChallengeStatus;
use domain::results::ResultView;
use domain::runs::RunView;
use domain::ApiErrorBody;
use serde::Deserialize;

fn short(commit: &str) -> &str {
    commit.get(..10).unwrap_or(commit)
}

fn severity_label(s: Severity) -> &'static str {
    match s {
        Severity::Block => "block",
        Severity::Reject => "reject",
        Severity::Controls => "controls",
        Severity::Review => "review",
    }
}

fn status_label(s: TaskStatus) -> &'static str {
    match s {
        TaskStatus::Eligible => "eligible",
        TaskStatus::Rejected => "rejected",
        TaskStatus::Blocked => "blocked",
        TaskStatus::Invalid => "invalid",
    }
}

fn meaning(code: &str) -> &'static str {
    CATALOGUE.iter().find(|(c, _, _)| *c == code).map(|(_, _, m)| *m).unwrap_or("")
}

/// The collections `/arena` opens on, each with its checks.
#[component]
pub fn CollectionList() -> impl IntoView {
    let reads = reads();
    let environments = async move {
        let reads = reads?;
        Ok::<_, ApiErrorBody>((reads.environments(200).await?, reads.latest_runs().await?))
    };
    view! {
        <section class="collections">
            <h1>"Collections"</h1>
            <p>
                <a class="button" href="/arena/submit">"Submit a collection"</a>
                " · " <a href="/arena/check">"Check a local folder"</a>
                " · agents: " <code>"arena_cli.py environments list"</code>
            </p>
            <Suspense fallback=|| view! { <p>"Loading collections…"</p> }>
                {Suspend::new(async move {
                    match environments.await {
                        Ok((list, _)) if list.is_empty() => view! { <p class="empty">"No collection has been submitted yet."</p> }.into_any(),
                        Ok((list, mut latest)) => view! {
                            <ul class="env-list">
                                {list.into_iter().map(|e| {
                                    let run = latest.remove(&e.environment_id);
                                    view! { <EnvironmentRow env=e run/> }
                                }).collect_view()}
                            </ul>
                        }
                        .into_any(),
                        Err(error) => view! { <ReadError what="the collections" error/> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn EnvironmentRow(env: EnvironmentRecord, run: Option<RunView>) -> impl IntoView {
    let href = format!("/arena/submissions/{}", env.environment_id);
    let checks = if env.valid { ("badge ok", "valid") } else { ("badge paused", "not valid") };
    view! {
        <li class="card env">
            <a class="env-title" href=href>{env.title.clone()}</a>
            " " <span class=checks.0>{checks.1}</span>
            {run.map(|r| view! {
                " " <a class=format!("badge run-latest state-{}", r.state.as_str()) href=format!("/arena/runs/{}", r.run_id)>
                    {format!("latest run: {}{}", r.state.as_str(), r.stage.map(|s| format!(" at {s}")).unwrap_or_default())}
                </a>
            })}
            <p class="meta">
                {format!("{} · {}/{} tasks eligible · {}@{}", env.author, env.eligible_tasks, env.tasks, env.repo_id, short(&env.commit))}
                {(!env.entry_path.is_empty()).then(|| format!(" · {}", env.entry_path))}
                {env.agent_id.clone().map(|a| format!(" · agent {a}"))}
            </p>
            <p class="meta">{format!("{} · {} · {}", env.environment_id, env.challenge_id, env.gates_version)}</p>
        </li>
    }
}

/// A validation report: structure, warnings, the gate summary, each task and each finding explained.
#[component]
pub fn ReportView(report: Report) -> impl IntoView {
    let s = report.quality_gates.static_.summary.clone();
    let findings = report.quality_gates.static_.findings.clone();
    let heldout = report.quality_gates.static_.heldout.clone();
    view! {
        <div class="report">
            <h2>"Validation"</h2>
            <p class="verdict">
                {if report.valid {
                    view! { <span class="badge ok">"valid"</span> }.into_any()
                } else {
                    view! { <span class="badge paused">"not valid"</span> }.into_any()
                }}
                {format!(" {} task(s), {} eligible · gates {}", report.tasks, report.eligible_tasks, report.quality_gates.static_.version)}
            </p>
            {(!report.errors.is_empty()).then(|| view! {
                <h3>"Errors"</h3>
                <ul class="issues">
                    {report.errors.iter().map(|e| view! {
                        <li class="issue error">
                            <code>{e.code.clone()}</code> " "
                            {e.file.clone().unwrap_or_default()}
                            {e.field.clone().map(|f| format!(" ({f})"))}
                            ": " {e.message.clone()}
                        </li>
                    }).collect_view()}
                </ul>
            })}
            {(!report.warnings.is_empty()).then(|| view! {
                <h3>"Warnings"</h3>
                <ul class="issues">
                    {report.warnings.iter().map(|w| view! {
                        <li class="issue warn"><code>{w.code.clone()}</code> " " {w.message.clone()}</li>
                    }).collect_view()}
                </ul>
            })}
            <h3>"Static gates"</h3>
            <dl class="facts summary">
                <dt>"Blocked"</dt><dd>{s.blocked}</dd>
                <dt>"Rejected"</dt><dd>{s.rejected}</dd>
                <dt>"Eligible"</dt><dd>{s.eligible}</dd>
                <dt>"Needs controls"</dt><dd>{s.needs_controls}</dd>
                <dt>"Review"</dt><dd>{s.review}</dd>
                <dt>"Clean"</dt><dd>{s.clean}</dd>
            </dl>
            <p class="note">
                {if heldout.is_empty() {
                    "Not compared with any held-out suite.".to_string()
                } else {
                    format!(
                        "Compared with: {}.",
                        heldout
                            .iter()
                            .map(|h| format!("{} ({}{})", h.suite, if h.sealed { "sealed" } else { "public" }, if h.evaluated { ", evaluated" } else { "" }))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }}
            </p>
            <h3>"Tasks"</h3>
            <div class="table-wrap" tabindex="0" role="region" aria-label="Tasks">
                <table class="tasks cards">
                    <thead><tr><th>"Task"</th><th>"Format"</th><th>"Status"</th><th>"Findings"</th><th>"Credit"</th><th>"Identity"</th></tr></thead>
                    <tbody>
                        {report.task_list.iter().map(|t| {
                            let format = t.format.map(|f| format!("{f:?}").to_lowercase()).unwrap_or_else(|| "?".into());
                            let credit = [
                                t.credit.author_hub.clone().or(t.credit.author_name.clone()),
                                t.credit.license.clone(),
                                t.credit.category.clone(),
                                t.credit.origin.clone(),
                            ]
                            .into_iter()
                            .map(|v| v.unwrap_or_else(|| "—".into()))
                            .collect::<Vec<_>>()
                            .join(" · ");
                            view! {
                                <tr class=format!("task {}", status_label(t.status))>
                                    <td data-label="Task">{t.name.clone()}</td>
                                    <td data-label="Format">{format}</td>
                                    <td data-label="Status" class="status">{status_label(t.status)}</td>
                                    // One code a line (the style keeps each whole: codes hold hyphens).
                                    <td data-label="Findings" class="codes">{t.findings.join("\n")}</td>
                                    <td data-label="Credit">{credit}</td>
                                    <td data-label="Identity"><code title=t.identity.clone()>{t.identity.get(..19).unwrap_or(&t.identity).to_string()} "…"</code></td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
            {(!findings.is_empty()).then(|| view! {
                <h3>"Findings"</h3>
                <ul class="findings">
                    {findings.into_iter().map(|f| view! { <FindingItem finding=f/> }).collect_view()}
                </ul>
            })}
        </div>
    }
}

#[component]
fn FindingItem(finding: Finding) -> impl IntoView {
    let sev = severity_label(finding.severity);
    view! {
        <li class=format!("finding {sev}")>
            <span class=format!("badge sev-{sev}")>{sev}</span> " "
            <code>{finding.code.clone()}</code> " "
            <strong>{finding.task.clone()}</strong>
            {finding.file.clone().map(|f| view! { " " <span class="meta">{f}</span> })}
            <p>{finding.message.clone()}</p>
            <p class="note">{meaning(&finding.code)}</p>
        </li>
    }
}

/// What the newest collected run learned from each of the collection's tasks.
fn latest_signal(runs: &[(RunView, Option<ResultView>)]) -> Option<impl IntoView> {
    // Newest first: the first collected run that trained.
    let (run, signal) = runs
        .iter()
        .find_map(|(run, result)| Some((run.run_id.clone(), result.as_ref()?.training.clone()?)))?;
    Some(view! { <TrainingSignalView signal run_id=run/> })
}

/// `/arena/submissions/:id`: a collection's tasks, findings, identities, credit and PostTrain commands.
#[component]
pub fn SubmissionPage() -> impl IntoView {
    let id = use_params_map().read_untracked().get("id").unwrap_or_default();
    let (reads, parts, session) = (reads(), api::request_parts(), api::session());
    let detail = async move {
        let reads = reads?;
        let Some(detail) = reads.submission(&id).await? else { return Ok(None) };
        let parts = parts?;
        let preflights = reads.preflights(&id, &parts).await?;
        let mut runs = Vec::new();
        for run in reads.runs_of(&id).await? {
            let result = reads.result(&run.run_id).await?;
            runs.push((run, result));
        }
        let csrf = session.await?.viewer.map(|v| v.csrf);
        let verdicts = match reads.challenge(&detail.environment.challenge_id).await? {
            Some(_) => reads.gate_verdicts(&detail.environment.challenge_id, &id).await?,
            None => None,
        };
        Ok::<_, ApiErrorBody>(Some((detail, preflights, runs, csrf, verdicts)))
    };
    view! {
        <Suspense fallback=|| view! { <p>"Loading the collection…"</p> }>
            {Suspend::new(async move {
                match detail.await {
                    Ok(Some((d, preflights, runs, csrf, verdicts))) => view! {
                        <Submission detail=d/>
                        <h2>"Dynamic gates"</h2>
                        {match verdicts {
                            None => view! { <p class="note">"No verdict attached yet: an organizer runs the plan (gates plan) and attaches its results."</p> }.into_any(),
                            Some(tasks) => view! {
                                <ul class="findings verdicts">
                                    {tasks.into_iter().map(|t| {
                                        let v = format!("{:?}", t.verdict).to_lowercase();
                                        view! {
                                            <li class=format!("finding verdict-{v}")>
                                                <span class=format!("badge verdict-{v}")>{v.clone()}</span> " " <strong>{t.task}</strong>
                                                {t.band_pass_rate.map(|r| format!(" · band pass rate {:.0}%", 100.0 * r))}
                                                <p class="note">{t.reasons.join("; ")}</p>
                                            </li>
                                        }
                                    }).collect_view()}
                                </ul>
                            }.into_any(),
                        }}
                        <h2>"Runs"</h2>
                        {latest_signal(&runs)}
                        <RunList runs/>
                        {preflights.into_iter().map(|p| view! { <PreflightView preflight=p csrf=csrf.clone()/> }).collect_view()}
                    }
                    .into_any(),
                    Ok(None) => view! {
                        <PageMeta title="Open Env Arena · Not found" description="No collection has this id on Open Env Arena."/>
                        <h1>"No such collection"</h1>
                        <p><a href="/arena">"See every collection"</a></p>
                    }
                    .into_any(),
                    Err(error) => view! { <ReadError what="the collection" error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Submission(detail: SubmissionDetail) -> impl IntoView {
    let e = detail.environment;
    let p = detail.posttrain;
    let description = format!(
        "{} tasks, {} eligible, by {} on Open Env Arena ({})",
        e.tasks, e.eligible_tasks, e.author, e.challenge_id
    );
    view! {
        <PageMeta title=format!("{} · Open Env Arena", e.title) description=description preview=e.title.clone()/>
        <h1>{e.title.clone()}</h1>
        <dl class="facts">
            <dt>"Collection"</dt><dd><code>{e.environment_id.clone()}</code></dd>
            <dt>"Author"</dt><dd>{e.author.clone()}{e.agent_id.clone().map(|a| format!(" (agent {a})"))}</dd>
            <dt>"Challenge"</dt><dd><a href=format!("/arena/challenges/{}", e.challenge_id)>{e.challenge_id.clone()}</a></dd>
            <dt>"Source"</dt><dd><a href=e.source_url.clone() rel="external noopener">{format!("{} {}", e.repo_type, e.repo_id)}</a>
                {(!e.entry_path.is_empty()).then(|| format!(" · {}", e.entry_path))}</dd>
            <dt>"Pinned commit"</dt><dd><code>{e.commit.clone()}</code>{format!(" (asked: {})", e.revision)}</dd>
            <dt>"Submitted"</dt><dd>{e.created_at.clone()}</dd>
            <dt>"Judged by"</dt><dd class="judged-by">{judged_by(&e)}</dd>
        </dl>
        {(!e.notes.is_empty()).then(|| view! { <p class="notes">{e.notes.clone()}</p> })}
        <ReportView report=detail.validation/>
        <h2>"Improve a model on it with PostTrain"</h2>
        <p class="note">
            {format!("Outside the arena, on your own Fireworks and Daytona accounts; checked with {}. ", p.checked_with)}
            {p.costs.note.clone()}
        </p>
        <pre class="commands" tabindex="0" aria-label="The PostTrain commands">{p.commands.join("\n")}</pre>
        <dl class="facts">
            <dt>"Leaky"</dt><dd>{if p.leaky.is_empty() { "none".to_string() } else { p.leaky.join(", ") }}</dd>
            <dt>"Without oracle"</dt><dd>{p.no_oracle}</dd>
            <dt>"Agent as root"</dt><dd>{if p.root { "yes (no task has a reference solution)" } else { "no" }}</dd>
        </dl>
    }
}

/// `/arena/submit`: validate first and read every finding, then submit.
#[component]
pub fn SubmitPage() -> impl IntoView {
    let reads = reads();
    let session = api::session();
    let page = async move {
        let challenges = reads?.challenges().await?;
        Ok::<_, ApiErrorBody>((session.await?, challenges))
    };
    view! {
        <PageMeta title="Open Env Arena · Submit a collection" description="Submit a collection of RL task environments, pinned at a commit of an HF dataset or a GitHub repository, to an Open Env Arena challenge."/>
        <h1>"Submit a collection"</h1>
        <p class="note">
            "The arena reads a public HF dataset (recommended) or a public GitHub repository at the revision you give, "
            "resolves it to a commit, and checks every task. Validation stores nothing; submitting pins the commit."
        </p>
        <Suspense fallback=|| view! { <p>"Loading…"</p> }>
            {Suspend::new(async move {
                let (session, list) = match page.await {
                    Ok(read) => read,
                    Err(error) => return view! { <ReadError what="the form" error/> }.into_any(),
                };
                let open: Vec<String> = list
                    .challenges
                    .into_iter()
                    .filter(|c| c.status == ChallengeStatus::Open)
                    .map(|c| c.id)
                    .collect();
                let return_to = "/arena/submit".to_string();
                match session.viewer.clone() {
                    _ if open.is_empty() => {
                        view! { <p class="note">"No challenge takes collections right now."</p> }.into_any()
                    }
                    Some(viewer) => view! {
                        <AccountBox session return_to why="to validate and submit a collection".to_string()/>
                        <SubmitForm csrf=viewer.csrf agents=viewer.agents challenges=open/>
                    }
                    .into_any(),
                    None => view! { <AccountBox session return_to why="to validate and submit a collection".to_string()/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The answer to a submit.
#[derive(Deserialize)]
struct Submitted {
    environment_id: String,
    existing: bool,
    validation: Report,
}

/// A refused submit: `VALIDATION_FAILED` carries the report.
#[derive(Deserialize)]
struct Refusal {
    validation: Report,
}

/// The report a refused submit carries (`VALIDATION_FAILED`), if it is one.
fn refused_report(e: &client::Failure) -> Option<Report> {
    match e {
        client::Failure::Refused { body, .. } => {
            serde_json::from_str::<Refusal>(body).ok().map(|r| r.validation)
        }
        client::Failure::Unreachable(_) => None,
    }
}

#[cfg_attr(feature = "submit-islands", island)]
#[cfg_attr(not(feature = "submit-islands"), component)]
fn SubmitForm(csrf: String, agents: Vec<String>, challenges: Vec<String>) -> impl IntoView {
    let challenge = RwSignal::new(challenges.first().cloned().unwrap_or_default());
    let repo_type = RwSignal::new("dataset".to_string());
    let repo_id = RwSignal::new(String::new());
    let revision = RwSignal::new("main".to_string());
    let entry_path = RwSignal::new(String::new());
    let title = RwSignal::new(String::new());
    let notes = RwSignal::new(String::new());
    let agent = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let report = RwSignal::new(None::<Report>);
    let submitted = RwSignal::new(None::<(String, bool)>);
    let request = move || EnvironmentRequest {
        agent_id: Some(agent.get()).filter(|a| !a.is_empty()),
        challenge_id: challenge.get(),
        repo_type: repo_type.get(),
        repo_id: repo_id.get().trim().to_string(),
        revision: revision.get().trim().to_string(),
        entry_path: entry_path.get().trim().to_string(),
        title: title.get(),
        notes: notes.get(),
    };
    let validate = {
        let csrf = csrf.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            submitted.set(None);
            busy.set(true);
            error.set(None);
            let (csrf, body) = (csrf.clone(), request());
            leptos::task::spawn_local(async move {
                match client::call::<Report>("POST", "/api/environments/validate", Some(&csrf), Some(&body))
                    .await
                {
                    Ok(r) => report.set(Some(r)),
                    Err(e) => error.set(Some(e.describe())),
                }
                busy.set(false);
            });
        }
    };
    let submit = move |_| {
        busy.set(true);
        error.set(None);
        let (csrf, body) = (csrf.clone(), request());
        leptos::task::spawn_local(async move {
            match client::call::<Submitted>("POST", "/api/environments", Some(&csrf), Some(&body)).await {
                Ok(answer) => {
                    report.set(Some(answer.validation));
                    submitted.set(Some((answer.environment_id, answer.existing)));
                }
                // A failed validation shows its report, which says why.
                Err(e) => match refused_report(&e) {
                    Some(r) => report.set(Some(r)),
                    None => error.set(Some(e.describe())),
                },
            }
            busy.set(false);
        });
    };
    view! {
        <form class="post-form submit-form" on:submit=validate>
            <label>"Challenge"
                <select on:change=move |ev| challenge.set(event_target_value(&ev))>
                    {challenges.into_iter().map(|c| view! { <option value=c.clone()>{c.clone()}</option> }).collect_view()}
                </select>
            </label>
            <label>"Host"
                <select on:change=move |ev| repo_type.set(event_target_value(&ev)) prop:value=move || repo_type.get()>
                    <option value="dataset">"Hugging Face dataset"</option>
                    <option value="github">"GitHub repository"</option>
                </select>
            </label>
            <label>"Repository (owner/name)" <input name="repo_id" required placeholder="YOUR_NAME/environment-pack" prop:value=move || repo_id.get() on:input=move |ev| repo_id.set(event_target_value(&ev))/></label>
            <label>"Revision" <input name="revision" prop:value=move || revision.get() on:input=move |ev| revision.set(event_target_value(&ev))/></label>
            <label>"Entry path (the directory holding submission.yaml and envs/; empty for the root)" <input name="entry_path" prop:value=move || entry_path.get() on:input=move |ev| entry_path.set(event_target_value(&ev))/></label>
            <label>"Title" <input name="title" prop:value=move || title.get() on:input=move |ev| title.set(event_target_value(&ev))/></label>
            <label>"Notes" <textarea name="notes" rows="3" prop:value=move || notes.get() on:input=move |ev| notes.set(event_target_value(&ev))></textarea></label>
            <label>"Agent"
                <select on:change=move |ev| agent.set(event_target_value(&ev))>
                    <option value="">"none (your HF identity)"</option>
                    {agents.into_iter().map(|a| view! { <option value=a.clone()>{a.clone()}</option> }).collect_view()}
                </select>
            </label>
            {view! { <div class="row">
                <button type="submit" class="validate" disabled=move || busy.get()>"Validate"</button>
                <button type="button" class="submit" on:click=submit
                    disabled=move || busy.get() || !report.get().is_some_and(|r| r.valid)>"Submit"</button>
            </div> }.into_any()}
        </form>
        <SubmitOutcome busy error submitted/>
        {move || report.get().map(|r| view! { <ReportView report=r/> })}
    }
}

/// What the submit form is doing, what went wrong, or where the submitted collection is.
#[component]
fn SubmitOutcome(
    busy: RwSignal<bool>,
    error: RwSignal<Option<String>>,
    submitted: RwSignal<Option<(String, bool)>>,
) -> impl IntoView {
    view! {
        {move || busy.get().then(|| view! { <p class="note">"Reading the repository and checking every task…"</p> })}
        {move || error.get().map(|e| view! { <p class="error">{e}</p> })}
        {move || submitted.get().map(|(id, existing)| view! {
            <p class="ok submitted">
                {if existing { "Already submitted: the first title, notes and agent are kept. " } else { "Submitted. " }}
                <a href=format!("/arena/submissions/{id}")>{id.clone()}</a>
            </p>
        })}
    }
}

/// `/arena/check`: the structure check and static gates on a folder you pick, computed here in the
/// browser. Nothing leaves the page, so the private held-out suite is not compared.
#[component]
pub fn CheckPage() -> impl IntoView {
    view! {
        <PageMeta title="Open Env Arena · Check a folder" description="Check a local folder of tasks against the arena's static quality gates in your browser, before you publish it."/>
        <h1>"Check a local folder"</h1>
        <p class="note">
            "Pick your collection's folder (the one holding " <code>"submission.yaml"</code> " and " <code>"envs/"</code>
            "), its " <code>"envs/"</code> " folder, or one task. The structure check and the static gates run here, in your browser, "
            "with the same code the arena runs; nothing is uploaded. Validation on the arena also compares your prompts and files with the held-out suites."
        </p>
        <FolderCheck/>
    }
}

/// The folder picker and the report of the checks, run by the checker module in the browser.
#[cfg_attr(feature = "submit-islands", island)]
#[cfg_attr(not(feature = "submit-islands"), component)]
fn FolderCheck() -> impl IntoView {
    let report = RwSignal::new(None::<Report>);
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    // `webkitdirectory` (pick a folder) is not an attribute the view macro knows; set it once live.
    let picker = NodeRef::<leptos::html::Input>::new();
    Effect::new(move |_| {
        if let Some(input) = picker.get() {
            let _ = input.set_attribute("webkitdirectory", "");
        }
    });
    let on_change = move |ev: leptos::ev::Event| {
        let _ = &ev;
        #[cfg(feature = "hydrate")]
        {
            use wasm_bindgen::JsCast;
            let Some(input) = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok()) else {
                return;
            };
            busy.set(true);
            error.set(None);
            leptos::task::spawn_local(async move {
                let checked = match client::read_folder(&input).await {
                    Ok(files) => client::check_in_browser(files).await,
                    Err(e) => Err(e),
                };
                match checked
                    .and_then(|json| serde_json::from_str::<Report>(&json).map_err(|e| e.to_string()))
                {
                    Ok(r) => report.set(Some(r)),
                    Err(e) => error.set(Some(e)),
                }
                busy.set(false);
            });
        }
    };
    view! {
        <label>"A folder of tasks to check: "
            <input type="file" class="folder-picker" node_ref=picker multiple=true on:change=on_change/>
        </label>
        {move || busy.get().then(|| view! { <p class="note">"Checking…"</p> })}
        {move || error.get().map(|e| view! { <p class="error">{e}</p> })}
        {move || report.get().map(|r| view! { <ReportView report=r/> })}
    }
}

/// Which gates version judged the collection, and how: at submission, or re-checked from its
/// pinned commit after the gates changed (or why that re-check could not be made).
fn judged_by(e: &domain::collection::record::EnvironmentRecord) -> String {
    let mut text = match (&e.first_gates_version, &e.rechecked_at) {
        (Some(first), Some(at)) => {
            format!(
                "{}, re-checked from the pinned commit on {at} (first stored under {first})",
                e.gates_version
            )
        }
        _ => format!("{}, at submission", e.gates_version),
    };
    if let Some(error) = &e.recheck_error {
        text.push_str(&format!("; a re-check under the current gates could not be made: {error}"));
    }
    text
}
