//! A run's bundle, `job-inputs/{run_id}/` in the runs dataset, laid out as the pipeline's
//! `create_job_bundle` lays it out (reference §2): `job.json`, `config.toml`,
//! `task-lists/train_dataset.txt` and `task-lists/eval_suite-{name}.txt`; plus `arena.json`, what
//! the arena's job script needs beyond them (the model server, the bridge, the relay's stages).

use serde::{Deserialize, Serialize};

use super::config::{self, PipelineConfig};
use crate::registry::{Challenge, Registry};
use crate::runs::Purpose;

/// `job.json`: every key the pipeline's job wrapper reads, in the order `write_json` sorts them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobManifest {
    pub artifact_repo: String,
    pub config: String,
    pub leaderboard_repo: String,
    /// Runs publish no model: `null`.
    pub model_repo: Option<String>,
    pub private_artifacts: bool,
    pub private_model: bool,
    pub run_id: String,
    pub schema_version: u32,
    pub submission_id: String,
    pub team_name: String,
}

impl JobManifest {
    /// `json.dumps(…, indent=2, sort_keys=True)` and a newline, as the pipeline writes it.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).expect("JSON");
        out.push(b'\n');
        out
    }
}

/// `arena.json`: how the job script sets the job up around the pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSetup {
    pub schema_version: u32,
    pub run_id: String,
    pub purpose: Purpose,
    pub challenge_id: String,
    /// The pipeline commit installed in the job (`[pipeline] commit`).
    pub pipeline_commit: String,
    pub model_server: ModelServer,
    /// CUDA devices of the trainer (`posttrainarena-train run`).
    pub trainer_gpus: Vec<u32>,
    pub bridge: Bridge,
    /// `BENCHFLOW_BASE_MODEL` and `BENCHFLOW_ADAPTER_MODEL`.
    pub base_model_alias: String,
    pub student_model_alias: String,
    /// The challenge's Trackio Space: the job sets `TRACKIO_SPACE_ID` to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trackio_space: Option<String>,
    /// Who asked for the run and what it reserved: the job script ignores it; a restored arena
    /// rebuilds a run it has no row of from it (`server::runs::recover`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<RunOrigin>,
    /// The arena's HMAC-SHA-256 (with its backup key) of [`JobSetup::signed_origin`], hex: a
    /// restored arena believes an origin only when it signed it, since anyone who can start a job
    /// could point one at a bundle of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_signature: Option<String>,
}

impl JobSetup {
    /// What the origin's signature covers: the origin and the run, challenge and purpose it is
    /// for, so that a genuine origin cannot be copied into another run's bundle. `None` without an
    /// origin.
    pub fn signed_origin(&self) -> Option<Vec<u8>> {
        let origin = self.origin.as_ref()?;
        let mut message = format!(
            "open-env-arena run origin v1\n{}\n{}\n{}\n",
            self.run_id,
            self.challenge_id,
            self.purpose.as_str()
        )
        .into_bytes();
        message.extend(serde_json::to_vec(origin).expect("an origin is JSON"));
        Some(message)
    }
}

/// The run row's own facts that nothing else outside the arena records: the requester, the
/// request, the reservation and the counts the launch computed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOrigin {
    /// `None` for a baseline measurement.
    pub environment_id: Option<String>,
    pub author: String,
    pub author_id: String,
    pub agent_id: Option<String>,
    pub request_key: String,
    pub request_body: String,
    pub flavor: String,
    pub timeout_s: i64,
    pub reserved_cents: i64,
    pub eligible_tasks: i64,
    pub excluded_task_count: i64,
    pub requested_at: String,
    pub requested_epoch: i64,
}

/// `posttrainarena-vllm-serve`: TRL's vLLM server, on its own GPUs, bound to loopback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelServer {
    pub model: String,
    pub revision: String,
    pub gpus: Vec<u32>,
    pub tensor_parallel_size: u32,
    pub data_parallel_size: u32,
    pub max_model_len: u32,
}

/// `posttrainarena-train model-bridge`: the OpenAI-compatible endpoint sandboxes reach through the
/// job's exposed `port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bridge {
    pub port: u16,
    pub max_tokens: u32,
    pub max_context_tokens: u32,
    pub max_logprob_context_tokens: u32,
}

/// The exposed port of a run's model bridge: any port works in a job's container; one drawn from
/// the run id keeps runs on one machine (the local stand-in) apart, below the ports Linux hands
/// out to outgoing connections (32768 and up).
pub fn bridge_port(run_id: &str) -> u16 {
    let h = run_id
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    20_000 + (h % 12_000) as u16
}

pub fn setup(registry: &Registry, challenge: &Challenge, run_id: &str, purpose: Purpose) -> JobSetup {
    let header = &challenge.spec.challenge;
    let model = &registry.models[&header.model].model;
    let method = &registry.methods[&header.method];
    let s = &challenge.serving;
    let tp = s.tensor_parallel.max(1);
    JobSetup {
        schema_version: 1,
        run_id: run_id.to_string(),
        purpose,
        challenge_id: header.id.clone(),
        pipeline_commit: challenge.spec.pipeline.commit.clone(),
        model_server: ModelServer {
            model: model.repo.clone(),
            revision: model.revision.clone(),
            gpus: (s.trainer_gpus..s.trainer_gpus + s.vllm_gpus).collect(),
            tensor_parallel_size: tp,
            data_parallel_size: s.vllm_gpus / tp,
            max_model_len: s.max_context_tokens,
        },
        trainer_gpus: (0..s.trainer_gpus).collect(),
        bridge: Bridge {
            port: bridge_port(run_id),
            max_tokens: method.rollout.completion_tokens,
            max_context_tokens: method.rollout.context_tokens,
            max_logprob_context_tokens: method.rollout.context_tokens,
        },
        base_model_alias: config::BASE_ALIAS.into(),
        student_model_alias: config::STUDENT_ALIAS.into(),
        // A baseline trains nothing: there is nothing to log.
        trackio_space: challenge
            .spec
            .tracking
            .as_ref()
            .filter(|_| purpose == Purpose::Collection)
            .map(|t| t.trackio_space.clone()),
        origin: None,
        origin_signature: None,
    }
}

/// One file of a bundle: its path under `job-inputs/{run_id}/` and its bytes.
pub type BundleFile = (String, Vec<u8>);

/// A task list as `io.read_task_ids` reads it: one id per line.
pub fn task_list(ids: &[String]) -> Vec<u8> {
    let mut out = ids.join("\n").into_bytes();
    out.push(b'\n');
    out
}

/// Every file of a bundle, relative to it.
pub fn files(
    manifest: &JobManifest,
    config: &PipelineConfig,
    setup: &JobSetup,
    train_tasks: &[String],
    suites: &[(String, Vec<String>)],
) -> Vec<BundleFile> {
    let mut out = vec![
        ("job.json".to_string(), manifest.to_json()),
        ("config.toml".to_string(), config.to_toml().into_bytes()),
        ("arena.json".to_string(), {
            let mut v = serde_json::to_vec_pretty(setup).expect("JSON");
            v.push(b'\n');
            v
        }),
    ];
    if config.train_dataset.is_some() {
        out.push((config::TRAIN_TASK_LIST.to_string(), task_list(train_tasks)));
    }
    for (name, ids) in suites {
        out.push((config::suite_task_list(name), task_list(ids)));
    }
    out
}
