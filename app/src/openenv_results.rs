//! What the OpenEnv track measured: a run's held-out evaluation (before and after training, Δ
//! with its interval, per domain; each held-out task for editors only), the leaderboards that
//! rank submissions and accounts by it, and where the signed-in participant stands on quota.
//! Rendered on the server only: nothing here hydrates.

use domain::openenv::by_account::{AccountPage, AccountRow};
use domain::openenv::evaluation::{DeltaFigures, EvaluationState, EvaluationView, Leaderboard, PhaseScore};
use domain::openenv::quota::QuotaView;
use leptos::prelude::*;

fn pct(p: &Option<PhaseScore>, f: fn(&PhaseScore) -> f64) -> String {
    p.as_ref().map_or("–".into(), |p| format!("{:.1}%", 100.0 * f(p)))
}

fn pp(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:+.1} pp"))
}

fn interval(f: &DeltaFigures) -> String {
    match (f.stderr_pp, f.ci95_pp) {
        (Some(se), Some([lo, hi])) => format!("± {se:.1} (95%: {lo:+.1} to {hi:+.1})"),
        _ => "no interval under two paired tasks".into(),
    }
}

/// The run page's evaluation section.
#[component]
pub fn EvaluationPanel(evaluation: EvaluationView) -> impl IntoView {
    let e = evaluation;
    let state = match e.state {
        EvaluationState::Pending => "not started yet: it runs before the first optimizer step".to_string(),
        EvaluationState::Running => format!(
            "{} training: {} of {} held-out episodes played",
            e.phase.map_or("", |p| p.as_str()),
            e.done,
            e.planned
        ),
        EvaluationState::Complete => "complete".to_string(),
        EvaluationState::Incomplete => format!("incomplete: {}", e.reason.clone().unwrap_or_default()),
    };
    let f = e.figures.clone();
    let simulated = e.simulated.then(|| {
        view! { <p class="note simulated">"Simulated: the local cluster played these episodes with a scripted policy, not a model."</p> }
    });
    view! {
        <h2 id="evaluation">"Held-out evaluation"</h2>
        {simulated}
        <p class=format!("meta evaluation-state state-{}", format!("{:?}", e.state).to_lowercase())>
            {format!("Benchmark {} · {state}", e.benchmark)}
        </p>
        <table class="openenv-evaluation cards">
            <thead><tr><th>"Scope"</th><th>"Tasks paired"</th><th>"Mean reward before"</th><th>"after"</th><th>"Δ"</th><th>"Solved before"</th><th>"after"</th><th>"Solved Δ"</th></tr></thead>
            <tbody>
                <tr class="overall">
                    <td data-label="Scope">"All domains"</td>
                    <td data-label="Tasks paired">{f.paired_tasks}</td>
                    <td data-label="Mean reward before">{pct(&f.before, |p| p.mean_reward)}</td>
                    <td data-label="after">{pct(&f.after, |p| p.mean_reward)}</td>
                    <td data-label="Δ"><strong>{pp(f.delta_pp)}</strong> " " <span class="meta">{interval(&f)}</span></td>
                    <td data-label="Solved before">{pct(&f.before, |p| p.solved_rate)}</td>
                    <td data-label="after">{pct(&f.after, |p| p.solved_rate)}</td>
                    <td data-label="Solved Δ">{pp(f.solved_delta_pp)}</td>
                </tr>
                {e.domains.iter().map(|d| { let g = &d.figures; view! {
                    <tr>
                        <td data-label="Scope">{d.domain.clone()}</td>
                        <td data-label="Tasks paired">{format!("{} of {}", g.paired_tasks, d.tasks)}</td>
                        <td data-label="Mean reward before">{pct(&g.before, |p| p.mean_reward)}</td>
                        <td data-label="after">{pct(&g.after, |p| p.mean_reward)}</td>
                        <td data-label="Δ">{pp(g.delta_pp)}</td>
                        <td data-label="Solved before">{pct(&g.before, |p| p.solved_rate)}</td>
                        <td data-label="after">{pct(&g.after, |p| p.solved_rate)}</td>
                        <td data-label="Solved Δ">{pp(g.solved_delta_pp)}</td>
                    </tr>
                }}).collect_view()}
            </tbody>
        </table>
        <p class="meta">{format!(
            "Episodes scored before {} and after {}; left out (lost to the platform) {}; played again in a fresh sandbox {}.",
            f.before.as_ref().map_or(0, |p| p.episodes), f.after.as_ref().map_or(0, |p| p.episodes),
            f.before.as_ref().map_or(0, |p| p.lost) + f.after.as_ref().map_or(0, |p| p.lost), e.replays
        )}</p>
        {e.tasks.map(|tasks| view! {
            <h3>"Held-out tasks (editors only)"</h3>
            <table class="openenv-heldout-tasks cards">
                <thead><tr><th>"Task"</th><th>"Domain"</th><th>"Mean reward before"</th><th>"after"</th><th>"Solved before"</th><th>"after"</th></tr></thead>
                <tbody>
                    {tasks.into_iter().map(|t| view! {
                        <tr>
                            <td data-label="Task"><code>{t.task_id}</code></td><td data-label="Domain">{t.domain}</td>
                            <td data-label="Mean reward before">{pct(&t.before, |p| p.mean_reward)}</td>
                            <td data-label="after">{pct(&t.after, |p| p.mean_reward)}</td>
                            <td data-label="Solved before">{pct(&t.before, |p| p.solved_rate)}</td>
                            <td data-label="after">{pct(&t.after, |p| p.solved_rate)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        })}
    }
}

/// The OpenEnv leaderboard: submissions by mean Δ on the held-out benchmark, the base model's own
/// score as an unranked reference row.
#[component]
pub fn OpenEnvLeaderboard(board: Leaderboard) -> impl IntoView {
    let Some(benchmark) = board.benchmark.clone() else {
        return view! { <p class="note">"No held-out benchmark is set for this track: runs are not evaluated."</p> }
            .into_any();
    };
    let domains = board.domains.clone();
    let simulated =
        board.rows.iter().any(|r| r.simulated) || board.reference.as_ref().is_some_and(|r| r.simulated);
    let head_domains = domains.clone();
    view! {
        <p class="meta">{format!(
            "Ranked by the mean Δ of each submission's runs on {} ({benchmark}), after minus before training, in percentage points of mean reward.",
            board.benchmark_name.clone().unwrap_or_default()
        )}</p>
        {simulated.then(|| view! { <p class="note simulated">"Simulated rows come from the local cluster's scripted policy, not a model."</p> })}
        {if board.rows.is_empty() && board.reference.is_none() {
            view! { <p class="note">"No run has been evaluated yet."</p> }.into_any()
        } else {
            view! {
                <div class="table-wrap" tabindex="0" role="region" aria-label="Leaderboard by submission"><table class="openenv-leaderboard cards">
                    <thead><tr>
                        <th>"Rank"</th><th>"Submission"</th><th>"By"</th><th>"Δ mean reward"</th><th>"95% interval"</th><th>"Tie group"</th><th>"Runs"</th>
                        {head_domains.into_iter().map(|d| view! { <th class="domain">{d}</th> }).collect_view()}
                    </tr></thead>
                    <tbody>
                        {board.reference.clone().map(|r| view! {
                            <tr class="reference">
                                <td data-label="Rank">"–"</td>
                                <td data-label="Submission">"Base model before training (reference)"</td>
                                <td data-label="By">"–"</td>
                                <td data-label="Δ mean reward">{format!("{:.1}% mean reward, {:.1}% solved", r.mean_reward_pct, r.solved_rate_pct)}</td>
                                <td data-label="95% interval">"–"</td><td data-label="Tie group">"–"</td>
                                <td data-label="Runs">{r.runs}{r.simulated.then_some(" (simulated)")}</td>
                                {r.domains.into_iter().map(|d| view! {
                                    <td data-label=d.domain.clone()>{d.mean_reward_pct.map_or("–".into(), |v| format!("{v:.1}%"))}</td>
                                }).collect_view()}
                            </tr>
                        })}
                        {board.rows.into_iter().map(|row| view! {
                            <tr>
                                <td data-label="Rank">{row.rank}</td>
                                <td data-label="Submission">{row.name.clone()} " " <code>{row.submission_id.clone()}</code>{row.simulated.then_some(" (simulated)")}</td>
                                <td data-label="By">{row.account.clone()}</td>
                                <td data-label="Δ mean reward"><strong>{pp(Some(row.delta_pp))}</strong>{row.stderr_pp.map(|s| format!(" ± {s:.1}"))}</td>
                                <td data-label="95% interval">{row.ci95_pp.map_or("–".into(), |[lo, hi]| format!("{lo:+.1} to {hi:+.1}"))}</td>
                                <td data-label="Tie group">{row.tie_group}</td>
                                <td data-label="Runs">{row.runs}</td>
                                {row.domains.into_iter().map(|d| view! { <td data-label=d.domain.clone()>{pp(d.delta_pp)}</td> }).collect_view()}
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table></div>
            }.into_any()
        }}
        {(!board.unranked.is_empty()).then(|| view! {
            <h3>"Not ranked"</h3>
            <ul class="unranked">
                {board.unranked.clone().into_iter().map(|u| view! {
                    <li>
                        {u.name} " " <code>{u.submission_id}</code> " by " {u.account}
                        {u.simulated.then_some(" (simulated)")} ": " {u.reason}
                    </li>
                }).collect_view()}
            </ul>
        })}
        <p class="meta method">{board.method.clone()}</p>
    }
    .into_any()
}

/// The leaderboard by participant: one row per account (its best submission's Δ and interval, its
/// best Δ per domain), the signed-in caller's row pinned above, pages from a frozen snapshot.
#[component]
pub fn OpenEnvAccountBoard(page: AccountPage) -> impl IntoView {
    if page.benchmark.is_none() {
        return ().into_any();
    }
    let domains = page.domains.clone();
    let next = page.next_cursor.clone();
    let head = |domains: Vec<String>| {
        view! {
            <thead><tr>
                <th>"Rank"</th><th>"Account"</th><th>"Best submission"</th><th>"Δ mean reward"</th><th>"95% interval"</th><th>"Tie group"</th><th>"Submissions"</th>
                {domains.into_iter().map(|d| view! { <th class="domain">{format!("best {d}")}</th> }).collect_view()}
            </tr></thead>
        }
    };
    view! {
        <p class="meta">{format!(
            "One row per Hugging Face account: its best submission, and its best Δ in each domain across all of its submissions. {} accounts, as of {}.",
            page.total, page.snapshot_at
        )}</p>
        {page.me.clone().map(|me| view! {
            <div class="table-wrap" tabindex="0" role="region" aria-label="Your row"><table class="openenv-accounts pinned cards" aria-label="Your row">
                {head(domains.clone())}
                <tbody><AccountLine row=me/></tbody>
            </table></div>
        })}
        {if page.rows.is_empty() {
            view! { <p class="note">"No account has an evaluated run yet."</p> }.into_any()
        } else {
            view! {
                <div class="table-wrap" tabindex="0" role="region" aria-label="Leaderboard by account"><table class="openenv-accounts cards">
                    {head(domains)}
                    <tbody>{page.rows.into_iter().map(|row| view! { <AccountLine row/> }).collect_view()}</tbody>
                </table></div>
            }.into_any()
        }}
        {next.map(|c| view! {
            <p><a rel="next" href=format!("/arena/openenv?accounts={c}#by-account")>"Next accounts"</a></p>
        })}
    }
    .into_any()
}

#[component]
fn AccountLine(row: AccountRow) -> impl IntoView {
    view! {
        <tr data-account=row.account.clone()>
            <td data-label="Rank">{row.rank}</td>
            <td data-label="Account">{row.account.clone()}{row.simulated.then_some(" (simulated)")}</td>
            <td data-label="Best submission">{row.name.clone()} " " <code>{row.submission_id.clone()}</code></td>
            <td data-label="Δ mean reward"><strong>{pp(Some(row.delta_pp))}</strong>{row.stderr_pp.map(|s| format!(" ± {s:.1}"))}</td>
            <td data-label="95% interval">{row.ci95_pp.map_or("–".into(), |[lo, hi]| format!("{lo:+.1} to {hi:+.1}"))}</td>
            <td data-label="Tie group">{row.tie_group}</td>
            <td data-label="Submissions">{row.submissions}</td>
            {row.domains.into_iter().map(|d| view! { <td data-label=d.domain.clone()>{pp(d.delta_pp)}</td> }).collect_view()}
        </tr>
    }
}

/// Where the signed-in participant stands against the submission quota.
#[component]
pub fn QuotaLine(quota: QuotaView) -> impl IntoView {
    let text = if quota.exempt {
        "Your account is exempt from the submission limit (editors and the accounts the organizers list are)."
            .to_string()
    } else {
        let window = match quota.window_s {
            s if s % 3600 == 0 => format!("{} hours", s / 3600),
            s => format!("{s} seconds"),
        };
        let free = quota.limit.saturating_sub(quota.used);
        let next = match (&quota.next_free_at, free) {
            (Some(at), 0) => format!(" Your next submission can be accepted at {at}."),
            (Some(at), _) => format!(" Your oldest one frees at {at}."),
            (None, _) => String::new(),
        };
        format!(
            "You have used {} of {} accepted submissions in the last {window}: {free} left.{next}",
            quota.used, quota.limit
        )
    };
    view! { <p class="quota" role="status">{text}</p> }
}
