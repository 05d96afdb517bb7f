//! Container registries for the OpenEnv track, Docker Hub and GHCR in one: `/registry/{host}/v2/…`
//! speaks the OCI distribution API (`GET /v2/` answers 401 with a Bearer challenge, the token
//! endpoint hands out anonymous pull tokens, then manifests, image indexes and blobs by tag or
//! digest, with `Docker-Content-Digest`). Point the arena's registry base URLs at
//! `{stand-in}/registry/docker.io` and `{stand-in}/registry/ghcr.io`.
//!
//! Images are described by JSON files in a folder (`STANDIN_IMAGES`, [`crate::Hub::with_images`]);
//! no image bytes exist. Each file is one repository:
//!
//! ```json
//! {"image": "ghcr.io/arena-demo/echo-env", "private": false,
//!  "tags": {"v1": {"kind": "index", "images": [
//!     {"os": "linux", "architecture": "amd64", "entrypoint": ["python", "-m", "server"], "cmd": [],
//!      "exposed_ports": ["8000/tcp"], "labels": {}, "layers": [{"size": 1000}, {"digest": "sha256:…", "size": 5}]}]}}}
//! ```
//!
//! `kind` is `index` (a multi-platform index), `manifest` (one image manifest) or `schema1` (an
//! old Docker format the arena refuses). A layer without a digest gets one from its position.
//! A private repository hands out tokens but serves nothing to them. The stand-in's fault
//! switches (`PUT /_standin/faults`: 429, 5xx, slow) apply here as everywhere.

use std::collections::BTreeMap;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub use crate::images::{load, Image, LayerSpec, Repository, Tag};
use crate::SharedHub;

pub const INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const SCHEMA1: &str = "application/vnd.docker.distribution.manifest.v1+prettyjws";

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The digest of the `n`th image manifest of a tag (what an arena pins).
pub fn manifest_digest(repo: &str, tag_name: &str, tag: &Tag, n: usize) -> String {
    documents(repo, tag_name, tag).2.get(n).cloned().unwrap_or_default()
}

fn config_of(image: &Image) -> Value {
    json!({
        "architecture": image.architecture, "os": image.os,
        "config": {
            "Entrypoint": (!image.entrypoint.is_empty()).then_some(&image.entrypoint),
            "Cmd": (!image.cmd.is_empty()).then_some(&image.cmd),
            "ExposedPorts": image.exposed_ports.iter().map(|p| (p.clone(), json!({}))).collect::<serde_json::Map<_, _>>(),
            "Labels": image.labels,
            "Env": (!image.env.is_empty()).then_some(&image.env),
            "WorkingDir": image.workdir,
            "User": image.user,
        },
        "rootfs": {"type": "layers", "diff_ids": []},
    })
}

/// The documents a tag serves: (media type, bytes) by digest, the tag's own document, and each
/// image's manifest digest in order.
#[allow(clippy::type_complexity)]
fn documents(
    repo: &str,
    tag_name: &str,
    tag: &Tag,
) -> (BTreeMap<String, (&'static str, Vec<u8>)>, String, Vec<String>) {
    let mut docs = BTreeMap::new();
    let mut entries = Vec::new();
    for (n, image) in tag.images.iter().enumerate() {
        let config_bytes = serde_json::to_vec(&config_of(image)).expect("JSON");
        let config_digest = digest(&config_bytes);
        docs.insert(config_digest.clone(), (CONFIG, config_bytes.clone()));
        let layers: Vec<Value> = image
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let d = l
                    .digest
                    .clone()
                    .unwrap_or_else(|| digest(format!("{repo}:{tag_name}:{n}:{i}:{}", l.size).as_bytes()));
                json!({"mediaType": LAYER, "digest": d, "size": l.size})
            })
            .collect();
        let media = if tag.kind == "schema1" { SCHEMA1 } else { MANIFEST };
        let manifest = json!({
            "schemaVersion": if tag.kind == "schema1" { 1 } else { 2 },
            "mediaType": media,
            "config": {"mediaType": CONFIG, "digest": config_digest, "size": config_bytes.len()},
            "layers": layers,
        });
        let bytes = serde_json::to_vec(&manifest).expect("JSON");
        let d = digest(&bytes);
        entries.push(json!({"mediaType": media, "digest": d, "size": bytes.len(),
            "platform": {"os": image.os, "architecture": image.architecture}}));
        docs.insert(d, (media, bytes));
    }
    let per_image: Vec<String> =
        entries.iter().filter_map(|e| e["digest"].as_str().map(String::from)).collect();
    let own = if tag.kind == "index" {
        let bytes =
            serde_json::to_vec(&json!({"schemaVersion": 2, "mediaType": INDEX, "manifests": entries}))
                .expect("JSON");
        let d = digest(&bytes);
        docs.insert(d.clone(), (INDEX, bytes));
        d
    } else {
        entries.first().and_then(|e| e["digest"].as_str()).unwrap_or_default().to_string()
    };
    (docs, own, per_image)
}

pub fn router() -> Router<SharedHub> {
    Router::new()
        .route("/registry/{host}/v2/", get(base))
        .route("/registry/{host}/token", get(token))
        .route("/registry/{host}/v2/{*rest}", get(content))
}

fn challenge(hub: &SharedHub, host: &str, name: Option<&str>) -> Response {
    let base = hub.public_url.lock().unwrap().clone();
    let scope = name.map(|n| format!(",scope=\"repository:{n}:pull\"")).unwrap_or_default();
    let value = format!("Bearer realm=\"{base}/registry/{host}/token\",service=\"{host}\"{scope}");
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, value)],
        Json(json!({"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]})),
    )
        .into_response()
}

async fn base(State(hub): State<SharedHub>, UrlPath(host): UrlPath<String>, headers: HeaderMap) -> Response {
    match crate::bearer(&headers) {
        Some(t) if t.starts_with("anon:") => Json(json!({})).into_response(),
        _ => challenge(&hub, &host, None),
    }
}

#[derive(Deserialize)]
struct TokenQuery {
    #[serde(default)]
    scope: Option<String>,
}

async fn token(Query(q): Query<TokenQuery>) -> Response {
    let name = q
        .scope
        .as_deref()
        .and_then(|s| s.strip_prefix("repository:"))
        .and_then(|s| s.strip_suffix(":pull"))
        .unwrap_or("");
    Json(json!({"token": format!("anon:{name}"), "expires_in": 300})).into_response()
}

fn not_found(code: &str, message: &str) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"errors": [{"code": code, "message": message}]}))).into_response()
}

async fn content(
    State(hub): State<SharedHub>,
    UrlPath((host, rest)): UrlPath<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let (name, kind, reference) = match rest.rsplit_once("/manifests/") {
        Some((n, r)) => (n.to_string(), "manifests", r.to_string()),
        None => match rest.rsplit_once("/blobs/") {
            Some((n, r)) => (n.to_string(), "blobs", r.to_string()),
            None => return not_found("NAME_UNKNOWN", "no such route"),
        },
    };
    if crate::bearer(&headers) != Some(format!("anon:{name}").as_str()) {
        return challenge(&hub, &host, Some(&name));
    }
    let Some(repo) = hub.images.get(&format!("{host}/{name}")) else {
        return challenge(&hub, &host, Some(&name));
    };
    if repo.private {
        return (StatusCode::UNAUTHORIZED, Json(json!({"errors": [{"code": "DENIED", "message": "requested access to the resource is denied"}]})))
            .into_response();
    }
    let mut all = BTreeMap::new();
    let mut tags = BTreeMap::new();
    for (tag_name, tag) in &repo.tags {
        let (docs, own, _) = documents(&name, tag_name, tag);
        tags.insert(tag_name.clone(), own);
        all.extend(docs);
    }
    let wanted = if kind == "manifests" && !reference.starts_with("sha256:") {
        match tags.get(&reference) {
            Some(d) => d.clone(),
            None => return not_found("MANIFEST_UNKNOWN", "manifest unknown"),
        }
    } else {
        reference
    };
    match all.get(&wanted) {
        Some((media, bytes)) if kind == "blobs" || *media != CONFIG => (
            [
                (header::CONTENT_TYPE, media.to_string()),
                (header::HeaderName::from_static("docker-content-digest"), wanted),
            ],
            bytes.clone(),
        )
            .into_response(),
        _ => not_found(if kind == "blobs" { "BLOB_UNKNOWN" } else { "MANIFEST_UNKNOWN" }, "unknown"),
    }
}
