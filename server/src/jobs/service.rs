//! The organizers' view of spend: every pipeline job in the arena's HF namespace (challenge runs,
//! baseline evaluations, other PostTrain jobs), priced from HF's recorded duration at HF's current
//! flavor prices, with the budget the launch guard enforces and the relays a deploy would cut.

use std::collections::BTreeMap;

use domain::job_labels;
use domain::openenv::run::RunState;
use domain::runs::follow::{self, RelayState};
use domain::views::{JobRow, JobsView, RelayRow, SpendPoint};

use crate::http::ApiError;
use crate::jobs::repo::HfJob;
use crate::ports::jobs::Job;
use crate::{clock, AppState};

/// A pipeline job: one the arena labelled, or one running the pipeline (its CLI, or its job
/// wrapper `run_hf_job.py` by `uv run`).
fn is_pipeline(job: &Job, command: &[String]) -> bool {
    job.labels.keys().any(|k| k.starts_with("arena-"))
        || command.first().is_some_and(|c| c.starts_with("posttrainarena"))
        || command.iter().any(|c| c.ends_with("run_hf_job.py") || c.ends_with("arena_job.py"))
}

/// The secrets the open challenges' jobs need from the arena, and whether it has each.
pub fn job_secrets(s: &AppState) -> Vec<domain::views::JobSecretRow> {
    let mut needed: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let placeholder = domain::pipeline::config::TrainDataset {
        repo_id: String::new(),
        revision: String::new(),
        path: String::new(),
    };
    for c in s
        .registry
        .challenges
        .iter()
        .filter(|c| c.spec.challenge.status == domain::registry::ChallengeStatus::Open)
    {
        if let Ok(config) = domain::pipeline::config::compose(&s.registry, c, Some(&placeholder)) {
            for name in domain::pipeline::secrets::forwarded(&config) {
                needed.entry(name).or_default().push(c.id().to_string());
            }
        }
    }
    needed
        .into_iter()
        .map(|(name, needed_by)| domain::views::JobSecretRow {
            configured: s.jobs.secrets.contains_key(name),
            name: name.to_string(),
            needed_by,
        })
        .collect()
}

/// The challenge id a job's label names: a label is the id, or its rewritten form when the id
/// holds characters HF refuses in labels (`domain::job_labels`).
fn challenge_of_label(s: &AppState, label: &str) -> String {
    s.registry
        .challenges
        .iter()
        .map(|c| c.id().to_string())
        .find(|id| job_labels::value(id) == label)
        .unwrap_or_else(|| label.to_string())
}

fn epoch_of(text: Option<&str>) -> Option<i64> {
    text.and_then(clock::parse_rfc3339).map(|t| t.unix_timestamp())
}

// Long: one read of HF's jobs joined with the ledger, the relays and the secrets into the one view
// the jobs page shows.
pub async fn list(s: &AppState) -> Result<JobsView, ApiError> {
    let unavailable = |e: crate::ports::jobs::JobError| {
        ApiError::new(domain::ErrorCode::HubUnavailable, format!("HF Jobs did not answer: {e}"))
    };
    let prices = s.deps.jobs.prices().await.map_err(unavailable)?;
    let listed = s.deps.jobs.list().await.map_err(unavailable)?;
    let domain::time::Timestamp { text: now_text, epoch: now } = s.now();
    let recorded: BTreeMap<String, f64> = crate::jobs::repo::hf_running_s(&s.db).await?.into_iter().collect();
    let mut jobs = Vec::new();
    for job in listed.iter().filter(|j| is_pipeline(j, &j.command)) {
        let flavor = job.flavor.clone().unwrap_or_default();
        // A run's job as the reconciler priced it (a canceled one up to its last log line),
        // else HF's recorded running time.
        let running_s = match recorded.get(job.id.as_str()) {
            Some(secs) if job.status.stage.has_ended() => *secs,
            _ => job.durations.running_secs.unwrap_or_else(|| {
                match (epoch_of(job.started_at.as_deref()), epoch_of(job.finished_at.as_deref())) {
                    (Some(a), Some(b)) => (b - a) as f64,
                    (Some(a), None) => (now - a) as f64,
                    _ => 0.0,
                }
            }),
        };
        let hourly =
            domain::budget::job_hourly_usd(prices.get(&flavor).copied().unwrap_or(0.0), job.exposes_ports());
        let cost = follow::cost_cents(hourly, running_s);
        let purpose = job.labels.get(job_labels::PURPOSE).cloned().unwrap_or_else(|| "other".into());
        crate::jobs::repo::upsert_hf_job(
            &s.db,
            &HfJob {
                job_id: &job.id,
                run_id: job.labels.get(job_labels::RUN).map(String::as_str),
                purpose: &purpose,
                flavor: &flavor,
                stage: job.status.stage.as_str(),
                created_at: job.created_at.as_deref(),
                started_at: job.started_at.as_deref(),
                finished_at: job.finished_at.as_deref(),
                running_s,
                cost_cents: cost,
                now: &now_text,
            },
        )
        .await?;
        jobs.push(JobRow {
            job_id: job.id.to_string(),
            purpose,
            run_id: job.labels.get(job_labels::RUN).cloned(),
            challenge_id: job.labels.get(job_labels::CHALLENGE).map(|l| challenge_of_label(s, l)),
            flavor,
            stage: job.status.stage.to_string(),
            created_at: job.created_at.clone(),
            started_at: job.started_at.clone(),
            finished_at: job.finished_at.clone(),
            running_s,
            cost_usd: domain::budget::dollars(cost),
            url: s.deps.jobs.job_url(&job.id),
        });
    }
    s.changes.bump(crate::changes::Topic::Ledger);
    let budget = crate::catalog::service::budget(s).await?.value.as_ref().clone();
    let relays = crate::runs::repo::relays(&s.db)
        .await?
        .into_iter()
        .map(|(run_id, state, seen)| RelayRow {
            state: follow::relay_now(RelayState::parse(&state), seen, now, s.reconcile.relay_grace_s),
            run_id: run_id.into(),
            seen_epoch: seen,
        })
        .filter(|r| matches!(r.state, RelayState::Connected | RelayState::Reconnecting))
        .collect();
    let committed_history = crate::jobs::repo::history(&s.db)
        .await?
        .into_iter()
        .map(|(at, cents)| SpendPoint { at, committed_usd: domain::budget::dollars(cents) })
        .collect();
    let openenv_runs = crate::openenv::runs::repo::in_states(&s.db, RunState::LIVE)
        .await?
        .into_iter()
        .map(|r| (r.run_id, r.state.as_str().to_string()))
        .collect();
    let heldout_unchecked = heldout_unchecked(s);
    let newest = domain::board::MessageFilter { limit: 20, ..Default::default() };
    let (recent_messages, _) = crate::board::repo::list(&s.db, &newest).await?;
    Ok(JobsView {
        jobs,
        budget,
        prices_usd_per_hour: prices,
        relays,
        openenv_runs,
        openenv_capacity: Some(crate::openenv::queue::capacity(s).await?),
        heldout_unchecked,
        job_secrets: job_secrets(s),
        committed_history,
        backup: s.backups.as_ref().map(|b| b.view()),
        intake: crate::openenv::intake::read(&s.db).await?,
        hidden_messages: crate::board::repo::hidden(&s.db, 50).await?,
        recent_messages,
    })
}

/// Held-out suites a challenge scores on that this deployment has no fingerprint of, as
/// `challenge/suite` (the deployment's matter: said by `/api/version` and the organizer page).
pub fn heldout_unchecked(s: &AppState) -> Vec<String> {
    let mut out = Vec::new();
    for c in &s.registry.challenges {
        for suite in crate::heldout::unchecked(&s.fingerprints, c) {
            out.push(format!("{}/{suite}", c.id()));
        }
    }
    out
}

/// Every reservation of the ledger, newest first.
pub async fn reservations(s: &AppState) -> Result<Vec<domain::views::Reservation>, ApiError> {
    Ok(crate::jobs::repo::reservations(&s.db).await?)
}
