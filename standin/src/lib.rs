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
mod github_rate;
pub mod groups;
mod hub;
pub mod images;
pub mod job_record;
pub mod job_table;
pub mod jobs;
pub mod lfs;
mod lfs_pointer;
mod lfs_store;
mod oauth;
pub mod registry;
pub mod relay;
mod repos;
pub mod runner;
pub mod sandbox;
pub mod trainer;
pub mod users;
mod writes;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

pub use faults::Faults;
pub use github_rate::{RateLimitState, RateLimitUpdate};
pub(crate) use hub::{bearer, random_token, unauthorized, write_refusal};
pub use hub::{Hub, OAuthApp, SharedHub};
pub use users::{HubUser, OrgMembership};

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
        "orgs": hub.orgs_of(user).iter().map(org_json).collect::<Vec<_>>(),
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
