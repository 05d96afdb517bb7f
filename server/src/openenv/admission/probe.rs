//! One task's probe in one fresh sandbox: its pinned image started as an HF job exposing the
//! server's port; `/health` within the health wait while the job's stage is read too (a server
//! that exits is seen at once, with its exit and its last lines); the six `openenv validate`
//! criteria; the served schema against the submission's; the task chosen (a task API's listing,
//! or its id); the tools listed; the example actions played to a terminal reward in [0, 1];
//! `finish_action` from a fresh reset and after the first example action; the first observations
//! of two seeded resets fingerprinted. Every refusal carries the participant's own evidence
//! (`domain::openenv::evidence`), scrubbed of the arena's credentials as it is read. The sandbox is
//! stopped whatever happens.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use domain::ids::{JobId, SubmissionId, TaskId};
use domain::job_labels;
use domain::openenv::admission::{self, Answer, Outcome, Probe};
use domain::openenv::evidence;
use domain::openenv::SubmissionRequest;
use domain::ErrorCode;
use serde_json::{json, Value};

use super::socket::{EpisodeError, Session, MAX_ANSWER_BYTES};
use crate::config::Secret;
use crate::ports::jobs::{Job, JobLauncher, JobSpec};
use crate::AppState;

/// How long a sandbox may wait to be scheduled.
const SCHEDULE_WAIT: Duration = Duration::from_secs(300);
/// Each HTTP read of the probe, as `openenv validate` (5 s per call).
const CALL: Duration = Duration::from_secs(5);
/// How often the sandbox's job is read while its server does not answer yet.
const STAGE_EVERY: Duration = Duration::from_secs(1);
/// A server that exited: the last lines of its log quoted, each and all together at most.
pub const EXIT_LINES: usize = 5;
const EXIT_LINE_CHARS: usize = 200;
pub const EXIT_CHARS: usize = 500;

fn platform(code: ErrorCode, message: impl Into<String>) -> Outcome {
    Outcome::Platform { code, message: message.into(), evidence: None }
}

fn author(code: ErrorCode, message: impl Into<String>, evidence: Option<Value>) -> Outcome {
    Outcome::Author { code, message: message.into(), evidence }
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
    let probe = Probing { s, jobs: jobs.as_ref(), job_id: &job.id, port: sandbox.port, token: &token };
    let outcome = match tokio::time::timeout(deadline, probe.run(request, task_id)).await {
        Ok(outcome) => outcome,
        Err(_) => author(
            ErrorCode::AdmissionEpisodeFailed,
            format!(
                "the probe did not finish within {} s (health, the reads and the example episode)",
                deadline.as_secs()
            ),
            None,
        ),
    };
    if let Err(e) = jobs.cancel(&job.id).await {
        tracing::warn!(job = %job.id, error = %e, "stopping a sandbox failed; the sweep stops it");
    }
    outcome
}

/// One probe under way: the sandbox's job and how it is reached.
struct Probing<'a> {
    s: &'a AppState,
    jobs: &'a dyn JobLauncher,
    job_id: &'a JobId,
    port: u16,
    token: &'a Secret,
}

impl Probing<'_> {
    fn secrets(&self) -> Vec<&str> {
        self.s.openenv.secrets.iter().map(|s| s.0.as_str()).collect()
    }

    async fn run(&self, request: &SubmissionRequest, task_id: &TaskId) -> Outcome {
        let url = match self.sandbox_url().await {
            Ok(url) => url,
            Err(outcome) => return outcome,
        };
        match self.checks(&url, request, task_id).await {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }

    /// The checks once the sandbox has an address: each step's refusal, or the task's pass.
    async fn checks(
        &self,
        url: &str,
        request: &SubmissionRequest,
        task_id: &TaskId,
    ) -> Result<Outcome, Outcome> {
        // The sandbox's port is exposed with an HF token, not publicly.
        let http = crate::ports::http::sandbox_client(CALL);
        let secrets = self.secrets();
        let get = |path: &str| {
            let req = http.get(format!("{url}{path}")).bearer_auth(&self.token.0);
            let secrets = secrets.clone();
            async move { answer(req.send().await, &secrets).await }
        };
        let post = |path: &str, body: Value| {
            let req = http.post(format!("{url}{path}")).bearer_auth(&self.token.0).json(&body);
            let secrets = secrets.clone();
            async move { answer(req.send().await, &secrets).await }
        };
        self.until_healthy(&get).await?;
        let probe = Probe {
            openapi: get("/openapi.json").await,
            health: get("/health").await,
            metadata: get("/metadata").await,
            schema: get("/schema").await,
            mcp: post("/mcp", json!({})).await,
        };
        let failed: Vec<admission::Criterion> =
            admission::criteria(&probe).into_iter().filter(|c| !c.passed).collect();
        if !failed.is_empty() {
            let words: Vec<String> = failed
                .iter()
                .map(|c| format!("{} (expected {}; got {})", c.id, c.expected, c.actual))
                .collect();
            let checks: Vec<Value> = failed
                .iter()
                .map(|c| json!({"id": c.id, "expected": c.expected, "actual": c.actual}))
                .collect();
            return Err(author(
                ErrorCode::OpenenvEndpointInvalid,
                format!("openenv validate fails: {}", words.join("; ")),
                Some(json!({"failed_checks": checks})),
            ));
        }
        let served = probe.schema.and_then(|a| a.json).unwrap_or_default();
        if let Err((why, evidence)) = admission::schema_matches(&served, &request.schema) {
            return Err(author(ErrorCode::ImageSchemaMismatch, why.0, Some(evidence)));
        }
        // A task API (openenv 0.10) chooses the task at reset by `(split, index)`: the one it lists
        // under the submitted id, or the author's failure.
        let openapi = probe.openapi.and_then(|a| a.json).unwrap_or_default();
        let reset = if admission::has_task_api(&openapi) {
            listed_task(&get, &post, task_id).await?
        } else {
            domain::openenv::episode::reset_for(task_id.as_str())
        };
        // A tools environment lists its tools: the model is told them in its system message.
        let listing =
            post("/mcp", json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})).await;
        let tools = admission::tool_list(&listing.and_then(|a| a.json).unwrap_or_default())
            .map_err(|why| author(ErrorCode::OpenenvEndpointInvalid, format!("its tools: {why}"), None))?;
        let episodes = Episodes { url, token: self.token, secrets: &secrets, reset: &reset, request };
        let mut rewards = episodes.example().await?;
        let (first_observations, finished) = episodes.finish_and_fingerprints().await?;
        rewards.extend(finished);
        Ok(Outcome::Passed { reset: Some(reset), tools, first_observations, rewards })
    }

    /// The address HF exposes the sandbox's port at, once the job runs; the platform's failure
    /// when it is never scheduled, ends first (said with its exit and last lines), or lists no
    /// address for the port.
    async fn sandbox_url(&self) -> Result<String, Outcome> {
        let start = Instant::now();
        loop {
            match self.jobs.inspect(self.job_id).await {
                Ok(job) if job.status.stage.is_active() => {
                    if let Some(url) =
                        domain::openenv::exposed_url(&job.status.expose_urls, self.port, &[self.port])
                    {
                        return Ok(url);
                    }
                    if start.elapsed() > SCHEDULE_WAIT {
                        return Err(platform(
                            ErrorCode::SandboxStartupFailed,
                            format!("HF listed no URL for the sandbox's port {}", self.port),
                        ));
                    }
                }
                Ok(job) if job.status.stage.has_ended() => return Err(self.exited(&job).await),
                _ if start.elapsed() > SCHEDULE_WAIT => {
                    return Err(platform(
                        ErrorCode::SandboxStartupFailed,
                        "the sandbox was not scheduled in time",
                    ))
                }
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits for the image's `GET /health` to answer 200, within the track's health wait, reading
    /// the job's stage every second: a server that exited stops the wait at once.
    async fn until_healthy<G, GF>(&self, get: &G) -> Result<(), Outcome>
    where
        G: Fn(&str) -> GF,
        GF: std::future::Future<Output = Option<Answer>>,
    {
        let ready = Instant::now();
        let mut stage_read = Instant::now();
        loop {
            match get("/health").await.map(|a| a.status) {
                Some(200) => return Ok(()),
                // HF's proxy refusing the arena's reader is the arena's fault; an image that asks for
                // credentials while the reader is good is its author's.
                Some(status @ (401 | 403)) => return Err(self.refused(status).await),
                // A running app that has no health route will never grow one: say so now rather than
                // after the whole wait (its OpenAPI answer proves the app itself is up).
                Some(404) if get("/openapi.json").await.is_some_and(|a| a.status == 200) => {
                    let message = "the image serves GET /openapi.json but answers GET /health with 404: it has no health route";
                    return Err(platform(ErrorCode::SandboxStartupFailed, message));
                }
                _ => {}
            }
            if stage_read.elapsed() >= STAGE_EVERY {
                stage_read = Instant::now();
                if let Ok(job) = self.jobs.inspect(self.job_id).await {
                    if job.status.stage.has_ended() {
                        return Err(self.exited(&job).await);
                    }
                }
            }
            if ready.elapsed() > self.s.openenv.health_wait {
                let secs = self.s.openenv.health_wait.as_secs();
                let message = format!("the image never answered GET /health within {secs} s");
                return Err(platform(ErrorCode::SandboxStartupFailed, message));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// A sandbox whose job ended before its server served: the platform's failure as the guide
    /// says (one more fresh sandbox, the slot not counted), in words that say the server exited,
    /// its exit and the last lines it printed, scrubbed of the arena's credentials.
    async fn exited(&self, job: &Job) -> Outcome {
        let status = job.status.message.clone().unwrap_or_default();
        let secrets = self.secrets();
        // HF's log may lag its job's end by a moment: read it twice, keep the longer.
        let mut log = Vec::new();
        for wait in [Duration::ZERO, Duration::from_millis(500)] {
            tokio::time::sleep(wait).await;
            if let Ok(read) = self.jobs.logs(self.job_id, Some(20), Duration::from_secs(2), 64 << 10).await {
                if read.len() >= log.len() {
                    log = read;
                }
            }
        }
        let lines = last_lines(log.iter().map(|l| l.line.as_str()), &secrets);
        let status = evidence::scrubbed(&status, &secrets);
        let said = if lines.is_empty() {
            "it printed nothing".to_string()
        } else {
            format!("its last lines: {}", lines.join(" | "))
        };
        Outcome::Platform {
            code: ErrorCode::SandboxStartupFailed,
            message: format!(
                "the server exited before it answered GET /health (the sandbox ended {}: {status}); {said}",
                job.status.stage
            ),
            evidence: Some(json!({"stage": job.status.stage.to_string(), "exit": status, "log": lines})),
        }
    }

    /// `/health` answered 401 or 403. Whose fault that is, the arena's reader says: while HF still
    /// accepts it as the reader it must be (`domain::identity::sandbox_reader_refusal`), HF's proxy
    /// lets it through, so the refusal is the image's own (its author's failure, which counts). A
    /// reader HF no longer accepts (or cannot be asked about) fails every probe the same way until
    /// an organizer mends it: the arena's fault, said as such (the participant's slot is returned),
    /// with the credential named in the log.
    async fn refused(&self, status: u16) -> Outcome {
        // Asked afresh, not from the cache: a reader HF revoked a minute ago must not pass.
        let reader_good = match self.s.deps.hub.whoami(&self.token.0).await {
            Ok(account) => self
                .s
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
                    "GET /health answered {status} although the arena's credential is valid: the server asks for \
                     credentials the arena does not have; /health must answer 200 to anyone"
                ),
                None,
            );
        }
        tracing::error!(
            job = %self.job_id,
            "the sandbox's proxy refused ARENA_SANDBOX_TOKEN ({status}) and HF no longer accepts it as the reader: \
             it must be a read token of a member of ARENA_SANDBOX_NAMESPACE only"
        );
        platform(
            ErrorCode::AdmissionInfrastructureFailure,
            "the sandbox refused the arena's own credential, so the image could not be checked: the arena's fault, \
             not the image's; an organizer is mending it",
        )
    }
}

/// What a server printed last before it exited (HF's own `=====` markers left out), each line and
/// all together cut, scrubbed: from the last exception it raised when it raised one (its
/// `SomethingError: …` line, else its `Traceback`), since what follows an exception's first line
/// (a search-path list, a row of `****`) says less than the line that names what is missing;
/// else its last lines.
pub fn last_lines<'a>(lines: impl Iterator<Item = &'a str>, secrets: &[&str]) -> Vec<String> {
    let printed: Vec<&str> =
        lines.map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("=====")).collect();
    let from = printed
        .iter()
        .rposition(|l| names_an_exception(l))
        .or_else(|| printed.iter().rposition(|l| l.starts_with("Traceback (most recent call last)")))
        .unwrap_or(printed.len().saturating_sub(EXIT_LINES));
    // Scrubbed as one text, so that a credential printed over two lines is masked in both.
    let window: Vec<&str> = printed[from..].iter().take(EXIT_LINES).copied().collect();
    let mut out: Vec<String> = evidence::scrubbed_lines(&window, secrets)
        .iter()
        .map(|l| evidence::cut(l, EXIT_LINE_CHARS))
        .collect();
    while out.iter().map(|l| l.chars().count()).sum::<usize>() > EXIT_CHARS && out.len() > 1 {
        out.remove(0);
    }
    out
}

/// Whether a line is an exception's own line, as Python prints it last in a traceback
/// (`LookupError: …`, `json.decoder.JSONDecodeError: …`, `KeyboardInterrupt`).
fn names_an_exception(line: &str) -> bool {
    let name = line.split_once(':').map_or(line, |(name, _)| name);
    let last = name.rsplit('.').next().unwrap_or(name);
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && ["Error", "Exception", "Interrupt", "Exit"].iter().any(|end| last.ends_with(end))
}

/// The episodes a probe plays, each in a WebSocket session of its own.
struct Episodes<'a> {
    url: &'a str,
    token: &'a Secret,
    secrets: &'a [&'a str],
    reset: &'a Value,
    request: &'a SubmissionRequest,
}

impl Episodes<'_> {
    /// The example actions in order, from the task's reset, to a terminal reward in [0, 1].
    async fn example(&self) -> Result<Vec<f64>, Outcome> {
        let failed = |m: String, exchanges: &[evidence::Exchange]| {
            author(ErrorCode::AdmissionEpisodeFailed, m, Some(evidence::transcript(exchanges)))
        };
        let mut session = Session::open(self.url, self.token, self.secrets)
            .await
            .map_err(|e| failed(e.to_string(), &[]))?;
        let first = match session.reset(self.reset).await {
            Ok(first) => first,
            Err(e) => return Err(failed(e.to_string(), &session.exchanges)),
        };
        let mut steps = Vec::new();
        for action in &self.request.example_actions {
            match session.step(action).await {
                Ok(o) => {
                    let done = o.step.done;
                    steps.push(o.step);
                    if done {
                        break;
                    }
                }
                Err(e) => return Err(failed(e.to_string(), &session.exchanges)),
            }
        }
        // Its terminal reward (admission warns when no reward it sees ever differs).
        admission::judge_episode(&first.step, &steps, self.request.example_actions.len())
            .map(|r| vec![r])
            .map_err(|m| failed(m.0, &session.exchanges))
    }

    /// `finish_action` (when the submission has one) from a fresh reset, and after the first
    /// example action; the fingerprints of those two resets' first observations (seeds 1 and 2).
    async fn finish_and_fingerprints(&self) -> Result<(Vec<String>, Vec<f64>), Outcome> {
        let mut fingerprints = Vec::new();
        let mut rewards = Vec::new();
        for seed in [1, 2] {
            let (mut session, first, seeded) = match self.fresh(seed).await {
                Ok(fresh) => fresh,
                Err((e, exchanges)) if self.request.finish_action.is_some() => {
                    return Err(self.finish_failed(e.to_string(), &exchanges))
                }
                Err(_) => continue,
            };
            if seeded {
                fingerprints.push(evidence::fingerprint(&first.observation));
            }
            let Some(finish) = &self.request.finish_action else { continue };
            let when = if seed == 1 {
                "from a fresh reset"
            } else {
                match self.request.example_actions.first() {
                    Some(action) => match session.step(action).await {
                        // The first example action ended the episode: nothing to finish.
                        Ok(o) if o.step.done => continue,
                        Ok(_) => "after the first example action",
                        Err(e) => return Err(self.finish_failed(e.to_string(), &session.exchanges)),
                    },
                    None => continue,
                }
            };
            match session.step(finish).await {
                Ok(o) => rewards.push(
                    admission::judge_finish(&o.step, when)
                        .map_err(|m| self.finish_failed(m.0, &session.exchanges))?,
                ),
                Err(e) => {
                    return Err(self.finish_failed(format!("`finish_action` {when}: {e}"), &session.exchanges))
                }
            }
        }
        Ok((fingerprints, rewards))
    }

    fn finish_failed(&self, message: String, exchanges: &[evidence::Exchange]) -> Outcome {
        author(ErrorCode::FinishActionInvalid, message, Some(evidence::transcript(exchanges)))
    }

    /// A fresh session reset to the task with `seed`; an environment that refuses the seed is reset
    /// without it (and gives no fingerprint: `false`).
    async fn fresh(
        &self,
        seed: u64,
    ) -> Result<(Session<'_>, super::socket::Observed, bool), (EpisodeError, Vec<evidence::Exchange>)> {
        let mut seeded = self.reset.clone();
        if let Some(map) = seeded.as_object_mut() {
            map.insert("seed".into(), json!(seed));
        }
        let mut session =
            Session::open(self.url, self.token, self.secrets).await.map_err(|e| (e, Vec::new()))?;
        if let Ok(first) = session.reset(&seeded).await {
            return Ok((session, first, true));
        }
        let mut session =
            Session::open(self.url, self.token, self.secrets).await.map_err(|e| (e, Vec::new()))?;
        match session.reset(self.reset).await {
            Ok(first) => Ok((session, first, false)),
            Err(e) => Err((e, session.exchanges)),
        }
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
        author(ErrorCode::OpenenvEndpointInvalid, format!("its task API lists routes but {what}"), None)
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
        let ids = admission::listed_ids(&listed, 20);
        author(
            ErrorCode::TaskNotListed,
            format!("its task API lists no task `{task_id}`; it lists {}", ids.join(", ")),
            Some(json!({"listed": ids})),
        )
    })
}

/// An answer of the image's server: its status, and its body as JSON when it is JSON of at most
/// `MAX_ANSWER_BYTES` (a larger body is left unread, and counts as not JSON), scrubbed of the
/// arena's credentials.
async fn answer(r: Result<reqwest::Response, reqwest::Error>, secrets: &[&str]) -> Option<Answer> {
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
    let json = serde_json::from_slice::<Value>(&body).ok().map(|v| evidence::scrubbed_value(&v, secrets));
    Some(Answer { status, json })
}
