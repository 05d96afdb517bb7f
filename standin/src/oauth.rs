//! HF's OAuth endpoints as a Space sees them: discovery, authorize (a local page to choose who
//! signs in), token (authorization code with PKCE, HTTP Basic client auth) and userinfo.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::Engine;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::hub::PendingCode;
use crate::{bearer, random_token, unauthorized, SharedHub};

const CODE_LIFETIME: Duration = Duration::from_secs(600);

pub(crate) fn router() -> Router<SharedHub> {
    Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/oauth/authorize", get(authorize_page).post(authorize_approve))
        .route("/oauth/token", post(token))
        .route("/oauth/userinfo", get(userinfo))
}

fn base(hub: &SharedHub) -> String {
    hub.public_url.lock().unwrap().clone()
}

async fn discovery(State(hub): State<SharedHub>) -> Json<serde_json::Value> {
    let url = base(&hub);
    Json(json!({
        "issuer": url,
        "authorization_endpoint": format!("{url}/oauth/authorize"),
        "token_endpoint": format!("{url}/oauth/token"),
        "userinfo_endpoint": format!("{url}/oauth/userinfo"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code"],
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": ["openid", "profile", "email"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "subject_types_supported": ["public"],
    }))
}

#[derive(Debug, Deserialize)]
struct AuthorizeParams {
    client_id: String,
    redirect_uri: String,
    #[serde(default)]
    scope: String,
    state: String,
    response_type: String,
    #[serde(default)]
    code_challenge: Option<String>,
    #[serde(default)]
    code_challenge_method: Option<String>,
}

fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    (status, Json(json!({"error": error, "error_description": description}))).into_response()
}

/// Why an authorize request is refused, as (OAuth error, description); answered with 400.
fn check_authorize(hub: &SharedHub, p: &AuthorizeParams) -> Result<(), (&'static str, &'static str)> {
    if p.client_id != hub.app.client_id {
        return Err(("invalid_client", "unknown client_id"));
    }
    if p.response_type != "code" {
        return Err(("unsupported_response_type", "only code"));
    }
    if p.state.is_empty() || p.redirect_uri.is_empty() {
        return Err(("invalid_request", "state and redirect_uri are required"));
    }
    if p.code_challenge.is_some() && p.code_challenge_method.as_deref() != Some("S256") {
        return Err(("invalid_request", "code_challenge_method must be S256"));
    }
    Ok(())
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The page where a local tester chooses who signs in.
async fn authorize_page(State(hub): State<SharedHub>, Query(p): Query<AuthorizeParams>) -> Response {
    if let Err((error, description)) = check_authorize(&hub, &p) {
        return oauth_error(StatusCode::BAD_REQUEST, error, description);
    }
    let hidden = |name: &str, value: &str| {
        format!(r#"<input type="hidden" name="{}" value="{}">"#, escape(name), escape(value))
    };
    let mut fields = String::new();
    for (name, value) in [
        ("client_id", p.client_id.as_str()),
        ("redirect_uri", p.redirect_uri.as_str()),
        ("scope", p.scope.as_str()),
        ("state", p.state.as_str()),
        ("response_type", p.response_type.as_str()),
        ("code_challenge", p.code_challenge.as_deref().unwrap_or("")),
        ("code_challenge_method", p.code_challenge_method.as_deref().unwrap_or("")),
    ] {
        fields.push_str(&hidden(name, value));
    }
    let buttons: String = hub
        .users
        .iter()
        .map(|u| {
            let orgs: Vec<String> = u.orgs.iter().map(|o| format!("{} ({})", o.name, o.role)).collect();
            format!(
                r#"<li><button type="submit" name="user" value="{id}">Sign in as {name}</button> {full}{orgs}</li>"#,
                id = escape(&u.id()),
                name = escape(&u.name),
                full = escape(&u.fullname),
                orgs = if orgs.is_empty() { String::new() } else { format!(" · {}", escape(&orgs.join(", "))) },
            )
        })
        .collect();
    Html(format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Local Hugging Face stand-in: sign in</title></head><body style="font-family:sans-serif;max-width:40rem;margin:2rem auto">
<h1>Local Hugging Face stand-in</h1><p>This is not huggingface.co: it signs in the local demo users of this machine.</p>
<p>Choose who signs in to <code>{client}</code>:</p><form method="post" action="/oauth/authorize">{fields}<ul>{buttons}</ul></form></body></html>"#,
        client = escape(&p.client_id),
    ))
    .into_response()
}

#[derive(Debug, Deserialize)]
struct Approval {
    /// The chosen user's id (names need not be unique).
    user: String,
    #[serde(flatten)]
    params: AuthorizeParams,
}

async fn authorize_approve(State(hub): State<SharedHub>, Form(form): Form<Approval>) -> Response {
    let mut p = form.params;
    // The page's hidden fields send absent PKCE values as empty strings.
    p.code_challenge = p.code_challenge.filter(|c| !c.is_empty());
    p.code_challenge_method = p.code_challenge_method.filter(|c| !c.is_empty());
    if let Err((error, description)) = check_authorize(&hub, &p) {
        return oauth_error(StatusCode::BAD_REQUEST, error, description);
    }
    if hub.user_by_id(&form.user).is_none() {
        return oauth_error(StatusCode::BAD_REQUEST, "access_denied", "no such user");
    }
    let code = random_token(24);
    hub.codes.lock().unwrap().insert(
        code.clone(),
        PendingCode {
            user: form.user,
            client_id: p.client_id,
            redirect_uri: p.redirect_uri.clone(),
            code_challenge: p.code_challenge,
            scope: p.scope,
            issued: Instant::now(),
        },
    );
    let sep = if p.redirect_uri.contains('?') { '&' } else { '?' };
    let state: String = url_encode(&p.state);
    Redirect::to(&format!("{}{sep}code={code}&state={state}", p.redirect_uri)).into_response()
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Client credentials from HTTP Basic auth, or from the form.
fn client_credentials(headers: &HeaderMap, form: &HashMap<String, String>) -> Option<(String, String)> {
    if let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        if let Some(encoded) = value.strip_prefix("Basic ") {
            let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
            let text = String::from_utf8(decoded).ok()?;
            let (id, secret) = text.split_once(':')?;
            return Some((percent_decode(id), percent_decode(secret)));
        }
    }
    Some((form.get("client_id")?.clone(), form.get("client_secret")?.clone()))
}

/// RFC 6749 form-encodes Basic credentials; decode `%XX` and `+`.
fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(hi * 16 + lo);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn token(
    State(hub): State<SharedHub>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let Some((client_id, secret)) = client_credentials(&headers, &form) else {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client", "client authentication is required");
    };
    if client_id != hub.app.client_id || secret != hub.app.client_secret {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client", "wrong client credentials");
    }
    if form.get("grant_type").map(String::as_str) != Some("authorization_code") {
        return oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type", "only authorization_code");
    }
    let code = form.get("code").cloned().unwrap_or_default();
    // A code is good once, whatever happens next.
    let Some(pending) = hub.codes.lock().unwrap().remove(&code) else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "unknown or used code");
    };
    if pending.issued.elapsed() > CODE_LIFETIME {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "the code expired");
    }
    if pending.client_id != client_id || form.get("redirect_uri") != Some(&pending.redirect_uri) {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "redirect_uri or client does not match",
        );
    }
    if let Some(challenge) = &pending.code_challenge {
        let verifier = form.get("code_verifier").map(String::as_str).unwrap_or("");
        let digest = Sha256::digest(verifier.as_bytes());
        if base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest) != *challenge {
            return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "PKCE verification failed");
        }
    }
    let access_token = format!("hf_oauth_{}", random_token(24));
    hub.oauth_tokens.lock().unwrap().insert(access_token.clone(), pending.user);
    Json(json!({
        "access_token": access_token,
        "token_type": "bearer",
        "expires_in": 28800,
        "scope": pending.scope,
    }))
    .into_response()
}

async fn userinfo(State(hub): State<SharedHub>, headers: HeaderMap) -> Response {
    let Some(user) = bearer(&headers).and_then(|t| hub.user_by_token(t)) else { return unauthorized() };
    Json(json!({
        "sub": user.id(),
        "name": user.fullname,
        "preferred_username": user.name,
        "picture": "",
        "isPro": false,
        "canPay": false,
        "orgs": hub.orgs_of(user).iter().map(|o| json!({
            "sub": format!("org-{}", o.name),
            "name": o.name,
            "preferred_username": o.name,
            "roleInOrg": o.role,
        })).collect::<Vec<_>>(),
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn decodes_form_encoding_without_panicking() {
        assert_eq!(percent_decode("a%3Ab+c"), "a:b c");
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("%é"), "%é");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
