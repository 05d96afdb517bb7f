//! The OpenEnv track: a submission is one environment published as public container images. This
//! module holds the rules the arena applies at once, before anything is stored, in the guide's
//! order: the contract (task limits), the sandbox's size, the schema and example actions, the image
//! references, and, once each image has been read from its registry, what its manifest and config
//! must say. The reads themselves live in the server; the decisions are here.

use crate::invalid::Invalid;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ErrorCode;

pub mod admission;
pub mod alerts;
pub mod assignment;
pub mod benchmark;
pub mod by_account;
pub mod controls;
pub mod episode;
pub mod evaluation;
pub mod evidence;
pub mod image;
pub mod queue;
pub mod quota;
pub mod refusal;
pub mod run;
pub mod schema;
pub mod state;
pub mod wording;
pub use image::{ImageRef, RegistryHost};
pub use refusal::Refusal;

#[cfg(test)]
mod tests;

/// At most this many tasks, example actions and images per submission.
pub const MAX_TASKS: usize = 50;
pub const MAX_EXAMPLE_ACTIONS: usize = 16;
pub const MAX_IMAGES: usize = 50;
/// The port the sandbox keeps for itself.
pub const RESERVED_PORT: u16 = 49983;
pub const MAX_START_ARGS: usize = 32;
pub const MAX_START_CHARS: usize = 4096;
pub const MAX_IMAGE_BYTES: u64 = 2 << 30;
pub const MAX_LAYERS: usize = 128;
pub const MAX_SUBMISSION_BYTES: u64 = 32 << 30;

/// One task of a submission, with the guide's defaults for what it leaves out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"))]
    pub task_id: String,
    /// `train` or `eval`; at least one task trains.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^(train|eval)$"))]
    pub split: String,
    /// This task's own image; the submission's `image` when absent.
    #[serde(default)]
    pub image: Option<String>,
    /// The three walls together are at most 3,600 s.
    #[serde(default = "d180")]
    #[cfg_attr(feature = "openapi", schema(minimum = 120, maximum = 300))]
    pub reset_wall_s: u64,
    #[serde(default = "d1800")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 3600))]
    pub rollout_wall_s: u64,
    #[serde(default = "d120")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1800))]
    pub verifier_wall_s: u64,
    #[serde(default = "d120")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 120))]
    pub tool_wall_s: u64,
    #[serde(default = "d128")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1024))]
    pub tool_calls_total: u64,
    #[serde(default = "d60")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 60))]
    pub tool_calls_per_minute: u64,
    #[serde(default = "d4096")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 8192))]
    pub completion_tokens: u64,
    #[serde(default = "d8192")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 16384))]
    pub context_tokens: u64,
    #[serde(default = "d2")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 16))]
    pub memory_gib: u64,
    #[serde(default = "d1")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 2))]
    pub cpu_floor_vcpus: u64,
    #[serde(default = "d10")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 44))]
    pub workspace_gib: u64,
}

macro_rules! defaults {
    ($($name:ident = $v:expr),*) => { $(fn $name() -> u64 { $v })* };
}
defaults!(
    d1 = 1,
    d2 = 2,
    d10 = 10,
    d60 = 60,
    d120 = 120,
    d128 = 128,
    d180 = 180,
    d1800 = 1800,
    d4096 = 4096,
    d8192 = 8192
);

/// The body of `POST /api/openenv/submissions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SubmissionRequest {
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"))]
    pub submission_id: String,
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200, pattern = r"\S"))]
    pub name: String,
    /// The image every task without its own uses (Docker Hub or GHCR, a tag or a digest).
    #[serde(default)]
    pub image: Option<String>,
    /// What the server's `GET /schema` returns: `action` and `observation` JSON Schemas.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub schema: Value,
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 50))]
    pub tasks: Vec<TaskSpec>,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>, min_items = 1, max_items = 16))]
    pub example_actions: Vec<Value>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub finish_action: Option<Value>,
    /// Not 0, not 49983 (the sandbox keeps it).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 49982))]
    pub server_port: Option<u16>,
    /// An `https` link, recorded as the submitter's claim.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 2048, pattern = r"^https://\S+$"))]
    pub source: Option<String>,
}

fn refuse<T>(code: ErrorCode, message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal { code, message: message.into() })
}

/// Body fields of the retired forms, which named a Space or a dataset as the image's source.
const RETIRED_FIELDS: [&str; 6] = ["space", "space_id", "space_url", "dataset", "dataset_id", "repo_id"];

/// Reads the body: a retired form is `SUBMISSION_FORMAT_RETIRED`, anything else that is not the
/// guide's body is `CONTRACT_INVALID`, naming what is wrong.
pub fn parse(body: &Value) -> Result<SubmissionRequest, Refusal> {
    if let Some(field) = RETIRED_FIELDS.iter().find(|f| body.get(**f).is_some()) {
        return refuse(
            ErrorCode::SubmissionFormatRetired,
            format!("`{field}` names a Space or a dataset as the image source; that form is retired: build the environment into an image, publish it on Docker Hub or GHCR, and submit its reference as `image`"),
        );
    }
    serde_json::from_value(body.clone()).or_else(|e| {
        refuse(ErrorCode::ContractInvalid, format!("the submission is not the guide's body: {e}"))
    })
}

/// One task limit of the guide's table: the field, its value and the allowed range.
fn limits(t: &TaskSpec) -> [(&'static str, u64, u64, u64); 9] {
    [
        ("reset_wall_s", t.reset_wall_s, 120, 300),
        ("rollout_wall_s", t.rollout_wall_s, 1, 3600),
        ("verifier_wall_s", t.verifier_wall_s, 1, 1800),
        ("tool_wall_s", t.tool_wall_s, 1, 120),
        ("tool_calls_total", t.tool_calls_total, 1, 1024),
        ("tool_calls_per_minute", t.tool_calls_per_minute, 1, 60),
        ("completion_tokens", t.completion_tokens, 1, 8192),
        ("context_tokens", t.context_tokens, 1, 16384),
        (
            "reset_wall_s + rollout_wall_s + verifier_wall_s",
            t.reset_wall_s + t.rollout_wall_s + t.verifier_wall_s,
            0,
            3600,
        ),
    ]
}

/// The sandbox every task runs in: 16 GiB, 2 vCPU, 44 GiB of workspace.
fn sandbox(t: &TaskSpec) -> [(&'static str, u64, u64); 3] {
    [
        ("memory_gib", t.memory_gib, 16),
        ("cpu_floor_vcpus", t.cpu_floor_vcpus, 2),
        ("workspace_gib", t.workspace_gib, 44),
    ]
}

fn id_ok(id: &str, max: usize) -> bool {
    (1..=max).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && id.as_bytes()[0].is_ascii_alphanumeric()
}

/// The contract, then the sandbox's size: every task within the guide's limits.
pub fn check_contract(r: &SubmissionRequest) -> Result<(), Refusal> {
    let bad = |m: String| refuse(ErrorCode::ContractInvalid, m);
    if !id_ok(&r.submission_id, 64) {
        return bad(format!(
            "`submission_id` `{}` must be 1 to 64 letters, digits, `-`, `_` or `.`, starting with a letter or digit",
            r.submission_id
        ));
    }
    if r.name.trim().is_empty() || r.name.chars().count() > 200 {
        return bad("`name` must be 1 to 200 characters".into());
    }
    if !(1..=MAX_TASKS).contains(&r.tasks.len()) {
        return bad(format!("`tasks` holds {}; a submission has 1 to {MAX_TASKS}", r.tasks.len()));
    }
    if !(1..=MAX_EXAMPLE_ACTIONS).contains(&r.example_actions.len()) {
        return bad(format!(
            "`example_actions` holds {}; a submission has 1 to {MAX_EXAMPLE_ACTIONS}",
            r.example_actions.len()
        ));
    }
    let mut seen = BTreeSet::new();
    for t in &r.tasks {
        if !seen.insert(t.task_id.as_str()) {
            return bad(format!("task id `{}` appears twice; task ids are unique", t.task_id));
        }
        check_task_contract(t)?;
        if t.image.is_none() && r.image.is_none() {
            return bad(format!("task `{}` has no image and the submission names none", t.task_id));
        }
    }
    if !r.tasks.iter().any(|t| t.split == "train") {
        return bad("no task has `split: \"train\"`; at least one task trains".into());
    }
    if let Some(port) = r.server_port {
        if port == 0 || port == RESERVED_PORT {
            return bad(format!("`server_port` {port} is not allowed (port {RESERVED_PORT} is reserved)"));
        }
    }
    if let Some(source) = &r.source {
        if !source.starts_with("https://") || source.len() > 2048 || source.contains(char::is_whitespace) {
            return bad("`source` must be one `https://` link".into());
        }
    }
    r.tasks.iter().try_for_each(check_task_sandbox)
}

/// One task's id, split and limits (the guide's table): a submission's and a held-out benchmark's.
fn check_task_contract(t: &TaskSpec) -> Result<(), Refusal> {
    let bad = |m: String| refuse(ErrorCode::ContractInvalid, m);
    if !id_ok(&t.task_id, 128) {
        return bad(format!("task id `{}` must be 1 to 128 letters, digits, `-`, `_` or `.`", t.task_id));
    }
    if !matches!(t.split.as_str(), "train" | "eval") {
        return bad(format!("task `{}` has split `{}`; a split is `train` or `eval`", t.task_id, t.split));
    }
    for (field, value, min, max) in limits(t) {
        if value < min || value > max {
            let range = if min <= 1 { format!("at most {max}") } else { format!("{min} to {max}") };
            return bad(format!("task `{}`: `{field}` is {value}; the limit is {range}", t.task_id));
        }
    }
    Ok(())
}

/// One task's sandbox: within the size every sandbox has.
fn check_task_sandbox(t: &TaskSpec) -> Result<(), Refusal> {
    for (field, value, max) in sandbox(t) {
        if value > max {
            return refuse(
                ErrorCode::EnvironmentTooLargeForSandbox,
                format!("task `{}`: `{field}` is {value}; a sandbox has at most {max}", t.task_id),
            );
        }
    }
    Ok(())
}

/// Everything one task must meet: its contract, then its sandbox.
pub fn check_task(t: &TaskSpec) -> Result<(), Refusal> {
    check_task_contract(t)?;
    check_task_sandbox(t)
}

/// Whether an action takes one of the two reserved shapes: `{"finish": true}`, or an object whose
/// only field is `action` holding an object (read as a wrapper).
pub fn is_reserved(action: &Value) -> bool {
    let Some(obj) = action.as_object() else { return false };
    let finish = obj.len() == 1 && obj.get("finish") == Some(&Value::Bool(true));
    let wrapper = obj.len() == 1 && obj.get("action").is_some_and(Value::is_object);
    finish || wrapper
}

/// The schema's shape: an object with `action` and `observation` schemas (objects), as the server's
/// `/schema` returns them; whether each is a valid JSON Schema is the server's check (it compiles
/// them), as is each example action's validity.
pub fn check_schema_shape(r: &SubmissionRequest) -> Result<(), Refusal> {
    let bad = |m: String| refuse(ErrorCode::SchemaInvalid, m);
    let Some(schema) = r.schema.as_object() else {
        return bad("`schema` must be an object with `action` and `observation`".into());
    };
    for part in ["action", "observation"] {
        if !schema.get(part).is_some_and(Value::is_object) {
            return bad(format!("`schema.{part}` must be a JSON Schema object"));
        }
    }
    // Named as a person counts them: example action 1 first, then the finish action.
    let named = (1..).map(|n| format!("example action {n}"));
    let actions = r
        .example_actions
        .iter()
        .zip(named)
        .chain(r.finish_action.iter().map(|a| (a, "`finish_action`".into())));
    for (a, name) in actions {
        if !a.is_object() {
            return bad(format!("{name} is not a JSON object"));
        }
        if is_reserved(a) {
            return bad(format!(
                "{name} takes a reserved shape (`{{\"finish\": true}}`, or only `action` holding an object); rename its fields"
            ));
        }
    }
    Ok(())
}

/// The references each task uses, in the order first named, and each task's image.
pub fn image_references(r: &SubmissionRequest) -> Result<(Vec<ImageRef>, BTreeMap<String, usize>), Refusal> {
    let mut refs: Vec<ImageRef> = Vec::new();
    let mut by_task = BTreeMap::new();
    let mut index = |raw: &str| -> Result<usize, Refusal> {
        let parsed = ImageRef::parse(raw)?;
        Ok(match refs.iter().position(|x| *x == parsed) {
            Some(i) => i,
            None => {
                refs.push(parsed);
                refs.len() - 1
            }
        })
    };
    if let Some(image) = &r.image {
        index(image)?;
    }
    for t in &r.tasks {
        let raw = t.image.as_ref().or(r.image.as_ref()).expect("checked by the contract");
        let i = index(raw)?;
        by_task.insert(t.task_id.clone(), i);
    }
    if refs.len() > MAX_IMAGES {
        return refuse(
            ErrorCode::ImageLimitExceeded,
            format!("{} images are named; a submission names at most {MAX_IMAGES}", refs.len()),
        );
    }
    Ok((refs, by_task))
}

/// What the registry said of one image: its manifest (after choosing linux/amd64 from an index) and
/// its config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageFacts {
    /// The digest of the linux/amd64 image manifest: what the submission pins.
    pub digest: String,
    pub layers: Vec<Layer>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `EXPOSE`d ports as the config lists them (`8000/tcp`).
    pub exposed_ports: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// The config's `Env`, `KEY=value` each.
    #[serde(default)]
    pub env: Vec<String>,
    /// The config's `WorkingDir` and `User` (empty when the image sets none).
    #[serde(default)]
    pub workdir: String,
    #[serde(default)]
    pub user: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layer {
    pub digest: String,
    pub size: u64,
}

/// An image the arena can run: its pinned digest, the port its server listens on, its size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageSummary {
    pub port: u16,
    pub compressed_bytes: u64,
    pub start: SandboxStart,
}

/// How a sandbox job starts an image's server. HF runs a job's `command` as it is and does not
/// pass it to the image's entrypoint ("Always spell out the full command", HF's Jobs docs), so the
/// command is the image's own `ENTRYPOINT` followed by its `CMD`, as `docker run` would start it.
/// The container keeps the image's `WORKDIR` and `USER`; its `ENV` is sent as the job's
/// environment too, so the server sees the same variables whether or not HF applies the image's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxStart {
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
}

/// The longest `Env` an image may have: a few dozen variables is usual.
pub const MAX_ENV_VARS: usize = 128;
pub const MAX_ENV_CHARS: usize = 32 * 1024;

/// The sandbox start of an image, or why none can be built from its config.
pub fn sandbox_start(facts: &ImageFacts) -> Result<SandboxStart, Invalid> {
    let command: Vec<String> = facts.entrypoint.iter().chain(&facts.cmd).cloned().collect();
    if command.is_empty() {
        return Err("the image has no ENTRYPOINT or CMD to start its server".into());
    }
    if command.len() > MAX_START_ARGS {
        return Err(
            format!("its start command has {} arguments; at most {MAX_START_ARGS}", command.len()).into()
        );
    }
    let chars: usize = command.iter().map(|a| a.chars().count()).sum();
    if chars > MAX_START_CHARS {
        return Err(format!("its start command has {chars} characters; at most {MAX_START_CHARS}").into());
    }
    if command[0].is_empty() {
        return Err("its start command begins with an empty program name".into());
    }
    if facts.env.len() > MAX_ENV_VARS {
        return Err(format!("its ENV sets {} variables; at most {MAX_ENV_VARS}", facts.env.len()).into());
    }
    if facts.env.iter().map(String::len).sum::<usize>() > MAX_ENV_CHARS {
        return Err(format!("its ENV holds more than {MAX_ENV_CHARS} characters").into());
    }
    let mut env = BTreeMap::new();
    for entry in &facts.env {
        let (key, value) = entry.split_once('=').unwrap_or((entry.as_str(), ""));
        let valid = key.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(format!(
                "its ENV entry `{}` is not NAME=value",
                entry.chars().take(80).collect::<String>()
            )
            .into());
        }
        // A later entry wins, as in the container.
        env.insert(key.to_string(), value.to_string());
    }
    Ok(SandboxStart { command, env })
}

/// The URL HF lists for `port` among the `status.exposeUrls` of a job that exposed `exposed`: the
/// one whose host holds `--{port}.` (HF's `https://{job_id}--{port}.hf.jobs`), as
/// `huggingface_hub`'s sandbox picks it, never by position, since the list's order is not
/// documented; or, for a job that exposed only `port` and lists one URL, that URL (a loopback
/// stand-in's `http://127.0.0.1:{proxy}` names no port in its host).
pub fn exposed_url(urls: &[String], port: u16, exposed: &[u16]) -> Option<String> {
    let marker = format!("--{port}.");
    let named = urls.iter().find(|u| {
        let host = u.split_once("://").map_or(u.as_str(), |(_, rest)| rest);
        host.split(['/', '?', '#']).next().unwrap_or_default().contains(&marker)
    });
    let only = (exposed == [port] && urls.len() == 1).then(|| &urls[0]);
    named.or(only).map(|u| u.trim_end_matches('/').to_string())
}

/// The start command, the port and the size of one image.
pub fn judge_image(
    facts: &ImageFacts,
    server_port: Option<u16>,
    name: &str,
) -> Result<ImageSummary, Refusal> {
    let server = |m: String| refuse(ErrorCode::ImageServerInvalid, format!("{name}: {m}"));
    let start = match sandbox_start(facts) {
        Ok(start) => start,
        Err(m) => return server(m.0),
    };
    let tcp: Vec<u16> = facts
        .exposed_ports
        .iter()
        .filter_map(|p| {
            let (port, proto) = p.split_once('/').unwrap_or((p.as_str(), "tcp"));
            (proto == "tcp").then(|| port.parse().ok()).flatten()
        })
        .collect();
    let port = match (server_port, tcp.as_slice()) {
        (Some(p), _) => p,
        (None, [one]) => *one,
        (None, []) => return server("it EXPOSEs no port and the submission sets no `server_port`".into()),
        (None, _) => {
            return server(format!("it EXPOSEs {} ports; set `server_port` to its server's", tcp.len()))
        }
    };
    if port == RESERVED_PORT {
        return server(format!("port {RESERVED_PORT} is reserved by the sandbox"));
    }
    if facts.layers.len() > MAX_LAYERS {
        return refuse(
            ErrorCode::ImageCompressedSizeExceeded,
            format!("{name}: {} layers; at most {MAX_LAYERS}", facts.layers.len()),
        );
    }
    let bytes: u64 = facts.layers.iter().map(|l| l.size).sum();
    if bytes > MAX_IMAGE_BYTES {
        return refuse(
            ErrorCode::ImageCompressedSizeExceeded,
            format!("{name}: {bytes} bytes compressed; at most {MAX_IMAGE_BYTES} (2 GiB)"),
        );
    }
    Ok(ImageSummary { port, compressed_bytes: bytes, start })
}

/// All images together, with a layer shared by several counted once.
pub fn check_total_size(images: &[&ImageFacts]) -> Result<u64, Refusal> {
    let mut layers = BTreeMap::new();
    for f in images {
        for l in &f.layers {
            layers.insert(l.digest.as_str(), l.size);
        }
    }
    let total: u64 = layers.values().sum();
    if total > MAX_SUBMISSION_BYTES {
        return refuse(
            ErrorCode::SubmissionSizeExceeded,
            format!("the images hold {total} bytes compressed together (shared layers once); at most {MAX_SUBMISSION_BYTES} (32 GiB)"),
        );
    }
    Ok(total)
}

/// One image of a submission as its status shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImageView {
    /// The reference as submitted.
    pub submitted: String,
    /// The pinned linux/amd64 image, `…@sha256:…`: what admission and training run.
    pub resolved: String,
    pub port: u16,
    pub compressed_bytes: u64,
    /// The image's `org.opencontainers.image.*` labels: the submitter's claims, not checked.
    pub labels: BTreeMap<String, String>,
    /// Per task served by this image: `pending`, `passed`, or `failed` with its code.
    pub compatibility: BTreeMap<String, Compatibility>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Compatibility {
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SubmissionReport {
    pub errors: Vec<AdmissionError>,
    /// What admission noticed without refusing (`RESET_IGNORES_TASK`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<AdmissionError>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AdmissionError {
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// What the participant's own server answered, bounded (`openenv::evidence`): the schema's
    /// differences, the episode's transcript, the failed checks, a server's exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub evidence: Option<Value>,
    /// What to do next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Slot {
    /// `held` while it is checked, `used` when it counts, `returned` when it does not.
    pub state: String,
    /// While the account's slots are all taken: seconds until its next one frees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunRef {
    /// Null until the arena starts the submission's run.
    pub run_id: Option<String>,
    /// The run's state once it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<run::RunState>,
}

/// `GET /api/openenv/submissions/{id}`, and the answer to a submission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvSubmission))]
pub struct SubmissionView {
    pub submission_id: String,
    pub name: String,
    pub account: String,
    /// `validating`, `validated` or `rejected`.
    pub state: String,
    pub report: SubmissionReport,
    /// `author` or `platform` once rejected.
    pub error_origin: Option<String>,
    pub slot: Slot,
    pub images: Vec<ImageView>,
    pub run: RunRef,
    /// While an admitted submission waits for a GPU: its place in line and the estimated start;
    /// null otherwise (before admission, once its run exists, or rejected).
    #[serde(default)]
    pub queue: Option<queue::QueuePlace>,
    /// The submitter's claimed source (`https`), not checked.
    pub source: Option<String>,
    pub accepted_at: String,
    pub updated_at: String,
    /// True when this answer is the stored record of an earlier identical request.
    pub existing: bool,
    /// Set while admission waits before taking it, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
}

/// A submission accepted but not yet taken by admission: until when, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvWaiting))]
pub struct Waiting {
    /// When admission takes it (RFC 3339).
    pub until: String,
    pub until_epoch: i64,
    pub reason: String,
}

/// The OCI labels a submission's status shows: `org.opencontainers.image.*` only.
pub fn claimed_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(k, _)| k.starts_with("org.opencontainers.image."))
        .map(|(k, v)| (k.clone(), v.chars().take(512).collect()))
        .collect()
}
