//! Public GitHub repositories: two API calls per validation (`commits/{ref}` to resolve, then
//! `git/trees/{sha}?recursive=1`), and raw files from the raw host, which has no API limit. The
//! API's hourly limit is shared by every participant's validations: once GitHub says it is used
//! up, the arena answers 503 naming the limit and its reset without calling again until then.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use domain::collection::request::Source;
use domain::collection::Entry;
use reqwest::StatusCode;
use serde::Deserialize;

use super::hf::without_url;
use super::{bounded_body, encode_path, RepoReader, SourceError};
use crate::ports::clock::Clock;
use crate::ports::identity::http_client;

#[derive(Clone)]
pub struct GitHub {
    client: reqwest::Client,
    api: String,
    raw: String,
    limit: Arc<Limit>,
    /// The rate-limit window is judged on the clock port, so fixed-clock tests reach its reset.
    clock: Arc<dyn Clock>,
}

/// The last limit GitHub reported.
#[derive(Default)]
struct Limit {
    limit: AtomicU64,
    exhausted_until: AtomicU64,
}

impl GitHub {
    pub fn new(api: &str, raw: &str, clock: Arc<dyn Clock>) -> Self {
        GitHub {
            clock,
            client: http_client(),
            api: api.trim_end_matches('/').to_string(),
            raw: raw.trim_end_matches('/').to_string(),
            limit: Arc::new(Limit::default()),
        }
    }

    fn epoch(&self) -> u64 {
        self.clock.epoch().max(0) as u64
    }

    fn check_limit(&self) -> Result<(), SourceError> {
        let until = self.limit.exhausted_until.load(Ordering::Relaxed);
        if until > self.epoch() {
            return Err(SourceError::RateLimited {
                limit: self.limit.limit.load(Ordering::Relaxed),
                reset_epoch: until,
            });
        }
        Ok(())
    }

    async fn api_get(&self, url: String) -> Result<reqwest::Response, SourceError> {
        self.check_limit()?;
        let resp = self
            .client
            .get(url)
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .send()
            .await
            .map_err(|e| {
                SourceError::Unavailable(format!("GitHub could not be reached: {}", without_url(&e)))
            })?;
        let header =
            |k: &str| resp.headers().get(k).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
        if let Some(limit) = header("x-ratelimit-limit") {
            self.limit.limit.store(limit, Ordering::Relaxed);
        }
        let exhausted = header("x-ratelimit-remaining") == Some(0);
        if exhausted && matches!(resp.status(), StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS) {
            let reset = header("x-ratelimit-reset").unwrap_or_else(|| self.epoch() + 3600);
            self.limit.exhausted_until.store(reset, Ordering::Relaxed);
            return Err(SourceError::RateLimited {
                limit: self.limit.limit.load(Ordering::Relaxed),
                reset_epoch: reset,
            });
        }
        Ok(resp)
    }
}

#[derive(Deserialize)]
struct CommitAnswer {
    sha: String,
}

#[derive(Deserialize)]
struct TreeAnswer {
    #[serde(default)]
    truncated: bool,
    tree: Vec<TreeItem>,
}

#[derive(Deserialize)]
struct TreeItem {
    path: String,
    mode: String,
    #[serde(rename = "type")]
    kind: String,
    sha: String,
    #[serde(default)]
    size: u64,
}

fn status_error(status: StatusCode, revision: &str) -> SourceError {
    match status {
        // GitHub answers 404 for private repositories too.
        StatusCode::NOT_FOUND => SourceError::RepoNotFound,
        StatusCode::UNPROCESSABLE_ENTITY => SourceError::RevisionNotFound(revision.to_string()),
        // A 403 that is not the hourly limit is GitHub's secondary (abuse) limit.
        StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS => {
            SourceError::Unavailable("GitHub refused the request for now (its secondary rate limit)".into())
        }
        StatusCode::UNAUTHORIZED => SourceError::Private,
        s => SourceError::Unavailable(format!("GitHub answered {s}")),
    }
}

#[async_trait::async_trait]
impl RepoReader for GitHub {
    async fn resolve(&self, source: &Source) -> Result<String, SourceError> {
        let url = format!(
            "{}/repos/{}/commits/{}",
            self.api,
            encode_path(&source.repo_id()),
            encode_path(&source.revision)
        );
        let resp = self.api_get(url).await?;
        if !resp.status().is_success() {
            return Err(status_error(resp.status(), &source.revision));
        }
        let body = bounded_body(resp, 16 << 20).await?;
        let answer: CommitAnswer = serde_json::from_slice(&body)
            .map_err(|_| SourceError::Unavailable("GitHub's commit answer was not understood".into()))?;
        if !domain::collection::request::is_commit(&answer.sha) {
            return Err(SourceError::Unavailable("GitHub answered no commit id".into()));
        }
        Ok(answer.sha.to_ascii_lowercase())
    }

    async fn list(&self, source: &Source, commit: &str) -> Result<(Vec<Entry>, u32), SourceError> {
        let url =
            format!("{}/repos/{}/git/trees/{commit}?recursive=1", self.api, encode_path(&source.repo_id()));
        let resp = self.api_get(url).await?;
        if !resp.status().is_success() {
            return Err(status_error(resp.status(), commit));
        }
        let body = bounded_body(resp, 64 << 20).await?;
        let answer: TreeAnswer = serde_json::from_slice(&body)
            .map_err(|_| SourceError::Unavailable("GitHub's tree listing was not understood".into()))?;
        if answer.truncated {
            return Err(SourceError::TooLarge(
                "GitHub truncated the repository's listing (over 100,000 entries); put the collection in a smaller repository or an HF dataset".into(),
            ));
        }
        let entries = answer
            .tree
            .into_iter()
            .filter(|i| i.kind == "blob" || i.mode == "120000")
            .map(|i| Entry { symlink: i.mode == "120000", path: i.path, blob: i.sha, size: i.size })
            .collect();
        Ok((super::under(entries, &source.entry_path), 1))
    }

    async fn read(
        &self,
        source: &Source,
        commit: &str,
        path: &str,
        max: u64,
    ) -> Result<Vec<u8>, SourceError> {
        let url = format!(
            "{}/{}/{commit}/{}",
            self.raw,
            encode_path(&source.repo_id()),
            encode_path(&super::in_repo(source, path))
        );
        let resp = self.client.get(url).send().await.map_err(|e| {
            SourceError::Unavailable(format!("GitHub could not be reached: {}", without_url(&e)))
        })?;
        if !resp.status().is_success() {
            return Err(SourceError::Unavailable(format!(
                "`{path}` could not be read from GitHub ({})",
                resp.status()
            )));
        }
        bounded_body(resp, max).await
    }
}
