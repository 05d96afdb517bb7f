//! HF datasets: `GET /api/datasets/{repo}/revision/{rev}` resolves a revision,
//! `GET /api/datasets/{repo}/tree/{sha}/{dir}?recursive=true` lists files with their git blob ids
//! (paged by `Link: rel="next"`), `GET /datasets/{repo}/resolve/{sha}/{path}` reads one. Collections
//! are read without a token (they must be public); the private overlay with the arena's own.

use domain::collection::request::Source;
use domain::collection::Entry;
use reqwest::StatusCode;
use serde::Deserialize;

use super::{bounded_body, encode_path, RepoReader, SourceError};
use crate::config::Secret;
use crate::ports::identity::http_client;

/// At most this many listing pages (HF pages by 1,000).
const MAX_PAGES: u32 = 30;

#[derive(Clone)]
pub struct HfDatasets {
    client: reqwest::Client,
    endpoint: String,
    token: Option<Secret>,
}

impl HfDatasets {
    pub fn new(endpoint: &str) -> Self {
        HfDatasets {
            client: http_client(),
            endpoint: endpoint.trim_end_matches('/').to_string(),
            token: None,
        }
    }

    /// Reads with the arena's own token (sent to HF only): the private overlay.
    pub fn with_token(endpoint: &str, token: &Secret) -> Self {
        HfDatasets { token: Some(token.clone()), ..HfDatasets::new(endpoint) }
    }

    fn get(&self, url: String) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => self.client.get(url).bearer_auth(&t.0),
            None => self.client.get(url),
        }
    }
}

#[derive(Deserialize)]
struct RevisionAnswer {
    sha: String,
}

#[derive(Deserialize)]
struct TreeItem {
    #[serde(rename = "type")]
    kind: String,
    path: String,
    #[serde(default)]
    oid: String,
    #[serde(default)]
    size: u64,
}

fn error_for(status: StatusCode, headers: &reqwest::header::HeaderMap, revision: &str) -> SourceError {
    let code = headers.get("x-error-code").and_then(|v| v.to_str().ok()).unwrap_or("");
    match status {
        StatusCode::NOT_FOUND if code == "RevisionNotFound" => {
            SourceError::RevisionNotFound(revision.to_string())
        }
        StatusCode::NOT_FOUND => SourceError::RepoNotFound,
        // Anonymous reads of a private repository, and on the real Hub of a missing one, are 401.
        StatusCode::UNAUTHORIZED => SourceError::Private,
        StatusCode::FORBIDDEN if code == "GatedRepo" => SourceError::Gated,
        StatusCode::FORBIDDEN => SourceError::Private,
        s if s.is_redirection() => SourceError::Unavailable(format!(
            "Hugging Face answered a redirect ({s}), as for a renamed repository; redirects are not followed: use the current name"
        )),
        s => SourceError::Unavailable(format!("Hugging Face answered {s}")),
    }
}

fn transport(e: reqwest::Error) -> SourceError {
    SourceError::Unavailable(format!("Hugging Face could not be reached: {}", without_url(&e)))
}

/// A reqwest error's text without the URL it carries.
pub fn without_url(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "connection failed".into()
    } else {
        "the connection broke".into()
    }
}

/// The `rel="next"` target of a `Link` header. A next page elsewhere than `endpoint` is an error,
/// never a silently short listing (and never a request to another host).
fn next_link(headers: &reqwest::header::HeaderMap, endpoint: &str) -> Result<Option<String>, SourceError> {
    let Some(link) = headers.get(reqwest::header::LINK).and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    for part in link.split(',') {
        let Some((url, params)) = part.split_once(';') else { continue };
        if params.contains("rel=\"next\"") {
            let url = url.trim().trim_start_matches('<').trim_end_matches('>');
            return if url.starts_with(&format!("{endpoint}/")) {
                Ok(Some(url.to_string()))
            } else {
                Err(SourceError::Unavailable("the listing pointed its next page at another address".into()))
            };
        }
    }
    Ok(None)
}

#[async_trait::async_trait]
impl RepoReader for HfDatasets {
    async fn resolve(&self, source: &Source) -> Result<String, SourceError> {
        let url = format!(
            "{}/api/datasets/{}/revision/{}",
            self.endpoint,
            encode_path(&source.repo_id()),
            encode_path(&source.revision).replace('/', "%2F")
        );
        let resp = self.get(url).send().await.map_err(transport)?;
        if !resp.status().is_success() {
            return Err(error_for(resp.status(), resp.headers(), &source.revision));
        }
        let body = bounded_body(resp, 8 << 20).await?;
        let answer: RevisionAnswer = serde_json::from_slice(&body).map_err(|_| {
            SourceError::Unavailable("Hugging Face's revision answer was not understood".into())
        })?;
        if !domain::collection::request::is_commit(&answer.sha) {
            return Err(SourceError::Unavailable("Hugging Face answered no commit id".into()));
        }
        Ok(answer.sha.to_ascii_lowercase())
    }

    async fn list(&self, source: &Source, commit: &str) -> Result<(Vec<Entry>, u32), SourceError> {
        let dir = if source.entry_path.is_empty() {
            String::new()
        } else {
            format!("/{}", encode_path(&source.entry_path))
        };
        let mut url = Some(format!(
            "{}/api/datasets/{}/tree/{commit}{dir}?recursive=true&expand=false",
            self.endpoint,
            encode_path(&source.repo_id())
        ));
        let mut entries = Vec::new();
        let mut pages = 0;
        while let Some(u) = url.take() {
            pages += 1;
            if pages > MAX_PAGES {
                return Err(SourceError::TooLarge(format!("the listing is longer than {MAX_PAGES} pages")));
            }
            let resp = self.get(u).send().await.map_err(transport)?;
            if resp.status() == StatusCode::NOT_FOUND
                && resp.headers().get("x-error-code").is_some_and(|v| v == "EntryNotFound")
            {
                return Err(SourceError::NotADirectory(source.entry_path.clone()));
            }
            if !resp.status().is_success() {
                return Err(error_for(resp.status(), resp.headers(), commit));
            }
            url = next_link(resp.headers(), &self.endpoint)?;
            let body = bounded_body(resp, 32 << 20).await?;
            let items: Vec<TreeItem> = serde_json::from_slice(&body).map_err(|_| {
                SourceError::Unavailable("Hugging Face's tree listing was not understood".into())
            })?;
            entries.extend(items.into_iter().filter(|i| i.kind == "file").map(|i| Entry {
                path: i.path,
                blob: i.oid,
                size: i.size,
                symlink: false,
            }));
            if entries.len() > domain::collection::listing::MAX_FILES + 1 {
                break;
            }
        }
        Ok((super::under(entries, &source.entry_path), pages))
    }

    async fn read(
        &self,
        source: &Source,
        commit: &str,
        path: &str,
        max: u64,
    ) -> Result<Vec<u8>, SourceError> {
        let url = format!(
            "{}/datasets/{}/resolve/{commit}/{}",
            self.endpoint,
            encode_path(&source.repo_id()),
            encode_path(&super::in_repo(source, path))
        );
        let mut resp = self.get(url).send().await.map_err(transport)?;
        // An LFS file is a redirect to HF's storage: followed once, without the token.
        if resp.status().is_redirection() {
            let to = super::storage_redirect(&resp, &self.endpoint).ok_or_else(|| {
                SourceError::Unreadable(format!("`{path}` redirects somewhere HF does not store files"))
            })?;
            resp = self.client.get(to).send().await.map_err(transport)?;
            if resp.status().is_redirection() {
                return Err(SourceError::Unreadable(format!("`{path}`'s storage answered another redirect")));
            }
        }
        if !resp.status().is_success() {
            return Err(match error_for(resp.status(), resp.headers(), commit) {
                SourceError::RepoNotFound => SourceError::Unavailable(format!("`{path}` could not be read")),
                other => other,
            });
        }
        bounded_body(resp, max).await
    }
}
