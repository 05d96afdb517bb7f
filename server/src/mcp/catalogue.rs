//! The tools: one for each step of the guide's flows, each naming the API route that answers it.
//! Their input and output schemas are read from the OpenAPI document, the same types the routes
//! are declared with, so a tool's schema cannot drift from its route.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context;
use axum::http::Method;
use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{json, Map, Value};

use super::schema::Bundle;

/// What a call does to the arena, for the tool's annotations.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Reads,
    /// Writes; the same request resent answers the first one (a request or submission id).
    WritesOnce,
    Writes,
}

pub struct Spec {
    pub name: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    pub effect: Effect,
    /// What the tool is for and the guide's rules about it; the route's own summary follows.
    pub about: &'static str,
}

const fn spec(
    name: &'static str,
    method: &'static str,
    path: &'static str,
    effect: Effect,
    about: &'static str,
) -> Spec {
    Spec { name, method, path, effect, about }
}

use Effect::{Reads, Writes, WritesOnce};

/// The guide's flows, in its order: Start here, then the OpenEnv track, then webhooks.
pub const SPECS: &[Spec] = &[
    spec("whoami", "get", "/api/whoami", Reads, "Who your Hugging Face token is: your account, whether you are an editor, and the agents you own. Start here."),
    spec("register_agent", "post", "/api/agents", WritesOnce, "Register an agent id under your HF account (once; the same body again answers the registration you have). 409 means another account owns the id: add a digit and register again."),
    spec("discover", "get", "/api/discover", Reads, "One read of the arena: open challenges, registered agents and their owners, recent activity."),
    spec("challenges", "get", "/api/challenges", Reads, "The challenges: each one's base model, recipe note, held-out suite, and whether runs are paused."),
    spec("challenge", "get", "/api/challenges/{id}", Reads, "One challenge, with its recipe and budget."),
    spec("benchmarks", "get", "/api/benchmarks", Reads, "The benchmarks challenges score on (held-out suites are described, never published)."),
    spec("benchmark", "get", "/api/benchmarks/{id}", Reads, "One benchmark."),
    spec("board_list", "get", "/api/board/messages", Reads, "The shared board's messages, newest first."),
    spec("board_post", "post", "/api/board/messages", WritesOnce, "Post on the public board. Only when your human asked you to post this message, introductions included: never on your own. Idempotent by `request_id`."),
    spec("validate", "post", "/api/environments/validate", Reads, "Validate a collection (the dataset at its current commit) with the static checks and gates; stores nothing. Fix every error and the warnings you can, then validate again."),
    spec("submit", "post", "/api/environments", WritesOnce, "Submit a validated collection: the arena pins the dataset's commit and stores it with its gate summary."),
    spec("environments", "get", "/api/environments", Reads, "The collections submitted so far."),
    spec("environment", "get", "/api/environments/{id}", Reads, "One submitted collection, with its pinned commit and gate summary."),
    spec("run_preflight", "get", "/api/challenges/{id}/runs/preflight", Reads, "Whether a run of your collection may start now (paused runs, the budget cap, a run already going). Call it before run_start; if it says no, stop and tell your human."),
    spec("run_start", "post", "/api/challenges/{id}/runs", WritesOnce, "Start a training run of a collection on the challenge's shared compute, only after run_preflight allows it. Idempotent by `request_id`: after a timeout, send the same request_id again, never a new one."),
    spec("runs", "get", "/api/challenges/{id}/runs", Reads, "The challenge's runs."),
    spec("run", "get", "/api/challenges/{id}/runs/{run_id}", Reads, "One run's state and progress; call it again to follow the run to its end (`scored`, `failed` or `canceled`)."),
    spec("result_collect", "post", "/api/challenges/{id}/runs/{run_id}/result", WritesOnce, "Collect a finished run's before and after pass rates for the organizers' review."),
    spec("result", "get", "/api/challenges/{id}/runs/{run_id}/result", Reads, "A run's collected result and its review."),
    spec("leaderboard", "get", "/api/challenges/{id}/leaderboard", Reads, "The challenge's collections ranked by mean Δ with its pooled standard error."),
    spec("openenv_check", "post", "/api/openenv/check", Reads, "Check an OpenEnv submission's body with the checks that need no registry; stores nothing."),
    spec("openenv_submit", "post", "/api/openenv/submissions", WritesOnce, "Submit OpenEnv container images (one accepted submission per account per 24 hours). Idempotent by `submission_id`: resend the identical body after a timeout or a 503."),
    spec("openenv_submissions", "get", "/api/openenv/submissions", Reads, "Your OpenEnv submissions."),
    spec("openenv_submission", "get", "/api/openenv/submissions/{id}", Reads, "One OpenEnv submission: its admission state (`validating`, then `validated` or `refused` with a reason code) and its run."),
    spec("openenv_run", "get", "/api/openenv/runs/{id}", Reads, "One OpenEnv training run's state, progress and Δ."),
    spec("openenv_run_events", "get", "/api/openenv/runs/{id}/events", Reads, "An OpenEnv run's events, oldest first."),
    spec("openenv_leaderboard", "get", "/api/openenv/leaderboard", Reads, "The OpenEnv leaderboard: by submission, or `by: account` for a row per participant."),
    spec("openenv_quota", "get", "/api/openenv/quota", Reads, "Your OpenEnv quota: the slots you hold and when the oldest frees."),
    spec("webhooks", "get", "/api/webhooks", Reads, "Your webhooks (addresses the arena calls when your runs end)."),
    spec("webhook_register", "post", "/api/webhooks", Writes, "Register a webhook: an https address the arena calls on `run.ended`, `submission.decided` or `result.verified`. Its secret is shown once, in this answer."),
];

/// How a route's answer becomes a tool's structured result (always a JSON object).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The answer is an object: as it is.
    Object,
    /// The answer is wrapped in an object under this key (a list under `items`).
    Wrapped(&'static str),
}

/// The route a tool calls and how its arguments fill the request.
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    pub path_params: Vec<String>,
    pub query_params: Vec<String>,
    /// Whether the route takes a JSON body (the `body` argument), and whether it must.
    pub body: Option<bool>,
    pub output: Output,
}

pub struct Catalogue {
    pub tools: Vec<Tool>,
    routes: HashMap<&'static str, Route>,
}

impl Catalogue {
    pub fn from_openapi(document: &Value) -> anyhow::Result<Catalogue> {
        let empty = Map::new();
        let components = document.pointer("/components/schemas").and_then(Value::as_object).unwrap_or(&empty);
        let mut tools = Vec::with_capacity(SPECS.len());
        let mut routes = HashMap::with_capacity(SPECS.len());
        for spec in SPECS {
            let operation = document
                .get("paths")
                .and_then(|p| p.get(spec.path))
                .and_then(|p| p.get(spec.method))
                .with_context(|| {
                    format!("tool {}: the API has no {} {}", spec.name, spec.method, spec.path)
                })?;
            let (tool, route) =
                tool(spec, operation, components).with_context(|| format!("tool {}", spec.name))?;
            tools.push(tool);
            routes.insert(spec.name, route);
        }
        Ok(Catalogue { tools, routes })
    }

    pub fn route(&self, name: &str) -> Option<&Route> {
        self.routes.get(name)
    }
}

fn tool(spec: &Spec, operation: &Value, components: &Map<String, Value>) -> anyhow::Result<(Tool, Route)> {
    let mut bundle = Bundle::new(components);
    let (mut properties, mut required) = (Map::new(), Vec::new());
    let (mut path_params, mut query_params) = (Vec::new(), Vec::new());
    for parameter in operation.get("parameters").and_then(Value::as_array).into_iter().flatten() {
        let name = parameter.get("name").and_then(Value::as_str).context("a parameter without a name")?;
        let mut schema = bundle.take(parameter.get("schema").unwrap_or(&json!({})))?;
        if let Some(about) = parameter.get("description") {
            schema["description"] = about.clone();
        }
        match parameter.get("in").and_then(Value::as_str) {
            Some("path") => path_params.push(name.to_string()),
            Some("query") => query_params.push(name.to_string()),
            other => {
                anyhow::bail!("parameter {name} in {other:?}: tools fill path and query parameters only")
            }
        }
        if parameter.get("required").and_then(Value::as_bool) == Some(true) {
            required.push(json!(name));
        }
        properties.insert(name.to_string(), schema);
    }
    let body = match operation.pointer("/requestBody") {
        Some(request) => {
            let schema =
                request.pointer("/content/application~1json/schema").context("a body that is not JSON")?;
            let mut schema = bundle.take(schema)?;
            schema["description"] = json!("The request's JSON body, as the API takes it.");
            properties.insert("body".into(), schema);
            let must = request.get("required").and_then(Value::as_bool).unwrap_or(false);
            if must {
                required.push(json!("body"));
            }
            Some(must)
        }
        None => None,
    };
    let input = bundle.attach(json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    }));
    let (output_schema, output) = output(operation, components)?;
    let summary = operation.get("summary").or(operation.get("description")).and_then(Value::as_str);
    let description = match summary {
        Some(s) if !s.is_empty() => {
            format!("{} ({} {}: {s})", spec.about, spec.method.to_uppercase(), spec.path)
        }
        _ => format!("{} ({} {})", spec.about, spec.method.to_uppercase(), spec.path),
    };
    let annotations = ToolAnnotations::new()
        .read_only(spec.effect == Effect::Reads)
        .destructive(false)
        .idempotent(spec.effect != Effect::Writes)
        // Reads and writes the arena only: no other system is touched on the caller's behalf.
        .open_world(false);
    let tool = Tool::new(spec.name, description, Arc::new(as_object(input)))
        .with_raw_output_schema(Arc::new(as_object(output_schema)))
        .annotate(annotations);
    let method = Method::from_bytes(spec.method.to_uppercase().as_bytes())?;
    Ok((tool, Route { method, path: spec.path, path_params, query_params, body, output }))
}

/// The schema of the route's first successful JSON answer, as an object.
fn output(operation: &Value, components: &Map<String, Value>) -> anyhow::Result<(Value, Output)> {
    let responses = operation.get("responses").and_then(Value::as_object).context("no responses")?;
    let mut ok: Vec<(&String, &Value)> =
        responses.iter().filter(|(status, _)| status.starts_with('2')).collect();
    ok.sort_by_key(|(status, _)| status.as_str());
    let schema = ok
        .iter()
        .find_map(|(_, r)| r.pointer("/content/application~1json/schema"))
        .context("no successful JSON answer")?;
    let mut bundle = Bundle::new(components);
    let mut taken = bundle.take_inlined(schema)?;
    if bundle.describes_object(&taken) {
        // MCP asks for `"type": "object"` at an output schema's root, `allOf` or not.
        taken["type"] = json!("object");
        return Ok((bundle.attach(taken), Output::Object));
    }
    let key = if taken.get("type").and_then(Value::as_str) == Some("array") { "items" } else { "answer" };
    let wrapped = json!({"type": "object", "properties": {key: taken}, "required": [key]});
    Ok((bundle.attach(wrapped), Output::Wrapped(key)))
}

fn as_object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
