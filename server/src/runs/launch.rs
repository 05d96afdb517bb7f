//! A launch's steps outside the arena, each safe to repeat after a crash:
//! 1. the collection mirrored into the runs dataset at its pinned commit
//!    (`collections/{run_id}/`, one commit, its marker last), which the bundle's
//!    `[train_dataset]` then names;
//! 2. the bundle, `job-inputs/{run_id}/` as the pipeline's `create_job_bundle` lays it out
//!    (`job.json`, `config.toml`, the task lists) and the job script's `arena.json`, one commit;
//!    the leaderboard dataset made private (or found private) before it;
//! 3. the HF job: the uv image running the arena's job script by URL, pinned by its hash, with
//!    the secrets the pipeline needs (`domain::pipeline::secrets`), unless a job carrying the
//!    run's label exists.

use std::collections::BTreeMap;

use domain::collection::package;
use domain::collection::report::TaskStatus;
use domain::ids::{EnvironmentId, JobId, RunId};
use domain::job_labels;
use domain::pipeline::bundle::{self, JobManifest};
use domain::pipeline::config::{self, TrainDataset};
use domain::pipeline::{self as pipeline, secrets};
use domain::runs::JobStage;
use serde::{Deserialize, Serialize};

use crate::http::ApiError;
use crate::ports::datasets::DatasetError;
use crate::ports::jobs::{Expose, JobError, JobSpec};
use crate::runs::repo::{LaunchStep, Run};
use crate::AppState;

/// How long one server may work on a run before another may take over.
pub const LEASE_S: i64 = 120;

fn dataset_step(e: DatasetError) -> Step {
    match e {
        DatasetError::Unavailable(r) => Step::Unknown(format!("the runs dataset did not answer: {r}")),
        other => Step::Failed(format!("writing the runs dataset failed: {other}")),
    }
}

/// `collections/{run_id}/arena-mirror.json`: what was mirrored, written with the files.
#[derive(Debug, Serialize, Deserialize)]
struct MirrorMarker {
    environment_id: String,
    repo_type: String,
    repo_id: String,
    commit: String,
    entry_path: String,
    /// The folder of the task packages, relative to the mirror.
    tasks_dir: String,
}

fn marker_path(run_id: &RunId) -> String {
    format!("{}/arena-mirror.json", pipeline::mirror_dir(run_id))
}

/// The collection's files at its pinned commit, into the runs dataset; answers the mirror's commit
/// and its marker. A mirror an earlier attempt made is found by its marker.
async fn mirror_collection(
    s: &AppState,
    run: &Run,
    environment_id: &EnvironmentId,
) -> Result<(String, MirrorMarker), Step> {
    let ds = &s.runs_dataset;
    if let Some(found) = read_marker(s, run, "main").await? {
        let head = s.deps.datasets.head(ds).await.map_err(dataset_step)?;
        return Ok((head, found));
    }
    let (record, _) = crate::collections::service::get(s, environment_id)
        .await
        .map_err(|e| Step::Failed(format!("the collection could not be read: {}", e.into_body().message)))?;
    let source = record.pinned_source().ok_or_else(|| Step::Failed("an unknown repository type".into()))?;
    let (listing, contents) = s.sources.snapshot(&source, &record.commit).await.map_err(|e| match e {
        crate::sources::SourceError::Unavailable(r) => Step::Unknown(format!("reading the collection: {r}")),
        other => Step::Failed(format!("the collection can no longer be read at its commit: {other}")),
    })?;
    let layout = package::discover(&listing);
    let marker = MirrorMarker {
        environment_id: record.environment_id.clone(),
        repo_type: record.repo_type.clone(),
        repo_id: record.repo_id.clone(),
        commit: record.commit.clone(),
        entry_path: record.entry_path.clone(),
        tasks_dir: layout.tasks_dir.unwrap_or("envs").to_string(),
    };
    let dir = pipeline::mirror_dir(&run.id);
    let mut files: Vec<(String, Vec<u8>)> =
        contents.iter().map(|(path, blob)| (format!("{dir}/{path}"), blob.bytes().to_vec())).collect();
    files.push((marker_path(&run.id), serde_json::to_vec_pretty(&marker).expect("JSON")));
    let summary = format!("{}: mirror of {} at {}", run.id, record.environment_id, record.commit);
    let commit = s.deps.datasets.commit(ds, &summary, &files).await.map_err(dataset_step)?;
    Ok((commit, marker))
}

async fn read_marker(s: &AppState, run: &Run, revision: &str) -> Result<Option<MirrorMarker>, Step> {
    match s.deps.datasets.read(&s.runs_dataset, revision, &marker_path(&run.id), 1 << 16).await {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Step::Failed(format!("the mirror's marker is unreadable: {e}"))),
        Err(DatasetError::NotFound) => Ok(None),
        Err(e) => Err(dataset_step(e)),
    }
}

/// The leaderboard dataset the pipeline's publish commands write, private: created so, or found
/// so. The pipeline would create a missing one public.
async fn private_leaderboard(s: &AppState) -> Result<(), Step> {
    let repo = &s.jobs.leaderboard_dataset;
    s.deps.datasets.ensure(repo).await.map_err(dataset_step)?;
    match s.deps.datasets.is_private(repo).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(Step::Failed(format!(
            "the leaderboard dataset {repo} is public, and each run's record would be published there: an organizer makes it private"
        ))),
        Err(e) => Err(dataset_step(e)),
    }
}

/// The run's bundle, unless an earlier attempt committed it; answers the commit that holds it.
pub async fn bundle(s: &AppState, run: &Run) -> Result<String, Step> {
    let ds = &s.runs_dataset;
    let dir = pipeline::bundle_dir(&run.id);
    s.deps.datasets.ensure(ds).await.map_err(dataset_step)?;
    private_leaderboard(s).await?;
    match s.deps.datasets.read(ds, "main", &format!("{dir}/job.json"), 1 << 20).await {
        Ok(_) => return s.deps.datasets.head(ds).await.map_err(dataset_step),
        Err(DatasetError::NotFound) => {}
        Err(e) => return Err(dataset_step(e)),
    }
    let c = s.challenge(&run.challenge_id).map_err(|e| Step::Failed(e.into_body().message))?;
    let (train, train_tasks, submission_id, team_name) = match &run.environment_id {
        None => (
            None,
            Vec::new(),
            format!("baseline-{}", run.challenge_id),
            "Open Env Arena organizers".to_string(),
        ),
        Some(environment_id) => {
            let (mirror, marker) = match &run.mirror_commit {
                Some(commit) => match read_marker(s, run, commit).await? {
                    Some(marker) => (commit.clone(), marker),
                    None => mirror_collection(s, run, environment_id).await?,
                },
                None => mirror_collection(s, run, environment_id).await?,
            };
            if run.mirror_commit.as_deref() != Some(&mirror) {
                let domain::time::Timestamp { text: at, epoch } = s.now();
                crate::runs::repo::collection_mirrored(&s.db, &run.id, &mirror, &at, epoch)
                    .await
                    .map_err(|e| Step::Unknown(e.to_string()))?;
            }
            let (record, report) =
                crate::collections::service::get(s, environment_id).await.map_err(|e| {
                    Step::Failed(format!("the collection could not be read: {}", e.into_body().message))
                })?;
            let eligible: Vec<String> = report
                .task_list
                .iter()
                .filter(|t| t.status == TaskStatus::Eligible)
                .map(|t| t.name.clone())
                .collect();
            let train = TrainDataset {
                repo_id: ds.clone(),
                revision: mirror,
                path: format!("{}/{}", pipeline::mirror_dir(&run.id), marker.tasks_dir),
            };
            (Some(train), eligible, record.environment_id, record.author)
        }
    };
    let pipeline_config = config::compose(&s.registry, c, train.as_ref())
        .map_err(|e| Step::Failed(format!("composing the config: {e}")))?;
    let suites: Vec<(String, Vec<String>)> = config::eval_suites(&s.registry, c)
        .map_err(|e| Step::Failed(e.to_string()))?
        .into_iter()
        .map(|(suite, tasks)| (suite.name, tasks))
        .collect();
    let manifest = JobManifest {
        artifact_repo: ds.clone(),
        config: "config.toml".into(),
        leaderboard_repo: s.jobs.leaderboard_dataset.clone(),
        model_repo: None,
        private_artifacts: true,
        private_model: true,
        run_id: run.id.to_string(),
        schema_version: 1,
        submission_id,
        team_name,
    };
    let mut setup = bundle::setup(&s.registry, c, &run.id, run.purpose);
    setup.origin = Some(origin(run));
    // Signed with the arena's key, so that a restored arena believes it (`runs::recover`).
    setup.origin_signature = s.signing.as_ref().and_then(|k| setup.signed_origin().map(|m| k.sign(&[&m])));
    let files: Vec<(String, Vec<u8>)> =
        bundle::files(&manifest, &pipeline_config, &setup, &train_tasks, &suites)
            .into_iter()
            .map(|(path, bytes)| (format!("{dir}/{path}"), bytes))
            .collect();
    let summary = format!("{}: bundle of a {} run on {}", run.id, run.purpose.as_str(), run.challenge_id);
    s.deps.datasets.commit(ds, &summary, &files).await.map_err(dataset_step)
}

/// The run's own facts, kept in its bundle so that a restored arena can rebuild its row
/// (`runs::recover`).
fn origin(run: &Run) -> bundle::RunOrigin {
    bundle::RunOrigin {
        environment_id: run.environment_id.as_ref().map(ToString::to_string),
        author: run.author.clone(),
        author_id: run.author_id.clone(),
        agent_id: run.agent_id.clone(),
        request_key: run.request_key.clone(),
        request_body: run.request_body.clone(),
        flavor: run.flavor.clone(),
        timeout_s: run.timeout_s,
        reserved_cents: run.reserved_cents,
        eligible_tasks: run.eligible_tasks,
        excluded_task_count: run.excluded_task_count,
        requested_at: run.created_at.clone(),
        requested_epoch: run.created_epoch,
    }
}

/// Creates the run's HF job, unless one carrying its label exists.
pub async fn create_job(s: &AppState, run: &Run) -> Result<(JobId, JobStage), Step> {
    let job_step = |e: JobError| {
        match e {
        JobError::Unavailable { reason, .. } => Step::Unknown(reason),
        JobError::PaymentRequired(message) => Step::Failed(format!(
            "HF Jobs refused the launch: the arena's namespace has no prepaid credit (402: {message}). Nothing ran and nothing counts against you; stop and tell an organizer"
        )),
        other => Step::Failed(format!("HF Jobs refused the launch: {other}; stop and tell an organizer")),
    }
    };
    let jobs = s.launcher_of(&run.challenge_id).map_err(|e| Step::Failed(e.to_string()))?;
    let run_label = job_labels::value(run.id.as_str());
    if let Some(job) =
        jobs.find_by_label(job_labels::RUN, &run_label).await.map_err(job_step)?.into_iter().next()
    {
        return Ok((job.id, job.status.stage));
    }
    let c = s.challenge(&run.challenge_id).map_err(|e| Step::Failed(e.into_body().message))?;
    let commit =
        run.bundle_commit.clone().ok_or_else(|| Step::Failed("the bundle was not recorded".into()))?;
    // The names the pipeline's config needs; the values are the arena's (checked at preflight).
    let placeholder = TrainDataset { repo_id: String::new(), revision: String::new(), path: String::new() };
    let composed =
        config::compose(&s.registry, c, Some(&placeholder)).map_err(|e| Step::Failed(e.to_string()))?;
    let mut secrets_map = BTreeMap::new();
    for name in secrets::forwarded(&composed) {
        let value = s.jobs.secrets.get(name).ok_or_else(|| {
            Step::Failed(format!("the arena has no value for the job secret {name}; an organizer sets it"))
        })?;
        secrets_map.insert(name.to_string(), value.0.clone());
    }
    // The job reports back with this secret, and the bridge takes this key; only the relay
    // secret's hash is kept, set before the job exists so that the job and the row agree.
    let secret = crate::identity::random_secret();
    crate::runs::repo::set_secret(&s.db, &run.id, &crate::identity::sha256_hex(&secret))
        .await
        .map_err(|e| Step::Unknown(e.to_string()))?;
    crate::runs::repo::set_job_script(&s.db, &run.id, &s.jobs.script_sha256)
        .await
        .map_err(|e| Step::Unknown(e.to_string()))?;
    secrets_map.insert("ARENA_RUN_SECRET".into(), secret);
    secrets_map.insert(secrets::BRIDGE_KEY.into(), crate::identity::random_secret());
    let labels = job_labels::labels(&[
        (job_labels::RUN, run.id.as_str()),
        (job_labels::CHALLENGE, run.challenge_id.as_str()),
        (job_labels::REQUEST, &run.request_key),
        (job_labels::PURPOSE, run.purpose.job_purpose()),
    ]);
    let bundle_path = pipeline::bundle_dir(&run.id);
    let spec = JobSpec {
        docker_image: s.jobs.image.clone(),
        command: pipeline::job_command(&pipeline::JobArgs {
            script_url: &s.jobs.script_url,
            script_sha256: &s.jobs.script_sha256,
            bundle_repo: &s.runs_dataset,
            bundle_revision: &commit,
            bundle_path: &bundle_path,
            pipeline_ref: &c.spec.pipeline.commit,
        }),
        arguments: Vec::new(),
        environment: BTreeMap::from([
            ("ARENA_RUN_ID".to_string(), run.id.to_string()),
            ("ARENA_URL".to_string(), s.public_url.clone()),
            ("ARENA_JOB_NAMESPACE".to_string(), s.jobs.namespace.clone()),
            ("ARENA_HEARTBEAT_S".to_string(), s.jobs.heartbeat_s.to_string()),
        ]),
        secrets: secrets_map,
        flavor: run.flavor.clone(),
        timeout_seconds: run.timeout_s as u64,
        labels,
        attempts: c.spec.compute.attempts,
        expose: Some(Expose::public(bundle::bridge_port(&run.id))),
    };
    let job = jobs.create(&spec).await.map_err(job_step)?;
    Ok((job.id, job.status.stage))
}

/// Why a launch step did not finish.
#[derive(Debug)]
pub enum Advance {
    /// Another server holds the run's lease.
    Busy,
    /// HF did not answer or answered 5xx: tried again later, the run keeps its intent.
    Unknown(String),
    Internal(ApiError),
}

impl From<sqlx::Error> for Advance {
    fn from(e: sqlx::Error) -> Self {
        Advance::Internal(e.into())
    }
}

impl From<ApiError> for Advance {
    fn from(e: ApiError) -> Self {
        Advance::Internal(e)
    }
}

/// Takes the run's launch one step at a time to its end, under the run's lease. Safe to call
/// again after a crash anywhere: every step first looks for what an earlier attempt did.
pub async fn advance(s: &AppState, id: &RunId) -> Result<Run, Advance> {
    let outcome = crate::engine::leased(s, &Launching, id, advance_leased(s, id)).await?;
    s.changes.bump(crate::changes::Topic::Runs);
    outcome.unwrap_or(Err(Advance::Busy))
}

async fn advance_leased(s: &AppState, id: &RunId) -> Result<Run, Advance> {
    let mut run = must_get(s, id).await?;
    if run.launch == LaunchStep::Reserved {
        match bundle(s, &run).await {
            Ok(commit) => {
                let domain::time::Timestamp { text: at, epoch } = s.now();
                crate::runs::repo::mirrored(&s.db, id, &commit, &at, epoch).await?
            }
            Err(Step::Unknown(reason)) => return Err(Advance::Unknown(reason)),
            Err(Step::Failed(reason)) => return fail(s, id, &reason, false).await,
        }
        run = must_get(s, id).await?;
    }
    if run.launch == LaunchStep::Mirrored {
        match create_job(s, &run).await {
            Ok((job_id, status)) => {
                let domain::time::Timestamp { text: at, epoch } = s.now();
                crate::runs::repo::launched(&s.db, id, &job_id, status.as_str(), &at, epoch).await?
            }
            Err(Step::Unknown(reason)) => return Err(Advance::Unknown(reason)),
            Err(Step::Failed(reason)) => {
                let platform = domain::runs::is_platform_fault(&reason);
                return fail(s, id, &reason, platform).await;
            }
        }
        run = must_get(s, id).await?;
    }
    Ok(run)
}

/// The run's row, which a launch's caller has seen stored: its absence is an internal error.
pub async fn must_get(s: &AppState, id: &RunId) -> Result<Run, ApiError> {
    crate::runs::repo::get(&s.db, id).await?.ok_or_else(|| ApiError::internal("a run vanished"))
}

async fn fail(s: &AppState, id: &RunId, reason: &str, platform: bool) -> Result<Run, Advance> {
    let domain::time::Timestamp { text: at, epoch } = s.now();
    crate::runs::repo::launch_failed(&s.db, id, reason, platform, &at, epoch).await?;
    s.changes.bump(crate::changes::Topic::Ledger);
    Ok(must_get(s, id).await?)
}

pub enum Step {
    /// Definite: nothing more will be tried.
    Failed(String),
    Unknown(String),
}

/// Launches left unfinished (a crash, HF down): the background launcher's pass.
pub async fn resume_launches(s: &AppState) -> anyhow::Result<usize> {
    let done = crate::engine::pass(s, &Launching).await?;
    if done > 0 {
        s.changes.bump(crate::changes::Topic::Runs);
    }
    Ok(done)
}

/// Runs and baselines whose launch is unfinished, on the engine (`crate::engine`), under the
/// run's one lease (the reconciler's too, so a launch and a follow of one run never overlap).
pub struct Launching;

#[async_trait::async_trait]
impl crate::engine::Track for Launching {
    type Key = RunId;
    const RECORD: &'static str = "run";

    /// One at a time: each launch mirrors a collection and creates a job.
    fn at_once(&self) -> usize {
        1
    }

    fn lease_s(&self, _: &AppState) -> i64 {
        LEASE_S
    }

    async fn due(&self, s: &AppState) -> anyhow::Result<Vec<RunId>> {
        Ok(crate::runs::repo::unlaunched(&s.db).await?)
    }

    const LEASE: crate::engine::RowLease = crate::runs::repo::LEASE;

    fn key_values(id: &RunId) -> Vec<&str> {
        vec![id.as_str()]
    }

    async fn step(&self, s: &AppState, id: &RunId) -> anyhow::Result<bool> {
        match advance_leased(s, id).await {
            Ok(_) => Ok(true),
            Err(Advance::Unknown(reason)) => Err(anyhow::anyhow!("the launch is still unfinished: {reason}")),
            Err(Advance::Internal(e)) => Err(e.into()),
            Err(Advance::Busy) => Ok(false),
        }
    }
}
