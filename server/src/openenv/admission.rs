//! Admission of accepted OpenEnv submissions, in the background: for each task, its pinned image in
//! one fresh sandbox (an HF job exposing the server's port), `/health` within 120 s, the six
//! `openenv validate` criteria, the served schema against the submission's, and the example actions
//! played over the server's WebSocket to a terminal reward in [0, 1]. The rules are
//! `domain::openenv::admission`; each probe's outcome is stored with the submission, so a restart
//! resumes with the tasks still to probe, and every sandbox is stopped when its probe ends.

use domain::ids::{JobId, SubmissionId, TaskId};
use domain::job_labels;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use domain::openenv::admission::{
    self, Answer, Outcome, Probe, SlotState, Step, SubmissionState, TaskProbe, Verdict,
};
use domain::openenv::{SubmissionReport, SubmissionRequest};
use domain::ErrorCode;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::config::Secret;
use crate::ports::jobs::{JobLauncher, JobSpec};
use crate::AppState;

/// How long a sandbox may wait to be scheduled.
const SCHEDULE_WAIT: Duration = Duration::from_secs(300);
/// Each HTTP read of the probe, as `openenv validate` (5 s per call).
const CALL: Duration = Duration::from_secs(5);
/// An answer of the image's server read during a probe, and one WebSocket message of its episode:
/// a schema or an observation is a few KB; larger is refused, not buffered.
const MAX_ANSWER_BYTES: usize = 1 << 20;

fn platform(code: ErrorCode, message: impl Into<String>) -> Outcome {
    Outcome::Platform { code, message: message.into() }
}

fn author(code: ErrorCode, message: impl Into<String>) -> Outcome {
    Outcome::Author { code, message: message.into() }
}

/// What a task's sandbox runs: its pinned image, the port its server listens on, its start.
pub struct Sandbox {
    pub image: String,
    pub port: u16,
    pub start: domain::openenv::SandboxStart,
}

/// One task's probe in one fresh sandbox; the sandbox is stopped whatever happens.
pub async fn probe_task(
    s: &AppState,
    submission: &SubmissionId,
    request: &SubmissionRequest,
    task_id: &TaskId,
    sandbox: &Sandbox,
) -> Outcome {
    let Some(token) = s.openenv.sandbox_token.clone() else {
        return platform(
            ErrorCode::AdmissionInfrastructureFailure,
            "the arena has no token to reach its sandboxes with (ARENA_SANDBOX_TOKEN); an organizer sets it",
        );
    };
    let Some(jobs) = s.deps.sandboxes.clone() else {
        return platform(
            ErrorCode::AdmissionInfrastructureFailure,
            "the arena has no namespace to start sandboxes in (ARENA_SANDBOX_NAMESPACE); an organizer sets it",
        );
    };
    let task = request.tasks.iter().find(|t| t.task_id == task_id);
    let wall = task.map_or(3600, |t| t.reset_wall_s + t.rollout_wall_s + t.verifier_wall_s);
    // Whoever reads the sandbox namespace reads its labels: they name no task.
    let task_label = job_labels::opaque_task(submission.as_str(), task_id.as_str());
    let spec = JobSpec {
        docker_image: sandbox.image.clone(),
        command: sandbox.start.command.clone(),
        arguments: Vec::new(),
        environment: sandbox.start.env.clone(),
        secrets: BTreeMap::new(),
        // 2 vCPU and 16 GiB, as the guide promises every sandbox.
        flavor: "cpu-basic".into(),
        timeout_seconds: wall + s.openenv.health_wait.as_secs(),
        labels: job_labels::labels(&[
            (job_labels::PURPOSE, job_labels::ADMISSION),
            (job_labels::SUBMISSION, submission.as_str()),
            (job_labels::TASK, task_label.as_str()),
        ]),
        attempts: None,
        // Reachable with an HF token only: the participant's server is the arena's alone while it
        // is checked.
        expose: Some(crate::ports::jobs::Expose::private(sandbox.port)),
    };
    let job = match jobs.create(&spec).await {
        Ok(job) => job,
        Err(e) => {
            return platform(
                ErrorCode::AdmissionInfrastructureFailure,
                format!("the sandbox was not created: {e}"),
            )
        }
    };
    // One deadline over the whole probe, whatever each step allows: a server that answers just in
    // time, step after step, cannot hold admission.
    let deadline = s.openenv.probe_deadline;
    let probe = probe_in(s, jobs.as_ref(), &job.id, sandbox.port, &token, request, task_id);
    let outcome = match tokio::time::timeout(deadline, probe).await {
        Ok(outcome) => outcome,
        Err(_) => author(
            ErrorCode::AdmissionEpisodeFailed,
            format!(
                "the probe did not finish within {} s (health, the reads and the example episode)",
                deadline.as_secs()
            ),
        ),
    };
    if let Err(e) = jobs.cancel(&job.id).await {
        tracing::warn!(job = %job.id, error = %e, "stopping a sandbox failed; the sweep stops it");
    }
    outcome
}

async fn probe_in(
    s: &AppState,
    jobs: &dyn JobLauncher,
    job_id: &JobId,
    port: u16,
    token: &Secret,
    request: &SubmissionRequest,
    task_id: &TaskId,
) -> Outcome {
    let url = match sandbox_url(jobs, job_id, port).await {
        Ok(url) => url,
        Err(outcome) => return outcome,
    };
    // The sandbox's port is exposed with an HF token, not publicly.
    let http = crate::ports::http::sandbox_client(CALL);
    let get = |path: &str| {
        let req = http.get(format!("{url}{path}")).bearer_auth(&token.0);
        async move { answer(req.send().await).await }
    };
    if let Err(outcome) = until_healthy(s, job_id, token, &get).await {
        return outcome;
    }
    let probe = Probe {
        openapi: get("/openapi.json").await,
        health: get("/health").await,
        metadata: get("/metadata").await,
        schema: get("/schema").await,
        mcp: answer(http.post(format!("{url}/mcp")).bearer_auth(&token.0).json(&json!({})).send().await)
            .await,
    };
    let failed: Vec<String> = admission::criteria(&probe)
        .into_iter()
        .filter(|c| !c.passed)
        .map(|c| format!("{} (expected {}; got {})", c.id, c.expected, c.actual))
        .collect();
    if !failed.is_empty() {
        return author(
            ErrorCode::OpenenvEndpointInvalid,
            format!("openenv validate fails: {}", failed.join("; ")),
        );
    }
    let served = probe.schema.and_then(|a| a.json).unwrap_or_default();
    if let Err(m) = admission::schema_matches(&served, &request.schema) {
        return author(ErrorCode::ImageSchemaMismatch, m);
    }
    let post = |path: &str, body: Value| {
        let req = http.post(format!("{url}{path}")).bearer_auth(&token.0).json(&body);
        async move { answer(req.send().await).await }
    };
    // A task API (openenv 0.10) chooses the task at reset by `(split, index)`: the one it lists
    // under the submitted id, or the author's failure.
    let openapi = probe.openapi.and_then(|a| a.json).unwrap_or_default();
    let reset = if admission::has_task_api(&openapi) {
        match listed_task(&get, &post, task_id).await {
            Ok(reset) => reset,
            Err(outcome) => return outcome,
        }
    } else {
        domain::openenv::episode::reset_for(task_id.as_str())
    };
    // A tools environment lists its tools: the model is told them in its system message.
    let listing =
        post("/mcp", json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})).await;
    let tools = match admission::tool_list(&listing.and_then(|a| a.json).unwrap_or_default()) {
        Ok(tools) => tools,
        Err(why) => return author(ErrorCode::OpenenvEndpointInvalid, format!("its tools: {why}")),
    };
    match episode(&url, token, &reset, &request.example_actions).await {
        Ok((first, steps)) => match admission::judge_episode(&first, &steps, request.example_actions.len()) {
            Ok(_) => Outcome::Passed { reset: Some(reset), tools },
            Err(m) => author(ErrorCode::AdmissionEpisodeFailed, m),
        },
        Err(e) => author(ErrorCode::AdmissionEpisodeFailed, e.to_string()),
    }
}

/// The address HF exposes the sandbox's `port` at, once the job runs; the platform's failure when
/// it is never scheduled, ends first, or lists no address for the port.
async fn sandbox_url(jobs: &dyn JobLauncher, job_id: &JobId, port: u16) -> Result<String, Outcome> {
    let start = Instant::now();
    loop {
        match jobs.inspect(job_id).await {
            Ok(job) if job.status.stage.is_active() => {
                if let Some(url) = domain::openenv::exposed_url(&job.status.expose_urls, port, &[port]) {
                    return Ok(url);
                }
                if start.elapsed() > SCHEDULE_WAIT {
                    return Err(platform(
                        ErrorCode::SandboxStartupFailed,
                        format!("HF listed no URL for the sandbox's port {port}"),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(job) if job.status.stage.has_ended() => {
                return Err(platform(
                    ErrorCode::SandboxStartupFailed,
                    format!(
                        "the sandbox ended {} before serving: {}",
                        job.status.stage,
                        job.status.message.unwrap_or_default()
                    ),
                ))
            }
            _ if start.elapsed() > SCHEDULE_WAIT => {
                return Err(platform(
                    ErrorCode::SandboxStartupFailed,
                    "the sandbox was not scheduled in time",
                ))
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Waits for the image's `GET /health` to answer 200, within the track's health wait.
async fn until_healthy<G, GF>(s: &AppState, job_id: &JobId, token: &Secret, get: &G) -> Result<(), Outcome>
where
    G: Fn(&str) -> GF,
    GF: std::future::Future<Output = Option<Answer>>,
{
    let ready = Instant::now();
    loop {
        match get("/health").await.map(|a| a.status) {
            Some(200) => return Ok(()),
            // HF's proxy refusing the arena's reader is the arena's fault; an image that asks for
            // credentials while the reader is good is its author's.
            Some(status @ (401 | 403)) => return Err(refused(s, job_id, token, status).await),
            // A running app that has no health route will never grow one: say so now rather than
            // after the whole wait (its OpenAPI answer proves the app itself is up).
            Some(404) if get("/openapi.json").await.is_some_and(|a| a.status == 200) => {
                let message = "the image serves GET /openapi.json but answers GET /health with 404: it has no health route";
                return Err(platform(ErrorCode::SandboxStartupFailed, message));
            }
            _ => {}
        }
        if ready.elapsed() > s.openenv.health_wait {
            let secs = s.openenv.health_wait.as_secs();
            let message = format!("the image never answered GET /health within {secs} s");
            return Err(platform(ErrorCode::SandboxStartupFailed, message));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Splits of a task API read at most.
const MAX_SPLITS: usize = 8;

/// The reset that plays `task_id` through the environment's task API (openenv 0.10:
/// `/list_environments`, `/{env}/splits`, `/{env}/tasks`); an environment that answers 501 there
/// implements none and is reset by the task's id. A task the API does not list is its author's
/// failure (`TASK_NOT_LISTED`).
async fn listed_task<G, P, GF, PF>(get: &G, post: &P, task_id: &TaskId) -> Result<Value, Outcome>
where
    G: Fn(&str) -> GF,
    P: Fn(&str, Value) -> PF,
    GF: std::future::Future<Output = Option<Answer>>,
    PF: std::future::Future<Output = Option<Answer>>,
{
    let unreadable = |what: &str| {
        author(ErrorCode::OpenenvEndpointInvalid, format!("its task API lists routes but {what}"))
    };
    let json_of = |a: Option<Answer>| a.filter(|a| a.status == 200).and_then(|a| a.json);
    let envs =
        json_of(get("/list_environments").await).ok_or_else(|| unreadable("GET /list_environments fails"))?;
    let env = envs.as_array().and_then(|e| e.first()).and_then(Value::as_str);
    let env =
        env.filter(|e| !e.is_empty() && e.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b)));
    let env = env.ok_or_else(|| unreadable("GET /list_environments names no environment"))?;
    let splits = match get(&format!("/{env}/splits")).await {
        Some(a) if a.status == 501 => return Ok(domain::openenv::episode::reset_for(task_id.as_str())),
        other => json_of(other).ok_or_else(|| unreadable(&format!("GET /{env}/splits fails")))?,
    };
    let names: Vec<String> = splits
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str().map(String::from))
        .take(MAX_SPLITS)
        .collect();
    let mut listed = Vec::new();
    for name in names {
        let tasks =
            json_of(post(&format!("/{env}/tasks"), json!({"split": name})).await).ok_or_else(|| {
                unreadable(&format!("POST /{env}/tasks for split `{name}` fails (or answers over 1 MiB)"))
            })?;
        listed.push((name, tasks));
    }
    admission::task_reset(&listed, task_id.as_str()).ok_or_else(|| {
        author(
            ErrorCode::TaskNotListed,
            format!(
                "its task API lists no task `{task_id}`; it lists {}",
                admission::listed_ids(&listed, 20).join(", ")
            ),
        )
    })
}

/// `/health` answered 401 or 403. Whose fault that is, the arena's reader says: while HF still
/// accepts it as the reader it must be (`domain::identity::sandbox_reader_refusal`), HF's proxy
/// lets it through, so the refusal is the image's own (its author's failure, which counts). A
/// reader HF no longer accepts (or cannot be asked about) fails every probe the same way until an
/// organizer mends it: the arena's fault, said as such (the participant's slot is returned), with
/// the credential named in the log.
async fn refused(s: &AppState, job_id: &JobId, token: &Secret, status: u16) -> Outcome {
    // Asked afresh, not from the cache: a reader HF revoked a minute ago must not pass.
    let reader_good = match s.deps.hub.whoami(&token.0).await {
        Ok(account) => s
            .openenv
            .sandbox_namespace
            .as_deref()
            .is_some_and(|ns| domain::identity::sandbox_reader_refusal(&account, ns, &[]).is_none()),
        Err(_) => false,
    };
    if reader_good {
        return author(
            ErrorCode::OpenenvEndpointInvalid,
            format!(
                "GET /health answered {status} although the arena's credential is valid: the server asks for                  credentials the arena does not have; /health must answer 200 to anyone"
            ),
        );
    }
    tracing::error!(
        job = %job_id,
        "the sandbox's proxy refused ARENA_SANDBOX_TOKEN ({status}) and HF no longer accepts it as the reader: it \
         must be a read token of a member of ARENA_SANDBOX_NAMESPACE only"
    );
    platform(
        ErrorCode::AdmissionInfrastructureFailure,
        "the sandbox refused the arena's own credential, so the image could not be checked: the arena's fault, not \
         the image's; an organizer is mending it",
    )
}

/// An answer of the image's server: its status, and its body as JSON when it is JSON of at most
/// `MAX_ANSWER_BYTES` (a larger body is left unread, and counts as not JSON).
async fn answer(r: Result<reqwest::Response, reqwest::Error>) -> Option<Answer> {
    let mut r = r.ok()?;
    let status = r.status().as_u16();
    if r.content_length().is_some_and(|n| n > MAX_ANSWER_BYTES as u64) {
        return Some(Answer { status, json: None });
    }
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = r.chunk().await {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Some(Answer { status, json: None });
        }
        body.extend_from_slice(&chunk);
    }
    Some(Answer { status, json: serde_json::from_slice(&body).ok() })
}

/// Why the example episode failed, in the words its submitter reads.
#[derive(Debug, thiserror::Error)]
enum EpisodeError {
    #[error("the server did not open a WebSocket on /ws")]
    SocketTimeout,
    #[error("the server did not open a WebSocket on /ws: {0:#}")]
    NoSocket(anyhow::Error),
    #[error("the episode's connection failed: {0}")]
    Connection(#[source] tokio_tungstenite::tungstenite::Error),
    #[error("the server did not answer within 60 s")]
    Silent,
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("an observation the arena cannot read: {0}")]
    Unreadable(#[source] serde_json::Error),
    #[error("the server answered {0}")]
    Unexpected(String),
    #[error("the server sent a message over {} KiB", MAX_ANSWER_BYTES >> 10)]
    TooLarge,
    #[error("the server closed the episode")]
    Closed,
}

/// The example episode over `/ws`: a reset to the task (`reset`: its id, or the task API's
/// `{"split", "index"}`), then the actions in order until the episode ends.
async fn episode(
    url: &str,
    token: &Secret,
    reset: &Value,
    actions: &[Value],
) -> Result<(Step, Vec<Step>), EpisodeError> {
    let mut socket = tokio::time::timeout(CALL, open_socket(url, token))
        .await
        .map_err(|_| EpisodeError::SocketTimeout)?
        .map_err(EpisodeError::NoSocket)?;
    let reset = exchange(&mut socket, domain::openenv::episode::ws_reset(reset)).await?;
    let mut steps = Vec::new();
    for action in actions {
        let step = exchange(&mut socket, json!({"type": "step", "data": action})).await?;
        let done = step.done;
        steps.push(step);
        if done {
            break;
        }
    }
    Ok((reset, steps))
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// `/ws` of the sandbox at `url`, with the HF token its exposed port asks for; the address is
/// resolved as the HTTP reads resolve it (`crate::ports::http::resolve`).
async fn open_socket(url: &str, token: &Secret) -> anyhow::Result<Socket> {
    use anyhow::Context;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let ws = url.replacen("http://", "ws://", 1).replacen("https://", "wss://", 1);
    let mut request = format!("{ws}/ws").into_client_request()?;
    let bearer: reqwest::header::HeaderValue =
        format!("Bearer {}", token.0).parse().context("the sandbox token is not a header value")?;
    request.headers_mut().insert(reqwest::header::AUTHORIZATION, bearer);
    let host = request.uri().host().context("the sandbox URL has no host")?.to_string();
    let port = request.uri().port_u16().unwrap_or(if ws.starts_with("wss://") { 443 } else { 80 });
    let addrs = crate::ports::http::resolve(&host, port).await?;
    let tcp = tokio::net::TcpStream::connect(addrs.as_slice()).await?;
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_ANSWER_BYTES))
        .max_frame_size(Some(MAX_ANSWER_BYTES));
    let (socket, _) =
        tokio_tungstenite::client_async_tls_with_config(request, tcp, Some(config), None).await?;
    Ok(socket)
}

/// Sends one message of the episode and reads the server's observation.
async fn exchange(socket: &mut Socket, message: Value) -> Result<Step, EpisodeError> {
    socket.send(Message::Text(message.to_string().into())).await.map_err(EpisodeError::Connection)?;
    loop {
        let next = tokio::time::timeout(Duration::from_secs(60), socket.next())
            .await
            .map_err(|_| EpisodeError::Silent)?;
        match next {
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(&t).map_err(EpisodeError::NotJson)?;
                return match v["type"].as_str() {
                    Some("observation") => {
                        serde_json::from_value::<Step>(v["data"].clone()).map_err(EpisodeError::Unreadable)
                    }
                    _ => Err(EpisodeError::Unexpected(v.to_string().chars().take(200).collect())),
                };
            }
            Some(Ok(_)) => continue,
            Some(Err(tokio_tungstenite::tungstenite::Error::Capacity(_))) => {
                return Err(EpisodeError::TooLarge)
            }
            _ => return Err(EpisodeError::Closed),
        }
    }
}

/// Stops sandboxes no probe is using: those a crashed or restarted server left running (a probe
/// holds its submission's lease while its sandbox runs).
pub async fn sweep(s: &AppState) -> anyhow::Result<usize> {
    let Some(sandboxes) = &s.deps.sandboxes else { return Ok(0) };
    let jobs = match sandboxes.find_by_label(job_labels::PURPOSE, job_labels::ADMISSION).await {
        Ok(jobs) => jobs,
        Err(e) => {
            tracing::warn!(error = %e, "listing admission sandboxes failed; the next pass tries again");
            return Ok(0);
        }
    };
    let live: Vec<&crate::ports::jobs::Job> = jobs.iter().filter(|j| j.status.stage.is_live()).collect();
    if live.is_empty() {
        return Ok(0);
    }
    // A sandbox's label is its submission's id as HF accepts it (`domain::job_labels`).
    let probing: std::collections::BTreeSet<String> = crate::openenv::repo::probing(&s.db, s.now().epoch)
        .await?
        .iter()
        .map(|id| job_labels::value(id))
        .collect();
    let mut stopped = 0;
    for job in live {
        let submission = job.labels.get(job_labels::SUBMISSION).map(String::as_str).unwrap_or_default();
        if probing.contains(submission) {
            continue;
        }
        match sandboxes.cancel(&job.id).await {
            Ok(()) => {
                tracing::info!(job = %job.id, submission, "stopped a sandbox no probe was using");
                stopped += 1;
            }
            Err(e) => tracing::warn!(job = %job.id, error = %e, "stopping an orphaned sandbox failed"),
        }
    }
    Ok(stopped)
}

/// One pass: sandboxes left running are stopped, then each submission still validating gets its
/// pending probes and its verdict, under its admission lease (renewed while the probes run, so
/// that no other server probes it a second time).
pub async fn pass(s: &AppState) -> anyhow::Result<usize> {
    sweep(s).await?;
    crate::engine::pass(s, &Admissions(s.openenv.admissions_at_once)).await
}

/// A submission in admission: its account and id.
pub struct Validating {
    pub account_id: String,
    pub submission_id: SubmissionId,
}

impl std::fmt::Display for Validating {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.submission_id)
    }
}

/// OpenEnv submissions being admitted, on the engine (`crate::engine`), so many at once.
pub struct Admissions(pub usize);

#[async_trait::async_trait]
impl crate::engine::Track for Admissions {
    type Key = Validating;
    const RECORD: &'static str = "submission";

    /// Several accounts' submissions side by side (`due` gives one per account); their probes
    /// share this server's admission sandboxes.
    fn at_once(&self) -> usize {
        self.0
    }

    fn lease_s(&self, s: &AppState) -> i64 {
        s.openenv.lease_s
    }

    async fn due(&self, s: &AppState) -> anyhow::Result<Vec<Validating>> {
        Ok(crate::openenv::repo::admissible(&s.db, s.now().epoch)
            .await?
            .into_iter()
            .map(|(account_id, submission_id)| Validating { account_id, submission_id })
            .collect())
    }

    const LEASE: crate::engine::RowLease = crate::openenv::repo::ADMISSION_LEASE;

    fn key_values(k: &Validating) -> Vec<&str> {
        vec![k.account_id.as_str(), k.submission_id.as_str()]
    }

    async fn step(&self, s: &AppState, k: &Validating) -> anyhow::Result<bool> {
        admit(s, &k.account_id, &k.submission_id).await
    }
}

/// One round of a submission's admission: its verdict when it has one; else the next probes (as
/// many as this server's admission sandboxes allow, shared by every submission), each stored as
/// it comes in, then the verdict again. A round ends well within a probe's deadline, so that the
/// next pass takes other accounts' submissions too. True once it is decided.
async fn admit(s: &AppState, account_id: &str, submission_id: &SubmissionId) -> anyhow::Result<bool> {
    use anyhow::Context;
    let Some(stored) = crate::openenv::repo::get(&s.db, account_id, submission_id).await? else {
        return Ok(false);
    };
    let request: SubmissionRequest =
        serde_json::from_str(&stored.body).context("reading the stored submission")?;
    let images: Vec<Value> = serde_json::from_str(&stored.images).context("reading the stored images")?;
    let mut probes: Vec<TaskProbe> = serde_json::from_str(&stored.probes).unwrap_or_default();
    for t in &request.tasks {
        if !probes.iter().any(|p| p.task_id == t.task_id) {
            probes.push(TaskProbe::new(&t.task_id));
        }
    }
    let allowance = &s.openenv.allowance;
    if let Some(decided) = decided(admission::verdict(&probes, allowance)) {
        finish(s, account_id, submission_id, &probes, decided).await?;
        return Ok(true);
    }
    let image_of = |task: &str| {
        let i =
            images.iter().find(|i| i["tasks"].as_array().is_some_and(|ts| ts.iter().any(|t| t == task)))?;
        Some(Sandbox {
            image: i["resolved"].as_str().unwrap_or_default().to_string(),
            port: i["port"].as_u64().and_then(|p| u16::try_from(p).ok())?,
            start: serde_json::from_value(i["start"].clone()).ok()?,
        })
    };
    let round: Vec<(usize, String)> = probes
        .iter()
        .enumerate()
        .filter(|(_, p)| p.pending())
        .map(|(i, p)| (i, p.task_id.clone()))
        .take(s.openenv.sandbox_limit)
        .collect();
    let request = &request;
    let image_of = &image_of;
    let mut running = futures_util::stream::iter(round)
        .map(|(i, task)| async move {
            // A sandbox of this server's allowance, whichever submission holds the others.
            let _sandbox = s.openenv.sandboxes.acquire().await;
            let started = Instant::now();
            let outcome = match image_of(&task) {
                // Checked at submission with the task id's rule, so it parses.
                Some(sandbox) => match TaskId::parse(&task) {
                    Ok(task) => probe_task(s, submission_id, request, &task, &sandbox).await,
                    Err(e) => platform(ErrorCode::AdmissionInfrastructureFailure, e.to_string()),
                },
                None => platform(
                    ErrorCode::AdmissionInfrastructureFailure,
                    "no image, port or start command recorded for the task",
                ),
            };
            (i, outcome, started.elapsed().as_secs())
        })
        .buffer_unordered(s.openenv.sandbox_limit);
    while let Some((i, outcome, spent_s)) = running.next().await {
        probes[i].attempts += 1;
        probes[i].spent_s += spent_s;
        probes[i].last = Some(outcome);
        let text = serde_json::to_string(&probes).expect("JSON");
        crate::openenv::repo::save_probes(&s.db, account_id, submission_id, &text).await?;
    }
    drop(running);
    match decided(admission::verdict(&probes, allowance)) {
        Some(verdict) => {
            finish(s, account_id, submission_id, &probes, verdict).await?;
            Ok(true)
        }
        None => Ok(false),
    }
}

fn decided(verdict: Verdict) -> Option<Verdict> {
    (verdict != Verdict::Pending).then_some(verdict)
}

async fn finish(
    s: &AppState,
    account_id: &str,
    submission_id: &SubmissionId,
    probes: &[TaskProbe],
    verdict: Verdict,
) -> Result<(), sqlx::Error> {
    let now = s.now();
    let (state, slot, origin, errors) = match verdict {
        Verdict::Validated => (SubmissionState::Validated, SlotState::Used, None, Vec::new()),
        Verdict::Rejected { origin, slot, errors } => (SubmissionState::Rejected, slot, Some(origin), errors),
        Verdict::Pending => return Ok(()),
    };
    let report = SubmissionReport {
        errors: errors
            .into_iter()
            .map(|(task, code, message)| domain::openenv::AdmissionError {
                code: code.as_str().to_string(),
                message,
                task_id: Some(task),
            })
            .collect(),
    };
    let report = serde_json::to_string(&report).expect("JSON");
    let probes = serde_json::to_string(probes).expect("JSON");
    crate::openenv::repo::decide(
        &s.db,
        account_id,
        submission_id,
        state,
        slot,
        origin,
        &report,
        &probes,
        &now,
    )
    .await?;
    tracing::info!(submission = %submission_id, %state, %slot, "admission decided");
    Ok(())
}
