//! An OpenEnv run's held-out evaluation: the trainer plays every task of the track's benchmark
//! `trials` times with the base policy before the first optimizer step and with the trained policy
//! after the last, and reports one record per episode. The arena scores the records itself (never a
//! summary the trainer sends): each episode's reward in [0, 1], solved when it reaches 1; an
//! episode lost to the platform (after its replay) is left out, not scored 0, as the pipeline's
//! score_v2 leaves out infrastructure-error cells. Δ is paired and clustered by task: every
//! held-out task weighs the same, and its standard error is that of the tasks' own Δs.

use crate::invalid::Invalid;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::score::Z95;

/// What a run plays and is scored on, fixed when the run is assigned (the registry may change).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub benchmark: String,
    pub trials: u32,
    pub phase_allowance_s: u64,
    pub tasks: Vec<PlannedTask>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedTask {
    pub task_id: String,
    pub domain: String,
}

impl Plan {
    /// Episodes per phase.
    pub fn cells(&self) -> u32 {
        self.tasks.len() as u32 * self.trials
    }

    /// The domains, in the plan's order.
    pub fn domains(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in &self.tasks {
            if !out.contains(&t.domain) {
                out.push(t.domain.clone());
            }
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvPhase))]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Before,
    After,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Before => "before",
            Phase::After => "after",
        }
    }

    pub fn parse(s: &str) -> Option<Phase> {
        match s {
            "before" => Some(Phase::Before),
            "after" => Some(Phase::After),
            _ => None,
        }
    }
}

#[cfg(feature = "sqlx")]
crate::text_column!(Phase, "evaluation phase");

/// One held-out episode as the trainer reports it. `reward` is null when the episode was lost to
/// the platform even after its replay (left out of the score).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvEpisodeRecord))]
#[serde(deny_unknown_fields)]
pub struct EpisodeRecord {
    pub task_id: String,
    /// 0 to `trials - 1`.
    pub trial: u32,
    pub reward: Option<f64>,
    /// Times it was played again in a fresh sandbox after the platform lost it.
    #[serde(default)]
    pub replays: u32,
}

/// On an `evaluating` event: the phase, its progress, and on the phase's last event the records
/// of every planned episode (the arena keeps them apart and never shows them to participants).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvEvaluationReport))]
#[serde(deny_unknown_fields)]
pub struct EvaluationReport {
    pub phase: Phase,
    pub done: u32,
    pub planned: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<EpisodeRecord>,
    /// The phase could not be played to its end: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// Played by the simulated cluster (a scripted policy, no model).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
}

/// At most this many records on one event (the benchmark's own bounds keep real ones far below).
pub const MAX_RECORDS: usize = 200 * 16;

impl EvaluationReport {
    pub fn check(&self) -> Result<(), Invalid> {
        if self.done > self.planned || self.records.len() > MAX_RECORDS {
            return Err("an evaluation's progress past what it planned".into());
        }
        if self.incomplete.as_ref().is_some_and(|w| w.len() > super::state::MAX_TEXT) {
            return Err("`evaluation.incomplete` is over 2000 bytes".into());
        }
        if self.records.iter().any(|r| r.reward.is_some_and(|x| !(0.0..=1.0).contains(&x) || !x.is_finite()))
        {
            return Err("an episode's reward outside [0, 1]".into());
        }
        Ok(())
    }
}

/// Whether `records` account for every planned episode of a phase exactly once, and for nothing
/// else: the reason when not.
pub fn check_coverage(plan: &Plan, records: &[EpisodeRecord]) -> Result<(), Invalid> {
    let planned: BTreeSet<(&str, u32)> = plan
        .tasks
        .iter()
        .flat_map(|t| (0..plan.trials).map(move |trial| (t.task_id.as_str(), trial)))
        .collect();
    let mut seen = BTreeSet::new();
    for r in records {
        let cell = (r.task_id.as_str(), r.trial);
        if !planned.contains(&cell) {
            return Err(
                format!("a record of an episode the benchmark does not plan (trial {})", r.trial).into()
            );
        }
        if !seen.insert(cell) {
            return Err("an episode reported twice".into());
        }
    }
    if seen.len() != planned.len() {
        return Err(format!("{} of {} planned episodes reported", seen.len(), planned.len()).into());
    }
    Ok(())
}

/// A phase's figures: episodes scored and lost, the mean reward and the solved rate (fractions,
/// each task weighing the same).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvPhaseScore))]
pub struct PhaseScore {
    pub episodes: u32,
    pub lost: u32,
    pub mean_reward: f64,
    pub solved_rate: f64,
}

/// Δ over a set of tasks, in percentage points: after minus before of the mean reward and of the
/// solved rate, with the paired, task-clustered standard error of the first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvDeltaFigures))]
pub struct DeltaFigures {
    /// Held-out tasks with a scored episode in both phases: what Δ is over (and the phases' figures,
    /// once there is one; before that, each phase's figures are over the tasks it scored).
    pub paired_tasks: u32,
    pub before: Option<PhaseScore>,
    pub after: Option<PhaseScore>,
    pub delta_pp: Option<f64>,
    pub solved_delta_pp: Option<f64>,
    /// sd of the tasks' Δs / √n (null under two paired tasks).
    pub stderr_pp: Option<f64>,
    pub ci95_pp: Option<[f64; 2]>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvDomainFigures))]
pub struct DomainFigures {
    pub domain: String,
    pub tasks: u32,
    #[serde(flatten)]
    pub figures: DeltaFigures,
}

/// One held-out task's outcome (editors only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvTaskFigures))]
pub struct TaskFigures {
    pub task_id: String,
    pub domain: String,
    pub before: Option<PhaseScore>,
    pub after: Option<PhaseScore>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvEvaluationState))]
#[serde(rename_all = "lowercase")]
pub enum EvaluationState {
    /// Not started yet.
    Pending,
    /// A phase is being played.
    Running,
    /// Both phases scored.
    Complete,
    /// The run ended without both phases scored: `reason` says why.
    Incomplete,
}

/// `evaluation` of a run's view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvEvaluationView))]
pub struct EvaluationView {
    pub benchmark: String,
    pub state: EvaluationState,
    /// The phase being played (or the last one reported) and its progress.
    pub phase: Option<Phase>,
    pub done: u32,
    pub planned: u32,
    pub reason: Option<String>,
    /// The simulated cluster played it: a scripted policy, no model.
    pub simulated: bool,
    /// Episodes played again in a fresh sandbox after the platform lost them.
    pub replays: u32,
    #[serde(flatten)]
    pub figures: DeltaFigures,
    pub domains: Vec<DomainFigures>,
    /// Each held-out task's before and after: editors only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<TaskFigures>>,
}

/// A task's (mean reward, solved rate, scored, lost) over its records of one phase.
fn task_phase(records: &[&EpisodeRecord]) -> (Option<(f64, f64)>, u32, u32) {
    let scored: Vec<f64> = records.iter().filter_map(|r| r.reward).collect();
    let lost = (records.len() - scored.len()) as u32;
    if scored.is_empty() {
        return (None, 0, lost);
    }
    let n = scored.len() as f64;
    let mean = scored.iter().sum::<f64>() / n;
    let solved = scored.iter().filter(|&&r| r >= 1.0).count() as f64 / n;
    (Some((mean, solved)), scored.len() as u32, lost)
}

fn phase_score(tasks: &[&PerTask], pick: impl Fn(&PerTask) -> &PerPhase) -> Option<PhaseScore> {
    let kept: Vec<(f64, f64)> = tasks.iter().filter_map(|t| pick(t).figures).collect();
    if kept.is_empty() {
        return None;
    }
    let n = kept.len() as f64;
    Some(PhaseScore {
        episodes: tasks.iter().map(|t| pick(t).scored).sum(),
        lost: tasks.iter().map(|t| pick(t).lost).sum(),
        mean_reward: kept.iter().map(|k| k.0).sum::<f64>() / n,
        solved_rate: kept.iter().map(|k| k.1).sum::<f64>() / n,
    })
}

struct PerPhase {
    figures: Option<(f64, f64)>,
    scored: u32,
    lost: u32,
}

struct PerTask {
    task_id: String,
    domain: String,
    before: PerPhase,
    after: PerPhase,
}

fn per_task(plan: &Plan, before: &[EpisodeRecord], after: &[EpisodeRecord]) -> Vec<PerTask> {
    let of = |records: &[EpisodeRecord], id: &str| {
        let mine: Vec<&EpisodeRecord> = records.iter().filter(|r| r.task_id == id).collect();
        let (figures, scored, lost) = task_phase(&mine);
        PerPhase { figures, scored, lost }
    };
    plan.tasks
        .iter()
        .map(|t| PerTask {
            task_id: t.task_id.clone(),
            domain: t.domain.clone(),
            before: of(before, &t.task_id),
            after: of(after, &t.task_id),
        })
        .collect()
}

/// Δ over `tasks`: the phases over the paired tasks, and the paired, task-clustered error.
fn delta(tasks: &[&PerTask]) -> DeltaFigures {
    let paired: Vec<&PerTask> =
        tasks.iter().copied().filter(|t| t.before.figures.is_some() && t.after.figures.is_some()).collect();
    let pair = |t: &PerTask| t.before.figures.zip(t.after.figures).unwrap_or_default();
    let d: Vec<f64> = paired.iter().map(|t| 100.0 * (pair(t).1 .0 - pair(t).0 .0)).collect();
    let solved: Vec<f64> = paired.iter().map(|t| 100.0 * (pair(t).1 .1 - pair(t).0 .1)).collect();
    let n = d.len();
    let mean = |xs: &[f64]| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
    let delta_pp = mean(&d);
    let stderr_pp = (n >= 2).then(|| {
        let m = delta_pp.unwrap_or(0.0);
        (d.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64 / n as f64).sqrt()
    });
    // Once both phases are in, each is shown over the paired tasks (what Δ compares); until then
    // a phase is shown over the tasks it scored.
    let shown: &[&PerTask] = if paired.is_empty() { tasks } else { &paired };
    DeltaFigures {
        paired_tasks: n as u32,
        before: phase_score(shown, |t| &t.before),
        after: phase_score(shown, |t| &t.after),
        delta_pp,
        solved_delta_pp: mean(&solved),
        stderr_pp,
        ci95_pp: delta_pp.zip(stderr_pp).map(|(d, s)| [d - Z95 * s, d + Z95 * s]),
    }
}

/// What the run's events said of its evaluation: the latest phase and progress, the reason a
/// phase could not finish, and whether the simulated cluster played it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    pub phase: Option<Phase>,
    pub done: u32,
    pub planned: u32,
    pub incomplete: Option<String>,
    pub simulated: bool,
    /// The run is in `evaluating` now.
    pub running: bool,
    /// The run has ended.
    pub ended: bool,
    /// Why the run ended without an evaluation, when it did (failed, cancelled).
    pub ended_why: Option<String>,
    /// The run took at least one optimizer step (`policy_version` > 0).
    pub trained: bool,
}

/// Why a run that took no optimizer step is never ranked.
pub const UNTRAINED: &str = "never ranked: the run took no optimizer step, so its held-out change measures \
     nothing it learned";

/// The run's evaluation, scored from its stored records; `editor` adds each task's figures.
pub fn view(
    plan: &Plan,
    before: &[EpisodeRecord],
    after: &[EpisodeRecord],
    progress: &Progress,
    editor: bool,
) -> EvaluationView {
    let tasks = per_task(plan, before, after);
    let all: Vec<&PerTask> = tasks.iter().collect();
    let figures = delta(&all);
    let scored = !before.is_empty() && !after.is_empty() && figures.paired_tasks > 0;
    // A phase that could not be played to its end leaves the evaluation incomplete, whatever it
    // scored: its figures are shown, never ranked.
    let (state, reason) = if progress.ended && !progress.trained {
        (EvaluationState::Incomplete, Some(UNTRAINED.to_string()))
    } else if let Some(why) = &progress.incomplete {
        (EvaluationState::Incomplete, Some(why.clone()))
    } else if scored {
        (EvaluationState::Complete, None)
    } else if progress.ended {
        let why = progress.ended_why.clone().unwrap_or_else(|| {
            if plan.tasks.is_empty() {
                "the benchmark's environments are not on this arena".into()
            } else if !before.is_empty() && !after.is_empty() {
                "no held-out task was scored in both phases".into()
            } else {
                "the run ended before both evaluation phases were reported".into()
            }
        });
        (EvaluationState::Incomplete, Some(why))
    } else if progress.running || progress.phase.is_some() {
        (EvaluationState::Running, None)
    } else {
        (EvaluationState::Pending, None)
    };
    let domains = plan
        .domains()
        .into_iter()
        .map(|domain| {
            let mine: Vec<&PerTask> = tasks.iter().filter(|t| t.domain == domain).collect();
            DomainFigures { tasks: mine.len() as u32, figures: delta(&mine), domain }
        })
        .collect();
    let phase_of = |p: &PerPhase| {
        p.figures.map(|(mean_reward, solved_rate)| PhaseScore {
            episodes: p.scored,
            lost: p.lost,
            mean_reward,
            solved_rate,
        })
    };
    EvaluationView {
        benchmark: plan.benchmark.clone(),
        state,
        phase: progress.phase,
        done: progress.done,
        planned: if progress.planned > 0 { progress.planned } else { plan.cells() },
        reason,
        simulated: progress.simulated,
        replays: before.iter().chain(after).map(|r| r.replays).sum(),
        figures,
        domains,
        tasks: editor.then(|| {
            tasks
                .iter()
                .map(|t| TaskFigures {
                    task_id: t.task_id.clone(),
                    domain: t.domain.clone(),
                    before: phase_of(&t.before),
                    after: phase_of(&t.after),
                })
                .collect()
        }),
    }
}

/// A submission's evaluated run, as the leaderboard reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluatedRun {
    pub account: String,
    pub submission_id: String,
    pub name: String,
    pub run_id: String,
    pub order: i64,
    pub evaluation: EvaluationView,
}

/// One row of `GET /api/openenv/leaderboard`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvLeaderboardRow))]
pub struct LeaderboardRow {
    /// Equal Δ (to a hundredth of a point) share a rank.
    pub rank: u32,
    /// Rows whose 95% intervals overlap the group's first row share a group (1 is the leaders').
    pub tie_group: u32,
    pub account: String,
    pub submission_id: String,
    pub name: String,
    pub delta_pp: f64,
    pub stderr_pp: Option<f64>,
    pub ci95_pp: Option<[f64; 2]>,
    pub runs: u32,
    pub run_ids: Vec<String>,
    /// Mean Δ per domain over the runs (null where no task of the domain was paired).
    pub domains: Vec<DomainDelta>,
    /// Some run of it was played by the simulated cluster.
    pub simulated: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvDomainDelta))]
pub struct DomainDelta {
    pub domain: String,
    pub delta_pp: Option<f64>,
}

/// The base model's own score before training, unranked: the mean over the evaluated runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvReferenceRow))]
pub struct ReferenceRow {
    pub mean_reward_pct: f64,
    pub solved_rate_pct: f64,
    pub runs: u32,
    pub domains: Vec<DomainReference>,
    pub simulated: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvDomainReference))]
pub struct DomainReference {
    pub domain: String,
    pub mean_reward_pct: Option<f64>,
}

/// A run listed apart from the ranking, with why: it ended without a complete evaluation (no
/// optimizer step, a run ended for want of a training signal, a phase that could not be played).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvUnrankedRow))]
pub struct UnrankedRow {
    pub account: String,
    pub submission_id: String,
    pub name: String,
    pub run_id: String,
    /// Why it is not ranked (its evaluation's reason, e.g. `UNTRAINED`).
    pub reason: String,
    pub simulated: bool,
}

/// `GET /api/openenv/leaderboard`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvLeaderboard))]
pub struct Leaderboard {
    /// The benchmark the track's runs are evaluated on (null: none is set).
    pub benchmark: Option<String>,
    pub benchmark_name: Option<String>,
    pub domains: Vec<String>,
    pub rows: Vec<LeaderboardRow>,
    pub reference: Option<ReferenceRow>,
    /// Runs that ended without a complete evaluation: listed apart with their reason, never
    /// ranked, newest first.
    #[serde(default)]
    pub unranked: Vec<UnrankedRow>,
    /// How the standard error is computed, in words.
    pub method: String,
}

pub const METHOD: &str = "Per run: Δ = mean over held-out tasks of (mean reward after − before), in percentage points, each task weighing the same; SE = sd of the tasks' Δ / √n (paired, clustered by task). Episodes the platform lost are left out, not scored 0. A run that took no optimizer step is never ranked, whatever its evaluation. Per submission: the mean Δ of its evaluated runs, with the run-to-run variance pooled over submissions with repeats (never below a run's own evaluation variance), as the collection leaderboard pools it. 95% interval = Δ ± 1.96 SE; rows whose intervals overlap the first row of their group share a tie group.";

/// The ended runs whose evaluation is not complete (`UNTRAINED`, a run that failed for want of a
/// training signal, a phase not played to its end), newest first: the leaderboard lists them apart
/// with their reason rather than leaving them out silently.
pub fn unranked(runs: &[EvaluatedRun]) -> Vec<UnrankedRow> {
    let mut out: Vec<&EvaluatedRun> =
        runs.iter().filter(|r| r.evaluation.state != EvaluationState::Complete).collect();
    out.sort_by_key(|r| std::cmp::Reverse(r.order));
    out.into_iter()
        .map(|r| UnrankedRow {
            account: r.account.clone(),
            submission_id: r.submission_id.clone(),
            name: r.name.clone(),
            run_id: r.run_id.clone(),
            reason: r
                .evaluation
                .reason
                .clone()
                .unwrap_or_else(|| "its held-out evaluation is incomplete".into()),
            simulated: r.evaluation.simulated,
        })
        .collect()
}

/// Ranks submissions by the mean Δ of their runs whose evaluation is complete.
pub fn leaderboard(runs: &[EvaluatedRun], domains: &[String]) -> (Vec<LeaderboardRow>, Option<ReferenceRow>) {
    let complete: Vec<&EvaluatedRun> =
        runs.iter().filter(|r| r.evaluation.state == EvaluationState::Complete).collect();
    let key = |r: &EvaluatedRun| format!("{}/{}", r.account, r.submission_id);
    let ranked: Vec<crate::ranking::RankedRun> = complete
        .iter()
        .filter_map(|r| {
            Some(crate::ranking::RankedRun {
                environment_id: key(r),
                run_id: r.run_id.clone(),
                accepted: true,
                delta_pp: r.evaluation.figures.delta_pp?,
                stderr_pp: r.evaluation.figures.stderr_pp,
                order: r.order,
            })
        })
        .collect();
    let (rows, _) = crate::ranking::rank(&ranked);
    let mut by_key: BTreeMap<String, Vec<&EvaluatedRun>> = BTreeMap::new();
    for r in &complete {
        by_key.entry(key(r)).or_default().push(r);
    }
    let mut out: Vec<LeaderboardRow> = rows
        .into_iter()
        .filter_map(|row| {
            let mine = by_key.get(&row.environment_id)?;
            let latest = mine.iter().max_by_key(|r| r.order)?;
            let domain_delta = |d: &str| {
                let xs: Vec<f64> = mine
                    .iter()
                    .filter_map(|r| r.evaluation.domains.iter().find(|x| x.domain == d)?.figures.delta_pp)
                    .collect();
                (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
            };
            Some(LeaderboardRow {
                rank: row.rank,
                tie_group: 0,
                account: latest.account.clone(),
                submission_id: latest.submission_id.clone(),
                name: latest.name.clone(),
                delta_pp: row.delta_pp,
                stderr_pp: row.stderr_pp,
                ci95_pp: row.stderr_pp.map(|s| [row.delta_pp - Z95 * s, row.delta_pp + Z95 * s]),
                runs: row.verified_runs,
                run_ids: row.run_ids,
                domains: domains
                    .iter()
                    .map(|d| DomainDelta { domain: d.clone(), delta_pp: domain_delta(d) })
                    .collect(),
                simulated: mine.iter().any(|r| r.evaluation.simulated),
            })
        })
        .collect();
    let mut group = 0;
    let mut head: Option<(f64, Option<f64>)> = None;
    for row in &mut out {
        let me = (row.delta_pp, row.stderr_pp);
        if !head.is_some_and(|h| crate::ranking::tied_with_leader(me, h)) {
            group += 1;
            head = Some(me);
        }
        row.tie_group = group;
    }
    let befores: Vec<&EvaluatedRun> =
        complete.iter().copied().filter(|r| r.evaluation.figures.before.is_some()).collect();
    let reference = (!befores.is_empty()).then(|| {
        let n = befores.len() as f64;
        let avg = |f: &dyn Fn(&PhaseScore) -> f64| {
            100.0 * befores.iter().filter_map(|r| r.evaluation.figures.before.as_ref()).map(f).sum::<f64>()
                / n
        };
        ReferenceRow {
            mean_reward_pct: avg(&|p| p.mean_reward),
            solved_rate_pct: avg(&|p| p.solved_rate),
            runs: befores.len() as u32,
            domains: domains
                .iter()
                .map(|d| {
                    let xs: Vec<f64> = befores
                        .iter()
                        .filter_map(|r| {
                            let f = &r.evaluation.domains.iter().find(|x| &x.domain == d)?.figures;
                            Some(100.0 * f.before.as_ref()?.mean_reward)
                        })
                        .collect();
                    DomainReference {
                        domain: d.clone(),
                        mean_reward_pct: (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64),
                    }
                })
                .collect(),
            simulated: befores.iter().any(|r| r.evaluation.simulated),
        }
    });
    (out, reference)
}

#[cfg(test)]
mod tests;
