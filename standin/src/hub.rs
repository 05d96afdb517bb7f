//! The stand-in's state (`Hub`), who is calling and HF's error answers: what every route reads,
//! apart from the routes themselves (the crate's root assembles them).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::faults::Faults;
use crate::github_rate::{RateLimit, RateLimitState, RateLimitUpdate};
use crate::images::Repository;
use crate::job_table::Jobs;
use crate::lfs_store::Store;
use crate::repos;
use crate::users::{HubUser, OrgMembership};

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
    pub(crate) storage_url: Mutex<String>,
    pub(crate) faults: Mutex<Faults>,
    pub(crate) codes: Mutex<HashMap<String, PendingCode>>,
    /// Access tokens issued by the OAuth flow, mapped to the user's id.
    pub(crate) oauth_tokens: Mutex<HashMap<String, String>>,
    /// Tokens their owners revoked: refused everywhere from then on (`revoke`).
    pub(crate) revoked: Mutex<std::collections::HashSet<String>>,
    /// Organizations users joined after the stand-in started (`join_org`), by user name: what
    /// whoami and userinfo name from then on.
    pub(crate) joined: Mutex<Vec<(String, OrgMembership)>>,
    pub(crate) stats: Stats,
    pub(crate) repos: Option<repos::Repos>,
    /// LFS objects of the repositories (beside them).
    pub(crate) lfs: Option<Store>,
    pub(crate) tree_page_size: usize,
    pub(crate) github_rate_limit: u32,
    pub(crate) github: Mutex<RateLimit>,
    /// HF Jobs, each running the simulated pipeline.
    pub jobs: Jobs,
    /// Container image repositories served as Docker Hub and GHCR, by `host/name`.
    pub images: std::collections::BTreeMap<String, Repository>,
}

/// Request counters for `GET /_standin/stats`.
#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) whoami_calls: AtomicU64,
    pub(crate) dataset_api_requests: AtomicU64,
    pub(crate) dataset_file_requests: AtomicU64,
    pub(crate) github_api_requests: AtomicU64,
    pub(crate) github_raw_requests: AtomicU64,
    pub(crate) jobs_api_requests: AtomicU64,
    pub(crate) dataset_write_requests: AtomicU64,
    pub(crate) registry_requests: AtomicU64,
}

impl Stats {
    pub(crate) fn counter(&self, method: &axum::http::Method, path: &str) -> Option<&AtomicU64> {
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

    pub(crate) fn json(&self) -> Value {
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

    pub(crate) fn reset(&self) {
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
            joined: Mutex::new(Vec::new()),
            stats: Stats::default(),
            repos: None,
            lfs: None,
            tree_page_size: DEFAULT_TREE_PAGE_SIZE,
            github_rate_limit: DEFAULT_GITHUB_RATE_LIMIT,
            github: Mutex::new(RateLimit::new(DEFAULT_GITHUB_RATE_LIMIT)),
            jobs: Jobs::new(DEFAULT_STAGE_MS),
            images: std::collections::BTreeMap::new(),
        })
    }

    /// Serves the git repositories under `root` (`datasets/{owner}/{name}`, `github/{owner}/{repo}`).
    /// Like the other `with_` settings, call it before the hub is shared.
    pub fn with_repos(self: SharedHub, root: PathBuf) -> SharedHub {
        self.configure(|hub| {
            hub.lfs = Some(Store::new(root.clone()));
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
            hub.github = Mutex::new(RateLimit::new(limit));
        })
    }

    /// Serves these container image repositories (see `crate::registry`).
    pub fn with_images(self: SharedHub, images: std::collections::BTreeMap<String, Repository>) -> SharedHub {
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

    pub(crate) fn user_by_id(&self, id: &str) -> Option<&HubUser> {
        self.users.iter().find(|u| u.id() == id)
    }

    /// Requests to the container registries (`/registry/…`), faulted ones included.
    pub fn registry_requests(&self) -> u64 {
        self.stats.registry_requests.load(Ordering::Relaxed)
    }

    pub fn whoami_calls(&self) -> u64 {
        self.stats.whoami_calls.load(Ordering::Relaxed)
    }

    /// Makes `user` a member of `org` with `role`, as an organization's admin would on HF: whoami
    /// and userinfo name it from then on (repository permissions keep the file's organizations).
    pub fn join_org(&self, user: &str, org: &str, role: &str) {
        let membership = OrgMembership { name: org.into(), role: role.into() };
        self.joined.lock().unwrap().push((user.to_string(), membership));
    }

    /// A user's organizations: the file's and those joined since.
    pub(crate) fn orgs_of(&self, user: &HubUser) -> Vec<OrgMembership> {
        let joined = self.joined.lock().unwrap();
        let later = joined.iter().filter(|(name, _)| name == &user.name).map(|(_, m)| m.clone());
        user.orgs.iter().cloned().chain(later).collect()
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

/// A code the authorize page gave, until the token route redeems it.
pub(crate) struct PendingCode {
    pub(crate) user: String,
    pub(crate) client_id: String,
    pub(crate) redirect_uri: String,
    pub(crate) code_challenge: Option<String>,
    pub(crate) scope: String,
    pub(crate) issued: Instant,
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
        Some(_) => Some(hf_error(
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

/// An error as the Hub sends it: JSON `{"error"}` with `X-Error-Code` and `X-Error-Message`.
pub(crate) fn hf_error(status: StatusCode, code: Option<&str>, message: &str) -> Response {
    let mut resp = (status, Json(json!({ "error": message }))).into_response();
    if let Some(code) = code {
        resp.headers_mut().insert("x-error-code", HeaderValue::from_str(code).expect("ascii code"));
    }
    if let Ok(v) = HeaderValue::from_str(message) {
        resp.headers_mut().insert("x-error-message", v);
    }
    resp
}

/// Random URL-safe text for codes and tokens.
pub(crate) fn random_token(bytes: usize) -> String {
    use base64::Engine;
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the OS has randomness");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}
