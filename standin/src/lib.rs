//! A local stand-in for the Hugging Face Hub, speaking the protocols the arena uses:
//! `GET /api/whoami-v2`, OAuth (authorize with a page to choose who signs in, token with PKCE and
//! `state`, userinfo) and OpenID discovery. Its users come from a JSON file; fault switches make
//! it slow, rate-limited, failing or dropping connections. Everything it serves is local and
//! labelled as such.
//!
//! With a repositories directory (`ARENA_HUB_REPOS`, [`Hub::with_repos`]) it also serves, from local
//! git repositories (work trees or bare; branches, tags and commits are the revisions):
//!
//! - HF datasets from `{dir}/datasets/{owner}/{name}`: `GET /api/datasets/{owner}/{name}` (main) and
//!   `.../revision/{rev}` (`?blobs=true` adds size and blob id to siblings); `GET .../tree/{rev}[/{path}]`
//!   (`?recursive=true`, paged by `?limit=` or `STANDIN_TREE_PAGE_SIZE`, default 1000, with a
//!   `Link: <..&cursor=N>; rel="next"` header); `GET|HEAD /datasets/{owner}/{name}/resolve/{rev}/{path}`
//!   with `X-Repo-Commit` and `ETag` (the git blob id). Errors carry HF's `X-Error-Code`: missing repo
//!   404 `RepoNotFound`, revision 404 `RevisionNotFound`, path 404 `EntryNotFound`, private 401
//!   `RepoNotFound`, gated 403 `GatedRepo`.
//! - GitHub from `{dir}/github/{owner}/{repo}` (point `GITHUB_API_URL` at the stand-in and
//!   `GITHUB_RAW_URL` at `{stand-in}/raw`): `GET /repos/{owner}/{repo}/commits/{ref}` (unknown ref 422),
//!   `GET /repos/{owner}/{repo}/git/trees/{sha}?recursive=1`, and `GET /raw/{owner}/{repo}/{sha}/{path}`.
//!   The two API routes share one hourly window of `STANDIN_GITHUB_RATE_LIMIT` calls (default 60),
//!   answer `x-ratelimit-*` headers, and 403 when it is spent. `GET /_standin/github` shows the
//!   window `{rate_limit, remaining, used, reset}`; `PUT /_standin/github` with
//!   `{"rate_limit"?: n, "remaining"?: n, "reset_in_s"?: s}` starts a new one (absent fields: same
//!   limit, all remaining, an hour); `DELETE` restores the configured limit.
//!
//! `git config standin.visibility private|gated` in a repository hides it (private: HF 401, GitHub
//! 404) or gates it (HF 403). The fault switches apply to every route but the `/_standin` ones.
//! `GET /_standin/stats` counts requests: `whoami_calls` (answered by whoami), and
//! `dataset_api_requests`, `dataset_file_requests`, `dataset_write_requests`,
//! `jobs_api_requests`, `github_api_requests`, `github_raw_requests`, `registry_requests` (faulted ones included, so
//! retries show), and the jobs created and running; `DELETE /_standin/stats` zeroes the counts.
//!
//! With repositories it also takes dataset writes (`crate::writes`: create, preupload, commit)
//! and runs HF Jobs (`crate::jobs`), each job playing the simulated training pipeline
//! (`crate::pipeline`); `PUT /_standin/jobs` sets their fault switches. A job that exposes a port
//! and names an image served here with a `serve` command runs that command as a sandbox instead
//! (`crate::sandbox`). With image descriptions (`STANDIN_IMAGES`) it serves Docker Hub and GHCR
//! (`crate::registry`), and it can connect a simulated OpenEnv training cluster (`crate::cluster`).

pub mod cluster;
pub mod cluster_state;
mod datasets;
pub mod faults;
mod github;
pub mod groups;
pub mod job_record;
pub mod jobs;
pub mod lfs;
mod lfs_pointer;
mod oauth;
pub mod registry;
pub mod relay;
mod repos;
pub mod runner;
pub mod sandbox;
pub mod trainer;
pub mod users;
mod writes;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
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
pub use github::{RateLimitState, RateLimitUpdate};
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
    /// The origin of its LFS storage (`lfs::storage_router`), another listener, as HF's CDN is
    /// another host.
    storage_url: Mutex<String>,
    faults: Mutex<Faults>,
    codes: Mutex<HashMap<String, oauth::PendingCode>>,
    /// Access tokens issued by the OAuth flow, mapped to the user's id.
    oauth_tokens: Mutex<HashMap<String, String>>,
    /// Tokens their owners revoked: refused everywhere from then on (`revoke`).
    revoked: Mutex<std::collections::HashSet<String>>,
    stats: Stats,
    repos: Option<repos::Repos>,
    /// LFS objects of the repositories (beside them).
    lfs: Option<lfs::Store>,
    tree_page_size: usize,
    github_rate_limit: u32,
    github: Mutex<github::RateLimit>,
    /// HF Jobs, each running the simulated pipeline.
    pub jobs: jobs::Jobs,
    /// Container image repositories served as Docker Hub and GHCR, by `host/name`.
    pub images: std::collections::BTreeMap<String, registry::Repository>,
}

/// Request counters for `GET /_standin/stats`.
#[derive(Default)]
struct Stats {
    whoami_calls: AtomicU64,
    dataset_api_requests: AtomicU64,
    dataset_file_requests: AtomicU64,
    github_api_requests: AtomicU64,
    github_raw_requests: AtomicU64,
    jobs_api_requests: AtomicU64,
    dataset_write_requests: AtomicU64,
    registry_requests: AtomicU64,
}

impl Stats {
    fn counter(&self, method: &axum::http::Method, path: &str) -> Option<&AtomicU64> {
        let write = path.starts_with("/api/repos/")
            || (path.starts_with("/api/datasets/") && method == axum::http::Method::POST);
        if write {
            Some(&self.dataset_write_requests)
        } else if path.starts_with("/api/jobs") {
            Some(&self.jobs_api_requests)
        } else if path.starts_with("/api/datasets/") {
            Some(&self.dataset_api_requests)
        } else if path.starts_with("/datasets/") {
            Some(&self.dataset_file_requests)
        } else if path.starts_with("/repos/") {
            Some(&self.github_api_requests)
        } else if path.starts_with("/raw/") {
            Some(&self.github_raw_requests)
        } else if path.starts_with("/registry/") {
            Some(&self.registry_requests)
        } else {
            None
        }
    }

    fn json(&self) -> Value {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        json!({
            "whoami_calls": n(&self.whoami_calls),
            "dataset_api_requests": n(&self.dataset_api_requests),
            "dataset_file_requests": n(&self.dataset_file_requests),
            "github_api_requests": n(&self.github_api_requests),
            "github_raw_requests": n(&self.github_raw_requests),
            "jobs_api_requests": n(&self.jobs_api_requests),
            "dataset_write_requests": n(&self.dataset_write_requests),
            "registry_requests": n(&self.registry_requests),
        })
    }

    fn reset(&self) {
        for c in [
            &self.whoami_calls,
            &self.dataset_api_requests,
            &self.dataset_file_requests,
            &self.github_api_requests,
            &self.github_raw_requests,
            &self.jobs_api_requests,
            &self.dataset_write_requests,
            &self.registry_requests,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

const DEFAULT_TREE_PAGE_SIZE: usize = 1000;
const DEFAULT_GITHUB_RATE_LIMIT: u32 = 60;
/// How long each simulated pipeline stage takes by default (ms).
const DEFAULT_STAGE_MS: u64 = 2000;

pub type SharedHub = Arc<Hub>;

impl Hub {
    pub fn new(users: Vec<HubUser>, app: OAuthApp, faults: Faults) -> SharedHub {
        Arc::new(Hub {
            users,
            app,
            public_url: Mutex::new(String::new()),
            storage_url: Mutex::new(String::new()),
            faults: Mutex::new(faults),
            codes: Mutex::new(HashMap::new()),
            oauth_tokens: Mutex::new(HashMap::new()),
            revoked: Mutex::new(std::collections::HashSet::new()),
            stats: Stats::default(),
            repos: None,
            lfs: None,
            tree_page_size: DEFAULT_TREE_PAGE_SIZE,
            github_rate_limit: DEFAULT_GITHUB_RATE_LIMIT,
            github: Mutex::new(github::RateLimit::new(DEFAULT_GITHUB_RATE_LIMIT)),
            jobs: jobs::Jobs::new(DEFAULT_STAGE_MS),
            images: std::collections::BTreeMap::new(),
        })
    }

    /// Serves the git repositories under `root` (`datasets/{owner}/{name}`, `github/{owner}/{repo}`).
    /// Like the other `with_` settings, call it before the hub is shared.
    pub fn with_repos(self: SharedHub, root: PathBuf) -> SharedHub {
        self.configure(|hub| {
            hub.lfs = Some(lfs::Store::new(root.clone()));
            hub.repos = Some(repos::Repos::new(root));
        })
    }

    /// Serves a dataset made from a folder (`owner/name`), with a commit id that is the same on
    /// every machine (see `Repos::seed`); needs `with_repos` first. Answers the hub and the commit.
    pub fn with_seed_dataset(
        self: SharedHub,
        id: &str,
        src: &std::path::Path,
    ) -> anyhow::Result<(SharedHub, String)> {
        let (owner, name) = id.split_once('/').ok_or_else(|| anyhow::anyhow!("`{id}` is not owner/name"))?;
        let name = repos::RepoName::parse(owner, name)
            .ok_or_else(|| anyhow::anyhow!("`{id}` is not a repository name"))?;
        let repos = self
            .repos
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("seed datasets need the repositories' folder"))?;
        let commit =
            repos.seed(repos::Kind::Dataset, &name, src, "A dataset seeded by the local stand-in")?;
        Ok((self, commit))
    }

    /// Tree listings' page size when the request gives no `limit` (default 1000).
    pub fn with_tree_page_size(self: SharedHub, size: usize) -> SharedHub {
        self.configure(|hub| hub.tree_page_size = size.max(1))
    }

    /// The GitHub API's hourly call limit (default 60), also what `DELETE /_standin/github` restores.
    pub fn with_github_rate_limit(self: SharedHub, limit: u32) -> SharedHub {
        self.configure(|hub| {
            hub.github_rate_limit = limit;
            hub.github = Mutex::new(github::RateLimit::new(limit));
        })
    }

    /// Serves these container image repositories (see `crate::registry`).
    pub fn with_images(
        self: SharedHub,
        images: std::collections::BTreeMap<String, registry::Repository>,
    ) -> SharedHub {
        self.configure(|hub| hub.images = images)
    }

    /// How long each simulated pipeline stage takes (ms).
    pub fn with_stage_ms(self: SharedHub, ms: u64) -> SharedHub {
        self.configure(|hub| hub.jobs.stage_ms.store(ms, Ordering::Relaxed))
    }

    fn configure(mut self: SharedHub, set: impl FnOnce(&mut Hub)) -> SharedHub {
        set(Arc::get_mut(&mut self).expect("configure the hub before sharing it"));
        self
    }

    /// Where LFS objects are uploaded to and downloaded from (the Hub's own address until the
    /// storage listener runs).
    pub fn storage_url(&self) -> String {
        let storage = self.storage_url.lock().unwrap().clone();
        if storage.is_empty() {
            self.public_url.lock().unwrap().clone()
        } else {
            storage
        }
    }

    /// Revokes a token, as its owner does in their HF settings: every route and every sandbox's
    /// proxy refuses it from then on.
    pub fn revoke(&self, token: &str) {
        self.revoked.lock().unwrap().insert(token.to_string());
    }

    pub(crate) fn user_by_token(&self, token: &str) -> Option<&HubUser> {
        if self.revoked.lock().unwrap().contains(token) {
            return None;
        }
        if let Some(u) = self.users.iter().find(|u| u.token == token) {
            return Some(u);
        }
        let id = self.oauth_tokens.lock().unwrap().get(token).cloned()?;
        self.user_by_id(&id)
    }

    fn user_by_id(&self, id: &str) -> Option<&HubUser> {
        self.users.iter().find(|u| u.id() == id)
    }

    /// Requests to the container registries (`/registry/…`), faulted ones included.
    pub fn registry_requests(&self) -> u64 {
        self.stats.registry_requests.load(Ordering::Relaxed)
    }

    pub fn whoami_calls(&self) -> u64 {
        self.stats.whoami_calls.load(Ordering::Relaxed)
    }

    /// Revokes every OAuth access token the stand-in issued (as a person would on HF, or as HF does
    /// when a membership changes).
    pub fn revoke_oauth_tokens(&self) {
        self.oauth_tokens.lock().unwrap().clear();
    }

    /// Reads of dataset files (`/datasets/…/resolve/…`).
    pub fn dataset_file_requests(&self) -> u64 {
        self.stats.dataset_file_requests.load(Ordering::Relaxed)
    }

    /// The GitHub API's rate-limit window now.
    pub fn github_rate_limit(&self) -> RateLimitState {
        self.github.lock().unwrap().state()
    }

    /// Starts a new GitHub rate-limit window (see `PUT /_standin/github`).
    pub fn set_github_rate_limit(&self, update: RateLimitUpdate) -> RateLimitState {
        self.github.lock().unwrap().update(update)
    }

    pub fn set_faults(&self, faults: Faults) {
        *self.faults.lock().unwrap() = faults;
    }
}

pub fn router(hub: SharedHub) -> Router {
    let hub_routes = Router::new()
        .route("/api/whoami-v2", get(whoami))
        .merge(oauth::router())
        .merge(datasets::router())
        .merge(writes::router().layer(axum::extract::DefaultBodyLimit::max(256 << 20)))
        .merge(lfs::router().layer(axum::extract::DefaultBodyLimit::max(1 << 30)))
        .merge(jobs::router())
        .merge(github::router())
        .merge(registry::router())
        .layer(middleware::from_fn_with_state(hub.clone(), inject_faults))
        .layer(middleware::from_fn_with_state(hub.clone(), count_requests));
    Router::new()
        .merge(hub_routes)
        .route("/_standin/faults", get(get_faults).put(put_faults).delete(clear_faults))
        .route("/_standin/stats", get(stats).delete(reset_stats))
        .route("/_standin/github", get(get_github).put(put_github).delete(reset_github))
        .merge(jobs::control())
        .with_state(hub)
}

/// Counts repository requests before the faults, so that retries after a fault show in the stats.
async fn count_requests(State(hub): State<SharedHub>, req: Request, next: Next) -> Response {
    if let Some(c) = hub.stats.counter(req.method(), req.uri().path()) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    next.run(req).await
}

async fn inject_faults(State(hub): State<SharedHub>, req: Request, next: Next) -> Response {
    let hit = hub.faults.lock().unwrap().take(req.uri().path());
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

/// `None` when the caller may write in the namespace (and use its jobs), else HF's refusal.
pub(crate) fn write_refusal(hub: &Hub, headers: &HeaderMap, namespace: &str) -> Option<Response> {
    match bearer(headers).and_then(|t| hub.user_by_token(t)) {
        None => Some(unauthorized()),
        Some(user) if user.may_write(namespace) => None,
        Some(_) => Some(datasets::hf_error(
            StatusCode::FORBIDDEN,
            None,
            &format!("You don't have the rights to write in {namespace}"),
        )),
    }
}

pub(crate) fn unauthorized() -> Response {
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
    hub.stats.whoami_calls.fetch_add(1, Ordering::Relaxed);
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
        "auth": {"type": "access_token", "accessToken": {"displayName": "local stand-in token", "role": user.role(), "createdAt": "2026-01-01T00:00:00.000Z"}},
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
    let mut stats = hub.stats.json();
    if let (Some(all), Value::Object(jobs)) = (stats.as_object_mut(), hub.jobs.stats()) {
        all.extend(jobs);
    }
    Json(stats)
}

async fn reset_stats(State(hub): State<SharedHub>) -> StatusCode {
    hub.stats.reset();
    StatusCode::NO_CONTENT
}

async fn get_github(State(hub): State<SharedHub>) -> Json<RateLimitState> {
    Json(hub.github_rate_limit())
}

async fn put_github(
    State(hub): State<SharedHub>,
    Json(update): Json<RateLimitUpdate>,
) -> Json<RateLimitState> {
    Json(hub.set_github_rate_limit(update))
}

async fn reset_github(State(hub): State<SharedHub>) -> Json<RateLimitState> {
    let limit = hub.github_rate_limit;
    Json(hub.set_github_rate_limit(RateLimitUpdate { rate_limit: Some(limit), ..Default::default() }))
}

/// Serves the stand-in on a listener until the process ends, and its LFS storage on a second
/// listener of the same address (another origin, as HF's CDN is).
pub async fn serve(listener: tokio::net::TcpListener, hub: SharedHub) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    {
        let mut url = hub.public_url.lock().unwrap();
        if url.is_empty() {
            *url = format!("http://{addr}");
        }
    }
    let storage = tokio::net::TcpListener::bind((addr.ip(), 0)).await?;
    *hub.storage_url.lock().unwrap() = format!("http://{}", storage.local_addr()?);
    let files =
        lfs::storage_router().layer(axum::extract::DefaultBodyLimit::max(1 << 30)).with_state(hub.clone());
    tokio::spawn(async move { axum::serve(storage, files).await });
    axum::serve(listener, router(hub).into_make_service_with_connect_info::<SocketAddr>()).await
}

/// Random URL-safe text for codes and tokens.
pub(crate) fn random_token(bytes: usize) -> String {
    use base64::Engine;
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the OS has randomness");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}
