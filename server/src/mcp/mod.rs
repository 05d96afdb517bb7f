//! `/mcp`: the arena as a Model Context Protocol server (streamable HTTP, the official Rust SDK
//! `rmcp`), for agents that reach services through MCP rather than `arena_cli.py`.
//!
//! Each tool is one route of the JSON API and is answered by that route, called in-process
//! through the same router: the same extractors, checks, limits, launch guard and error codes, so
//! a tool can answer nothing the route would not. Tools' schemas are taken from `/openapi.json`.
//! The caller is the HF token in `Authorization: Bearer`, resolved as the API resolves it; without
//! one, `/mcp` answers 401 pointing at its protected-resource metadata (RFC 9728), which names
//! Hugging Face as the authorization server, so MCP clients sign their user in with HF.

pub mod catalogue;
pub mod handler;
pub mod schema;

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use domain::ErrorCode;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{json, Value};

use crate::http::ApiError;
use crate::identity::Caller;
use crate::AppState;

pub use catalogue::{Catalogue, SPECS};

/// Where the protected-resource metadata is served (RFC 9728 §3: the well-known prefix, then the
/// resource's path), and the bare prefix some clients read first.
const METADATA: &str = "/.well-known/oauth-protected-resource";

/// A tool call's JSON-RPC body is small; the API's own body limit applies again to the route.
const MAX_BODY: usize = 256 * 1024;

/// `/mcp` and its metadata documents. `api` is the JSON API with its state (the routes the
/// tools call); `openapi` is the document their schemas come from.
pub fn router(state: &AppState, api: Router, openapi: &Value) -> anyhow::Result<Router<AppState>> {
    let catalogue = Arc::new(Catalogue::from_openapi(openapi)?);
    let arena = handler::Arena::new(catalogue, api);
    // Stateless: every POST is answered on its own (no session to keep, so any replica answers
    // it), as JSON rather than a stream where the tool emits nothing before its result.
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(MAX_BODY)
        // `Origin` and `Host` are checked before the token (`rebinding_refusal`), against the
        // arena's own public URL rather than rmcp's loopback-only default.
        .disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || Ok(arena.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Ok(Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .route(METADATA, get(resource_metadata))
        .route(&format!("{METADATA}/mcp"), get(resource_metadata)))
}

/// The protected-resource metadata of `/mcp` (RFC 9728).
async fn resource_metadata(State(s): State<AppState>) -> Json<Value> {
    Json(json!({
        "resource": format!("{}/mcp", s.public_url),
        "authorization_servers": [s.auth.authorization_server],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["openid", "profile"],
        "resource_name": "Open Env Arena",
        "resource_documentation": format!("{}/AGENTS.md#connect-over-mcp", s.public_url),
    }))
}

/// DNS rebinding: a page of another origin that renamed its own host to the arena's address could
/// call a local arena with the demo tokens `dev/run` prints. MCP's Streamable HTTP transport says a
/// server must check `Origin`: a request that sends one must send the arena's own public origin,
/// and a `Host` must be one the arena serves (its public URL's, `ARENA_MCP_HOSTS`). Agents and CLIs
/// send no `Origin` and pass.
fn rebinding_refusal(s: &AppState, headers: &axum::http::HeaderMap) -> Option<ApiError> {
    let text = |name| headers.get(name).map(|v| v.to_str().unwrap_or("(not text)"));
    if let Some(origin) = text(header::ORIGIN) {
        if origin != s.auth.public_origin {
            return Some(ApiError::new(
                ErrorCode::OriginRefused,
                format!("/mcp answers pages of {} only, not of `{origin}`", s.auth.public_origin),
            ));
        }
    }
    if let Some(host) = text(header::HOST) {
        if !s.auth.mcp_hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            tracing::warn!(
                host,
                "refused an /mcp request for a host the arena does not serve (ARENA_MCP_HOSTS)"
            );
            return Some(ApiError::new(
                ErrorCode::OriginRefused,
                format!("/mcp is served as {} only, not as `{host}`", s.auth.mcp_hosts.join(", ")),
            ));
        }
    }
    None
}

/// Every `/mcp` request comes from no other origin or host (`rebinding_refusal`) and carries an
/// HF token that resolves to an account; else 401 with the challenge MCP's authorization spec
/// asks for. Cookies are not a way in: the tools forward the bearer token only.
async fn require_token(State(s): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(refused) = rebinding_refusal(&s, request.headers()) {
        return refused.into_response();
    }
    let (mut parts, body) = request.into_parts();
    if !parts.headers.contains_key(header::AUTHORIZATION) {
        let error = ApiError::new(
            ErrorCode::AuthRequired,
            "send your HF token as `Authorization: Bearer <token>`; MCP clients sign in with Hugging Face \
             through the metadata this challenge names",
        );
        return challenge(&s, error, None);
    }
    match Caller::from_request_parts(&mut parts, &s).await {
        Ok(Caller(Some(_))) => next.run(Request::from_parts(parts, body)).await,
        Ok(Caller(None)) => {
            let error = ApiError::new(ErrorCode::InvalidToken, "the token names no Hugging Face account");
            challenge(&s, error, Some("invalid_token"))
        }
        Err(error) if error.code() == ErrorCode::InvalidToken => challenge(&s, error, Some("invalid_token")),
        // Rate limits and HF being away keep their own answers.
        Err(error) => error.into_response(),
    }
}

fn challenge(s: &AppState, error: ApiError, code: Option<&str>) -> Response {
    let mut response = error.into_response();
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    let code = code.map(|c| format!("error=\"{c}\", ")).unwrap_or_default();
    let value = format!("Bearer {code}resource_metadata=\"{}{METADATA}/mcp\"", s.public_url);
    if let Ok(value) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}
