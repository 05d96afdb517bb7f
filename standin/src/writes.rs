//! HF dataset writes, as `huggingface_hub` makes them: `POST /api/repos/create`, the preupload
//! check, and `POST /api/datasets/{owner}/{name}/commit/main` with an NDJSON body (a `header`
//! line, then `file` lines with base64 or UTF-8 content, `lfsFile` lines naming objects uploaded
//! through `crate::lfs`, and `deletedFile` lines). Writing needs the token of a user who may write
//! in the namespace. As strict as the Hub: `preupload` sends binary samples, files of 10 MB or
//! more and paths the repository's `.gitattributes` routes there to LFS, and a commit carrying a
//! binary file (or one of 10 MiB or more) inline is refused with the Hub's message.
//! `POST /api/validate-yaml` (which `upload_folder` asks about a `README.md` before uploading it)
//! checks only that a card's front matter is closed and is a YAML mapping of `key: value` lines.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use base64::Engine;
use domain::invalid::Invalid;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::datasets::{internal, repo_not_found};
use crate::hub::hf_error;
use crate::repos::{Kind, RepoName, RepoPath};
use crate::SharedHub;

pub(crate) fn router() -> Router<SharedHub> {
    Router::new()
        .route("/api/repos/create", post(create))
        .route("/api/datasets/{owner}/{name}/preupload/{rev}", post(preupload))
        .route("/api/datasets/{owner}/{name}/commit/{*rev}", post(commit))
        .route("/api/validate-yaml", post(validate_yaml))
        .route("/api/datasets/{owner}/{name}/settings", axum::routing::put(settings))
}

/// huggingface_hub 1.x+ sends `visibility`; older clients sent `private`.
#[derive(Deserialize)]
struct Settings {
    #[serde(default)]
    private: Option<bool>,
    #[serde(default)]
    visibility: Option<String>,
}

/// `PUT /api/datasets/{repo}/settings` (`update_repo_settings`): the visibility.
async fn settings(
    State(hub): State<SharedHub>,
    headers: HeaderMap,
    Path((owner, name)): Path<(String, String)>,
    Json(req): Json<Settings>,
) -> Response {
    let result = async {
        if let Some(r) = crate::write_refusal(&hub, &headers, &owner) {
            return Err(r);
        }
        let (Some(repos), Some(id)) = (hub.repos.as_ref(), RepoName::parse(&owner, &name)) else {
            return Err(repo_not_found());
        };
        let repo = repos.open(Kind::Dataset, &id).await.map_err(internal)?.ok_or_else(repo_not_found)?;
        let private = match req.visibility.as_deref() {
            Some("private") => Some(true),
            Some("public") => Some(false),
            Some(other) => {
                let message =
                    format!("Invalid visibility '{other}' for a dataset: use 'public' or 'private'");
                return Err((StatusCode::BAD_REQUEST, Json(json!({ "error": message }))).into_response());
            }
            None => req.private,
        };
        if let Some(private) = private {
            repo.set_private(private).await.map_err(internal)?;
        }
        Ok(Json(json!({})).into_response())
    };
    result.await.unwrap_or_else(|r| r)
}

#[derive(Deserialize)]
struct CardRequest {
    content: String,
}

/// HF's answer shape: `{errors, warnings}` of `{message}`, 400 when there are errors.
async fn validate_yaml(Json(req): Json<CardRequest>) -> Response {
    let message = |m: &str| json!({ "message": m });
    let Some(rest) = req.content.strip_prefix("---\n") else {
        let warnings = [message("empty or missing yaml metadata in repo card")];
        return Json(json!({ "errors": [], "warnings": warnings })).into_response();
    };
    let Some((front, _)) = rest.split_once("\n---") else {
        let errors = [message("the card's YAML front matter is not closed by `---`")];
        return (StatusCode::BAD_REQUEST, Json(json!({ "errors": errors, "warnings": [] }))).into_response();
    };
    let bad = front.lines().find(|l| {
        let l = l.trim_end();
        !(l.is_empty() || l.starts_with('#') || l.starts_with(' ') || l.starts_with('-') || l.contains(':'))
    });
    match bad {
        Some(line) => {
            let errors = [message(&format!("not a YAML mapping line: `{line}`"))];
            (StatusCode::BAD_REQUEST, Json(json!({ "errors": errors, "warnings": [] }))).into_response()
        }
        None => Json(json!({ "errors": [], "warnings": [] })).into_response(),
    }
}

#[derive(Deserialize)]
struct CreateRequest {
    name: String,
    #[serde(default)]
    organization: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    private: Option<bool>,
    #[serde(default)]
    visibility: Option<String>,
}

async fn create(
    State(hub): State<SharedHub>,
    headers: HeaderMap,
    Json(req): Json<CreateRequest>,
) -> Response {
    let result = async {
        let user =
            crate::bearer(&headers).and_then(|t| hub.user_by_token(t)).ok_or_else(crate::unauthorized)?;
        let owner = req.organization.clone().unwrap_or_else(|| user.name.clone());
        if let Some(r) = crate::write_refusal(&hub, &headers, &owner) {
            return Err(r);
        }
        if req.kind.as_deref() != Some("dataset") {
            return Err(hf_error(StatusCode::BAD_REQUEST, None, "the local stand-in creates datasets only"));
        }
        let (Some(repos), Some(id)) = (hub.repos.as_ref(), RepoName::parse(&owner, &req.name)) else {
            return Err(hf_error(StatusCode::BAD_REQUEST, None, "Invalid repo name"));
        };
        let private = req.private.unwrap_or(false) || req.visibility.as_deref() == Some("private");
        let url = format!("{}/datasets/{}", hub.public_url.lock().unwrap(), id.id());
        if repos.create(Kind::Dataset, &id, private).await.map_err(internal)? {
            Ok((StatusCode::OK, Json(json!({"url": url, "name": id.id()}))).into_response())
        } else {
            Err((
                StatusCode::CONFLICT,
                Json(json!({"error": "You already created this dataset repo", "url": url})),
            )
                .into_response())
        }
    };
    result.await.unwrap_or_else(|r| r)
}

async fn preupload(
    State(hub): State<SharedHub>,
    headers: HeaderMap,
    Path((owner, name, rev)): Path<(String, String, String)>,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = crate::write_refusal(&hub, &headers, &owner) {
        return r;
    }
    let attributes = gitattributes(&hub, &owner, &name, &rev).await;
    let b64 = base64::engine::general_purpose::STANDARD;
    let files: Vec<Value> = body["files"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .map(|f| {
                    let path = f["path"].as_str().unwrap_or_default();
                    let size = f["size"].as_u64().unwrap_or(0);
                    let sample = f["sample"].as_str().and_then(|s| b64.decode(s).ok()).unwrap_or_default();
                    // Empty files are always regular.
                    let lfs = size > 0
                        && (size >= crate::lfs::LFS_THRESHOLD
                            || crate::lfs::routed_to_lfs(&attributes, path)
                            || crate::lfs::is_binary(&sample, true));
                    let mode = if lfs { "lfs" } else { "regular" };
                    json!({"path": path, "uploadMode": mode, "shouldIgnore": false})
                })
                .collect()
        })
        .unwrap_or_default();
    Json(json!({"files": files})).into_response()
}

/// The repository's `.gitattributes` at a revision (the Hub's default when it has none).
async fn gitattributes(hub: &SharedHub, owner: &str, name: &str, rev: &str) -> String {
    let read = async {
        let repos = hub.repos.as_ref()?;
        let repo = repos.open(Kind::Dataset, &RepoName::parse(owner, name)?).await.ok()??;
        let rev = crate::repos::Rev::parse(rev)?;
        let sha = repo.commit(&rev).await.ok()??;
        let tree = repo.tree(&sha).await.ok()?;
        let entry = tree.get(&RepoPath::parse(".gitattributes")?)?;
        String::from_utf8(repo.blob(&entry.oid).await.ok()?).ok()
    };
    read.await.unwrap_or_else(|| crate::repos::GITATTRIBUTES.to_string())
}

fn bad(message: &str) -> Response {
    hf_error(StatusCode::BAD_REQUEST, None, message)
}

fn invalid(message: &str) -> Invalid {
    Invalid::new(message)
}

/// A commit's summary, the commit it must follow (`parentCommit`) and its files (`None`: deleted).
type Commit = (String, Option<String>, Vec<(RepoPath, Option<Vec<u8>>)>);

/// The files of an NDJSON commit body (an `lfsFile` as its pointer); the error is the message of
/// a 400.
fn parse_commit(body: &[u8], store: Option<&crate::lfs::Store>) -> Result<Commit, Invalid> {
    let mut summary = String::from("Upload files");
    let mut parent = None;
    let mut files = Vec::new();
    let (mut binary, mut large) = (Vec::new(), Vec::new());
    for line in body.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)) {
        let op: Value = serde_json::from_slice(line).map_err(|_| invalid("Invalid NDJSON line"))?;
        let value = &op["value"];
        match op["key"].as_str() {
            Some("header") => {
                if let Some(s) = value["summary"].as_str() {
                    summary = s.to_string();
                }
                parent = value["parentCommit"].as_str().map(String::from);
            }
            Some("file") => {
                let path = value["path"]
                    .as_str()
                    .and_then(RepoPath::parse)
                    .ok_or_else(|| invalid("Invalid path"))?;
                let content = value["content"].as_str().ok_or_else(|| invalid("A file needs content"))?;
                let bytes = match value["encoding"].as_str() {
                    Some("base64") => base64::engine::general_purpose::STANDARD
                        .decode(content)
                        .map_err(|_| invalid("Invalid base64 content"))?,
                    _ => content.as_bytes().to_vec(),
                };
                if crate::lfs::is_binary(&bytes, false) {
                    binary.push(path.as_str().to_string());
                } else if bytes.len() >= crate::lfs::INLINE_LIMIT {
                    large.push(path.as_str().to_string());
                }
                files.push((path, Some(bytes)));
            }
            Some("lfsFile") => {
                let path = value["path"]
                    .as_str()
                    .and_then(RepoPath::parse)
                    .ok_or_else(|| invalid("Invalid path"))?;
                let (Some("sha256"), Some(oid), Some(size)) =
                    (value["algo"].as_str(), value["oid"].as_str(), value["size"].as_u64())
                else {
                    return Err(invalid("An lfsFile needs algo sha256, an oid and a size"));
                };
                if store.and_then(|s| s.size(oid)) != Some(size) {
                    return Err(format!(
                        "LFS object {oid} of {size} bytes was not uploaded ({})",
                        path.as_str()
                    )
                    .into());
                }
                files.push((path, Some(crate::lfs::pointer(oid, size).into_bytes())));
            }
            Some("deletedFile") => {
                let path = value["path"]
                    .as_str()
                    .and_then(RepoPath::parse)
                    .ok_or_else(|| invalid("Invalid path"))?;
                files.push((path, None));
            }
            Some(other) => {
                return Err(format!("the local stand-in does not support `{other}` operations").into());
            }
            None => return Err(invalid("Each line needs a key")),
        }
    }
    // The Hub's own refusals, in its words.
    let listed = |paths: &[String]| paths.iter().map(|p| format!("\n- {p}")).collect::<String>();
    if !binary.is_empty() {
        return Err(format!(
            "Your push was rejected because it contains binary files. Please use https://huggingface.co/docs/hub/xet to store binary files. Offending files:{}",
            listed(&binary)
        ).into());
    }
    if !large.is_empty() {
        return Err(format!(
            "Your push was rejected because it contains files larger than 10 MiB. Please use https://huggingface.co/docs/hub/xet to store large files. Offending files:{}",
            listed(&large)
        ).into());
    }
    Ok((summary, parent, files))
}

async fn commit(
    State(hub): State<SharedHub>,
    headers: HeaderMap,
    Path((owner, name, rev)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    let result = async {
        if let Some(r) = crate::write_refusal(&hub, &headers, &owner) {
            return Err(r);
        }
        if rev != "main" {
            return Err(bad("the local stand-in commits to main only"));
        }
        let (Some(repos), Some(id)) = (hub.repos.as_ref(), RepoName::parse(&owner, &name)) else {
            return Err(repo_not_found());
        };
        let repo = repos.open(Kind::Dataset, &id).await.map_err(internal)?.ok_or_else(repo_not_found)?;
        let (summary, parent, files) = parse_commit(&body, hub.lfs.as_ref()).map_err(|m| bad(&m.0))?;
        let Some(oid) = repo.write_on(parent.as_deref(), &summary, &files).await.map_err(internal)? else {
            return Err(hf_error(
                StatusCode::PRECONDITION_FAILED,
                None,
                "A commit has happened since. Please refresh and try again.",
            ));
        };
        hub.jobs.note_commit(&summary);
        let url = format!("{}/datasets/{}/commit/{oid}", hub.public_url.lock().unwrap(), id.id());
        Ok(Json(json!({"commitUrl": url, "commitOid": oid, "pullRequestUrl": null})).into_response())
    };
    result.await.unwrap_or_else(|r| r)
}
