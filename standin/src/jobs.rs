//! HF Jobs, as `huggingface_hub` calls them: create (`POST /api/jobs/{namespace}`), inspect
//! (`GET …/{id}`), list with `label=k=v` and `stage=` filters paged by `Link: rel="next"`,
//! cancel (`POST …/{id}/cancel`), logs as server-sent events (`GET …/{id}/logs`), and the hardware
//! list with prices (`GET /api/jobs/hardware`). Creating or reading jobs needs the token of a user
//! who may write in the namespace.
//!
//! A job of the uv image runs its command as a local process with the simulated pipeline on its
//! `PATH` (`crate::runner`); a job of an image the stand-in's registry holds, with a port to
//! expose, runs its command in that image's played container (`crate::sandbox`); any other image
//! cannot run here and errs at once. Creates are refused as HF refuses them: no command, or a
//! label outside `[A-Za-z0-9_-]{1,100}`. Answers carry `retry` (attempts − 1); with the `nulls`
//! switch (or `STANDIN_JOB_NULLS=1`) every optional field that holds nothing is an explicit `null`.
//! `GET …/{id}/logs?tail=N` starts N lines from the end; `GET …/{id}/metrics` streams a sample a
//! second (CPU, memory and each GPU's utilisation; GPUs sit idle while the job's processes are
//! stopped) and answers 406 once the job has ended. `PUT /_standin/jobs` sets fault switches for
//! the jobs created next (see [`JobFaults`]).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::hub::hf_error;
pub use crate::job_record::{now_rfc3339, Expose, JobFaults, JobView};
use crate::job_table::KEPT_BODIES;
pub use crate::job_table::{Job, Jobs};
use crate::SharedHub;

/// HF's hourly prices (USD) for the flavors the stand-in offers.
pub const HARDWARE: &[(&str, &str, f64)] = &[
    ("cpu-basic", "CPU basic", 0.0),
    ("a100-large", "Nvidia A100 - large", 2.5),
    ("h200", "Nvidia H200", 5.0),
    ("h200x2", "2x Nvidia H200", 10.0),
    ("h200x4", "4x Nvidia H200", 20.0),
    ("h200x8", "8x Nvidia H200", 40.0),
];

/// Keys and values HF accepts in labels: 1 to 100 of `[A-Za-z0-9_-]`.
fn valid_label(text: &str) -> bool {
    (1..=100).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A job as HF answers it; with the `nulls` switch on, every optional field that holds nothing
/// is an explicit `null` rather than empty or missing (a client must read both the same).
pub fn answer(view: &JobView, nulls: bool) -> Value {
    let mut v = serde_json::to_value(view).unwrap_or_default();
    if nulls {
        for key in ["labels", "arguments", "environment", "secrets", "command"] {
            let empty = v[key].as_array().is_some_and(|a| a.is_empty())
                || v[key].as_object().is_some_and(|o| o.is_empty());
            if empty {
                v[key] = Value::Null;
            }
        }
        for key in ["expose", "volumes", "spaceId", "dockerImage", "startedAt", "finishedAt"] {
            if v.get(key).is_none_or(Value::is_null) {
                v[key] = Value::Null;
            }
        }
        if v["status"].get("exposeUrls").is_none() {
            v["status"]["exposeUrls"] = Value::Null;
        }
        v["status"]["sshUrl"] = Value::Null;
        if view.started_at.is_none() {
            v["durations"] = Value::Null;
        }
    }
    v
}

impl JobView {
    pub fn expose_ports(&self) -> Vec<u16> {
        self.expose.as_ref().map(|e| e.ports.clone()).unwrap_or_default()
    }
}

pub(crate) fn router() -> Router<SharedHub> {
    Router::new()
        .route("/api/jobs/hardware", get(hardware))
        .route("/api/jobs/{namespace}", post(create).get(list))
        .route("/api/jobs/{namespace}/{id}", get(inspect))
        .route("/api/jobs/{namespace}/{id}/cancel", post(cancel))
        .route("/api/jobs/{namespace}/{id}/logs", get(logs))
        .route("/api/jobs/{namespace}/{id}/metrics", get(metrics))
}

pub(crate) fn control() -> Router<SharedHub> {
    Router::new()
        .route("/_standin/jobs", get(get_faults).put(put_faults).delete(clear_faults))
        .route("/_standin/jobs/bodies", get(bodies))
        .route("/_standin/sandboxes", get(get_sandboxes).put(put_sandboxes))
}

async fn bodies(State(hub): State<SharedHub>) -> Json<Value> {
    Json(Value::Array(hub.jobs.bodies.lock().unwrap().clone()))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateJob {
    #[serde(default)]
    docker_image: Option<String>,
    #[serde(default)]
    space_id: Option<String>,
    #[serde(default)]
    command: Option<Vec<String>>,
    #[serde(default)]
    arguments: Vec<String>,
    #[serde(default)]
    environment: BTreeMap<String, String>,
    #[serde(default)]
    secrets: BTreeMap<String, String>,
    #[serde(default)]
    flavor: Option<String>,
    #[serde(default)]
    timeout_seconds: Option<u64>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    attempts: Option<u32>,
    /// Ports to expose; a job of an image the stand-in's registry holds then runs as a sandbox.
    #[serde(default)]
    expose: Option<Expose>,
}

async fn hardware() -> Json<Value> {
    Json(Value::Array(
        HARDWARE
            .iter()
            .map(|(name, pretty, price)| {
                json!({"name": name, "prettyName": pretty, "cpu": "local", "ram": "local", "ephemeralStorage": "local",
                       "accelerator": if name.starts_with("cpu") { Value::Null } else { json!({"type": "gpu", "model": pretty, "quantity": "1", "vram": "141 GB", "manufacturer": "Nvidia"}) },
                       "unitCostMicroUSD": (price / 60.0 * 1e6).round() as u64, "unitCostUSD": price / 60.0, "unitLabel": "minute"})
            })
            .collect(),
    ))
}

/// `POST /api/jobs/{namespace}`: the request checked as HF checks it, a fault answered in its
/// place when one is set, then the job recorded and started.
async fn create(
    State(hub): State<SharedHub>,
    Path(namespace): Path<String>,
    headers: HeaderMap,
    Json(raw): Json<Value>,
) -> Response {
    if let Some(r) = crate::write_refusal(&hub, &headers, &namespace) {
        return r;
    }
    let (req, command) = match checked_request(&raw) {
        Ok(checked) => checked,
        Err(r) => return r,
    };
    if let Some(r) = create_fault(&hub.jobs) {
        return r;
    }
    let flavor = req.flavor.clone().unwrap_or_else(|| "cpu-basic".into());
    if !HARDWARE.iter().any(|(n, _, _)| *n == flavor) {
        return hf_error(StatusCode::BAD_REQUEST, None, &format!("unknown flavor {flavor}"));
    }
    let faults = pipeline_faults(&hub.jobs);
    let id = format!("{:024x}", 0x6a0b_0000_0000u64 + hub.jobs.next.fetch_add(1, Ordering::SeqCst));
    let view = JobView {
        id: id.clone(),
        created_at: now_rfc3339(),
        started_at: None,
        finished_at: None,
        docker_image: req.docker_image,
        space_id: req.space_id,
        command,
        arguments: req.arguments,
        environment: req.environment,
        secrets: req.secrets.keys().cloned().collect(),
        flavor,
        labels: req.labels,
        timeout: req.timeout_seconds.unwrap_or(1800),
        attempts: req.attempts.unwrap_or(1).max(1),
        retry: req.attempts.unwrap_or(1).max(1) - 1,
        expose: req.expose.clone(),
        status: json!({"stage": "SCHEDULING", "message": null}),
        durations: json!({}),
        owner: json!({"id": format!("org-{namespace}"), "name": namespace, "type": "org"}),
    };
    keep_body(&hub.jobs, &id, raw);
    hub.jobs.jobs.lock().unwrap().push(Job {
        view: view.clone(),
        pid: None,
        namespace,
        secrets: req.secrets,
        logs: Vec::new(),
        faults,
        created: std::time::Instant::now(),
        started: None,
        finished: None,
        cancel: Arc::new(tokio::sync::Notify::new()),
    });
    start(&hub, &view);
    Json(answer(&view, hub.jobs.nulls())).into_response()
}

/// The request as HF reads it, and its command; HF refuses a missing or empty command (it runs
/// it as it is) and labels outside `[A-Za-z0-9_-]{1,100}`.
#[allow(clippy::result_large_err)]
fn checked_request(raw: &Value) -> Result<(CreateJob, Vec<String>), Response> {
    let req: CreateJob = serde_json::from_value(raw.clone())
        .map_err(|e| hf_error(StatusCode::BAD_REQUEST, None, &format!("Invalid job spec: {e}")))?;
    let command = match req.command.clone() {
        Some(c) if !c.is_empty() && !c[0].is_empty() => c,
        _ => {
            return Err(hf_error(
                StatusCode::BAD_REQUEST,
                None,
                "Invalid job spec: command must be a non-empty list",
            ))
        }
    };
    if let Some((k, v)) = req.labels.iter().find(|(k, v)| !valid_label(k) || !valid_label(v)) {
        let message = format!(
            "Invalid label {k}={v}: label keys and values must be 1-100 characters of letters, digits, '-' and '_'"
        );
        return Err(hf_error(StatusCode::BAD_REQUEST, None, &message));
    }
    Ok((req, command))
}

/// The answer of a set create fault (its count taken down by one), instead of a job.
fn create_fault(jobs: &Jobs) -> Option<Response> {
    let status = {
        let mut f = jobs.faults.lock().unwrap();
        let status = f.create_status?;
        let left = f.create_count.unwrap_or(1).saturating_sub(1);
        if left == 0 {
            f.create_status = None;
            f.create_count = None;
        } else {
            f.create_count = Some(left);
        }
        status
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let message = if status == StatusCode::PAYMENT_REQUIRED {
        "Payment required: add prepaid credit to run jobs (local stand-in fault)"
    } else {
        "Internal Error (local stand-in fault)"
    };
    Some(hf_error(status, None, message))
}

/// The pipeline faults the new job carries (each set fault is taken by its count of jobs).
fn pipeline_faults(jobs: &Jobs) -> JobFaults {
    let mut f = jobs.faults.lock().unwrap();
    if !f.pipeline() {
        return JobFaults::default();
    }
    let taken = f.clone();
    match f.count.unwrap_or(1).saturating_sub(1) {
        0 => {
            *f = JobFaults {
                create_status: f.create_status,
                create_count: f.create_count,
                nulls: f.nulls,
                ..Default::default()
            }
        }
        left => f.count = Some(left),
    }
    taken
}

/// Keeps the request's body as it came (secrets' values masked) for the tests to read.
fn keep_body(jobs: &Jobs, id: &str, mut recorded: Value) {
    if let Some(secrets) = recorded.get_mut("secrets").and_then(Value::as_object_mut) {
        for v in secrets.values_mut() {
            *v = json!("***");
        }
    }
    let mut kept = jobs.bodies.lock().unwrap();
    kept.push(json!({"id": id, "body": recorded}));
    let over = kept.len().saturating_sub(KEPT_BODIES);
    kept.drain(..over);
}

/// Starts the job: a sandbox for an exposed image the stand-in serves, the uv image's command,
/// or an error for any other image.
fn start(hub: &SharedHub, view: &JobView) {
    let image = view.docker_image.clone().unwrap_or_default();
    let sandbox = match view.expose_ports().is_empty() {
        false => crate::sandbox::image_of(&hub.images, &image),
        true => None,
    };
    let id = view.id.clone();
    match sandbox {
        Some(image) => {
            tokio::spawn(crate::sandbox::run(hub.clone(), id, image));
        }
        None if crate::runner::runs_command(&image) => {
            tokio::spawn(crate::runner::run(hub.clone(), id));
        }
        None => {
            let message = format!("the local stand-in cannot run image `{image}`: it runs the uv image's commands and the sandbox images it serves");
            hub.jobs.log(&id, message.clone());
            hub.jobs.set_stage(&id, "ERROR", Some(message));
        }
    }
}

fn view_of(hub: &SharedHub, namespace: &str, id: &str) -> Option<JobView> {
    hub.jobs.with(id, |j| (j.namespace == namespace).then(|| j.view.clone())).flatten()
}

async fn inspect(
    State(hub): State<SharedHub>,
    Path((namespace, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = crate::write_refusal(&hub, &headers, &namespace) {
        return r;
    }
    match view_of(&hub, &namespace, &id) {
        Some(v) => Json(answer(&v, hub.jobs.nulls())).into_response(),
        None => hf_error(StatusCode::NOT_FOUND, None, "Job not found"),
    }
}

async fn list(
    State(hub): State<SharedHub>,
    Path(namespace): Path<String>,
    headers: HeaderMap,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Response {
    if let Some(r) = crate::write_refusal(&hub, &headers, &namespace) {
        return r;
    }
    let pairs: Vec<(String, String)> = url_pairs(query.as_deref().unwrap_or(""));
    let labels: Vec<(String, String)> = pairs
        .iter()
        .filter(|(k, _)| k == "label")
        .filter_map(|(_, v)| v.split_once('=').map(|(a, b)| (a.to_string(), b.to_string())))
        .collect();
    let stages: Vec<&str> = pairs.iter().filter(|(k, _)| k == "stage").map(|(_, v)| v.as_str()).collect();
    let limit: usize = pairs
        .iter()
        .find(|(k, _)| k == "limit")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(50)
        .clamp(1, 500);
    let cursor: usize =
        pairs.iter().find(|(k, _)| k == "cursor").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let all: Vec<JobView> = {
        let mut jobs = hub.jobs.jobs.lock().unwrap();
        jobs.iter_mut()
            .filter(|j| j.namespace == namespace)
            .filter(|j| labels.iter().all(|(k, v)| j.view.labels.get(k) == Some(v)))
            .filter(|j| stages.is_empty() || stages.contains(&j.stage()))
            .map(|j| {
                j.refresh();
                j.view.clone()
            })
            .collect()
    };
    let nulls = hub.jobs.nulls();
    let page: Vec<Value> = all.iter().skip(cursor).take(limit).map(|v| answer(v, nulls)).collect();
    let mut resp = Json(page).into_response();
    if cursor + limit < all.len() {
        let base = hub.public_url.lock().unwrap().clone();
        let mut next: Vec<String> = pairs
            .iter()
            .filter(|(k, _)| k != "cursor" && k != "limit")
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        next.push(format!("limit={limit}"));
        next.push(format!("cursor={}", cursor + limit));
        let link = format!("<{base}/api/jobs/{namespace}?{}>; rel=\"next\"", next.join("&"));
        if let Ok(v) = HeaderValue::from_str(&link) {
            resp.headers_mut().insert(header::LINK, v);
        }
    }
    resp
}

fn url_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn cancel(
    State(hub): State<SharedHub>,
    Path((namespace, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = crate::write_refusal(&hub, &headers, &namespace) {
        return r;
    }
    let Some(notify) = hub.jobs.with(&id, |j| (j.namespace == namespace).then(|| j.cancel.clone())).flatten()
    else {
        return hf_error(StatusCode::NOT_FOUND, None, "Job not found");
    };
    hub.jobs.set_stage(&id, "CANCELED", Some("Canceled by user".into()));
    notify.notify_waiters();
    StatusCode::OK.into_response()
}

#[derive(Deserialize)]
struct LogQuery {
    #[serde(default)]
    tail: Option<usize>,
}

/// The log as server-sent events: every line so far (the last `tail` of them when asked), then
/// new ones until the job ends.
async fn logs(
    State(hub): State<SharedHub>,
    Path((namespace, id)): Path<(String, String)>,
    headers: HeaderMap,
    axum::extract::Query(q): axum::extract::Query<LogQuery>,
) -> Response {
    if let Some(r) = crate::write_refusal(&hub, &headers, &namespace) {
        return r;
    }
    if view_of(&hub, &namespace, &id).is_none() {
        return hf_error(StatusCode::NOT_FOUND, None, "Job not found");
    }
    let start = match q.tail {
        Some(n) => hub.jobs.with(&id, |j| j.logs.len().saturating_sub(n)).unwrap_or(0),
        None => 0,
    };
    let stream = log_stream(hub, id, start);
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(30))).into_response()
}

/// GPU utilisation a job shows: busy while its processes run, idle while they are stopped (a hung
/// job) or before its command starts.
fn gpu_busy(pid: Option<u32>) -> bool {
    let Some(pid) = pid else { return false };
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses: `T` is stopped.
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('T')),
        Err(_) => false,
    }
}

/// The job's metrics as HF streams them: one `event: metric` a second, 406 once the job ended.
async fn metrics(
    State(hub): State<SharedHub>,
    Path((namespace, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = crate::write_refusal(&hub, &headers, &namespace) {
        return r;
    }
    let Some(finished) = hub.jobs.with(&id, |j| (j.namespace == namespace).then(|| j.finished())).flatten()
    else {
        return hf_error(StatusCode::NOT_FOUND, None, "Job not found");
    };
    if finished {
        return hf_error(StatusCode::NOT_ACCEPTABLE, None, "Job is not running");
    }
    let stream = stream::unfold((hub, id, true), |(hub, id, first)| async move {
        if !first {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let (pid, flavor, finished, idle) =
            hub.jobs.with(&id, |j| (j.pid, j.view.flavor.clone(), j.finished(), j.faults.gpus_idle))?;
        if finished {
            return None;
        }
        let gpus = domain::registry::serving::flavor_gpus(&flavor).unwrap_or(0);
        let busy = !idle && gpu_busy(pid);
        let util = if busy { 87 } else { 0 };
        let sample = json!({
            "cpu_usage_pct": if busy { 35.0 } else { 0.0 }, "cpu_millicores": if busy { 2800 } else { 0 },
            "memory_used_bytes": 12u64 << 30, "memory_total_bytes": 192u64 << 30, "rx_bps": 0, "tx_bps": 0,
            "gpus": (0..gpus).map(|g| (g.to_string(), json!({"utilization": util, "memory_used_bytes": if busy { 70u64 << 30 } else { 0 }, "memory_total_bytes": 141u64 << 30}))).collect::<serde_json::Map<String, Value>>(),
            "replica": 0,
        });
        Some((
            Ok::<_, Infallible>(Event::default().event("metric").data(sample.to_string())),
            (hub, id, false),
        ))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(30))).into_response()
}

fn log_stream(hub: SharedHub, id: String, start: usize) -> impl Stream<Item = Result<Event, Infallible>> {
    // Lines are taken a batch at a time under one lock, as fast as the client reads them.
    const BATCH: usize = 512;
    let batches = stream::unfold((hub, id, start, false), |(hub, id, sent, done)| async move {
        if done {
            return None;
        }
        loop {
            let (lines, finished) = hub
                .jobs
                .with(&id, |j| {
                    (
                        j.logs.get(sent..).unwrap_or(&[]).iter().take(BATCH).cloned().collect::<Vec<_>>(),
                        j.finished(),
                    )
                })
                .unwrap_or((Vec::new(), true));
            if !lines.is_empty() {
                let next = sent + lines.len();
                let events: Vec<Result<Event, Infallible>> = lines
                    .into_iter()
                    .map(|(ts, text)| {
                        Ok(Event::default().data(json!({"data": text, "timestamp": ts}).to_string()))
                    })
                    .collect();
                return Some((stream::iter(events), (hub, id, next, false)));
            }
            if finished {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    batches.flatten()
}

async fn get_faults(State(hub): State<SharedHub>) -> Json<JobFaults> {
    Json(hub.jobs.faults.lock().unwrap().clone())
}

#[derive(Deserialize)]
struct FaultsUpdate {
    #[serde(flatten)]
    faults: JobFaults,
    /// Sets how long each simulated stage takes (ms), for the jobs created from now on.
    #[serde(default)]
    stage_ms: Option<u64>,
}

async fn put_faults(State(hub): State<SharedHub>, Json(update): Json<FaultsUpdate>) -> Json<JobFaults> {
    if let Some(ms) = update.stage_ms {
        hub.jobs.stage_ms.store(ms, Ordering::Relaxed);
    }
    *hub.jobs.faults.lock().unwrap() = update.faults.clone();
    Json(update.faults)
}

async fn clear_faults(State(hub): State<SharedHub>) -> StatusCode {
    *hub.jobs.faults.lock().unwrap() = JobFaults::default();
    StatusCode::NO_CONTENT
}

/// The sandboxes' switches: how long each takes to start, and how many of the next never do.
#[derive(Debug, Default, serde::Serialize, Deserialize)]
struct SandboxSwitches {
    #[serde(default)]
    start_s: Option<f64>,
    #[serde(default)]
    never_serve: Option<u32>,
}

fn sandbox_switches(hub: &SharedHub) -> SandboxSwitches {
    SandboxSwitches {
        start_s: Some(hub.jobs.sandbox_start_ms.load(Ordering::Relaxed) as f64 / 1000.0),
        never_serve: Some(hub.jobs.never_serve.load(Ordering::Relaxed)),
    }
}

async fn get_sandboxes(State(hub): State<SharedHub>) -> Json<SandboxSwitches> {
    Json(sandbox_switches(&hub))
}

async fn put_sandboxes(
    State(hub): State<SharedHub>,
    Json(set): Json<SandboxSwitches>,
) -> Json<SandboxSwitches> {
    if let Some(s) = set.start_s {
        hub.jobs.sandbox_start_ms.store((s.max(0.0) * 1000.0) as u64, Ordering::Relaxed);
    }
    if let Some(n) = set.never_serve {
        hub.jobs.never_serve.store(n, Ordering::Relaxed);
    }
    Json(sandbox_switches(&hub))
}
