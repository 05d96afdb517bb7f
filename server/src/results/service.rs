//! Results: `result collect` re-reads a scored run's evidence from the runs dataset, checks it
//! covers the held-out suites exactly and that the pipeline's report is what the cells give, and
//! stores a pending result; an editor reviews it once; the leaderboard ranks accepted runs.

use std::collections::BTreeMap;

use domain::collection::report::TaskStatus;
use domain::ids::{ChallengeId, RunId};
use domain::results::{self, Evidence, RankedRun, ResultView, Review, ReviewView, RunEvidence, Verified};
use domain::runs::{Purpose, RunState};
use domain::score::Z95;
use domain::training::signal::{self, TrainingFiles};
use domain::views::{Leaderboard, LeaderboardRow};
use domain::ErrorCode;

use crate::changes::{Snapshot, Topic};
use crate::http::ApiError;
use crate::identity::Identity;
use crate::ports::datasets::DatasetError;
use crate::results::repo::{NewResult, Stored};
use crate::AppState;

/// Result files are read up to this size.
const MAX_RESULT_BYTES: u64 = 64 << 20;

pub fn view(r: &Stored, existing: bool) -> ResultView {
    let m = &r.measured;
    ResultView {
        run_id: r.run_id.clone(),
        challenge_id: r.challenge_id.clone(),
        environment_id: r.environment_id.clone(),
        status: r.review.clone(),
        measured: m.clone(),
        ci95_pp: m.stderr_pp.map(|se| [m.delta_pp - Z95 * se, m.delta_pp + Z95 * se]),
        task_identities: r.task_identities.clone(),
        read_commit: r.read_commit.clone(),
        collected_by: r.collected_by.clone(),
        collected_at: r.collected_at.clone(),
        training: r.training.clone(),
        review: match (&r.review_note, &r.reviewed_by, &r.reviewed_at) {
            (Some(note), Some(by), Some(at)) => Some(ReviewView {
                accepted: r.review == "accepted",
                note: note.clone(),
                by: by.clone(),
                at: at.clone(),
            }),
            _ => None,
        },
        existing,
    }
}

/// The runs dataset commit to read a run's results at: where the reconciler found its result
/// files; the dataset's head for a run scored before that commit was recorded.
pub async fn evidence_commit(s: &AppState, run: &crate::runs::repo::Run) -> Result<String, ApiError> {
    if let Some(commit) = &run.results_commit {
        return Ok(commit.clone());
    }
    s.deps.datasets.head(&s.runs_dataset).await.map_err(|e| {
        ApiError::new(
            ErrorCode::HubUnavailable,
            format!("the runs dataset did not answer ({e}); collect again"),
        )
    })
}

async fn read_file(s: &AppState, commit: &str, path: &str) -> Result<Vec<u8>, ApiError> {
    s.deps.datasets.read(&s.runs_dataset, commit, path, MAX_RESULT_BYTES).await.map_err(|e| match e {
        DatasetError::NotFound => ApiError::new(
            ErrorCode::ResultFilesMissing,
            format!("`{path}` is not in the runs dataset at {commit}"),
        ),
        DatasetError::Unavailable(r) => ApiError::new(
            ErrorCode::HubUnavailable,
            format!("the runs dataset did not answer ({r}); collect again"),
        ),
        other => ApiError::internal(other),
    })
}

/// Reads a run's evidence from the runs dataset: its bundle at the commit the launch made (what
/// the run was told to evaluate), its results where the reconciler found them; and verifies it
/// (`domain::results::verify`). Answers the verification and the results commit. A refusal's
/// details name held-out tasks: only an `editor` is told them.
pub async fn verify_run(
    s: &AppState,
    run: &crate::runs::repo::Run,
    editor: bool,
) -> Result<(Verified, String), ApiError> {
    let bundle_commit = run
        .bundle_commit
        .clone()
        .ok_or_else(|| ApiError::new(ErrorCode::ResultFilesMissing, format!("{} has no bundle", run.id)))?;
    let commit = evidence_commit(s, run).await?;
    let bundle = domain::pipeline::bundle_dir(&run.id);
    let reports = format!("{}/reports", domain::pipeline::run_dir(&run.id));
    let text = |b: Vec<u8>, path: &str| {
        String::from_utf8(b)
            .map_err(|_| ApiError::new(ErrorCode::ResultUnreadable, format!("`{path}` is not UTF-8")))
    };
    let config_path = format!("{bundle}/config.toml");
    let config_toml = text(read_file(s, &bundle_commit, &config_path).await?, &config_path)?;
    let (suites, _) = results::bundle_suites(&config_toml)
        .map_err(|e| ApiError::new(ErrorCode::ResultUnreadable, e.to_string()))?;
    let mut task_lists = BTreeMap::new();
    for (_, dataset) in suites {
        let path = format!("{bundle}/{}", dataset.task_list);
        task_lists.insert(dataset.task_list, text(read_file(s, &bundle_commit, &path).await?, &path)?);
    }
    let report_file = if run.purpose == Purpose::Baseline { "baseline.json" } else { "score.json" };
    let (train_list, training) = match run.purpose {
        Purpose::Baseline => (None, Default::default()),
        Purpose::Collection => training_evidence(s, run, &bundle_commit, &commit).await?,
    };
    let evidence = RunEvidence {
        config_toml,
        task_lists,
        outcomes: read_file(s, &commit, &format!("{reports}/eval_task_outcomes.json")).await?,
        report: read_file(s, &commit, &format!("{reports}/{report_file}")).await?,
        train_list,
        training,
    };
    let verified = results::verify(&run.id, run.purpose == Purpose::Baseline, &evidence)
        .map_err(|e| refused(e, editor))?;
    Ok((verified, commit))
}

/// A collection run's train task list (its bundle) and GRPO's records (its jobs folder), each as
/// found: whether GRPO ran, and so whether they must be there, is the report's to say.
async fn training_evidence(
    s: &AppState,
    run: &crate::runs::repo::Run,
    bundle_commit: &str,
    commit: &str,
) -> Result<(Option<String>, TrainingFiles), ApiError> {
    let maybe = |r: Result<Vec<u8>, ApiError>| match r {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.code() == ErrorCode::ResultFilesMissing => Ok(None),
        Err(e) => Err(e),
    };
    let list_path =
        format!("{}/{}", domain::pipeline::bundle_dir(&run.id), domain::pipeline::config::TRAIN_TASK_LIST);
    let train_list = maybe(read_file(s, bundle_commit, &list_path).await)?
        .map(|b| {
            String::from_utf8(b).map_err(|_| {
                ApiError::new(ErrorCode::ResultUnreadable, format!("`{list_path}` is not UTF-8"))
            })
        })
        .transpose()?;
    let jobs = format!("{}/{}", domain::pipeline::run_dir(&run.id), signal::JOBS_DIR);
    let files = TrainingFiles {
        task_stats: maybe(read_file(s, commit, &format!("{jobs}/{}", signal::TASK_STATS)).await)?,
        sampler: maybe(read_file(s, commit, &format!("{jobs}/{}", signal::SAMPLER)).await)?,
        diagnostics: maybe(read_file(s, commit, &format!("{jobs}/{}", signal::DIAGNOSTICS)).await)?,
    };
    Ok((train_list, files))
}

/// `result collect`: the run's author, the collection's author or an editor; idempotent.
pub async fn collect(
    s: &AppState,
    challenge_id: &ChallengeId,
    run_id: &RunId,
    me: &Identity,
) -> Result<ResultView, ApiError> {
    let run = crate::runs::service::find(s, run_id).await?;
    if run.challenge_id != challenge_id {
        return Err(ApiError::new(ErrorCode::RunNotFound, format!("no run `{run_id}` on `{challenge_id}`")));
    }
    let Some(environment_id) = run.environment_id.clone() else {
        return Err(ApiError::new(
            ErrorCode::WrongRunPurpose,
            format!("{run_id} measured the base model; collect it with POST /api/challenges/{challenge_id}/baseline/{run_id}/collect"),
        ));
    };
    let collection_author = crate::collections::repo::author_id(&s.db, &environment_id).await?;
    if !(me.editor || run.author_id == me.id || collection_author.as_deref() == Some(me.id.as_str())) {
        return Err(ApiError::new(
            ErrorCode::NotAuthorOrEditor,
            "results are collected by the run's author, the collection's author or a BenchFlow editor",
        ));
    }
    if let Some(stored) = crate::results::repo::get(&s.db, run_id).await? {
        return Ok(view(&stored, true));
    }
    if run.state != RunState::Scored {
        return Err(ApiError::new(
            ErrorCode::RunNotScored,
            format!("{run_id} is {}; a result is collected once its state is scored", run.state.as_str()),
        ));
    }
    let (verified, commit) = verify_run(s, &run, me.editor).await?;
    let Verified::Scored { measured, training, .. } = verified else {
        return Err(ApiError::internal("a collection's run verified as a baseline"));
    };
    let (_, stored_report) = crate::collections::service::get(s, &environment_id).await?;
    let identities: Vec<String> = stored_report
        .task_list
        .iter()
        .filter(|t| t.status == TaskStatus::Eligible)
        .map(|t| t.identity.clone())
        .collect();
    let now = s.now().text;
    if let Some(t) = &training {
        // TRL's own log of every step: the curves are whole even where the relay and the log's tail missed steps.
        crate::runs::repo::add_train_points(&s.db, run_id, &t.curve.points, "diagnostics", &now).await?;
    }
    let (inserted, stored) = crate::results::repo::insert(
        &s.db,
        &NewResult {
            run_id,
            challenge_id,
            environment_id: &environment_id,
            measured: &measured,
            task_identities: &identities,
            read_commit: &commit,
            collected_by: &me.name,
            now: &now,
            training: training.as_ref().map(|t| &t.signal),
        },
    )
    .await?;
    s.changes.bump(Topic::Results);
    Ok(view(&stored, !inserted))
}

/// The refusal's answer. Its details (which cell, which field) name held-out tasks, so a caller
/// who is not an editor gets the code and what to do, and an editor the details.
pub fn refused(e: results::Refused, editor: bool) -> ApiError {
    let (code, general) = match &e {
        results::Refused::Unreadable(_) => (
            ErrorCode::ResultUnreadable,
            "the run's result files could not be read as the pipeline writes them",
        ),
        results::Refused::Evidence(Evidence::Coverage(_)) => {
            (ErrorCode::ResultIncomplete, "the run's results do not cover its held-out suites exactly")
        }
        results::Refused::Evidence(Evidence::Mismatch(_)) => {
            (ErrorCode::ResultMismatch, "the pipeline's report differs from its per-task results")
        }
        // GRPO's records name the collection's own train tasks only: its author may read why.
        results::Refused::Training(_) => {
            return ApiError::new(ErrorCode::TrainingRecordsInvalid, e.to_string())
        }
    };
    if editor {
        ApiError::new(code, e.to_string())
    } else {
        ApiError::new(
            code,
            format!("{general}; the details name held-out tasks, so only a BenchFlow editor sees them: ask an organizer"),
        )
    }
}

/// A run's collected result, on any challenge (the run page knows only its id).
pub async fn of_run(s: &AppState, run_id: &RunId) -> Result<Option<ResultView>, ApiError> {
    Ok(crate::results::repo::get(&s.db, run_id).await?.map(|r| view(&r, true)))
}

pub async fn get(s: &AppState, challenge_id: &ChallengeId, run_id: &RunId) -> Result<ResultView, ApiError> {
    crate::results::repo::get(&s.db, run_id)
        .await?
        .filter(|r| r.challenge_id == challenge_id)
        .map(|r| view(&r, true))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::ResultNotFound,
                format!("no collected result for `{run_id}`; collect it first"),
            )
        })
}

/// `result review`: editors only, once.
pub async fn review(
    s: &AppState,
    challenge_id: &ChallengeId,
    run_id: &RunId,
    me: &Identity,
    r: Review,
) -> Result<ResultView, ApiError> {
    if !me.editor {
        return Err(ApiError::new(ErrorCode::Forbidden, "results are reviewed by BenchFlow editors"));
    }
    r.check().map_err(|m| ApiError::new(ErrorCode::InvalidReview, m))?;
    let current = get(s, challenge_id, run_id).await?;
    let now = s.now().text;
    // Milliseconds: the order of reviews decides a row's latest accepted run.
    let order = (s.deps.clock.now().unix_timestamp_nanos() / 1_000_000) as i64;
    if !crate::results::repo::review(&s.db, run_id, &r, &me.name, &now, order).await? {
        return Err(ApiError::new(
            ErrorCode::ReviewExists,
            format!("{run_id}'s result was already reviewed ({}); reviews are final", current.status),
        ));
    }
    s.changes.bump(Topic::Results);
    get(s, challenge_id, run_id).await
}

/// `GET /api/challenges/{id}/leaderboard[?benchmark=ID]`.
pub async fn leaderboard(
    s: &AppState,
    challenge_id: &ChallengeId,
    benchmark: Option<&str>,
) -> Result<Snapshot<Leaderboard>, ApiError> {
    let challenge = s.registry.challenge(challenge_id).ok_or_else(|| {
        ApiError::new(
            ErrorCode::ChallengeNotFound,
            format!("no challenge `{challenge_id}`; GET /api/challenges lists them"),
        )
    })?;
    let suites = challenge.spec.challenge.suites.clone();
    if let Some(b) = benchmark.filter(|b| !suites.iter().any(|x| x == b)) {
        return Err(ApiError::new(
            ErrorCode::BenchmarkNotScored,
            format!("`{challenge_id}` does not score on `{b}`; it scores on {}", suites.join(", ")),
        ));
    }
    let key = (challenge_id.to_string(), benchmark.map(String::from));
    s.caches.leaderboards.get(&s.changes, key, board(s, challenge_id, suites, benchmark)).await
}

async fn board(
    s: &AppState,
    challenge_id: &ChallengeId,
    suites: Vec<String>,
    benchmark: Option<&str>,
) -> Result<Leaderboard, ApiError> {
    let stored = crate::results::repo::list(&s.db, Some(challenge_id)).await?;
    let pending_count = stored.iter().filter(|r| r.review == "pending").count() as u64;
    // What is ranked: the pooled Δ, or the named benchmark's (a one-suite challenge's pooled Δ is it).
    let on = |r: &Stored| -> Option<(f64, Option<f64>)> {
        match benchmark {
            Some(b) if suites.len() > 1 => {
                r.measured.suites.iter().find(|x| x.suite == b).map(|x| (x.delta_pp, x.stderr_pp))
            }
            _ => Some((r.measured.delta_pp, r.measured.stderr_pp)),
        }
    };
    let ranked: Vec<RankedRun> = stored
        .iter()
        .filter(|r| r.review != "pending")
        .filter_map(|r| {
            let (delta, se) = on(r)?;
            Some(RankedRun {
                environment_id: r.environment_id.clone(),
                run_id: r.run_id.clone(),
                accepted: r.review == "accepted",
                delta_pp: delta,
                stderr_pp: se,
                order: r.reviewed_epoch.unwrap_or(0),
            })
        })
        .collect();
    let (rows, per_run_sd_pp) = results::rank(&ranked);
    let by_run: BTreeMap<&str, &Stored> = stored.iter().map(|r| (r.run_id.as_str(), r)).collect();
    let leader = rows.first().map(|r| (r.delta_pp, r.stderr_pp));
    // Titles and authors of every ranked collection in one read (their reports are not needed).
    let ids: Vec<&str> = rows.iter().map(|r| r.environment_id.as_str()).collect();
    let records = crate::collections::repo::records(&s.db, &ids).await?;
    let mut out = Vec::new();
    for row in rows {
        let latest = by_run.get(row.latest_run_id.as_str()).copied();
        let record = records.get(&row.environment_id).ok_or_else(|| {
            ApiError::internal(format!("a ranked collection `{}` has no record", row.environment_id))
        })?;
        out.push(LeaderboardRow {
            rank: row.rank,
            tied_with_leader: leader
                .is_some_and(|l| results::tied_with_leader((row.delta_pp, row.stderr_pp), l)),
            environment_id: row.environment_id,
            title: record.title.clone(),
            author: record.author.clone(),
            delta_pp: row.delta_pp,
            stderr_pp: row.stderr_pp,
            verified_runs: row.verified_runs,
            rejected_runs: row.rejected_runs,
            run_deltas_pp: row.run_deltas_pp,
            run_ids: row.run_ids,
            latest_run_id: row.latest_run_id,
            baseline_pass_rate: latest.map_or(0.0, |r| r.measured.baseline_pass_rate),
            after_pass_rate: latest.map_or(0.0, |r| r.measured.after_pass_rate),
            trials: latest.map_or(0, |r| r.measured.trials),
        });
    }
    Ok(Leaderboard {
        challenge_id: challenge_id.to_string(),
        benchmark: benchmark.map(String::from).or_else(|| (suites.len() == 1).then(|| suites[0].clone())),
        benchmarks: suites,
        per_run_sd_pp,
        pending_count,
        rows: out,
    })
}

/// A challenge's rows on one benchmark alone (for `GET /api/benchmarks/{id}`).
pub async fn benchmark_rows(
    s: &AppState,
    challenge_id: &ChallengeId,
    benchmark: &str,
) -> Result<Vec<LeaderboardRow>, ApiError> {
    Ok(leaderboard(s, challenge_id, Some(benchmark)).await?.value.rows.clone())
}
