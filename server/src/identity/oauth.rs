//! Sign-in with Hugging Face (OAuth authorization code with PKCE and `state`), sign-out, and the
//! hand-off that lets a page framed on huggingface.co pick up a sign-in finished in a new tab.
//!
//! Inside the frame the session cookie is partitioned under huggingface.co, while the new tab's
//! cookie belongs to the Space's own site, so the tab cannot simply share its cookie. Instead the
//! callback page gives the framed page (its opener) a one-time code by `postMessage` to the same
//! origin; the framed page redeems it at `/auth/handoff`, which signs in its own session. The code
//! lives 60 s, works once, and is stored only as a hash.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use domain::ErrorCode;
use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, Scope, TokenResponse, TokenUrl,
};
use serde::{Deserialize, Serialize};
use sqlx::Row;
use tower_sessions::Session;

use super::provider::{unavailable, OAuthSettings};
use super::{random_secret, sign_in, Caller, SessionUser};
use crate::http::ApiError;
use crate::AppState;

const PENDING: &str = "oauth_pending";
const HANDOFF_LIFETIME_S: i64 = 60;

fn oauth_settings(state: &AppState) -> Result<&OAuthSettings, ApiError> {
    state.auth.oauth.as_ref().ok_or_else(|| {
        ApiError::new(
            ErrorCode::OauthNotConfigured,
            "sign-in is not configured: set OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET and OPENID_PROVIDER_URL",
        )
    })
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/auth/login", get(login))
        .route("/login/callback", get(callback))
        .route("/auth/logout", post(logout))
        .route("/auth/handoff", post(handoff))
        .route("/auth/session", get(session_info))
}

#[derive(Serialize)]
struct SessionInfo {
    user: Option<SessionUserView>,
    /// The token a signed-in page sends in `X-CSRF-Token` with every write.
    csrf: Option<String>,
    /// Whether sign-in is configured at all.
    sign_in: bool,
}

#[derive(Serialize)]
struct SessionUserView {
    name: String,
    fullname: String,
    editor: bool,
}

/// The browser session as the page needs it. Only same-origin scripts can read it (no CORS).
async fn session_info(State(state): State<AppState>, session: Session) -> Json<SessionInfo> {
    let user = super::session_user(&session).await;
    Json(SessionInfo {
        csrf: user.as_ref().map(|u| u.csrf.clone()),
        user: user.map(|u| SessionUserView { name: u.name, fullname: u.fullname, editor: u.editor }),
        sign_in: state.auth.oauth.is_some(),
    })
}

#[derive(Debug, Serialize, Deserialize)]
struct Pending {
    state: String,
    verifier: String,
    return_to: String,
    popup: bool,
}

#[derive(Deserialize)]
struct LoginParams {
    #[serde(default)]
    return_to: Option<String>,
    /// Set when the page is framed and opened sign-in in a new tab.
    #[serde(default)]
    popup: Option<String>,
}

/// Only paths on this site: a single leading `/`, then visible ASCII without `\\`. Browsers drop
/// tabs and newlines from URLs, so `/\t/evil.example` would become `//evil.example`: any
/// whitespace or control character sends the user home instead.
pub fn safe_return(path: Option<&str>) -> String {
    match path {
        Some(p)
            if p.starts_with('/')
                && !p.starts_with("//")
                && p.len() <= 512
                && p.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b'\\') =>
        {
            p.to_string()
        }
        _ => "/".into(),
    }
}

async fn login(
    State(state): State<AppState>,
    session: Session,
    Query(p): Query<LoginParams>,
) -> Result<Response, ApiError> {
    let oauth = oauth_settings(&state)?;
    let endpoints = oauth.endpoints().await?;
    let client = BasicClient::new(ClientId::new(oauth.client_id.clone()))
        .set_auth_uri(AuthUrl::new(endpoints.authorization_endpoint.clone()).map_err(unavailable)?)
        .set_redirect_uri(RedirectUrl::new(oauth.redirect_url.clone()).map_err(ApiError::internal)?);
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, csrf) = client
        .authorize_url(CsrfToken::new_random)
        .add_scope(Scope::new("openid".into()))
        .add_scope(Scope::new("profile".into()))
        .set_pkce_challenge(challenge)
        .url();
    let pending = Pending {
        state: csrf.secret().clone(),
        verifier: verifier.secret().clone(),
        return_to: safe_return(p.return_to.as_deref()),
        popup: p.popup.is_some(),
    };
    session.insert(PENDING, pending).await.map_err(ApiError::internal)?;
    Ok(Redirect::to(url.as_str()).into_response())
}

#[derive(Deserialize)]
struct CallbackParams {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct UserInfo {
    sub: String,
    preferred_username: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    orgs: Vec<UserInfoOrg>,
}

#[derive(Deserialize)]
struct UserInfoOrg {
    preferred_username: String,
    #[serde(default, rename = "roleInOrg")]
    role_in_org: Option<String>,
}

fn failed(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::OauthFailed, message)
}

async fn callback(
    State(state): State<AppState>,
    session: Session,
    Query(p): Query<CallbackParams>,
) -> Result<Response, ApiError> {
    let oauth = oauth_settings(&state)?;
    let pending: Option<Pending> = session.remove(PENDING).await.map_err(ApiError::internal)?;
    let pending = pending
        .ok_or_else(|| failed("no sign-in is in progress in this browser; start again at /auth/login"))?;
    if let Some(error) = p.error {
        return Err(failed(format!("Hugging Face refused the sign-in: {error}")));
    }
    if p.state.as_deref() != Some(pending.state.as_str()) {
        return Err(failed("the sign-in's state does not match; start again at /auth/login"));
    }
    let code = p.code.ok_or_else(|| failed("Hugging Face sent no code"))?;
    let endpoints = oauth.endpoints().await?;
    let client = BasicClient::new(ClientId::new(oauth.client_id.clone()))
        .set_client_secret(ClientSecret::new(oauth.client_secret.0.clone()))
        .set_token_uri(TokenUrl::new(endpoints.token_endpoint.clone()).map_err(unavailable)?)
        .set_redirect_uri(RedirectUrl::new(oauth.redirect_url.clone()).map_err(ApiError::internal)?);
    let token = client
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier))
        .request_async(&oauth.http)
        .await
        .map_err(|e| {
            failed(format!("Hugging Face did not complete the sign-in ({})", oauth_error_kind(&e)))
        })?;
    let resp = oauth
        .http
        .get(&endpoints.userinfo_endpoint)
        .bearer_auth(token.access_token().secret())
        .send()
        .await
        .map_err(|e| unavailable(e.without_url()))?;
    if !resp.status().is_success() {
        return Err(unavailable(format!("userinfo answered {}", resp.status())));
    }
    let info: UserInfo = resp.json().await.map_err(|e| unavailable(e.without_url()))?;
    let account = domain::identity::HubAccount {
        id: info.sub.clone(),
        name: info.preferred_username.clone(),
        fullname: String::new(),
        orgs: info
            .orgs
            .iter()
            .map(|o| domain::identity::OrgRole {
                org: o.preferred_username.clone(),
                role: o.role_in_org.clone(),
            })
            .collect(),
        token_role: None,
    };
    if state.auth.service.holds(&account) {
        return Err(super::service_account());
    }
    let editor_org = &state.auth.editor_org;
    // The token stays in memory, for re-checking the editor role; the session keeps a reference.
    let token_ref = random_secret();
    state.auth.session_tokens.insert(token_ref.clone(), token.access_token().secret().clone()).await;
    let user = SessionUser {
        editor: info.orgs.iter().any(|o| {
            &o.preferred_username == editor_org && matches!(o.role_in_org.as_deref(), Some("write" | "admin"))
        }),
        id: info.sub,
        fullname: info.name.unwrap_or_else(|| info.preferred_username.clone()),
        name: info.preferred_username,
        csrf: random_secret(),
        token_ref: Some(token_ref),
        checked_epoch: state.now().epoch,
        orgs: account.orgs.into_iter().map(|o| o.org).collect(),
    };
    sign_in(&session, &user).await?;
    if !pending.popup {
        return Ok(Redirect::to(&safe_return(Some(&pending.return_to))).into_response());
    }
    let code = create_handoff(&state, &user).await?;
    Ok(handoff_page(&code, &user.name).into_response())
}

fn oauth_error_kind<RE: std::error::Error, T: oauth2::ErrorResponse>(
    e: &oauth2::RequestTokenError<RE, T>,
) -> String {
    match e {
        oauth2::RequestTokenError::ServerResponse(r) => r.to_string(),
        oauth2::RequestTokenError::Request(_) => "no answer from the token endpoint".into(),
        oauth2::RequestTokenError::Parse(..) => "an unreadable token answer".into(),
        oauth2::RequestTokenError::Other(s) => s.clone(),
    }
}

fn hash(code: &str) -> String {
    domain::digest::sha256_hex(code)
}

async fn create_handoff(state: &AppState, user: &SessionUser) -> Result<String, ApiError> {
    let code = random_secret();
    let stored = SessionUser { csrf: String::new(), ..user.clone() };
    sqlx::query(
        "INSERT INTO auth_handoffs (code_hash, user_json, expires_epoch, used) VALUES ($1, $2, $3, 0)",
    )
    .bind(hash(&code))
    .bind(serde_json::to_string(&stored).map_err(ApiError::internal)?)
    .bind(state.now().epoch + HANDOFF_LIFETIME_S)
    .execute(&state.db.writer)
    .await?;
    Ok(code)
}

/// The callback page in the sign-in tab: hands the code to the framed page that opened it.
fn handoff_page(code: &str, name: &str) -> Html<String> {
    let code = serde_json::to_string(code).unwrap_or_default();
    let name = name.replace(['<', '>', '&', '"'], "");
    Html(format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Signed in</title></head>
<body style="font-family:sans-serif;margin:2rem"><p id="done">Signed in as {name}. You can close this tab.</p>
<script>
if (window.opener) {{ window.opener.postMessage({{ type: "arena-signed-in", code: {code} }}, location.origin); setTimeout(() => window.close(), 500); }}
else {{ location.replace("/"); }}
</script></body></html>"#
    ))
}

#[derive(Deserialize)]
struct HandoffRequest {
    code: String,
}

async fn handoff(
    State(state): State<AppState>,
    session: Session,
    headers: axum::http::HeaderMap,
    crate::http::ApiJson(req): crate::http::ApiJson<HandoffRequest>,
) -> Result<StatusCode, ApiError> {
    // Only the arena's own pages redeem codes: a browser always sends Origin with this POST.
    let origin = headers.get(axum::http::header::ORIGIN).and_then(|v| v.to_str().ok());
    if origin.is_some_and(|o| o != state.auth.public_origin) {
        return Err(ApiError::new(
            ErrorCode::CsrfInvalid,
            "sign-in hand-offs are accepted from the arena's own pages only",
        ));
    }
    // Marking it used and reading it is one statement, so a code works once even when raced.
    let row = sqlx::query(
        "UPDATE auth_handoffs SET used = 1 WHERE code_hash = $1 AND used = 0 AND expires_epoch >= $2 RETURNING user_json",
    )
    .bind(hash(&req.code))
    .bind(state.now().epoch)
    .fetch_optional(&state.db.writer)
    .await?;
    let row = row.ok_or_else(|| {
        ApiError::new(ErrorCode::HandoffInvalid, "this sign-in code is unknown, used or expired")
    })?;
    let json: String = row.try_get("user_json")?;
    let mut user: SessionUser = serde_json::from_str(&json).map_err(ApiError::internal)?;
    user.csrf = random_secret();
    sign_in(&session, &user).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn logout(caller: Caller, session: Session) -> Result<StatusCode, ApiError> {
    // `Caller` has checked the CSRF token of a signed-in session.
    if caller.0.is_some() {
        session.flush().await.map_err(ApiError::internal)?;
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes old hand-off codes now and every hour, for as long as the server runs.
/// Handoff codes older than a day are gone for good.
pub async fn purge_handoffs(state: &AppState) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM auth_handoffs WHERE expires_epoch < $1")
        .bind(state.now().epoch - 86_400)
        .execute(&state.db.writer)
        .await
        .map(|_| ())
}
