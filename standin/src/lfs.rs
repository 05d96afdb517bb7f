//! Files kept outside git, as the Hub keeps them (LFS, without Xet): `preupload` says which files
//! go there (paths `.gitattributes` routes to LFS, files of 10 MB or more, binary samples); the
//! git-lfs batch API (`POST /datasets/{repo}.git/info/lfs/objects/batch`) answers `basic` uploads
//! (one PUT) and `multipart` ones (a PUT per part, then the completion call), with a `verify`
//! call; objects already stored get no `actions`. A commit names them as `lfsFile` operations and
//! the repository holds a git-lfs pointer; the tree lists its `lfs` (`oid`, `size`,
//! `pointerSize`), and `resolve` answers it with a redirect to the stand-in's storage
//! (`/_lfs/objects/{oid}`), as the Hub redirects to its CDN. Storage is an origin of its own (a
//! second listener, `serve`), as HF's CDN and S3 are: uploads and downloads there take no token,
//! and clients do not follow the Hub's redirect there with one. The objects live under the
//! repositories' root in `lfs/objects/{oid}`.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::hub::hf_error;
use crate::SharedHub;

/// Files of this size or more go to LFS (the Hub's threshold).
pub const LFS_THRESHOLD: u64 = 10_000_000;
/// A commit that carries a file of this size or more inline is refused.
pub const INLINE_LIMIT: usize = 10 << 20;
/// Objects of this size or more are uploaded in parts of [`PART_BYTES`].
const MULTIPART_THRESHOLD: u64 = 8 << 20;
const PART_BYTES: u64 = 5 << 20;
/// The largest object the stand-in stores.
const MAX_OBJECT: u64 = 1 << 30;
use crate::lfs_pointer::is_oid;
pub use crate::lfs_pointer::{pointer, read_pointer};
pub use crate::lfs_store::Store;

/// Whether bytes would be refused inline: not UTF-8 text, or holding a NUL. A sample cut in the
/// middle of a character still counts as text.
pub fn is_binary(bytes: &[u8], sample: bool) -> bool {
    if bytes.contains(&0) {
        return true;
    }
    match std::str::from_utf8(bytes) {
        Ok(_) => false,
        Err(e) => !(sample && e.error_len().is_none()),
    }
}

/// Whether `.gitattributes` text routes `path` to LFS (`filter=lfs`; the last matching line wins).
pub fn routed_to_lfs(attributes: &str, path: &str) -> bool {
    let mut lfs = false;
    for line in attributes.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let mut words = line.split_whitespace();
        let Some(pattern) = words.next() else { continue };
        let rest: Vec<&str> = words.collect();
        if !matches(pattern, path) {
            continue;
        }
        if rest.contains(&"filter=lfs") {
            lfs = true;
        } else if rest.iter().any(|w| *w == "-filter" || w.starts_with("filter=")) {
            lfs = false;
        }
    }
    lfs
}

/// gitattributes' patterns: without a `/` one matches the file name at any depth; `*` stays
/// within a name, `**` crosses directories.
fn matches(pattern: &str, path: &str) -> bool {
    if pattern.contains('/') {
        glob(pattern.trim_start_matches('/').as_bytes(), path.as_bytes())
    } else {
        glob(pattern.as_bytes(), path.rsplit('/').next().unwrap_or(path).as_bytes())
    }
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') if p.get(1) == Some(&b'*') => {
            let rest = p[2..].strip_prefix(b"/").unwrap_or(&p[2..]);
            (0..=s.len()).any(|i| glob(rest, &s[i..]))
        }
        Some(b'*') => {
            (0..=s.len()).take_while(|&i| i == 0 || s[i - 1] != b'/').any(|i| glob(&p[1..], &s[i..]))
        }
        Some(b'?') => !s.is_empty() && s[0] != b'/' && glob(&p[1..], &s[1..]),
        Some(c) => s.first() == Some(c) && glob(&p[1..], &s[1..]),
    }
}

fn no_store() -> Response {
    hf_error(StatusCode::NOT_FOUND, None, "this stand-in keeps no repositories")
}

/// The Hub's side: the batch API, the multipart completion and `verify`.
pub(crate) fn router() -> Router<SharedHub> {
    Router::new()
        .route("/datasets/{owner}/{repo}/info/lfs/objects/batch", post(batch))
        .route("/_lfs/complete/{oid}", post(complete))
        .route("/_lfs/verify/{oid}", post(verify))
}

/// The storage's side, on its own origin: uploads, parts and downloads.
pub(crate) fn storage_router() -> Router<SharedHub> {
    Router::new()
        .route("/_lfs/upload/{oid}", put(upload))
        .route("/_lfs/part/{oid}/{n}", put(upload_part))
        .route("/_lfs/objects/{oid}", get(download))
}

#[derive(Deserialize)]
struct BatchRequest {
    operation: String,
    #[serde(default)]
    transfers: Vec<String>,
    objects: Vec<BatchObject>,
}

#[derive(Deserialize)]
struct BatchObject {
    oid: String,
    size: u64,
}

/// The git-lfs batch API for uploads to a dataset the caller may write.
async fn batch(
    State(hub): State<SharedHub>,
    headers: HeaderMap,
    Path((owner, repo)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let Some(_name) = repo.strip_suffix(".git") else {
        return hf_error(StatusCode::NOT_FOUND, None, "Not Found");
    };
    if let Some(r) = crate::write_refusal(&hub, &headers, &owner) {
        return r;
    }
    let Ok(req) = serde_json::from_slice::<BatchRequest>(&body) else {
        return hf_error(StatusCode::UNPROCESSABLE_ENTITY, None, "Invalid LFS batch request");
    };
    if req.operation != "upload" {
        return hf_error(StatusCode::UNPROCESSABLE_ENTITY, None, "the local stand-in takes uploads only");
    }
    let Some(store) = hub.lfs.as_ref() else { return no_store() };
    let base = hub.public_url.lock().unwrap().clone();
    let storage = hub.storage_url();
    let multipart = req.transfers.iter().any(|t| t == "multipart");
    let transfer = if multipart && req.objects.iter().any(|o| o.size >= MULTIPART_THRESHOLD) {
        "multipart"
    } else {
        "basic"
    };
    let objects: Vec<Value> = req
        .objects
        .iter()
        .map(|o| {
            if !is_oid(&o.oid) || o.size > MAX_OBJECT {
                return json!({"oid": o.oid, "size": o.size, "error": {"code": 422, "message": "Invalid oid or size"}});
            }
            if store.size(&o.oid) == Some(o.size) {
                return json!({"oid": o.oid, "size": o.size, "authenticated": true});
            }
            let upload = if transfer == "multipart" && o.size >= MULTIPART_THRESHOLD {
                let mut header = serde_json::Map::new();
                header.insert("chunk_size".into(), json!(PART_BYTES.to_string()));
                for n in 1..=o.size.div_ceil(PART_BYTES) {
                    header.insert(format!("{n:05}"), json!(format!("{storage}/_lfs/part/{}/{n}", o.oid)));
                }
                json!({"href": format!("{base}/_lfs/complete/{}", o.oid), "header": header})
            } else {
                json!({"href": format!("{storage}/_lfs/upload/{}", o.oid)})
            };
            json!({"oid": o.oid, "size": o.size, "authenticated": true, "actions": {
                "upload": upload,
                "verify": {"href": format!("{base}/_lfs/verify/{}", o.oid)},
            }})
        })
        .collect();
    let mut resp =
        Json(json!({"transfer": transfer, "objects": objects, "hash_algo": "sha256"})).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, "application/vnd.git-lfs+json".parse().expect("a media type"));
    resp
}

/// A `basic` upload: the whole object, which must hash to its oid. Like a storage's presigned
/// address, it takes no token.
async fn upload(State(hub): State<SharedHub>, Path(oid): Path<String>, body: Bytes) -> Response {
    let Some(store) = hub.lfs.as_ref() else { return no_store() };
    match store.put(&oid, &body) {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => hf_error(e.status(), None, &e.to_string()),
    }
}

/// One part of a `multipart` upload; answers its `ETag`.
async fn upload_part(
    State(hub): State<SharedHub>,
    Path((oid, n)): Path<(String, u32)>,
    body: Bytes,
) -> Response {
    let Some(store) = hub.lfs.as_ref() else { return no_store() };
    if !is_oid(&oid) || n == 0 || body.len() as u64 > PART_BYTES {
        return hf_error(StatusCode::BAD_REQUEST, None, "Invalid part");
    }
    let path = store.part(&oid, n);
    let written = std::fs::create_dir_all(path.parent().expect("parts/oid/"))
        .and_then(|()| std::fs::write(&path, &body));
    match written {
        Ok(()) => {
            ([(header::ETAG, format!("\"{}\"", hex::encode(Sha256::digest(&body))))], "").into_response()
        }
        Err(e) => hf_error(StatusCode::INTERNAL_SERVER_ERROR, None, &e.to_string()),
    }
}

#[derive(Deserialize)]
struct Completion {
    oid: String,
    parts: Vec<CompletedPart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompletedPart {
    part_number: u32,
    etag: String,
}

/// The completion of a `multipart` upload: every part, in order, each with its ETag.
async fn complete(State(hub): State<SharedHub>, Path(oid): Path<String>, body: Bytes) -> Response {
    let Some(store) = hub.lfs.as_ref() else { return no_store() };
    let Ok(done) = serde_json::from_slice::<Completion>(&body) else {
        return hf_error(StatusCode::BAD_REQUEST, None, "Invalid completion");
    };
    if done.oid != oid {
        return hf_error(StatusCode::BAD_REQUEST, None, "The oid is not the upload's");
    }
    let mut bytes = Vec::new();
    for (i, part) in done.parts.iter().enumerate() {
        let Ok(piece) = std::fs::read(store.part(&oid, part.part_number)) else {
            return hf_error(
                StatusCode::BAD_REQUEST,
                None,
                &format!("part {} was not uploaded", part.part_number),
            );
        };
        if part.part_number as usize != i + 1
            || part.etag != format!("\"{}\"", hex::encode(Sha256::digest(&piece)))
        {
            return hf_error(
                StatusCode::BAD_REQUEST,
                None,
                &format!("part {} is not the one uploaded", part.part_number),
            );
        }
        bytes.extend(piece);
    }
    match store.put(&oid, &bytes) {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(store.dir.join("parts").join(&oid));
            Json(json!({"oid": oid, "size": bytes.len()})).into_response()
        }
        Err(e) => hf_error(e.status(), None, &e.to_string()),
    }
}

#[derive(Deserialize)]
struct Verify {
    oid: String,
    size: u64,
}

/// `verify`: the object is stored, at its size.
async fn verify(
    State(hub): State<SharedHub>,
    headers: HeaderMap,
    Path(oid): Path<String>,
    body: Bytes,
) -> Response {
    if crate::bearer(&headers).and_then(|t| hub.user_by_token(t)).is_none() {
        return crate::unauthorized();
    }
    let Some(store) = hub.lfs.as_ref() else { return no_store() };
    match serde_json::from_slice::<Verify>(&body) {
        Ok(v) if v.oid == oid && store.size(&oid) == Some(v.size) => Json(json!({})).into_response(),
        Ok(_) => hf_error(StatusCode::NOT_FOUND, None, "Object not found or of another size"),
        Err(_) => hf_error(StatusCode::BAD_REQUEST, None, "Invalid verify request"),
    }
}

/// The storage address `resolve` redirects an LFS file to.
async fn download(State(hub): State<SharedHub>, Path(oid): Path<String>) -> Response {
    let Some(store) = hub.lfs.as_ref() else { return no_store() };
    match store.read(&oid) {
        Some(bytes) => ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response(),
        None => hf_error(StatusCode::NOT_FOUND, None, "Not Found"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitattributes_route_by_name_and_path() {
        let attrs = "*.parquet filter=lfs diff=lfs merge=lfs -text\n*.tar.* filter=lfs\nsaved_model/**/* filter=lfs\n*tfevents* filter=lfs\n";
        for path in
            ["a.parquet", "d/e/f.parquet", "x.tar.gz", "saved_model/v1/w.pb", "runs/events.out.tfevents.1"]
        {
            assert!(routed_to_lfs(attrs, path), "{path}");
        }
        for path in ["a.parquet.txt", "x.tar", "model/v1/w.pb", "notes.md"] {
            assert!(!routed_to_lfs(attrs, path), "{path}");
        }
        assert!(!routed_to_lfs(&format!("{attrs}*.parquet -filter\n"), "a.parquet"), "the last line wins");
    }

    #[test]
    fn a_pointer_names_its_object() {
        let oid = "a".repeat(64);
        assert_eq!(read_pointer(pointer(&oid, 12).as_bytes()), Some((oid.clone(), 12)));
        assert_eq!(
            read_pointer(b"version https://git-lfs.github.com/spec/v1\noid sha256:zz\nsize 1\n"),
            None
        );
        assert_eq!(read_pointer(b"plain text"), None);
        assert!(is_binary(b"PK\x03\x04\x14\x00\x06\x00", false) && is_binary(b"a\0b", false));
        assert!(!is_binary("caf\u{e9}".as_bytes(), false));
        assert!(!is_binary(&"caf\u{e9}".as_bytes()[..4], true), "a sample cut inside a character");
    }
}
