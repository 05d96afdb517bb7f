//! Results and the leaderboard, server-rendered: a result's pass rates and Δ with its 95% interval
//! drawn as a bar, per suite, with its review; and the leaderboard, each row's interval on one
//! shared axis, the rows whose interval overlaps the leader's grouped as statistically tied.

use domain::results::ResultView;
use domain::score::Z95;
use domain::training::signal::TrainingSignal;
use domain::views::{Leaderboard, LeaderboardRow};
use leptos::prelude::*;

use crate::api::{reads, ReadError};

/// A Δ's 95% interval; a null standard error (one paired task) gives none, only the point.
fn interval(delta: f64, stderr: Option<f64>) -> (f64, f64) {
    let se = stderr.unwrap_or(0.0);
    (delta - Z95 * se, delta + Z95 * se)
}

/// "± SE", or that there is none.
fn pm(stderr: Option<f64>) -> String {
    stderr.map_or_else(|| "± n/a (one paired task)".to_string(), |se| format!("± {se:.2}"))
}

/// The axis the intervals are drawn on: symmetric around 0, wide enough for every interval.
fn axis(intervals: impl Iterator<Item = (f64, f64)>) -> f64 {
    intervals.map(|(lo, hi)| lo.abs().max(hi.abs())).fold(1.0, f64::max) * 1.1
}

/// Δ with its 95% interval as a bar on an axis from −`half` to +`half` percentage points.
#[component]
pub fn IntervalBar(delta: f64, stderr: Option<f64>, half: f64) -> impl IntoView {
    let pct = |x: f64| ((x + half) / (2.0 * half) * 100.0).clamp(0.0, 100.0);
    let (lo, hi) = interval(delta, stderr);
    let label = match stderr {
        Some(_) => format!("{delta:+.2} pp, 95% interval {lo:+.2} to {hi:+.2}"),
        None => format!("{delta:+.2} pp, no standard error (one paired task)"),
    };
    // The axis is symmetric, so zero sits in the middle; its ends are labelled.
    view! {
        <span class="interval-wrap">
            <span class="interval" role="img" aria-label=format!("{label}, on an axis from {:+.1} to {:+.1} pp", -half, half)>
                <span class="zero" style=format!("left:{:.1}%", pct(0.0))></span>
                <span class="ci" style=format!("left:{:.1}%;width:{:.1}%", pct(lo), (pct(hi) - pct(lo)).max(0.5))></span>
                <span class="point" style=format!("left:{:.1}%", pct(delta))></span>
            </span>
            <span class="interval-axis" aria-hidden="true">
                <span class="lo">{format!("{:+.1}", -half)}</span>
                <span class="zero-label">"0"</span>
                <span class="hi">{format!("{:+.1} pp", half)}</span>
            </span>
        </span>
    }
}

#[component]
pub fn ResultCard(result: ResultView) -> impl IntoView {
    let r = result;
    let half = axis(
        std::iter::once(interval(r.measured.delta_pp, r.measured.stderr_pp))
            .chain(r.measured.suites.iter().map(|s| interval(s.delta_pp, s.stderr_pp))),
    );
    let ci =
        r.ci95_pp.map_or_else(|| "no interval".to_string(), |[lo, hi]| format!("95%: {lo:+.2} to {hi:+.2}"));
    let m = r.measured.clone();
    view! {
        <section class="card result" data-status=r.status.clone()>
            <h2>"Result " <span class=format!("badge result-{}", r.status)>{r.status.clone()}</span></h2>
            <p>
                {format!("Held-out before {:.1}%, after {:.1}%: Δ {:+.2} pp {} ({ci}), {} trial(s) on {} paired tasks, {} infrastructure-error cells left out.",
                    100.0 * m.baseline_pass_rate, 100.0 * m.after_pass_rate, m.delta_pp, pm(m.stderr_pp), m.trials, m.paired_tasks, m.infra_error_cells)}
            </p>
            <div class="intervals">
                <div class="interval-row"><span class="label">"pooled"</span><IntervalBar delta=m.delta_pp stderr=m.stderr_pp half/></div>
                {m.suites.iter().map(|s| view! {
                    <div class="interval-row"><span class="label">{s.suite.clone()}</span><IntervalBar delta=s.delta_pp stderr=s.stderr_pp half/></div>
                }).collect_view()}
            </div>
            <p class="note">{format!("Collected by {} at {} from the runs dataset at {}.", r.collected_by, r.collected_at, r.read_commit)}</p>
            {r.training.map(|signal| view! { <TrainingSignalView signal/> })}
            {match r.review {
                Some(rv) => view! {
                    <p class="review">{format!("{} by {} at {}: ", if rv.accepted { "Accepted" } else { "Rejected" }, rv.by, rv.at)} {rv.note}</p>
                }.into_any(),
                None => view! { <p class="note">"Awaiting an organizer's review; a verified result ranks on the leaderboard."</p> }.into_any(),
            }}
        </section>
    }
}

/// What GRPO's records say each train task gave the model: one sentence, then a row per task.
#[component]
pub fn TrainingSignalView(signal: TrainingSignal, #[prop(optional)] run_id: Option<String>) -> impl IntoView {
    let pct = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |p| format!("{:.0}%", 100.0 * p));
    view! {
        <section class="training-signal">
            <h3>"What training learned from each task"{run_id.map(|r| view! { " (run " <a href=format!("/arena/runs/{r}")>{r.clone()}</a> ")" })}</h3>
            <p class="signal-summary">{signal.summary.clone()}</p>
            <p class="note">{format!(
                "From GRPO's own records (train_task_stats.json). Each group is {} attempts at one task; GRPO learns only from a group whose attempts got different rewards. A task that is always or never solved teaches nothing. Masked rollouts are left out of the loss and never scored 0: the platform's errors (the sandbox, the agent or the verifier failed) and trajectory errors (scored, but the pipeline could not turn the trajectory into training tokens).",
                signal.num_generations
            )}</p>
            <div class="table-wrap" tabindex="0" role="region" aria-label="Training signal per task">
                <table class="cards signal">
                    <thead><tr><th scope="col">"Task"</th><th scope="col">"Verdict"</th><th scope="col">"Pass rate in training"</th><th scope="col">"Groups with signal"</th><th scope="col">"All-pass / all-fail groups"</th><th scope="col">"Masked rollouts"</th></tr></thead>
                    <tbody>
                        {signal.tasks.into_iter().map(|t| {
                            let v = serde_json::to_value(t.verdict).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
                            view! {
                                <tr class=format!("verdict-{v}")>
                                    <td data-label="Task"><code>{t.task.clone()}</code></td>
                                    <td data-label="Verdict"><span class=format!("badge signal-{v}")>{t.verdict.words()}</span></td>
                                    <td data-label="Pass rate in training" class="num">{format!("{} ({} of {} scored)", pct(t.pass_rate), t.passes, t.scored_rollouts)}</td>
                                    <td data-label="Groups with signal" class="num">{format!("{} of {}{}", t.groups_with_variance, t.groups, t.reward_variance.map(|v| format!(" (reward variance {v:.3})")).unwrap_or_default())}</td>
                                    <td data-label="All-pass / all-fail groups" class="num">{format!("{} / {}", t.all_pass_groups, t.all_fail_groups)}</td>
                                    <td data-label="Masked rollouts" class="num">{masked_words(&t)}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    }
}

/// A task's masked rollouts, and whose errors they were (results collected before the two kinds
/// were kept apart say only the count).
fn masked_words(t: &domain::training::signal::TaskSignal) -> String {
    let of = format!("{} of {}", t.masked_rollouts, t.rollouts);
    match t.infra_errors + t.trajectory_errors {
        0 => of,
        _ => format!("{of}: {} the platform's, {} trajectory", t.infra_errors, t.trajectory_errors),
    }
}

/// A challenge's leaderboard, server-rendered.
#[component]
pub fn LeaderboardView(board: Leaderboard) -> impl IntoView {
    let half = axis(board.rows.iter().map(|r| interval(r.delta_pp, r.stderr_pp)));
    let (tied, apart): (Vec<LeaderboardRow>, Vec<LeaderboardRow>) =
        board.rows.into_iter().partition(|r| r.tied_with_leader);
    let group = move |rows: Vec<LeaderboardRow>, caption: &'static str| {
        (!rows.is_empty()).then(|| view! {
            <tbody>
                <tr class="group"><th colspan="5">{caption}</th></tr>
                {rows.into_iter().map(|r| view! {
                    <tr class="lb-row" data-env=r.environment_id.clone()>
                        <td data-label="#" class="rank">{r.rank}</td>
                        <td data-label="Collection"><a href=format!("/arena/submissions/{}", r.environment_id)>{r.title.clone()}</a> <span class="meta">{format!(" {}", r.author)}</span></td>
                        <td data-label="Δ (pp)" class="num">{format!("{:+.2} {}", r.delta_pp, pm(r.stderr_pp))}</td>
                        <td data-label="95% interval" class="bar-cell"><IntervalBar delta=r.delta_pp stderr=r.stderr_pp half/></td>
                        <td data-label="Runs" class="num">{format!("{} accepted, {} rejected", r.verified_runs, r.rejected_runs)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        })
    };
    view! {
        <section class="leaderboard" data-challenge=board.challenge_id.clone()>
            <h2>"Leaderboard " <code>{board.challenge_id.clone()}</code></h2>
            <p class="note">
                {format!("Ranked on the mean Δ over each collection's accepted runs (pp), ± its standard error; bars are 95% intervals on one axis from {:+.1} to {:+.1} pp{}. {} result(s) await review.",
                    -half, half,
                    board.per_run_sd_pp.map(|sd| format!("; run-to-run SD {sd:.2} pp")).unwrap_or_default(),
                    board.pending_count)}
            </p>
            {if tied.is_empty() && apart.is_empty() {
                view! { <p class="empty">"No accepted result yet."</p> }.into_any()
            } else {
                view! {
                    <div class="table-wrap" tabindex="0" role="region" aria-label="Leaderboard">
                        <table class="runs board cards">
                            <thead><tr><th>"#"</th><th>"Collection"</th><th>"Δ (pp)"</th><th>"95% interval"</th><th>"Runs"</th></tr></thead>
                            {group(tied, "Statistically tied with the leader")}
                            {group(apart, "Clearly behind the leader")}
                        </table>
                    </div>
                }.into_any()
            }}
        </section>
    }
}

/// The leaderboards of every open challenge (for `/arena` and the challenge page).
#[component]
pub fn Leaderboards(#[prop(optional)] only: Option<String>) -> impl IntoView {
    let reads = reads();
    let boards = async move { reads?.leaderboards(only).await };
    view! {
        <Suspense fallback=|| view! { <p>"Loading the leaderboard…"</p> }>
            {Suspend::new(async move {
                match boards.await {
                    Ok(list) => list.into_iter().map(|board| view! { <LeaderboardView board/> }).collect_view().into_any(),
                    Err(error) => view! { <ReadError what="the leaderboard" error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}
