//! Dataset writes (and the private reads that go with them), with the arena's own token: create
//! the runs dataset, commit files to it (`POST /api/datasets/{repo}/commit/main`, an NDJSON body of
//! a header and one line per file), and read it back at a commit.

use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::http::client;
use super::lfs;
use crate::config::Secret;
use crate::sources::encode_path;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DatasetError {
    /// A definite refusal (4xx other than a missing file): nothing was written.
    #[error("HF refused ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("not found")]
    NotFound,
    /// No answer, or a 5xx: a commit may or may not have landed.
    #[error("HF did not answer ({0})")]
    Unavailable(String),
}

impl From<lfs::LfsError> for DatasetError {
    fn from(e: lfs::LfsError) -> Self {
        match e {
            lfs::LfsError::Refused { status, message } => DatasetError::Refused { status, message },
            lfs::LfsError::Unavailable(why) => DatasetError::Unavailable(why),
        }
    }
}

#[async_trait]
pub trait DatasetWriter: Send + Sync {
    /// Creates the private dataset unless it exists.
    async fn ensure(&self, repo: &str) -> Result<(), DatasetError>;
    /// Whether the dataset is private (`NotFound` when it does not exist).
    async fn is_private(&self, repo: &str) -> Result<bool, DatasetError>;
    /// The commit `main` points at.
    async fn head(&self, repo: &str) -> Result<String, DatasetError>;
    /// Commits `files` (path, bytes) to `main`; answers the new commit.
    async fn commit(
        &self,
        repo: &str,
        summary: &str,
        files: &[(String, Vec<u8>)],
    ) -> Result<String, DatasetError> {
        self.commit_changes(repo, summary, files, &[]).await
    }
    /// Commits `files` and deletes `deleted` (paths) in one commit to `main`.
    async fn commit_changes(
        &self,
        repo: &str,
        summary: &str,
        files: &[(String, Vec<u8>)],
        deleted: &[String],
    ) -> Result<String, DatasetError>;
    /// The files under `dir` on `main` (recursively), at most `max`; none when `dir` is not there.
    async fn list(&self, repo: &str, dir: &str, max: usize) -> Result<Vec<String>, DatasetError>;
    /// One file at a revision, at most `max` bytes; `NotFound` when it is not there.
    async fn read(&self, repo: &str, revision: &str, path: &str, max: u64) -> Result<Vec<u8>, DatasetError>;
    /// The commits of `main`, newest first, a page at a time: `next` is called with each page and
    /// answers whether to read on (at most `max` in all).
    async fn commits(
        &self,
        repo: &str,
        max: usize,
        next: &mut (dyn for<'p> FnMut(&'p [CommitInfo]) -> bool + Send),
    ) -> Result<(), DatasetError>;
    /// Where a person opens a path of the dataset (private to the organizers).
    fn url(&self, repo: &str, path: &str) -> String;
}

/// One commit of a dataset, as HF lists it (`GET /api/datasets/{repo}/commits/{revision}`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CommitInfo {
    pub id: String,
    pub title: String,
}

pub struct HfDatasetWriter {
    client: reqwest::Client,
    endpoint: String,
    token: Option<Secret>,
}

impl HfDatasetWriter {
    pub fn new(endpoint: &str, token: Option<Secret>) -> HfDatasetWriter {
        // A commit carries a whole collection: give it time.
        HfDatasetWriter::with_timeout(endpoint, token, Duration::from_secs(120))
    }

    /// Each request bounded by `timeout` (tests that play a slow Hub).
    pub fn with_timeout(endpoint: &str, token: Option<Secret>, timeout: Duration) -> HfDatasetWriter {
        HfDatasetWriter {
            client: client(timeout),
            endpoint: endpoint.trim_end_matches('/').to_string(),
            token,
        }
    }

    fn token(&self) -> Result<&str, DatasetError> {
        self.token.as_ref().map(|t| t.0.as_str()).ok_or_else(|| DatasetError::Refused {
            status: 401,
            message: "the arena has no HF token to write the runs dataset with (HF_TOKEN)".into(),
        })
    }

    fn request(&self, method: reqwest::Method, url: &str) -> Result<reqwest::RequestBuilder, DatasetError> {
        Ok(self.client.request(method, url).bearer_auth(self.token()?))
    }

    async fn send(req: reqwest::RequestBuilder) -> Result<reqwest::Response, DatasetError> {
        Self::check(req.send().await).await
    }

    async fn check(
        resp: Result<reqwest::Response, reqwest::Error>,
    ) -> Result<reqwest::Response, DatasetError> {
        let resp = resp.map_err(|e| DatasetError::Unavailable(e.without_url().to_string()))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let message: String = resp.text().await.unwrap_or_default().chars().take(500).collect();
        Err(match status {
            StatusCode::NOT_FOUND => DatasetError::NotFound,
            s if s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS => {
                DatasetError::Unavailable(format!("HF answered {s}"))
            }
            s => DatasetError::Refused { status: s.as_u16(), message },
        })
    }
}

#[derive(Deserialize)]
struct Revision {
    sha: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommitAnswer {
    commit_oid: String,
}

/// The NDJSON body of a commit: a header line, then one line per file (base64 content, or an
/// `lfsFile` naming an object uploaded to LFS), then one per deleted file (`deletedFile`, as
/// `huggingface_hub`'s `CommitOperationDelete` sends it).
pub fn commit_body(
    summary: &str,
    files: &[(String, Vec<u8>)],
    operations: &[lfs::Operation],
    deleted: &[String],
) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut body =
        serde_json::to_vec(&json!({"key": "header", "value": {"summary": summary, "description": ""}}))
            .expect("JSON");
    for ((path, bytes), operation) in files.iter().zip(operations) {
        body.push(b'\n');
        let line = match operation {
            lfs::Operation::Regular => {
                json!({"key": "file", "value": {"content": b64.encode(bytes), "path": path, "encoding": "base64"}})
            }
            lfs::Operation::Lfs { oid } => {
                json!({"key": "lfsFile", "value": {"path": path, "algo": "sha256", "oid": oid, "size": bytes.len()}})
            }
        };
        body.extend(serde_json::to_vec(&line).expect("JSON"));
    }
    for path in deleted {
        body.push(b'\n');
        body.extend(
            serde_json::to_vec(&json!({"key": "deletedFile", "value": {"path": path}})).expect("JSON"),
        );
    }
    body.push(b'\n');
    body
}

/// A tree listing's next page (`Link: <URL>; rel="next"`), only on the same endpoint.
fn next_page(resp: &reqwest::Response, endpoint: &str) -> Option<String> {
    let link = resp.headers().get(reqwest::header::LINK)?.to_str().ok()?;
    let url = link.split(',').find(|l| l.contains("rel=\"next\""))?.split(['<', '>']).nth(1)?;
    url.starts_with(&format!("{endpoint}/")).then(|| url.to_string())
}

#[async_trait]
impl DatasetWriter for HfDatasetWriter {
    async fn ensure(&self, repo: &str) -> Result<(), DatasetError> {
        let (organization, name) = repo.split_once('/').map_or((None, repo), |(o, n)| (Some(o), n));
        let body = json!({"name": name, "organization": organization, "type": "dataset", "private": true});
        let url = format!("{}/api/repos/create", self.endpoint);
        match Self::send(self.request(reqwest::Method::POST, &url)?.json(&body)).await {
            Ok(_) | Err(DatasetError::Refused { status: 409, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn is_private(&self, repo: &str) -> Result<bool, DatasetError> {
        #[derive(Deserialize)]
        struct Info {
            #[serde(default)]
            private: bool,
        }
        let url = format!("{}/api/datasets/{}", self.endpoint, encode_path(repo));
        let resp = Self::send(self.request(reqwest::Method::GET, &url)?).await?;
        let info: Info =
            resp.json().await.map_err(|e| DatasetError::Unavailable(e.without_url().to_string()))?;
        Ok(info.private)
    }

    async fn head(&self, repo: &str) -> Result<String, DatasetError> {
        let url = format!("{}/api/datasets/{}/revision/main", self.endpoint, encode_path(repo));
        let resp = Self::send(self.request(reqwest::Method::GET, &url)?).await?;
        let rev: Revision =
            resp.json().await.map_err(|e| DatasetError::Unavailable(e.without_url().to_string()))?;
        Ok(rev.sha)
    }

    async fn commit_changes(
        &self,
        repo: &str,
        summary: &str,
        files: &[(String, Vec<u8>)],
        deleted: &[String],
    ) -> Result<String, DatasetError> {
        // Binary and large files go to LFS first, as the Hub demands (`super::lfs`).
        let hub = lfs::Hub { client: &self.client, endpoint: &self.endpoint, token: self.token()? };
        let operations = if files.is_empty() { Vec::new() } else { hub.plan(repo, files).await? };
        let mut objects: Vec<(&str, &[u8])> = files
            .iter()
            .zip(&operations)
            .filter_map(|((_, bytes), op)| match op {
                lfs::Operation::Lfs { oid } => Some((oid.as_str(), bytes.as_slice())),
                lfs::Operation::Regular => None,
            })
            .collect();
        objects.sort_by_key(|(oid, _)| *oid);
        objects.dedup_by_key(|(oid, _)| *oid);
        hub.upload(repo, &objects).await?;
        let url = format!("{}/api/datasets/{}/commit/main", self.endpoint, encode_path(repo));
        let req = self
            .request(reqwest::Method::POST, &url)?
            .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
            .body(commit_body(summary, files, &operations, deleted));
        let answer: CommitAnswer = Self::send(req)
            .await?
            .json()
            .await
            .map_err(|e| DatasetError::Unavailable(e.without_url().to_string()))?;
        Ok(answer.commit_oid)
    }

    async fn read(&self, repo: &str, revision: &str, path: &str, max: u64) -> Result<Vec<u8>, DatasetError> {
        // A URL resolves `.` and `..` segments (`%2E%2E` too): a revision or path holding one
        // would read another repository's file with the arena's token.
        let dotted = |p: &str| p.split('/').any(|seg| seg.is_empty() || seg == "." || seg == "..");
        if !(revision == "main" || domain::pipeline::is_commit(revision)) || dotted(path) || dotted(repo) {
            return Err(DatasetError::Refused {
                status: 400,
                message: format!("not a file of a dataset at a commit: {revision}:{path}"),
            });
        }
        let url = format!(
            "{}/datasets/{}/resolve/{}/{}",
            self.endpoint,
            encode_path(repo),
            encode_path(revision),
            encode_path(path)
        );
        let first = self.request(reqwest::Method::GET, &url)?.send().await;
        // An LFS file (a snapshot, a binary file of a mirror): HF's storage, once, without the token.
        let resp = match first {
            Ok(r) if r.status().is_redirection() => {
                let to = crate::sources::storage_redirect(&r, &self.endpoint).ok_or_else(|| {
                    DatasetError::Refused {
                        status: 502,
                        message: format!("{path} redirects somewhere HF does not store files"),
                    }
                })?;
                Self::send(self.client.get(to)).await?
            }
            other => Self::check(other).await?,
        };
        crate::sources::bounded_body(resp, max).await.map_err(|e| DatasetError::Unavailable(e.to_string()))
    }

    async fn list(&self, repo: &str, dir: &str, max: usize) -> Result<Vec<String>, DatasetError> {
        #[derive(Deserialize)]
        struct Item {
            #[serde(rename = "type")]
            kind: String,
            path: String,
        }
        let mut next = Some(format!(
            "{}/api/datasets/{}/tree/main/{}?recursive=true",
            self.endpoint,
            encode_path(repo),
            encode_path(dir)
        ));
        let mut out = Vec::new();
        while let Some(url) = next.take() {
            let resp = match Self::send(self.request(reqwest::Method::GET, &url)?).await {
                Err(DatasetError::NotFound) if out.is_empty() => return Ok(out),
                other => other?,
            };
            next = next_page(&resp, &self.endpoint);
            let bytes = crate::sources::bounded_body(resp, 4 << 20)
                .await
                .map_err(|e| DatasetError::Unavailable(e.to_string()))?;
            let items: Vec<Item> =
                serde_json::from_slice(&bytes).map_err(|e| DatasetError::Unavailable(e.to_string()))?;
            out.extend(items.into_iter().filter(|i| i.kind == "file").map(|i| i.path));
            if out.len() >= max {
                out.truncate(max);
                break;
            }
        }
        Ok(out)
    }

    async fn commits(
        &self,
        repo: &str,
        max: usize,
        next: &mut (dyn for<'p> FnMut(&'p [CommitInfo]) -> bool + Send),
    ) -> Result<(), DatasetError> {
        let mut url = Some(format!("{}/api/datasets/{}/commits/main", self.endpoint, encode_path(repo)));
        let mut seen = 0;
        while let Some(at) = url.take() {
            let resp = Self::send(self.request(reqwest::Method::GET, &at)?).await?;
            url = next_page(&resp, &self.endpoint);
            let bytes = crate::sources::bounded_body(resp, 4 << 20)
                .await
                .map_err(|e| DatasetError::Unavailable(e.to_string()))?;
            let page: Vec<CommitInfo> =
                serde_json::from_slice(&bytes).map_err(|e| DatasetError::Unavailable(e.to_string()))?;
            seen += page.len();
            if page.is_empty() || !next(&page) || seen >= max {
                break;
            }
        }
        Ok(())
    }

    fn url(&self, repo: &str, path: &str) -> String {
        format!("{}/datasets/{repo}/tree/main/{path}", self.endpoint)
    }
}
