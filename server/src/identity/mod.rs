//! Who is calling. Agents send `Authorization: Bearer <HF token>`, resolved through HF's whoami
//! (cached by a hash of the token); people sign in with HF OAuth and carry a session cookie, and
//! every cookie-authenticated write carries the session's CSRF token in `X-CSRF-Token`.

/// The feature (`api::FEATURE`): `GET /api/whoami`; the OAuth routes are outside the API document
/// (`oauth::router`).
pub mod api;
pub mod cache;
pub mod caller;
pub mod oauth;
pub mod provider;
pub mod secrets;
pub mod sessions;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, Method};
use domain::identity::HubError;
use domain::ErrorCode;
use serde::{Deserialize, Serialize};
use tower_sessions::Session;

pub use caller::{Identity, Via};
pub use secrets::{random_hex, random_secret, same_bytes, sha256_hex};

use crate::http::ApiError;
use crate::AppState;

pub const CSRF_HEADER: &str = "x-csrf-token";
const SESSION_USER: &str = "user";

/// What the session remembers of a signed-in person. No token is kept: the OAuth access token
/// stays in this server's memory (`AuthSettings::session_tokens`) under `token_ref`, to re-check
/// the editor role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionUser {
    /// HF's stable account id (`sub`).
    pub id: String,
    pub name: String,
    pub fullname: String,
    pub editor: bool,
    pub csrf: String,
    #[serde(default)]
    pub token_ref: Option<String>,
    /// When the editor role and the organizations were last confirmed by HF (epoch seconds).
    #[serde(default)]
    pub checked_epoch: i64,
    /// The organizations HF named at sign-in and at each re-check: a session whose account is, or
    /// becomes, a member of a sandbox or evaluation namespace is refused like its token.
    #[serde(default)]
    pub orgs: Vec<String>,
}

/// The caller, signed in or not. Resolving a token that HF refuses, or failing to reach HF, is an
/// error: a request with a bad credential is never treated as anonymous.
pub struct Caller(pub Option<Identity>);

/// A caller that must be signed in.
pub struct User(pub Identity);

pub async fn session_user(session: &Session) -> Option<SessionUser> {
    session.get::<SessionUser>(SESSION_USER).await.ok().flatten()
}

pub async fn sign_in(session: &Session, user: &SessionUser) -> Result<(), ApiError> {
    // A new session id at sign-in, so an id planted before it is worthless.
    session.cycle_id().await.map_err(ApiError::internal)?;
    session.insert(SESSION_USER, user).await.map_err(ApiError::internal)
}

fn hub_error(e: HubError) -> ApiError {
    match e {
        HubError::InvalidToken => ApiError::new(
            ErrorCode::InvalidToken,
            "Hugging Face does not accept this token: check HF_TOKEN or run `hf auth login` again",
        ),
        HubError::Unavailable { reason, retry_after_s } => {
            let retry = retry_after_s.unwrap_or(30);
            ApiError::new(
                ErrorCode::HubUnavailable,
                format!("the arena cannot check your identity right now ({reason}); nothing was stored, try again"),
            )
            .retry_after(retry)
        }
        HubError::Throttled { reason, retry_after_s } => ApiError::new(
            ErrorCode::RateLimited,
            format!("{reason}; a token HF accepts is remembered, so retry with one after {retry_after_s} s"),
        )
        .retry_after(retry_after_s),
    }
}

/// The refusal of a request made with one of the arena's own accounts (`ServiceAccounts`).
pub fn service_account() -> ApiError {
    ApiError::new(
        ErrorCode::ServiceAccount,
        "this credential is one of the arena's own (its bot or a sandbox reader), which never acts as a caller; \
         nothing was stored or counted. Use your own Hugging Face token",
    )
}

/// Every route, public reads included, refuses the arena's own tokens at once (no HF call): a
/// sandbox given its reader must get nothing from the arena with it.
pub async fn refuse_own_tokens(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .map(|(_, t)| t.trim());
    if bearer.is_some_and(|t| state.auth.service_tokens.contains(&sha256_hex(t))) {
        return service_account().into_response();
    }
    next.run(request).await
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(value) = parts.headers.get(header::AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.split_once(' '))
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, t)| t.trim())
                // The shape of a token: checked before HF is asked, so junk costs no HF call.
                .filter(|t| (8..=512).contains(&t.len()) && t.bytes().all(|b| (0x21..=0x7e).contains(&b)))
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::InvalidToken,
                        "send your HF token as `Authorization: Bearer <token>`",
                    )
                })?;
            // The arena's own tokens are refused before HF is asked, its accounts once HF named them.
            if state.auth.service_tokens.contains(&sha256_hex(token)) {
                return Err(service_account());
            }
            let client = crate::http::client::address(parts, state.auth.proxy_hops);
            let account = state.hub.whoami(token, client).await.map_err(hub_error)?;
            if state.auth.service.holds(&account) {
                return Err(service_account());
            }
            return Ok(Caller(Some(Identity {
                editor: account.is_editor(&state.auth.editor_org),
                id: account.id,
                name: account.name,
                fullname: account.fullname,
                via: Via::Token,
            })));
        }
        let write = !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
        let sent = write.then(|| parts.headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or(""));
        Ok(Caller(session_caller(parts, state, sent).await?))
    }
}

/// The person signed in by the request's session cookie, if any. A write must carry the session's
/// CSRF token: `write_csrf` is what it sent, in the `X-CSRF-Token` header or, from a page's plain
/// form, in a field.
pub async fn session_caller(
    parts: &Parts,
    state: &AppState,
    write_csrf: Option<&str>,
) -> Result<Option<Identity>, ApiError> {
    let Some(session) = parts.extensions.get::<Session>().cloned() else { return Ok(None) };
    let Some(mut user) = session_user(&session).await else { return Ok(None) };
    if state.auth.service.holds_member(&user.id, &user.orgs) {
        return Err(service_account());
    }
    if let Some(sent) = write_csrf {
        if !same_bytes(sent.as_bytes(), user.csrf.as_bytes()) {
            return Err(ApiError::new(
                ErrorCode::CsrfInvalid,
                "a signed-in write needs the page's CSRF token in the X-CSRF-Token header",
            ));
        }
    }
    let client = crate::http::client::address(parts, state.auth.proxy_hops);
    recheck(state, &session, &mut user, client).await;
    if state.auth.service.holds_member(&user.id, &user.orgs) {
        return Err(service_account());
    }
    Ok(Some(Identity {
        id: user.id,
        name: user.name,
        fullname: user.fullname,
        editor: user.editor,
        via: Via::Session,
    }))
}

/// A session's editor role and organizations, confirmed by HF at least as often as a token's
/// whoami is reused (`ARENA_WHOAMI_CACHE_S`): with the OAuth token this server keeps in memory. A
/// token HF refuses, or one this server does not have (signed in on another replica, or before a
/// restart), ends the editor role in the session until the person signs in again, and leaves the
/// organizations as HF last named them; HF not answering withholds the role for this request only.
async fn recheck(
    state: &AppState,
    session: &Session,
    user: &mut SessionUser,
    client: Option<std::net::IpAddr>,
) {
    let now = state.now().epoch;
    if now - user.checked_epoch < state.auth.recheck_s {
        return;
    }
    let token = match &user.token_ref {
        Some(r) => state.auth.session_tokens.get(r).await,
        None => None,
    };
    match token {
        Some(token) => match state.hub.whoami(&token, client).await {
            Ok(account) => {
                user.editor = account.is_editor(&state.auth.editor_org);
                user.orgs = account.orgs.into_iter().map(|o| o.org).collect();
            }
            Err(HubError::InvalidToken) => user.editor = false,
            Err(_) => {
                user.editor = false;
                return;
            }
        },
        None => user.editor = false,
    }
    user.checked_epoch = now;
    if let Err(e) = session.insert(SESSION_USER, &*user).await {
        tracing::warn!(error = %e, "storing a session's re-checked role failed");
    }
}

impl FromRequestParts<AppState> for User {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        match Caller::from_request_parts(parts, state).await?.0 {
            Some(identity) => Ok(User(identity)),
            None => Err(ApiError::new(
                ErrorCode::AuthRequired,
                "this needs a Hugging Face identity: send `Authorization: Bearer <HF token>` or sign in",
            )),
        }
    }
}
