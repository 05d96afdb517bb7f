//! HF dataset reads, as `huggingface_hub` makes them: revision info, the paged tree listing and raw
//! files (`resolve`), with HF's error codes in `X-Error-Code`.

use std::collections::HashMap;

use axum::extract::{OriginalUri, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::hub::hf_error;
use crate::repos::{Entry, Kind, ObjectKind, Repo, RepoName, RepoPath, Rev, Visibility};
use crate::SharedHub;

pub(crate) fn router() -> Router<SharedHub> {
    Router::new()
        .route("/api/datasets/{owner}/{name}", get(info_main))
        .route("/api/datasets/{owner}/{name}/revision/{*rev}", get(info))
        .route("/api/datasets/{owner}/{name}/tree/{rev}", get(tree_root))
        .route("/api/datasets/{owner}/{name}/tree/{rev}/{*path}", get(tree_path))
        .route("/datasets/{owner}/{name}/resolve/{rev}/{*path}", get(resolve))
        .route("/api/datasets/{owner}/{name}/commits/{*rev}", get(commits))
}

/// Commits listed per page, as HF pages them (`Link: <…>; rel="next"`).
const COMMITS_PAGE: usize = 50;

/// `GET /api/datasets/{repo}/commits/{rev}` (huggingface_hub's `list_repo_commits`): the history of
/// `rev`, newest first, each `{id, title, message, authors: [{user}], date}`, paged by `Link`.
async fn commits(
    State(hub): State<SharedHub>,
    Path((owner, name, rev)): Path<(String, String, String)>,
    uri: OriginalUri,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let listed = async {
        let (repo, _) = open(&hub, &headers, &owner, &name).await?;
        let sha = commit_of(&repo, &rev).await?;
        let start = match q.get("cursor") {
            Some(c) => c.parse::<usize>().map_err(|_| bad_request("Invalid cursor"))?,
            None => 0,
        };
        // One more than a page: whether another page follows.
        let mut log = repo.log(&sha, start, COMMITS_PAGE + 1).await.map_err(internal)?;
        let more = log.len() > COMMITS_PAGE;
        log.truncate(COMMITS_PAGE);
        let page: Vec<Value> = log
            .into_iter()
            .map(|[id, author, date, message]| {
                let (title, body) = message.split_once('\n').unwrap_or((&message, ""));
                json!({"id": id, "title": title, "message": body.trim(), "authors": [{"user": author}], "date": date})
            })
            .collect();
        let mut resp = Json(page).into_response();
        if more {
            let link = format!("<{}>; rel=\"next\"", next_url(&hub, &uri, &headers, start + COMMITS_PAGE));
            if let Ok(v) = HeaderValue::from_str(&link) {
                resp.headers_mut().insert(header::LINK, v);
            }
        }
        Ok::<_, Response>(resp)
    };
    listed.await.unwrap_or_else(|r| r)
}

pub(crate) fn repo_not_found() -> Response {
    hf_error(StatusCode::NOT_FOUND, Some("RepoNotFound"), "Repository not found")
}

fn revision_not_found(rev: &str) -> Response {
    hf_error(StatusCode::NOT_FOUND, Some("RevisionNotFound"), &format!("Invalid rev id: {rev}"))
}

fn entry_not_found(path: &str, rev: &str) -> Response {
    hf_error(StatusCode::NOT_FOUND, Some("EntryNotFound"), &format!("{path} does not exist on \"{rev}\""))
}

pub(crate) fn internal(err: crate::repos::GitError) -> Response {
    tracing::error!(error = %err, "reading a dataset repository");
    hf_error(StatusCode::INTERNAL_SERVER_ERROR, None, "Internal Error")
}

/// Opens a dataset a client may read, or the answer HF gives when it may not. A private dataset
/// is readable with the token of a member of its namespace.
async fn open<'h>(
    hub: &'h SharedHub,
    headers: &HeaderMap,
    owner: &str,
    name: &str,
) -> Result<(Repo<'h>, RepoName), Response> {
    let (Some(repos), Some(id)) = (hub.repos.as_ref(), RepoName::parse(owner, name)) else {
        return Err(repo_not_found());
    };
    let repo = repos.open(Kind::Dataset, &id).await.map_err(internal)?.ok_or_else(repo_not_found)?;
    let member = crate::bearer(headers).and_then(|t| hub.user_by_token(t)).is_some_and(|u| u.may_read(owner));
    match repo.visibility {
        Visibility::Public => Ok((repo, id)),
        Visibility::Private if member => Ok((repo, id)),
        Visibility::Private => Err(hf_error(
            StatusCode::UNAUTHORIZED,
            Some("RepoNotFound"),
            "Repository not found or private",
        )),
        Visibility::Gated => Err(hf_error(
            StatusCode::FORBIDDEN,
            Some("GatedRepo"),
            &format!(
                "Access to dataset {} is restricted. You must have access to it and be authenticated to access it. Please log in.",
                id.id()
            ),
        )),
    }
}

async fn commit_of(repo: &Repo<'_>, rev: &str) -> Result<String, Response> {
    let parsed = Rev::parse(rev).ok_or_else(|| revision_not_found(rev))?;
    repo.commit(&parsed).await.map_err(internal)?.ok_or_else(|| revision_not_found(rev))
}

async fn info_main(
    State(hub): State<SharedHub>,
    Path((owner, name)): Path<(String, String)>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    info_for(&hub, &headers, &owner, &name, "main", &q).await.unwrap_or_else(|r| r)
}

async fn info(
    State(hub): State<SharedHub>,
    Path((owner, name, rev)): Path<(String, String, String)>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    info_for(&hub, &headers, &owner, &name, &rev, &q).await.unwrap_or_else(|r| r)
}

fn truthy(q: &HashMap<String, String>, key: &str) -> bool {
    q.get(key).is_some_and(|v| matches!(v.as_str(), "true" | "True" | "1"))
}

/// `{id, sha, siblings, private, gated, ...}`; with `?blobs=true`, siblings carry size and blob id.
async fn info_for(
    hub: &SharedHub,
    headers: &HeaderMap,
    owner: &str,
    name: &str,
    rev: &str,
    q: &HashMap<String, String>,
) -> Result<Response, Response> {
    let (repo, id) = open(hub, headers, owner, name).await?;
    let sha = commit_of(&repo, rev).await?;
    let tree = repo.tree(&sha).await.map_err(internal)?;
    let commit = repo.commit_info(&sha).await.map_err(internal)?;
    let blobs = truthy(q, "blobs");
    let siblings: Vec<Value> = tree
        .entries
        .iter()
        .filter(|e| e.kind == ObjectKind::Blob)
        .map(|e| {
            if blobs {
                json!({"rfilename": e.path, "size": e.size, "blobId": e.oid})
            } else {
                json!({"rfilename": e.path})
            }
        })
        .collect();
    let modified = commit.committer.date.replace('Z', ".000Z");
    Ok(Json(json!({
        "_id": format!("local-{}", id.id()),
        "id": id.id(),
        "author": id.owner(),
        "sha": sha,
        "lastModified": modified,
        "private": repo.visibility == Visibility::Private,
        "gated": false,
        "disabled": false,
        "downloads": 0,
        "likes": 0,
        "tags": [],
        "siblings": siblings,
    }))
    .into_response())
}

async fn tree_root(
    State(hub): State<SharedHub>,
    Path((owner, name, rev)): Path<(String, String, String)>,
    uri: OriginalUri,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    list(&hub, (&owner, &name, &rev), None, &uri, &headers, &q).await.unwrap_or_else(|r| r)
}

async fn tree_path(
    State(hub): State<SharedHub>,
    Path((owner, name, rev, path)): Path<(String, String, String, String)>,
    uri: OriginalUri,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    list(&hub, (&owner, &name, &rev), Some(&path), &uri, &headers, &q).await.unwrap_or_else(|r| r)
}

fn tree_item(e: &Entry) -> Option<Value> {
    match e.kind {
        ObjectKind::Blob => Some(match &e.lfs {
            // The Hub lists an LFS file at its object's size, with the pointer's beside it.
            Some((oid, size)) => json!({"type": "file", "oid": e.oid, "size": size, "path": e.path,
                "lfs": {"oid": oid, "size": size, "pointerSize": e.size}}),
            None => json!({"type": "file", "oid": e.oid, "size": e.size, "path": e.path}),
        }),
        ObjectKind::Tree => Some(json!({"type": "directory", "oid": e.oid, "size": 0, "path": e.path})),
        // HF repositories have no submodules.
        ObjectKind::Commit => None,
    }
}

/// One page of a directory's entries; `Link: <..&cursor=N>; rel="next"` when more remain.
async fn list(
    hub: &SharedHub,
    (owner, name, rev): (&str, &str, &str),
    path: Option<&str>,
    uri: &OriginalUri,
    headers: &HeaderMap,
    q: &HashMap<String, String>,
) -> Result<Response, Response> {
    let (repo, _) = open(hub, headers, owner, name).await?;
    let sha = commit_of(&repo, rev).await?;
    let dir = match path {
        None => None,
        Some(p) => Some(RepoPath::parse(p).ok_or_else(|| invalid_path(p))?),
    };
    let tree = repo.tree(&sha).await.map_err(internal)?;
    if let Some(dir) = &dir {
        if tree.get(dir).is_none_or(|e| e.kind != ObjectKind::Tree) {
            return Err(entry_not_found(dir.as_str(), rev));
        }
    }
    let page_size = match q.get("limit") {
        Some(l) => l.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| bad_request("Invalid limit"))?,
        None => hub.tree_page_size,
    };
    let start = match q.get("cursor") {
        Some(c) => c.parse::<usize>().map_err(|_| bad_request("Invalid cursor"))?,
        None => 0,
    };
    let items: Vec<Value> = tree.under(dir.as_ref(), truthy(q, "recursive")).filter_map(tree_item).collect();
    let end = start.saturating_add(page_size).min(items.len());
    let page = items.get(start..end).unwrap_or_default().to_vec();
    let mut resp = Json(page).into_response();
    if end < items.len() {
        let link = format!("<{}>; rel=\"next\"", next_url(hub, uri, headers, end));
        if let Ok(v) = HeaderValue::from_str(&link) {
            resp.headers_mut().insert(header::LINK, v);
        }
    }
    Ok(resp)
}

/// The request's own absolute URL with `cursor` set to `next`.
fn next_url(hub: &SharedHub, uri: &OriginalUri, headers: &HeaderMap, next: usize) -> String {
    let base = match headers.get(header::HOST).and_then(|h| h.to_str().ok()) {
        Some(host) => format!("http://{host}"),
        None => hub.public_url.lock().unwrap().clone(),
    };
    let mut query: Vec<&str> =
        uri.query().unwrap_or("").split('&').filter(|p| !p.is_empty() && !p.starts_with("cursor=")).collect();
    let cursor = format!("cursor={next}");
    query.push(&cursor);
    format!("{base}{}?{}", uri.path(), query.join("&"))
}

fn bad_request(message: &str) -> Response {
    hf_error(StatusCode::BAD_REQUEST, None, message)
}

fn invalid_path(path: &str) -> Response {
    bad_request(&format!("Invalid path in repository: {path:?}"))
}

/// A file's bytes (`GET`) or its headers (`HEAD`): `X-Repo-Commit`, `ETag` (the git blob id),
/// `Content-Length`. An LFS file is a redirect to the storage address of its object, with
/// `X-Linked-Etag` (its SHA-256) and `X-Linked-Size`, as the Hub answers one.
async fn resolve(
    State(hub): State<SharedHub>,
    method: Method,
    headers: HeaderMap,
    Path((owner, name, rev, path)): Path<(String, String, String, String)>,
) -> Response {
    let result = async {
        let (repo, _) = open(&hub, &headers, &owner, &name).await?;
        let sha = commit_of(&repo, &rev).await?;
        let path = RepoPath::parse(&path).ok_or_else(|| invalid_path(&path))?;
        let tree = repo.tree(&sha).await.map_err(internal)?;
        let entry = match tree.get(&path) {
            Some(e) if e.kind == ObjectKind::Blob => e,
            _ => return Err(entry_not_found(path.as_str(), &rev)),
        };
        if let Some((oid, size)) = &entry.lfs {
            let location = format!("{}/_lfs/objects/{oid}", hub.storage_url());
            let headers = [
                (header::LOCATION, location),
                (header::ETAG, format!("\"{}\"", entry.oid)),
                (header::HeaderName::from_static("x-linked-etag"), format!("\"{oid}\"")),
                (header::HeaderName::from_static("x-linked-size"), size.to_string()),
                (header::HeaderName::from_static("x-repo-commit"), sha),
            ];
            return Ok((StatusCode::FOUND, headers).into_response());
        }
        let body = if method == Method::HEAD {
            Vec::new()
        } else {
            repo.blob(&entry.oid).await.map_err(internal)?
        };
        let headers = [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_LENGTH, entry.size.unwrap_or(body.len() as u64).to_string()),
            (header::ETAG, format!("\"{}\"", entry.oid)),
            (header::HeaderName::from_static("x-repo-commit"), sha),
            (header::ACCEPT_RANGES, "none".to_string()),
        ];
        Ok((StatusCode::OK, headers, body).into_response())
    };
    result.await.unwrap_or_else(|r| r)
}
