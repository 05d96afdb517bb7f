//! Runs found again from HF's records. A restored database lacks what happened after its snapshot;
//! a run launched then still has its HF job, and the job's command names its bundle in the runs
//! dataset, whose `arena.json` carries the run's origin (`domain::pipeline::bundle::RunOrigin`).
//! While backups are on, each start lists the arena's jobs and takes back every run's job that no
//! run row knows: its row is rebuilt launched, with its live reservation, and the reconciler
//! follows it to its end as usual. The job's relay secret went with the lost row, so the run is
//! followed from HF's records (its status, its log, its result files) without its relay.
//!
//! Anyone who can start a job in the namespace can give it the run label and a command that reads
//! back, so a job is believed only when its purpose label says it is a collection run, its command
//! pins a commit of the runs dataset, and its bundle's origin carries the arena's signature
//! (`JobSetup::origin_signature`, with the backup key). Anything else is named and left alone.

use domain::ids::{JobId, RunId};
use domain::job_labels;
use domain::pipeline::bundle::JobSetup;
use domain::pipeline::config::PipelineConfig;
use domain::pipeline::{self as pipeline, JobCommandRead};
use domain::runs::Purpose;

use crate::ports::datasets::DatasetError;
use crate::ports::jobs::Job;
use crate::runs::repo::{self, FoundJob, Inserted, NewRun};
use crate::AppState;

/// The largest bundle file read back.
const MAX_BUNDLE_FILE: u64 = 1 << 20;

/// What one pass found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// Runs whose rows were rebuilt.
    pub taken_back: Vec<String>,
    /// Runs to take back that could not be yet (HF did not answer, or another run holds the live
    /// reservation until the reconciler ends it): tried again at the next pass.
    pub waiting: Vec<String>,
    /// Jobs left alone for good (not this arena's to believe, or a row that cannot be stored), and
    /// why: later passes do not read them again.
    pub skipped: Vec<(JobId, String)>,
}

impl Found {
    fn skip(&mut self, job: &Job, why: String) {
        self.skipped.push((job.id.clone(), why));
    }
}

/// Lists the jobs of every launcher and takes back the runs no row knows.
pub async fn pass(s: &AppState) -> anyhow::Result<Found> {
    use anyhow::Context;
    let mut found = Found::default();
    for launcher in s.deps.launchers.values() {
        let jobs = launcher.list().await.context("listing HF's jobs")?;
        let left_alone = |job: &Job| s.backups.as_ref().is_some_and(|b| b.left_alone(&job.id));
        for job in jobs.iter().filter(|j| j.labels.contains_key(job_labels::RUN) && !left_alone(j)) {
            take_back(s, job, &mut found).await;
        }
    }
    Ok(found)
}

/// The run a job is for, when it is one of this arena's: its command reads back, its bundle is in
/// this arena's runs dataset, and its run label names that run.
fn run_of(s: &AppState, job: &Job) -> Option<JobCommandRead> {
    let read = pipeline::read_job_command(&job.command)?;
    let labelled = job.labels.get(job_labels::RUN)?;
    (read.bundle_repo == s.runs_dataset && *labelled == job_labels::value(&read.run_id)).then_some(read)
}

/// The purposes of the jobs a run launches (a collection run, a baseline measurement): never a
/// sandbox's, whose command is the participant's.
fn is_run_purpose(job: &Job) -> bool {
    let purpose = job.labels.get(job_labels::PURPOSE).map(String::as_str);
    [Purpose::Collection, Purpose::Baseline].iter().any(|p| purpose == Some(p.job_purpose()))
}

async fn take_back(s: &AppState, job: &Job, found: &mut Found) {
    if !is_run_purpose(job) {
        let purpose = job.labels.get(job_labels::PURPOSE).map_or("none", String::as_str);
        found.skip(job, format!("job {}: its purpose label ({purpose}) is not a collection run's", job.id));
        return;
    }
    let Some(read) = run_of(s, job) else {
        // Another deployment's run in the same namespace: not this arena's to take, nor to name.
        if pipeline::read_job_command(&job.command).is_some_and(|r| r.bundle_repo != s.runs_dataset) {
            return;
        }
        let why = format!(
            "job {}: its command does not pin a bundle of this arena's runs dataset at a commit",
            job.id
        );
        found.skip(job, why);
        return;
    };
    match repo::get(&s.db, &read.run_id).await {
        Ok(Some(_)) => return,
        Ok(None) => {}
        Err(e) => {
            found.waiting.push(format!("{}: {e}", read.run_id));
            return;
        }
    }
    match rebuild(s, job, &read).await {
        Ok(true) => {
            tracing::warn!(run = %read.run_id, job = %job.id, "a run found again from its HF job");
            found.taken_back.push(read.run_id);
        }
        Ok(false) => found.waiting.push(format!("{}: another run holds the live reservation", read.run_id)),
        Err(Rebuild::Later(why)) => found.waiting.push(format!("{}: {why}", read.run_id)),
        Err(Rebuild::Never(why)) => found.skip(job, format!("{} (job {}): {why}", read.run_id, job.id)),
    }
}

enum Rebuild {
    /// Tried again at the next pass.
    Later(String),
    /// This job's run cannot be rebuilt (its bundle predates origins, or names an unknown
    /// challenge): HF's record still counts in the budget.
    Never(String),
}

async fn read_bundle_file(s: &AppState, read: &JobCommandRead, name: &str) -> Result<Vec<u8>, Rebuild> {
    let path = format!("{}/{name}", pipeline::bundle_dir(&read.run_id));
    s.deps.datasets.read(&s.runs_dataset, &read.bundle_revision, &path, MAX_BUNDLE_FILE).await.map_err(|e| {
        match e {
            DatasetError::Unavailable(r) => Rebuild::Later(format!("the runs dataset did not answer: {r}")),
            other => Rebuild::Never(format!("its bundle's {name} could not be read: {other}")),
        }
    })
}

/// Stores the job's run; false while another run holds the live reservation.
async fn rebuild(s: &AppState, job: &Job, read: &JobCommandRead) -> Result<bool, Rebuild> {
    let setup: JobSetup = serde_json::from_slice(&read_bundle_file(s, read, "arena.json").await?)
        .map_err(|e| Rebuild::Never(format!("its arena.json is unreadable: {e}")))?;
    let signed = setup
        .signed_origin()
        .ok_or_else(|| Rebuild::Never("its bundle predates the run origins a rebuild needs".into()))?;
    let key = s
        .signing
        .as_ref()
        .ok_or_else(|| Rebuild::Never("the arena has no signing key (ARENA_BACKUP_KEY)".into()))?;
    let signature = setup.origin_signature.as_deref().unwrap_or_default();
    if !key.verify(&[&signed], signature) {
        return Err(Rebuild::Never(
            "its bundle's origin does not carry the arena's signature: not written by this arena".into(),
        ));
    }
    if setup.run_id != read.run_id || RunId::parse(&read.run_id).is_err() {
        return Err(Rebuild::Never(format!("its bundle is for run {}", setup.run_id)));
    }
    if job.labels.get(job_labels::PURPOSE).map(String::as_str) != Some(setup.purpose.job_purpose()) {
        return Err(Rebuild::Never(format!("its bundle is for a {} run", setup.purpose.as_str())));
    }
    let origin = setup.origin.expect("signed_origin answered, so there is one");
    if s.registry.challenge(&setup.challenge_id).is_none() {
        return Err(Rebuild::Never(format!(
            "challenge {} is not in this arena's registry",
            setup.challenge_id
        )));
    }
    let config = read_bundle_file(s, read, "config.toml").await?;
    let config: PipelineConfig = std::str::from_utf8(&config)
        .ok()
        .and_then(|text| toml::from_str(text).ok())
        .ok_or_else(|| Rebuild::Never("its config.toml is unreadable".into()))?;
    let mirror_commit = config.train_dataset.as_ref().map(|t| t.revision.clone());
    // A secret nobody holds: the job's relay is refused, and the run is followed without it.
    let secret_hash = crate::identity::sha256_hex(&crate::identity::random_secret());
    let now = s.now();
    let run = NewRun {
        id: &read.run_id,
        challenge_id: &setup.challenge_id,
        purpose: setup.purpose,
        environment_id: origin.environment_id.as_deref(),
        author: &origin.author,
        author_id: &origin.author_id,
        agent_id: origin.agent_id.as_deref(),
        request_key: &origin.request_key,
        request_body: &origin.request_body,
        flavor: &origin.flavor,
        timeout_s: origin.timeout_s,
        reserved_cents: origin.reserved_cents,
        eligible_tasks: origin.eligible_tasks,
        excluded_task_count: origin.excluded_task_count,
        secret_hash: &secret_hash,
        now: &origin.requested_at,
        now_epoch: origin.requested_epoch,
    };
    let job_found = FoundJob {
        bundle_commit: &read.bundle_revision,
        mirror_commit: mirror_commit.as_deref(),
        job_id: &job.id,
        job_status: job.status.stage.as_str(),
        job_script_sha256: &read.script_sha256,
    };
    match repo::recovered(&s.db, &run, &job_found, &now).await {
        Ok(Inserted::Stored(_)) => {
            s.changes.bump(crate::changes::Topic::Runs);
            s.changes.bump(crate::changes::Topic::Ledger);
            Ok(true)
        }
        // Stored meanwhile (by the launcher of a run the snapshot held): nothing to take back.
        Ok(Inserted::Repeat(other)) if other.id.as_str() == read.run_id => Ok(true),
        Ok(Inserted::Repeat(other)) => {
            Err(Rebuild::Never(format!("its request id is already run {}'s", other.id)))
        }
        Ok(Inserted::AnotherActive) => Ok(false),
        // A constraint the row breaks will break it at every pass: end the finding for this job.
        Err(sqlx::Error::Database(e)) => Err(Rebuild::Never(format!("the database refused its row: {e}"))),
        Err(e) => Err(Rebuild::Later(e.to_string())),
    }
}
