//! A local stand-in for the Hugging Face Hub, speaking the protocols the arena uses:
//! `GET /api/whoami-v2`, OAuth (authorize with a page to choose who signs in, token with PKCE and
//! `state`, userinfo) and OpenID discovery. Its users come from a JSON file; fault switches make
//! it slow, rate-limited, failing or dropping connections. Everything it serves is local and
//! labelled as such.

pub mod faults;
mod oauth;
pub mod users;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

pub use faults::Faults;
pub use users::{HubUser, OrgMembership};

/// The OAuth app the stand-in accepts (HF gives a Space these as env vars).
#[derive(Debug, Clone)]
pub struct OAuthApp {
    pub client_id: String,
    pub client_secret: String,
}

pub struct Hub {
    pub users: Vec<HubUser>,
    pub app: OAuthApp,
    /// The base URL clients reach the stand-in at (for discovery documents).
    pub public_url: Mutex<String>,
    faults: Mutex<Faults>,
    codes: Mutex<HashMap<String, oauth::PendingCode>>,
    /// Access tokens issued by the OAuth flow, mapped to the user's id.
    oauth_tokens: Mutex<HashMap<String, String>>,
    whoami_calls: AtomicU64,
}

pub type SharedHub = Arc<Hub>;

impl Hub {
    pub fn new(users: Vec<HubUser>, app: OAuthApp, faults: Faults) -> SharedHub {
        Arc::new(Hub {
            users,
            app,
            public_url: Mutex::new(String::new()),
            faults: Mutex::new(faults),
            codes: Mutex::new(HashMap::new()),
            oauth_tokens: Mutex::new(HashMap::new()),
            whoami_calls: AtomicU64::new(0),
        })
    }

    fn user_by_token(&self, token: &str) -> Option<&HubUser> {
        if let Some(u) = self.users.iter().find(|u| u.token == token) {
            return Some(u);
        }
        let id = self.oauth_tokens.lock().unwrap().get(token).cloned()?;
        self.user_by_id(&id)
    }

    fn user_by_id(&self, id: &str) -> Option<&HubUser> {
        self.users.iter().find(|u| u.id() == id)
    }

    pub fn whoami_calls(&self) -> u64 {
        self.whoami_calls.load(Ordering::Relaxed)
    }

    pub fn set_faults(&self, faults: Faults) {
        *self.faults.lock().unwrap() = faults;
    }
}

pub fn router(hub: SharedHub) -> Router {
    let hub_routes = Router::new()
        .route("/api/whoami-v2", get(whoami))
        .merge(oauth::router())
        .layer(middleware::from_fn_with_state(hub.clone(), inject_faults));
    Router::new()
        .merge(hub_routes)
        .route("/_standin/faults", get(get_faults).put(put_faults).delete(clear_faults))
        .route("/_standin/stats", get(stats))
        .with_state(hub)
}

async fn inject_faults(State(hub): State<SharedHub>, req: Request, next: Next) -> Response {
    let hit = hub.faults.lock().unwrap().take();
    if let Some(faults) = hit {
        if let faults::Outcome::Answer(resp) = faults.apply().await {
            return resp;
        }
    }
    next.run(req).await
}

pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

fn unauthorized() -> Response {
    (StatusCode::UNAUTHORIZED, Json(json!({"error": "Invalid credentials in Authorization header"})))
        .into_response()
}

fn org_json(org: &OrgMembership) -> Value {
    json!({
        "id": format!("org-{}", org.name),
        "type": "org",
        "name": org.name,
        "fullname": org.name,
        "avatarUrl": "",
        "roleInOrg": org.role,
    })
}

/// HF's whoami-v2 answer for a user token.
async fn whoami(State(hub): State<SharedHub>, headers: HeaderMap) -> Response {
    hub.whoami_calls.fetch_add(1, Ordering::Relaxed);
    let Some(user) = bearer(&headers).and_then(|t| hub.user_by_token(t)) else { return unauthorized() };
    Json(json!({
        "id": user.id(),
        "type": "user",
        "name": user.name,
        "fullname": user.fullname,
        "email": user.email,
        "emailVerified": user.email.is_some(),
        "isPro": false,
        "canPay": false,
        "avatarUrl": "",
        "periodEnd": null,
        "orgs": user.orgs.iter().map(org_json).collect::<Vec<_>>(),
        "auth": {"type": "access_token", "accessToken": {"displayName": "local stand-in token", "role": "write", "createdAt": "2026-01-01T00:00:00.000Z"}},
    }))
    .into_response()
}

async fn get_faults(State(hub): State<SharedHub>) -> Json<Faults> {
    Json(hub.faults.lock().unwrap().clone())
}

async fn put_faults(State(hub): State<SharedHub>, Json(faults): Json<Faults>) -> Json<Faults> {
    hub.set_faults(faults.clone());
    Json(faults)
}

async fn clear_faults(State(hub): State<SharedHub>) -> StatusCode {
    hub.set_faults(Faults::default());
    StatusCode::NO_CONTENT
}

async fn stats(State(hub): State<SharedHub>) -> Json<Value> {
    Json(json!({"whoami_calls": hub.whoami_calls()}))
}

/// Serves the stand-in on a listener until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, hub: SharedHub) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    {
        let mut url = hub.public_url.lock().unwrap();
        if url.is_empty() {
            *url = format!("http://{addr}");
        }
    }
    axum::serve(listener, router(hub)).await
}

/// Random URL-safe text for codes and tokens.
pub(crate) fn random_token(bytes: usize) -> String {
    use base64::Engine;
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the OS has randomness");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}
