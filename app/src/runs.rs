//! Runs in the submissions app: a collection's preflight on each open challenge with, for its
//! author or an editor, the button that launches the run; and the collection's runs.

use domain::runs::{Preflight, RunRequest, RunView};
use leptos::prelude::*;
use serde::Deserialize;

use crate::client;

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

/// The answer to a launch.
#[derive(Deserialize)]
struct Launched {
    run: RunView,
    existing: bool,
}

/// Launches the run. The request id is made once and kept, so pressing again after an unclear
/// answer repeats the same request and never starts a second run.
#[island]
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

/// A collection's runs.
#[component]
pub fn RunList(runs: Vec<RunView>) -> impl IntoView {
    if runs.is_empty() {
        return view! { <p class="empty">"No run yet."</p> }.into_any();
    }
    view! {
        <div class="table-wrap">
            <table class="runs">
                <thead><tr><th>"Run"</th><th>"Challenge"</th><th>"State"</th><th>"Stage"</th><th>"Job"</th><th>"Reason"</th></tr></thead>
                <tbody>
                    {runs.into_iter().map(|r| view! {
                        <tr class=format!("run {}", r.state.as_str())>
                            <td><a href=format!("/arena/runs/{}", r.run_id)>{r.run_id.clone()}</a></td>
                            <td>{r.challenge_id.clone()}</td>
                            <td class="state">{r.state.as_str()}</td>
                            <td>{r.stage.clone().unwrap_or_else(|| "—".into())}</td>
                            <td>{r.status.clone()}</td>
                            <td>{r.reason.clone().unwrap_or_default()}{r.platform_fault.then_some(" (platform fault)")}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}
