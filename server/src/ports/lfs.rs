//! Files the Hub keeps outside git (LFS), written as `huggingface_hub` writes them without
//! `hf_xet` (`_commit_api.py`, `lfs.py`): `preupload` says which files go to LFS; the LFS batch
//! API says where each goes (`basic`: one PUT of the bytes; `multipart`: one PUT per part, then
//! the completion call), an object without `actions` is stored already, `verify` is called when
//! given; the commit then names them as `lfsFile` operations. A file `preupload` calls `regular`
//! that is not UTF-8 text goes to LFS too: the Hub's 512-byte sample can be fooled, and its commit
//! refuses a binary file inline.
//!
//! Upload and completion addresses are HF's storage's: the token is never sent there (only to
//! `verify` on the Hub itself), and only `https` addresses are used (plain-HTTP loopback ones when
//! the Hub is itself one: the local stand-in).

use std::collections::BTreeMap;

use base64::Engine;
use reqwest::header::{ACCEPT, CONTENT_TYPE, ETAG};
use serde::Deserialize;
use serde_json::{json, Value};

/// What an LFS transfer failed with; the dataset port turns it into its own error.
#[derive(Debug, thiserror::Error)]
pub enum LfsError {
    /// A definite refusal: nothing was stored.
    #[error("HF refused ({status}): {message}")]
    Refused { status: u16, message: String },
    /// No answer, or a 5xx.
    #[error("HF did not answer ({0})")]
    Unavailable(String),
}

/// `preupload` takes this many files a call (`huggingface_hub`'s batch).
const PREUPLOAD_BATCH: usize = 256;
/// What `preupload` reads of each file.
const SAMPLE_BYTES: usize = 512;
const LFS_MEDIA: &str = "application/vnd.git-lfs+json";

/// One file of a commit, as its operation names it.
pub enum Operation {
    /// Inline, base64 in the NDJSON body.
    Regular,
    /// In LFS storage, by its SHA-256.
    Lfs { oid: String },
}

/// The Hub the writer talks to, and how.
pub struct Hub<'a> {
    pub client: &'a reqwest::Client,
    pub endpoint: &'a str,
    pub token: &'a str,
}

/// Whether the bytes can go inline: UTF-8 text with no NUL (empty files are always regular).
pub fn is_text(bytes: &[u8]) -> bool {
    !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok()
}

impl Hub<'_> {
    fn unavailable(e: reqwest::Error) -> LfsError {
        LfsError::Unavailable(e.without_url().to_string())
    }

    async fn checked(resp: Result<reqwest::Response, reqwest::Error>) -> Result<reqwest::Response, LfsError> {
        let resp = resp.map_err(Self::unavailable)?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let message: String = resp.text().await.unwrap_or_default().chars().take(500).collect();
        Err(if status.is_server_error() || status.as_u16() == 429 {
            LfsError::Unavailable(format!("HF answered {status}: {message}"))
        } else {
            LfsError::Refused { status: status.as_u16(), message }
        })
    }

    /// The operation of each file: `preupload`'s answer, and LFS for anything that is not text.
    pub async fn plan(&self, repo: &str, files: &[(String, Vec<u8>)]) -> Result<Vec<Operation>, LfsError> {
        #[derive(Deserialize)]
        struct Answer {
            files: Vec<Mode>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Mode {
            path: String,
            upload_mode: String,
        }
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut modes: BTreeMap<String, String> = BTreeMap::new();
        let url =
            format!("{}/api/datasets/{}/preupload/main", self.endpoint, crate::sources::encode_path(repo));
        for batch in files.chunks(PREUPLOAD_BATCH) {
            let body = json!({"files": batch.iter().map(|(path, bytes)| json!({
                "path": path,
                "sample": b64.encode(&bytes[..bytes.len().min(SAMPLE_BYTES)]),
                "size": bytes.len(),
            })).collect::<Vec<_>>()});
            let resp = Self::checked(self.client.post(&url).bearer_auth(self.token).json(&body).send().await)
                .await?;
            let answer: Answer = resp.json().await.map_err(Self::unavailable)?;
            modes.extend(answer.files.into_iter().map(|m| (m.path, m.upload_mode)));
        }
        Ok(files
            .iter()
            .map(|(path, bytes)| {
                let lfs = modes.get(path).is_some_and(|m| m == "lfs") || !is_text(bytes);
                if lfs && !bytes.is_empty() {
                    Operation::Lfs { oid: domain::digest::sha256_hex(bytes) }
                } else {
                    Operation::Regular
                }
            })
            .collect())
    }

    /// An address HF gave for an upload: its storage's (`https`; a loopback address beside a local
    /// stand-in). `https://huggingface.co` is read as the configured endpoint,
    /// as `huggingface_hub`'s `fix_hf_endpoint_in_url` does.
    fn storage_url(&self, href: &str) -> Result<String, LfsError> {
        let href = match href.strip_prefix("https://huggingface.co") {
            Some(rest) if self.endpoint != "https://huggingface.co" => format!("{}{rest}", self.endpoint),
            _ => href.to_string(),
        };
        let local = |u: &str| {
            url::Url::parse(u).is_ok_and(|u| {
                u.scheme() == "http" && matches!(u.host(), Some(url::Host::Ipv4(ip)) if ip.is_loopback())
            })
        };
        if href.starts_with("https://") || (local(self.endpoint) && local(&href)) {
            Ok(href)
        } else {
            Err(LfsError::Refused {
                status: 502,
                message: format!("HF gave an upload address the arena does not use: {href}"),
            })
        }
    }

    /// Uploads the LFS objects (each `(oid, bytes)`) HF does not hold yet.
    pub async fn upload(&self, repo: &str, objects: &[(&str, &[u8])]) -> Result<(), LfsError> {
        if objects.is_empty() {
            return Ok(());
        }
        let url = format!("{}/datasets/{repo}.git/info/lfs/objects/batch", self.endpoint);
        let body = json!({
            "operation": "upload",
            "transfers": ["basic", "multipart"],
            "objects": objects.iter().map(|(oid, bytes)| json!({"oid": oid, "size": bytes.len()})).collect::<Vec<_>>(),
            "hash_algo": "sha256",
            "ref": {"name": "main"},
        });
        let req = self
            .client
            .post(&url)
            .bearer_auth(self.token)
            .header(ACCEPT, LFS_MEDIA)
            .header(CONTENT_TYPE, LFS_MEDIA);
        let resp = Self::checked(req.body(body.to_string()).send().await).await?;
        let answer: Value = resp.json().await.map_err(Self::unavailable)?;
        let listed = answer["objects"].as_array().ok_or_else(|| malformed("no objects"))?;
        for (oid, bytes) in objects {
            let object =
                listed.iter().find(|o| o["oid"] == *oid).ok_or_else(|| malformed("an object is missing"))?;
            if let Some(error) = object.get("error") {
                return Err(LfsError::Refused {
                    status: error["code"].as_u64().unwrap_or(422) as u16,
                    message: format!(
                        "HF refused LFS object {oid}: {}",
                        error["message"].as_str().unwrap_or("")
                    ),
                });
            }
            let Some(actions) = object.get("actions").filter(|a| !a.is_null()) else { continue };
            self.put(&actions["upload"], bytes).await?;
            if let Some(verify) = actions.get("verify").filter(|v| !v.is_null()) {
                let href = verify["href"].as_str().ok_or_else(|| malformed("a verify without href"))?;
                let href = self.storage_url(href)?;
                let mut req = self.client.post(&href).json(&json!({"oid": oid, "size": bytes.len()}));
                // The token goes to the Hub itself, never to storage.
                if href.starts_with(&format!("{}/", self.endpoint)) {
                    req = req.bearer_auth(self.token);
                }
                Self::checked(req.send().await).await?;
            }
        }
        Ok(())
    }

    /// One object's upload: `basic` (one PUT) or `multipart` (`chunk_size` and a URL per part in
    /// the action's header, then the completion call), without the token.
    async fn put(&self, upload: &Value, bytes: &[u8]) -> Result<(), LfsError> {
        let href =
            self.storage_url(upload["href"].as_str().ok_or_else(|| malformed("an upload without href"))?)?;
        let header = upload.get("header").and_then(Value::as_object);
        let Some(chunk) = header.and_then(|h| h.get("chunk_size")) else {
            Self::checked(self.client.put(&href).body(bytes.to_vec()).send().await).await?;
            return Ok(());
        };
        let chunk: usize = match chunk {
            Value::Number(n) => n.as_u64().map(|n| n as usize),
            Value::String(s) => s.parse().ok(),
            _ => None,
        }
        .filter(|c| *c > 0)
        .ok_or_else(|| malformed("chunk_size is not a number"))?;
        let mut parts: Vec<(u32, String)> = header
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| {
                Some((
                    k.parse::<u32>().ok().filter(|_| k.bytes().all(|b| b.is_ascii_digit()))?,
                    v.as_str()?.to_string(),
                ))
            })
            .collect();
        parts.sort();
        if parts.len() != bytes.len().div_ceil(chunk) {
            return Err(malformed("the part count is not ceil(size / chunk_size)"));
        }
        let mut etags = Vec::new();
        for (i, (_, part_url)) in parts.iter().enumerate() {
            let slice = &bytes[i * chunk..((i + 1) * chunk).min(bytes.len())];
            let resp =
                Self::checked(self.client.put(self.storage_url(part_url)?).body(slice.to_vec()).send().await)
                    .await?;
            let etag = resp.headers().get(ETAG).and_then(|v| v.to_str().ok()).filter(|e| !e.is_empty());
            etags.push(json!({"partNumber": i + 1, "etag": etag.ok_or_else(|| malformed("a part without an ETag"))?}));
        }
        let oid = domain::digest::sha256_hex(bytes);
        let done = self
            .client
            .post(&href)
            .header(ACCEPT, LFS_MEDIA)
            .header(CONTENT_TYPE, LFS_MEDIA)
            .body(json!({"oid": oid, "parts": etags}).to_string());
        Self::checked(done.send().await).await?;
        Ok(())
    }
}

fn malformed(what: &str) -> LfsError {
    LfsError::Unavailable(format!("a malformed answer from HF's LFS batch API: {what}"))
}
