//! Container registries (the OpenEnv track): an image is read anonymously through the OCI
//! distribution API, as `docker pull` would: `GET /v2/` for the token realm, an anonymous pull
//! token for the repository, the manifest (an index is narrowed to its linux/amd64 image) and the
//! config blob. Only Docker Hub and GHCR are spoken to, at configured base URLs; a token realm is
//! followed only to the registry's own origin or a configured auth origin, so no submission makes
//! the arena fetch an address it chose. What a digest names never changes, so it is cached.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use domain::openenv::{ImageFacts, ImageRef, Layer, RegistryHost};
use reqwest::{header, StatusCode};
use serde::Deserialize;

use super::http::{client, retry_after};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistryError {
    /// Missing, private, or no such tag.
    #[error("{0}")]
    Inaccessible(String),
    #[error("{0}")]
    PlatformUnsupported(String),
    #[error("{0}")]
    ManifestUnsupported(String),
    /// No answer, or a 5xx: nothing is known.
    #[error("{0}")]
    Unavailable(String),
    #[error("{message}")]
    RateLimited { message: String, retry_after_s: Option<u64> },
}

/// What a read of one image found, and how many requests it took.
#[derive(Debug, Clone)]
pub struct ImageRead {
    pub facts: ImageFacts,
    pub requests: u32,
}

#[async_trait]
pub trait ImageRegistry: Send + Sync {
    async fn read(&self, image: &ImageRef) -> Result<ImageRead, RegistryError>;
}

pub const INDEX_TYPES: [&str; 2] =
    ["application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"];
pub const IMAGE_TYPES: [&str; 2] =
    ["application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"];
/// Manifests and config blobs are small; anything larger is not what a registry serves.
const MAX_DOCUMENT_BYTES: usize = 4 << 20;
/// A token answer is a few KB.
const MAX_TOKEN_BYTES: usize = 64 << 10;
/// Images whose facts are kept (by digest; what a digest names never changes).
const CACHED_IMAGES: u64 = 10_000;

pub struct OciRegistries {
    http: reqwest::Client,
    docker: String,
    ghcr: String,
    /// Origins a token realm may be on besides the registry's own.
    auth_origins: Vec<String>,
    /// By `registry/repository@digest`, at most `CACHED_IMAGES`.
    cache: moka::sync::Cache<String, ImageFacts>,
}

/// A digest as it may go into a URL: `sha256:` and 64 lowercase hex digits, nothing else.
fn checked_digest(name: &str, digest: &str) -> Result<(), RegistryError> {
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Ok(());
    }
    let shown: String = digest.chars().take(80).collect();
    Err(RegistryError::ManifestUnsupported(format!("`{name}`: `{shown}` is not a sha256 digest")))
}

/// A body read to at most `max` bytes: refused from its declared length, or once past it.
async fn bounded(mut r: reqwest::Response, max: usize, what: &str) -> Result<Vec<u8>, RegistryError> {
    let too_large = || RegistryError::ManifestUnsupported(format!("{what}: larger than {} KiB", max >> 10));
    if r.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = r.chunk().await.map_err(OciRegistries::unavailable)? {
        if body.len() + chunk.len() > max {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[derive(Deserialize)]
struct Index {
    #[serde(default)]
    manifests: Vec<IndexEntry>,
}

#[derive(Deserialize)]
struct IndexEntry {
    digest: String,
    #[serde(rename = "mediaType", default)]
    media_type: String,
    #[serde(default)]
    platform: Option<Platform>,
}

#[derive(Deserialize)]
struct Platform {
    os: String,
    architecture: String,
}

#[derive(Deserialize)]
struct Manifest {
    config: Descriptor,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Descriptor {
    digest: String,
    #[serde(default)]
    size: u64,
}

#[derive(Deserialize, Default)]
struct ConfigBlob {
    #[serde(default)]
    os: String,
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    config: ContainerConfig,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct ContainerConfig {
    #[serde(default)]
    entrypoint: Option<Vec<String>>,
    #[serde(default)]
    cmd: Option<Vec<String>>,
    #[serde(default)]
    exposed_ports: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    env: Option<Vec<String>>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    user: Option<String>,
}

/// `origin` of an absolute URL: scheme, host and port.
fn origin(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    Some(u.origin().ascii_serialization())
}

/// `Bearer realm="…",service="…"` → (realm, service).
pub fn bearer_challenge(value: &str) -> Option<(String, Option<String>)> {
    let rest = value.trim().strip_prefix("Bearer ").or_else(|| value.trim().strip_prefix("bearer "))?;
    let mut realm = None;
    let mut service = None;
    // A scope may hold commas (`repository:a/b:pull,push`): parts without `=` belong to it.
    for part in rest.split(',') {
        let Some((k, v)) = part.trim().split_once('=') else { continue };
        let v = v.trim().trim_matches('"').to_string();
        match k.trim() {
            "realm" => realm = Some(v),
            "service" => service = Some(v),
            _ => {}
        }
    }
    Some((realm?, service))
}

struct Session<'a> {
    base: &'a str,
    name: String,
    token: Option<String>,
    requests: u32,
}

impl OciRegistries {
    pub fn new(docker: &str, ghcr: &str, auth_origins: &[String]) -> OciRegistries {
        OciRegistries {
            http: client(Duration::from_secs(20)),
            docker: docker.trim_end_matches('/').to_string(),
            ghcr: ghcr.trim_end_matches('/').to_string(),
            auth_origins: auth_origins.iter().filter_map(|o| origin(o)).collect(),
            cache: moka::sync::Cache::new(CACHED_IMAGES),
        }
    }

    fn base(&self, host: RegistryHost) -> &str {
        match host {
            RegistryHost::Docker => &self.docker,
            RegistryHost::Ghcr => &self.ghcr,
        }
    }

    fn unavailable(e: reqwest::Error) -> RegistryError {
        RegistryError::Unavailable(format!("the registry did not answer: {e}"))
    }

    /// An anonymous pull token, when the registry asks for one.
    async fn login(&self, s: &mut Session<'_>) -> Result<(), RegistryError> {
        s.requests += 1;
        let probe = self.http.get(format!("{}/v2/", s.base)).send().await.map_err(Self::unavailable)?;
        match probe.status() {
            StatusCode::UNAUTHORIZED => {}
            st if st.is_success() => return Ok(()),
            StatusCode::TOO_MANY_REQUESTS => return Err(rate_limited(&probe)),
            st => return Err(RegistryError::Unavailable(format!("the registry answered {st}"))),
        }
        let Some((realm, service)) = probe
            .headers()
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_challenge)
        else {
            return Err(RegistryError::Unavailable(
                "the registry asked for credentials the arena does not have".into(),
            ));
        };
        let allowed = origin(&realm)
            .is_some_and(|o| Some(&o) == origin(s.base).as_ref() || self.auth_origins.contains(&o));
        if !allowed {
            return Err(RegistryError::Unavailable(format!(
                "the registry's token realm `{realm}` is not one the arena reads from"
            )));
        }
        let mut query = vec![("scope", format!("repository:{}:pull", s.name))];
        if let Some(service) = service {
            query.push(("service", service));
        }
        s.requests += 1;
        let r = self.http.get(&realm).query(&query).send().await.map_err(Self::unavailable)?;
        #[derive(Deserialize)]
        struct Token {
            #[serde(default)]
            token: Option<String>,
            #[serde(default)]
            access_token: Option<String>,
        }
        match r.status() {
            s2 if s2.is_success() => {
                let body = bounded(r, MAX_TOKEN_BYTES, "the registry's token answer").await?;
                let t: Token = serde_json::from_slice(&body).map_err(|e| {
                    RegistryError::Unavailable(format!("the registry's token answer is unreadable: {e}"))
                })?;
                s.token = t.token.or(t.access_token);
                Ok(())
            }
            StatusCode::TOO_MANY_REQUESTS => Err(rate_limited(&r)),
            s2 if s2.is_server_error() => {
                Err(RegistryError::Unavailable(format!("the registry's token service answered {s2}")))
            }
            _ => Err(RegistryError::Inaccessible(format!(
                "`{}` cannot be read anonymously: make it public",
                s.name
            ))),
        }
    }

    /// A manifest or blob: its bytes, media type and digest header.
    async fn get(
        &self,
        s: &mut Session<'_>,
        path: &str,
        accept: &str,
    ) -> Result<(Vec<u8>, String, Option<String>), RegistryError> {
        s.requests += 1;
        let mut req =
            self.http.get(format!("{}/v2/{}/{path}", s.base, s.name)).header(header::ACCEPT, accept);
        if let Some(t) = &s.token {
            req = req.bearer_auth(t);
        }
        let mut r = req.send().await.map_err(Self::unavailable)?;
        // Registries hand blobs to their storage with one redirect; it is followed (without the
        // token) only to an https address.
        if r.status().is_redirection() && path.starts_with("blobs/") {
            let to =
                r.headers().get(header::LOCATION).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            if !to.starts_with("https://") {
                return Err(RegistryError::Unavailable(
                    "the registry redirected a blob to a non-https address".into(),
                ));
            }
            s.requests += 1;
            r = self.http.get(&to).send().await.map_err(Self::unavailable)?;
        }
        match r.status() {
            StatusCode::OK => {}
            StatusCode::TOO_MANY_REQUESTS => return Err(rate_limited(&r)),
            st if st.is_server_error() => {
                return Err(RegistryError::Unavailable(format!("the registry answered {st}")))
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::NOT_FOUND => {
                return Err(RegistryError::Inaccessible(format!(
                    "`{}` has no `{}` that can be read anonymously: it is missing, or private (make it public)",
                    s.name,
                    path.trim_start_matches("manifests/")
                )))
            }
            st => return Err(RegistryError::Unavailable(format!("the registry answered {st}"))),
        }
        let media = r
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").trim().to_string())
            .unwrap_or_default();
        let digest = r.headers().get("docker-content-digest").and_then(|v| v.to_str().ok()).map(String::from);
        let bytes = bounded(r, MAX_DOCUMENT_BYTES, &format!("`{}`: a document", s.name)).await?;
        Ok((bytes, media, digest))
    }
}

fn rate_limited(r: &reqwest::Response) -> RegistryError {
    RegistryError::RateLimited {
        message: "the registry limits the arena's anonymous reads; send the identical request again later"
            .into(),
        retry_after_s: retry_after(r.headers()),
    }
}

pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", domain::digest::sha256_hex(bytes))
}

/// The image's config blob, checked against its digest, read, and of the one platform the arena
/// runs.
fn linux_amd64_config(image: &ImageRef, bytes: &[u8], digest: &str) -> Result<ConfigBlob, RegistryError> {
    if sha256_digest(bytes) != digest {
        return Err(RegistryError::ManifestUnsupported(format!(
            "`{}`: the image config does not match its digest",
            image.canonical()
        )));
    }
    let config: ConfigBlob = serde_json::from_slice(bytes).map_err(|e| {
        RegistryError::ManifestUnsupported(format!(
            "`{}`: an unreadable image config: {e}",
            image.canonical()
        ))
    })?;
    if (config.os.as_str(), config.architecture.as_str()) != ("linux", "amd64") {
        return Err(RegistryError::PlatformUnsupported(format!(
            "`{}` is a {}/{} image; the arena runs linux/amd64 only",
            image.canonical(),
            config.os,
            config.architecture
        )));
    }
    Ok(config)
}

#[async_trait]
impl ImageRegistry for OciRegistries {
    /// The registry protocol's steps in order (token, manifest or index, platform, config blob),
    /// each verified before the next request.
    async fn read(&self, image: &ImageRef) -> Result<ImageRead, RegistryError> {
        let mut s = Session {
            base: self.base(image.registry),
            name: image.repository.clone(),
            token: None,
            requests: 0,
        };
        let key = |digest: &str| format!("{}/{}@{digest}", image.registry.name(), image.repository);
        if let domain::openenv::image::Reference::Digest(d) = &image.reference {
            if let Some(facts) = self.cache.get(&key(d)) {
                return Ok(ImageRead { facts, requests: 0 });
            }
        }
        self.login(&mut s).await?;
        let accept = [INDEX_TYPES.as_slice(), IMAGE_TYPES.as_slice()].concat().join(", ");
        let (bytes, media, header_digest) =
            self.get(&mut s, &format!("manifests/{}", image.reference_str()), &accept).await?;
        let (bytes, media, digest) = if INDEX_TYPES.contains(&media.as_str()) {
            let index: Index = serde_json::from_slice(&bytes).map_err(|e| {
                RegistryError::ManifestUnsupported(format!("`{}`: an unreadable image index: {e}", s.name))
            })?;
            let entry = index
                .manifests
                .iter()
                .find(|m| m.platform.as_ref().is_some_and(|p| p.os == "linux" && p.architecture == "amd64"))
                .ok_or_else(|| {
                    RegistryError::PlatformUnsupported(format!(
                        "`{}` has no linux/amd64 image: rebuild with DOCKER_DEFAULT_PLATFORM=linux/amd64",
                        image.canonical()
                    ))
                })?;
            checked_digest(&s.name, &entry.digest)?;
            if let Some(facts) = self.cache.get(&key(&entry.digest)) {
                return Ok(ImageRead { facts, requests: s.requests });
            }
            let accept =
                if entry.media_type.is_empty() { IMAGE_TYPES.join(", ") } else { entry.media_type.clone() };
            let (b, m, _) = self.get(&mut s, &format!("manifests/{}", entry.digest), &accept).await?;
            (b, m, entry.digest.clone())
        } else {
            let digest = header_digest.unwrap_or_else(|| sha256_digest(&bytes));
            checked_digest(&s.name, &digest)?;
            (bytes, media, digest)
        };
        if !IMAGE_TYPES.contains(&media.as_str()) {
            return Err(RegistryError::ManifestUnsupported(format!(
                "`{}` is served as `{media}`, not an OCI or Docker v2 image manifest",
                image.canonical()
            )));
        }
        if sha256_digest(&bytes) != digest {
            return Err(RegistryError::ManifestUnsupported(format!(
                "`{}`: the manifest does not match its digest",
                image.canonical()
            )));
        }
        let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
            RegistryError::ManifestUnsupported(format!(
                "`{}`: an unreadable manifest: {e}",
                image.canonical()
            ))
        })?;
        checked_digest(&s.name, &manifest.config.digest)?;
        let (config_bytes, _, _) =
            self.get(&mut s, &format!("blobs/{}", manifest.config.digest), "*/*").await?;
        let config = linux_amd64_config(image, &config_bytes, &manifest.config.digest)?;
        for layer in &manifest.layers {
            checked_digest(&s.name, &layer.digest)?;
        }
        let c = config.config;
        let facts = ImageFacts {
            digest: digest.clone(),
            layers: manifest.layers.into_iter().map(|l| Layer { digest: l.digest, size: l.size }).collect(),
            entrypoint: c.entrypoint.unwrap_or_default(),
            cmd: c.cmd.unwrap_or_default(),
            exposed_ports: c.exposed_ports.unwrap_or_default().into_keys().collect(),
            labels: c.labels.unwrap_or_default(),
            env: c.env.unwrap_or_default(),
            workdir: c.working_dir.unwrap_or_default(),
            user: c.user.unwrap_or_default(),
        };
        self.cache.insert(key(&digest), facts.clone());
        Ok(ImageRead { facts, requests: s.requests })
    }
}
