//! HF dataset writes, as `huggingface_hub` makes them: `POST /api/repos/create`, the preupload
//! check, and `POST /api/datasets/{owner}/{name}/commit/main` with an NDJSON body (a `header`
//! line, then `file` lines with base64 or UTF-8 content). Writing needs the token of a user who
//! may write in the namespace. LFS uploads are not spoken: every file is committed inline.
//! `POST /api/validate-yaml` (which `upload_folder` asks about a `README.md` before uploading it)
//! checks only that a card's front matter is closed and is a YAML mapping of `key: value` lines.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::datasets::{hf_error, internal, repo_not_found};
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
    Path((owner, _name, _rev)): Path<(String, String, String)>,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = crate::write_refusal(&hub, &headers, &owner) {
        return r;
    }
    let files: Vec<Value> = body["files"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .map(|f| json!({"path": f["path"], "uploadMode": "regular", "shouldIgnore": false}))
                .collect()
        })
        .unwrap_or_default();
    Json(json!({"files": files})).into_response()
}

fn bad(message: &str) -> Response {
    hf_error(StatusCode::BAD_REQUEST, None, message)
}

fn invalid(message: &str) -> String {
    message.to_string()
}

/// A commit's summary, the commit it must follow (`parentCommit`) and its files (`None`: deleted).
type Commit = (String, Option<String>, Vec<(RepoPath, Option<Vec<u8>>)>);

/// The files of an NDJSON commit body; the error is the message of a 400.
fn parse_commit(body: &[u8]) -> Result<Commit, String> {
    let mut summary = String::from("Upload files");
    let mut parent = None;
    let mut files = Vec::new();
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
                files.push((path, Some(bytes)));
            }
            Some("deletedFile") => {
                let path = value["path"]
                    .as_str()
                    .and_then(RepoPath::parse)
                    .ok_or_else(|| invalid("Invalid path"))?;
                files.push((path, None));
            }
            Some(other) => {
                return Err(format!("the local stand-in does not support `{other}` operations"));
            }
            None => return Err(invalid("Each line needs a key")),
        }
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
        let (summary, parent, files) = parse_commit(&body).map_err(|m| bad(&m))?;
        let Some(oid) = repo.write_on(parent.as_deref(), &summary, &files).await.map_err(internal)? else {
            return Err(hf_error(
                StatusCode::PRECONDITION_FAILED,
                None,
                "A commit has happened since. Please refresh and try again.",
            ));
        };
        let url = format!("{}/datasets/{}/commit/{oid}", hub.public_url.lock().unwrap(), id.id());
        Ok(Json(json!({"commitUrl": url, "commitOid": oid, "pullRequestUrl": null})).into_response())
    };
    result.await.unwrap_or_else(|r| r)
}
