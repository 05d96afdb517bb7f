//! The MCP server's handler: lists the catalogue's tools and answers a call by sending its route
//! the request the JSON API would get, through the same router, as the same caller.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, request::Parts, Request};
use axum::Router;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use tower::ServiceExt;

use super::catalogue::{Catalogue, Output, Route};

/// A route's answer is read up to this size; the API's largest reads are well under it.
const MAX_ANSWER: usize = 8 * 1024 * 1024;

const INSTRUCTIONS: &str = "Open Env Arena measures how much a collection of RL task environments improves a \
model. Work through the guide's Start here with these tools: whoami, register_agent, challenges, validate, \
submit, run_preflight, run_start, run (follow it to its end), result_collect, leaderboard. The OpenEnv track: \
openenv_check, openenv_submit, openenv_submission, openenv_run. Two rules hold throughout: post on the board \
only when your human asks you to, and start a run only when run_preflight allows it (when runs are paused or \
the budget cannot cover a run, stop and tell your human). A refused call is a tool error carrying the API's \
stable `code`, its `message` and the HTTP `status`. The whole guide: /AGENTS.md.";

#[derive(Clone)]
pub struct Arena {
    catalogue: Arc<Catalogue>,
    api: Router,
}

impl Arena {
    pub fn new(catalogue: Arc<Catalogue>, api: Router) -> Self {
        Arena { catalogue, api }
    }

    async fn call(
        &self,
        route: &Route,
        arguments: Map<String, Value>,
        parts: Option<&Parts>,
    ) -> CallToolResult {
        let request = match request(route, arguments, parts) {
            Ok(request) => request,
            Err(BadArguments(why)) => {
                let message = format!("tool arguments: {why}");
                return refused(json!({"code": "INVALID_JSON", "message": message, "status": 400}));
            }
        };
        let response = match self.api.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status();
        let body = match axum::body::to_bytes(response.into_body(), MAX_ANSWER).await {
            Ok(body) => body,
            Err(e) => {
                let message = format!("the answer could not be read: {e}");
                return refused(json!({"code": "INTERNAL", "message": message, "status": 500}));
            }
        };
        let answer: Value = match serde_json::from_slice(&body) {
            Ok(answer) => answer,
            Err(_) => json!({"message": String::from_utf8_lossy(&body)}),
        };
        if !status.is_success() {
            let mut error = match answer {
                Value::Object(fields) => fields,
                other => Map::from_iter([("message".to_string(), other)]),
            };
            error.insert("status".into(), json!(status.as_u16()));
            return refused(Value::Object(error));
        }
        CallToolResult::structured(match route.output {
            Output::Object => answer,
            Output::Wrapped(key) => json!({ key: answer }),
        })
    }
}

fn refused(error: Value) -> CallToolResult {
    CallToolResult::structured_error(error)
}

impl ServerHandler for Arena {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("open-env-arena", env!("CARGO_PKG_VERSION")).with_title("Open Env Arena"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.catalogue.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(route) = self.catalogue.route(&request.name) else {
            return Err(ErrorData::invalid_params(format!("no tool `{}`", request.name), None));
        };
        let parts = context.extensions.get::<Parts>();
        Ok(self.call(route, request.arguments.unwrap_or_default(), parts).await.into())
    }
}

/// Arguments that do not fit the tool: what is wrong, for the caller.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadArguments(String);

impl From<String> for BadArguments {
    fn from(why: String) -> Self {
        BadArguments(why)
    }
}

/// The API request a call stands for; `Err` says which argument does not fit.
fn request(
    route: &Route,
    mut arguments: Map<String, Value>,
    parts: Option<&Parts>,
) -> Result<Request<Body>, BadArguments> {
    let mut path = route.path.to_string();
    for name in &route.path_params {
        let value = arguments.remove(name).ok_or_else(|| format!("needs `{name}`"))?;
        let value = scalar(&value).ok_or_else(|| format!("`{name}` is a string"))?;
        path = path.replace(&format!("{{{name}}}"), &encode_segment(&value));
    }
    let mut query = Vec::new();
    for name in &route.query_params {
        if let Some(value) = arguments.remove(name).filter(|v| !v.is_null()) {
            query.push((
                name.clone(),
                scalar(&value).ok_or_else(|| format!("`{name}` is a string or a number"))?,
            ));
        }
    }
    if !query.is_empty() {
        path = format!("{path}?{}", serde_urlencoded::to_string(&query).map_err(|e| e.to_string())?);
    }
    let body = match route.body {
        Some(_) => arguments.remove("body"),
        None => None,
    };
    if route.body == Some(true) && body.is_none() {
        return Err(BadArguments("needs `body`, the request's JSON body".into()));
    }
    if let Some(unknown) = arguments.keys().next() {
        return Err(BadArguments(format!("takes no argument `{unknown}`")));
    }
    let mut builder = Request::builder().method(route.method.clone()).uri(path);
    if let Some(parts) = parts {
        // The caller, as the API knows callers: the bearer token (never a cookie) and the address.
        for name in [header::AUTHORIZATION, header::HeaderName::from_static("x-forwarded-for")] {
            if let Some(value) = parts.headers.get(&name) {
                builder = builder.header(name, value.clone());
            }
        }
        if let Some(info) = parts.extensions.get::<ConnectInfo<std::net::SocketAddr>>() {
            builder = builder.extension(*info);
        }
    }
    let body = match body {
        Some(body) => {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
            Body::from(serde_json::to_vec(&body).map_err(|e| e.to_string())?)
        }
        None => Body::empty(),
    };
    Ok(builder.body(body).map_err(|e| e.to_string())?)
}

/// A path or query value: a string, or a number or boolean written as the API reads it.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, so a value stays one segment.
pub fn encode_segment(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
