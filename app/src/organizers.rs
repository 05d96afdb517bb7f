//! `/arena/jobs`, the organizers' page: every pipeline job in the arena's HF namespace with its
//! cost, the cap and what is committed against it, and committed spend over time with the cap
//! line, and the organizers' controls. Server-rendered only: each control is a plain form.

use domain::board::{HiddenMessage, Message};
use domain::openenv::controls::Intake;
use domain::views::{JobsView, SpendPoint};
use leptos::prelude::*;

use crate::api::{self, reads, ReadError};
use crate::board::AccountBox;
use crate::components::PageMeta;
use domain::ApiErrorBody;

#[component]
pub fn JobsPage() -> impl IntoView {
    let (reads, parts, session) = (reads(), api::request_parts(), api::session());
    let page = async move {
        let reads = reads?;
        let view = reads.jobs(&parts?).await?;
        Ok::<_, ApiErrorBody>((session.await?, view))
    };
    view! {
        <PageMeta title="Open Env Arena · Jobs and spend" description="The arena's HF jobs, the budget's reservations and what each run spent, for BenchFlow editors."/>
        <h1>"Jobs and spend"</h1>
        <Suspense fallback=|| view! { <p>"Loading…"</p> }>
            {Suspend::new(async move {
                match page.await {
                    Ok((session, Some(v))) => {
                        let csrf = session.viewer.map(|v| v.csrf).unwrap_or_default();
                        let (intake, hidden) = (v.intake.clone(), v.hidden_messages.clone());
                        let (recent, runs) = (v.recent_messages.clone(), v.openenv_runs.clone());
                        view! {
                            <Jobs v/>
                            <Controls intake csrf=csrf.clone()/>
                            <OpenEnvCleanups runs csrf=csrf.clone()/>
                            <BoardMessages recent hidden csrf/>
                        }.into_any()
                    }
                    Ok((session, None)) => view! {
                        <AccountBox session return_to="/arena/jobs".to_string() why="as a BenchFlow editor to see the jobs and spend".to_string()/>
                        <p>"This page is for BenchFlow editors: sign in with an account that has the write or admin role in the organization."</p>
                    }
                    .into_any(),
                    Err(error) => view! { <ReadError what="the jobs" error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The OpenEnv cluster: its alerts, the queue, the last day's use and each node.
#[component]
fn Capacity(c: domain::openenv::queue::CapacityView) -> impl IntoView {
    let projected = match c.projected_empty_s {
        None => "cannot be estimated: no GPU is connected".to_string(),
        Some(s) => format!("{:.1} h", s as f64 / 3600.0),
    };
    view! {
        <section class="capacity" aria-labelledby="capacity-h">
            <h2 id="capacity-h">"OpenEnv cluster"</h2>
            {(!c.alerts.is_empty()).then(|| view! {
                <ul class="alerts" role="status">{c.alerts.iter().map(|a| view! { <li>{a.clone()}</li> }).collect_view()}</ul>
            })}
            <dl class="facts">
                <dt>"Queue"</dt><dd>{format!("{} waiting; empties in {projected} (a run takes {:.1} h, the median of recent runs)",
                    c.queue_length, c.typical_run_s as f64 / 3600.0)}</dd>
                <dt>"Last 24 h"</dt><dd>{format!("{} runs started, {:.2} GPU-hours", c.runs_started_24h, c.gpu_hours_24h)}</dd>
            </dl>
            <div class="table-wrap" tabindex="0" role="region" aria-label="Nodes">
                <table class="nodes cards">
                    <thead><tr><th>"Node"</th><th>"Connected"</th><th>"Last heartbeat"</th><th>"GPUs free"</th><th>"Sandboxes free"</th><th>"Runs"</th></tr></thead>
                    <tbody>
                        {c.nodes.iter().map(|n| view! {
                            <tr>
                                <td data-label="Node"><code>{n.node_id.clone()}</code></td>
                                <td data-label="Connected">{match (n.connected, &n.lost_at) {
                                    (true, _) => "yes".to_string(),
                                    (false, Some(at)) => format!("lost at {at}"),
                                    (false, None) => "silent".to_string(),
                                }}</td>
                                <td data-label="Last heartbeat">{n.last_heartbeat_at.clone()}</td>
                                <td data-label="GPUs free">{format!("{} of {}", n.gpus_free, n.gpus)}</td>
                                <td data-label="Sandboxes free">{n.sandboxes_free}</td>
                                <td data-label="Runs">{n.runs.iter().map(|r| view! {
                                    <a href=format!("/arena/openenv/runs/{r}")><code>{r.clone()}</code></a>" "
                                }).collect_view()}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    }
}

#[component]
fn Jobs(v: JobsView) -> impl IntoView {
    let b = v.budget.clone();
    view! {
        <dl class="facts">
            <dt>"Cap"</dt><dd>{format!("${:.2}", b.cap_usd)}</dd>
            <dt>"Committed"</dt><dd>{format!("${:.2} (ledger ${:.2}, HF's records {}, live reservations ${:.2})", b.committed_usd, b.ledger_usd,
                b.hf_recorded_usd.map(|u| format!("${u:.2}")).unwrap_or_else(|| "none yet".into()), b.live_reservations_usd)}</dd>
            <dt>"Remaining"</dt><dd>{format!("${:.2}", b.remaining_usd)}</dd>
            <dt>"Relays"</dt><dd>{if v.relays.is_empty() { "none connected: a deploy cuts nothing".to_string() } else {
                v.relays.iter().map(|r| format!("{} ({})", r.run_id, r.state.as_str())).collect::<Vec<_>>().join(", ") }}</dd>
            <dt>"OpenEnv runs"</dt><dd>{if v.openenv_runs.is_empty() { "none on the cluster".to_string() } else {
                v.openenv_runs.iter().map(|(id, state)| format!("{id} ({state})")).collect::<Vec<_>>().join(", ") }}</dd>
            <dt>"Backups"</dt><dd class="backup">{match &v.backup {
                None => "off: set ARENA_BACKUP_REPO to back the SQLite database up to a private dataset".to_string(),
                Some(b) => format!("to {} every {} s when it changed; last uploaded {}{}{}", b.repo, b.every_s,
                    b.last_ok_at.clone().unwrap_or_else(|| "never yet".into()),
                    b.last_error.as_ref().map(|e| format!("; the last try failed ({}): {e}, tried again", b.last_error_at.clone().unwrap_or_default())).unwrap_or_default(),
                    b.restored_from.as_ref().map(|r| format!("; restored at start from {r}")).unwrap_or_default())
                    + &if b.restore_skipped.is_empty() { String::new() } else {
                        format!("; passed over at the restore: {}", b.restore_skipped.join("; ")) }
                    + &if b.runs_found_again.is_empty() { String::new() } else {
                        format!("; runs found again from their HF jobs: {}", b.runs_found_again.join(", ")) }
                    + &b.runs_finding.as_ref().map(|f| format!("; finding runs again: {f}")).unwrap_or_default(),
            }}</dd>
            <dt>"Held-out suites unchecked"</dt><dd class="heldout-unchecked">{if v.heldout_unchecked.is_empty() {
                "none: every suite a challenge scores on has its fingerprint here".to_string() } else {
                format!("{}: validation cannot check overlap with them until their fingerprints are in the private overlay",
                    v.heldout_unchecked.join(", ")) }}</dd>
        </dl>
        {v.openenv_capacity.clone().map(|c| view! { <Capacity c/> })}
        <h2>"Committed spend"</h2>
        <SpendChart points=v.committed_history.clone() cap=b.cap_usd/>
        <h2>"Jobs"</h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="Jobs">
            <table class="runs jobs cards">
                <thead><tr><th>"Job"</th><th>"Purpose"</th><th>"Run"</th><th>"Flavor"</th><th>"Stage"</th><th>"Running"</th><th>"Cost"</th></tr></thead>
                <tbody>
                    {v.jobs.into_iter().map(|j| view! {
                        <tr>
                            <td data-label="Job"><a href=j.url rel="external noopener"><code>{j.job_id.clone()}</code></a></td>
                            <td data-label="Purpose">{j.purpose.clone()}</td>
                            <td data-label="Run">{j.run_id.clone().map(|r| view! { <a href=format!("/arena/runs/{r}")>{r.clone()}</a> })}</td>
                            <td data-label="Flavor">{j.flavor.clone()}</td>
                            <td data-label="Stage">{j.stage.clone()}</td>
                            <td data-label="Running">{format!("{:.0} s", j.running_s)}</td>
                            <td data-label="Cost">{format!("${:.2}", j.cost_usd)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}

/// What a control's form did, from the query the server sent the page back with.
fn outcome(key: &str, done: &str, undone: &str) -> Option<(&'static str, String)> {
    let query = leptos_router::hooks::use_query_map();
    query.with_untracked(|q| match (q.get(key), q.get(&format!("{key}_error"))) {
        (Some(_), _) => Some(("note", done.to_string())),
        (_, Some(code)) => Some(("error", format!("{undone}: {code}: {}", q.get("why").unwrap_or_default()))),
        _ => None,
    })
}

#[component]
fn Outcome(key: &'static str, done: &'static str, undone: &'static str) -> impl IntoView {
    outcome(key, done, undone).map(|(class, text)| view! { <p class=class role="status">{text}</p> })
}

/// OpenEnv intake as a plain form (the server answers it by sending the page back with what
/// happened).
#[component]
fn Controls(intake: Intake, csrf: String) -> impl IntoView {
    let state = if intake.open {
        "Open: new submissions are taken.".to_string()
    } else {
        format!("Paused since {}: {}. New submissions are answered 503 CAPACITY_BUSY with this reason; accepted ones go on, and every read answers.",
            intake.since.clone().unwrap_or_default(), intake.reason.clone().unwrap_or_default())
    };
    view! {
        <h2 id="intake">"OpenEnv intake"</h2>
        <Outcome key="intake" done="Intake changed." undone="Intake unchanged"/>
        <p class="intake-state">{state}</p>
        <form method="post" action="/arena/jobs/intake" class="intake">
            <input type="hidden" name="csrf" value=csrf/>
            <input type="hidden" name="open" value=if intake.open { "false" } else { "true" }/>
            {intake.open.then(|| view! {
                <label for="intake-reason">"Reason submitters will read"</label>
                <input id="intake-reason" name="reason" required maxlength="500" autocomplete="off"/>
            })}
            <button type="submit">{if intake.open { "Pause intake" } else { "Resume intake" }}</button>
        </form>
    }
}

/// OpenEnv runs in cleanup: an editor releases one whose trainer has not confirmed its sandboxes
/// gone for 900 s (the arena cancels those left and ends the run).
#[component]
fn OpenEnvCleanups(runs: Vec<(String, String)>, csrf: String) -> impl IntoView {
    let stalled: Vec<String> =
        runs.into_iter().filter(|(_, state)| state == "cleanup").map(|(id, _)| id).collect();
    view! {
        <h2 id="openenv-runs">"OpenEnv cleanups"</h2>
        <Outcome key="release" done="Cleanup released: the run ended and its sandboxes left were canceled." undone="Not released"/>
        {if stalled.is_empty() {
            view! { <p>"No OpenEnv run is in cleanup."</p> }.into_any()
        } else {
            view! {
                <ul class="cleanups">
                    {stalled.into_iter().map(|id| { let field = format!("release-{id}"); view! {
                        <li>
                            <a href=format!("/arena/openenv/runs/{id}")><code>{id.clone()}</code></a>
                            <form method="post" action="/arena/jobs/release" class="release">
                                <input type="hidden" name="csrf" value=csrf.clone()/>
                                <input type="hidden" name="id" value=id.clone()/>
                                <label for=field.clone()>"Reason"</label>
                                <input id=field name="reason" required maxlength="500" autocomplete="off"/>
                                <button type="submit">"Release cleanup"</button>
                            </form>
                        </li>
                    }}).collect_view()}
                </ul>
            }.into_any()
        }}
    }
}

/// The newest board messages, each with a form to hide it, and those editors hid.
#[component]
fn BoardMessages(recent: Vec<Message>, hidden: Vec<HiddenMessage>, csrf: String) -> impl IntoView {
    view! {
        <h2 id="board-messages">"Board messages"</h2>
        <Outcome key="hide" done="Message hidden: it left every listing and page, kept for audit." undone="Not hidden"/>
        {if recent.is_empty() {
            view! { <p>"No message is shown on the board."</p> }.into_any()
        } else {
            view! {
                <ul class="board-messages">
                    {recent.into_iter().map(|m| { let field = format!("hide-{}", m.id); view! {
                        <li>
                            <code>{m.id.clone()}</code>" by "{m.author.clone()}" at "{m.created_at.clone()}
                            <blockquote>{m.body.clone()}</blockquote>
                            <form method="post" action="/arena/jobs/hide" class="hide">
                                <input type="hidden" name="csrf" value=csrf.clone()/>
                                <input type="hidden" name="id" value=m.id.clone()/>
                                <label for=field.clone()>"Reason"</label>
                                <input id=field name="reason" required maxlength="500" autocomplete="off"/>
                                <button type="submit">"Hide message"</button>
                            </form>
                        </li>
                    }}).collect_view()}
                </ul>
            }.into_any()
        }}
        <h3>"Hidden"</h3>
        {if hidden.is_empty() {
            view! { <p>"None."</p> }.into_any()
        } else {
            view! {
                <ul class="hidden-messages">
                    {hidden.into_iter().map(|h| view! {
                        <li><code>{h.message.id.clone()}</code>" by "{h.message.author.clone()}", hidden by "{h.hidden_by.clone()}" at "
                            {h.hidden_at.clone()}": "{h.reason.clone()}<blockquote>{h.message.body.clone()}</blockquote></li>
                    }).collect_view()}
                </ul>
            }.into_any()
        }}
    }
}

/// Committed spend after each reservation, as a line under the cap's.
#[component]
fn SpendChart(points: Vec<SpendPoint>, cap: f64) -> impl IntoView {
    const W: f64 = 600.0;
    const H: f64 = 160.0;
    let top = points.iter().map(|p| p.committed_usd).fold(cap, f64::max).max(1.0);
    let y = |usd: f64| H - usd / top * (H - 10.0);
    let n = points.len().max(2) as f64 - 1.0;
    let line: Vec<String> = std::iter::once(format!("0,{:.1}", y(0.0)))
        .chain(
            points
                .iter()
                .enumerate()
                .map(|(i, p)| format!("{:.1},{:.1}", (i as f64 + 1.0) / (n + 1.0) * W, y(p.committed_usd))),
        )
        .collect();
    let last = points.last().map(|p| p.committed_usd).unwrap_or(0.0);
    view! {
        <svg class="spend" viewBox=format!("0 0 {W} {H}") role="img"
            aria-label=format!("Committed ${last:.2} of a ${cap:.2} cap over {} reservations", points.len())>
            <line class="cap" x1="0" x2=W y1=y(cap) y2=y(cap)/>
            <text class="cap-label" x="4" y=y(cap) - 4.0>{format!("cap ${cap:.0}")}</text>
            <polyline class="committed" points=line.join(" ")/>
        </svg>
        <p class="note">{format!("{} reservation(s); committed now ${last:.2}.", points.len())}</p>
    }
}
