//! GitHub's REST reads the arena makes (a commit, a recursive tree) with its anonymous hourly rate
//! limit, and raw files as raw.githubusercontent.com serves them (not rate-limited).

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde_json::{json, Value};

use crate::github_rate::RateLimitState;
use crate::repos::{Kind, ObjectKind, Repo, RepoName, RepoPath, Rev, Visibility};
use crate::SharedHub;

const DOCS: &str = "https://docs.github.com/rest";

pub(crate) fn router() -> Router<SharedHub> {
    Router::new()
        .route("/repos/{owner}/{repo}/commits/{*reference}", get(commit))
        .route("/repos/{owner}/{repo}/git/trees/{*sha}", get(tree))
        .route("/raw/{owner}/{repo}/{rev}/{*path}", get(raw))
}

fn with_rate_headers(mut resp: Response, s: RateLimitState) -> Response {
    let h = resp.headers_mut();
    for (name, value) in [
        ("x-ratelimit-limit", s.rate_limit.to_string()),
        ("x-ratelimit-remaining", s.remaining.to_string()),
        ("x-ratelimit-reset", s.reset.to_string()),
        ("x-ratelimit-used", s.used.to_string()),
        ("x-ratelimit-resource", "core".to_string()),
    ] {
        h.insert(name, HeaderValue::from_str(&value).expect("ascii header"));
    }
    resp
}

fn message(status: StatusCode, message: &str, docs: &str) -> Response {
    (status, Json(json!({"message": message, "documentation_url": docs, "status": status.as_str()})))
        .into_response()
}

fn not_found() -> Response {
    message(StatusCode::NOT_FOUND, "Not Found", DOCS)
}

fn internal(err: crate::repos::GitError) -> Response {
    tracing::error!(error = %err, "reading a GitHub stand-in repository");
    message(StatusCode::INTERNAL_SERVER_ERROR, "Server Error", DOCS)
}

/// Runs an API call inside the rate limit and stamps the `x-ratelimit-*` headers on its answer.
async fn rate_limited<F>(hub: &SharedHub, peer: Option<SocketAddr>, call: F) -> Response
where
    F: std::future::Future<Output = Result<Response, Response>>,
{
    let taken = hub.github.lock().unwrap().take();
    match taken {
        Ok(state) => with_rate_headers(call.await.unwrap_or_else(|r| r), state),
        Err(state) => {
            let ip = peer.map_or_else(|| "127.0.0.1".to_string(), |a| a.ip().to_string());
            let text = format!(
                "API rate limit exceeded for {ip}. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)"
            );
            let docs = "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting";
            with_rate_headers(message(StatusCode::FORBIDDEN, &text, docs), state)
        }
    }
}

/// A repository anyone may read; private ones are as absent as missing ones, as on GitHub.
async fn open<'h>(hub: &'h SharedHub, owner: &str, repo: &str) -> Result<Repo<'h>, Response> {
    let (Some(repos), Some(name)) = (hub.repos.as_ref(), RepoName::parse(owner, repo)) else {
        return Err(not_found());
    };
    match repos.open(Kind::Github, &name).await.map_err(internal)? {
        Some(r) if r.visibility == Visibility::Public => Ok(r),
        _ => Err(not_found()),
    }
}

type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

fn peer_addr(peer: Peer) -> Option<SocketAddr> {
    peer.map(|Extension(ConnectInfo(a))| a)
}

async fn commit(
    State(hub): State<SharedHub>,
    peer: Peer,
    Path((owner, repo, reference)): Path<(String, String, String)>,
) -> Response {
    let call = async {
        let r = open(&hub, &owner, &repo).await?;
        let no_commit = || {
            message(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("No commit found for SHA: {reference}"),
                "https://docs.github.com/rest/commits/commits#get-a-commit",
            )
        };
        let rev = Rev::parse(&reference).ok_or_else(no_commit)?;
        let sha = r.commit(&rev).await.map_err(internal)?.ok_or_else(no_commit)?;
        let c = r.commit_info(&sha).await.map_err(internal)?;
        let base = hub.public_url.lock().unwrap().clone();
        let sig = |s: &crate::repos::Signature| json!({"name": s.name, "email": s.email, "date": s.date});
        Ok(Json(json!({
            "sha": c.sha,
            "url": format!("{base}/repos/{owner}/{repo}/commits/{}", c.sha),
            "commit": {
                "message": c.message,
                "author": sig(&c.author),
                "committer": sig(&c.committer),
                "tree": {"sha": c.tree, "url": format!("{base}/repos/{owner}/{repo}/git/trees/{}", c.tree)},
            },
            "parents": c.parents.iter().map(|p| json!({"sha": p})).collect::<Vec<_>>(),
        }))
        .into_response())
    };
    rate_limited(&hub, peer_addr(peer), call).await
}

/// A tree by tree id, commit id or ref; any `recursive` value lists it recursively, as on GitHub.
async fn tree(
    State(hub): State<SharedHub>,
    peer: Peer,
    Path((owner, repo, sha)): Path<(String, String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let call = async {
        let r = open(&hub, &owner, &repo).await?;
        let rev = Rev::parse(&sha).ok_or_else(not_found)?;
        let tree_id = r.tree_id(&rev).await.map_err(internal)?.ok_or_else(not_found)?;
        let tree = r.tree(&tree_id).await.map_err(internal)?;
        let items: Vec<Value> = tree
            .under(None, q.contains_key("recursive"))
            .map(|e| match e.kind {
                ObjectKind::Blob => {
                    json!({"path": e.path, "mode": e.mode, "type": "blob", "sha": e.oid, "size": e.size})
                }
                ObjectKind::Tree => json!({"path": e.path, "mode": e.mode, "type": "tree", "sha": e.oid}),
                ObjectKind::Commit => json!({"path": e.path, "mode": e.mode, "type": "commit", "sha": e.oid}),
            })
            .collect();
        let base = hub.public_url.lock().unwrap().clone();
        Ok(Json(json!({
            "sha": tree_id,
            "url": format!("{base}/repos/{owner}/{repo}/git/trees/{tree_id}"),
            "tree": items,
            "truncated": false,
        }))
        .into_response())
    };
    rate_limited(&hub, peer_addr(peer), call).await
}

/// raw.githubusercontent.com: the bytes, or `404: Not Found` as text.
async fn raw(
    State(hub): State<SharedHub>,
    Path((owner, repo, rev, path)): Path<(String, String, String, String)>,
) -> Response {
    let not_found = || (StatusCode::NOT_FOUND, "404: Not Found").into_response();
    let result = async {
        let r = open(&hub, &owner, &repo).await.map_err(|_| not_found())?;
        let rev = Rev::parse(&rev).ok_or_else(not_found)?;
        let path = RepoPath::parse(&path).ok_or_else(not_found)?;
        let sha = r.commit(&rev).await.map_err(internal)?.ok_or_else(not_found)?;
        let tree = r.tree(&sha).await.map_err(internal)?;
        let entry = tree.get(&path).filter(|e| e.kind == ObjectKind::Blob).ok_or_else(not_found)?;
        let body = r.blob(&entry.oid).await.map_err(internal)?;
        let headers = [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_string()),
            (header::ETAG, format!("\"{}\"", entry.oid)),
            (header::HeaderName::from_static("x-content-type-options"), "nosniff".to_string()),
        ];
        Ok::<_, Response>((StatusCode::OK, headers, body).into_response())
    };
    result.await.unwrap_or_else(|r| r)
}
