//! Image references: Docker's grammar, limited to Docker Hub and GHCR. Docker's shorthand expands
//! as `docker pull` does (`name` → `docker.io/library/name:latest`); URLs, credentials and other
//! registries are refused, and a Space or dataset address is the retired submission form.

use serde::{Deserialize, Serialize};

use super::refusal::Refusal;
use crate::error::ErrorCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegistryHost {
    /// `docker.io` (its API host is `registry-1.docker.io`).
    Docker,
    /// `ghcr.io`.
    Ghcr,
}

impl RegistryHost {
    pub fn name(self) -> &'static str {
        match self {
            RegistryHost::Docker => "docker.io",
            RegistryHost::Ghcr => "ghcr.io",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Reference {
    Tag(String),
    /// `sha256:` and 64 hex digits.
    Digest(String),
}

/// A parsed image reference.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ImageRef {
    pub registry: RegistryHost,
    /// `owner/name` (`library/name` for Docker's official images).
    pub repository: String,
    pub reference: Reference,
}

fn invalid<T>(raw: &str, why: &str) -> Result<T, Refusal> {
    Err(Refusal {
        code: ErrorCode::ImageReferenceInvalid,
        message: format!("`{raw}` is not an image reference: {why}"),
    })
}

fn retired<T>(raw: &str) -> Result<T, Refusal> {
    Err(Refusal {
        code: ErrorCode::SubmissionFormatRetired,
        message: format!("`{raw}` names a Space or a dataset; that form is retired: build the environment into an image, publish it on Docker Hub or GHCR, and submit its reference"),
    })
}

/// A path component: lower-case letters and digits, single separators (`.`, `_`, `__`, `-`s) inside.
fn component_ok(c: &str) -> bool {
    let b = c.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_lowercase() | b[0].is_ascii_digit()
        && b[b.len() - 1].is_ascii_lowercase() | b[b.len() - 1].is_ascii_digit()
        && b.iter().all(|x| x.is_ascii_lowercase() || x.is_ascii_digit() || matches!(x, b'.' | b'_' | b'-'))
        && !c.contains("..")
        && !c.contains("___")
}

fn tag_ok(t: &str) -> bool {
    (1..=128).contains(&t.len())
        && (t.as_bytes()[0].is_ascii_alphanumeric() || t.as_bytes()[0] == b'_')
        && t.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn digest_ok(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

impl ImageRef {
    pub fn parse(raw: &str) -> Result<ImageRef, Refusal> {
        let s = raw.trim();
        let lower = s.to_ascii_lowercase();
        let hub = ["huggingface.co/", "hf.co/", "spaces/", "datasets/", "hf://"];
        if hub.iter().any(|h| lower.contains(h))
            || lower.ends_with(".hf.space")
            || lower.contains(".hf.space/")
        {
            return retired(raw);
        }
        if s.is_empty() || s.len() > 512 || s.contains(char::is_whitespace) {
            return invalid(raw, "empty, too long, or with spaces");
        }
        if s.contains("://") {
            return invalid(raw, "a URL; give the reference as `ghcr.io/owner/name:tag`");
        }
        let (rest, digest) = match s.split_once('@') {
            Some((name, d)) if digest_ok(d) => (name, Some(d.to_string())),
            Some(_) => {
                return invalid(raw, "credentials or a malformed digest; references carry no credentials")
            }
            None => (s, None),
        };
        let (host, path) = match rest.split_once('/') {
            Some((first, path)) if first.contains('.') || first.contains(':') || first == "localhost" => {
                (Some(first.to_ascii_lowercase()), path)
            }
            _ => (None, rest),
        };
        let registry = match host.as_deref() {
            None | Some("docker.io" | "index.docker.io" | "registry-1.docker.io") => RegistryHost::Docker,
            Some("ghcr.io") => RegistryHost::Ghcr,
            Some(other) => {
                return Err(Refusal {
                    code: ErrorCode::ImageRegistryUnsupported,
                    message: format!("`{raw}` is on `{other}`; the arena reads images from Docker Hub (docker.io) and GHCR (ghcr.io) only"),
                })
            }
        };
        // The tag follows the last `:` of the last component.
        let (name, tag) = match path.rsplit_once(':') {
            Some((name, tag)) if !tag.contains('/') => (name, Some(tag)),
            _ => (path, None),
        };
        if let Some(t) = tag.filter(|t| !tag_ok(t)) {
            return invalid(raw, &format!("the tag `{t}` is not a tag"));
        }
        let components: Vec<&str> = name.split('/').collect();
        if let Some(c) = components.iter().find(|c| !component_ok(c)) {
            return invalid(raw, &format!("`{c}` is not a lower-case name component"));
        }
        let repository = match (registry, components.len()) {
            (RegistryHost::Docker, 1) => format!("library/{name}"),
            (RegistryHost::Ghcr, 1) => return invalid(raw, "a GHCR image is `ghcr.io/owner/name`"),
            _ => name.to_string(),
        };
        let reference = match (digest, tag) {
            (Some(d), _) => Reference::Digest(d),
            (None, Some(t)) => Reference::Tag(t.to_string()),
            (None, None) => Reference::Tag("latest".into()),
        };
        Ok(ImageRef { registry, repository, reference })
    }

    /// The full reference, `docker.io/library/name:latest` or `ghcr.io/o/n@sha256:…`.
    pub fn canonical(&self) -> String {
        let base = format!("{}/{}", self.registry.name(), self.repository);
        match &self.reference {
            Reference::Tag(t) => format!("{base}:{t}"),
            Reference::Digest(d) => format!("{base}@{d}"),
        }
    }

    /// The reference pinned to a digest.
    pub fn pinned(&self, digest: &str) -> String {
        format!("{}/{}@{digest}", self.registry.name(), self.repository)
    }

    /// The tag or digest to ask the registry for.
    pub fn reference_str(&self) -> &str {
        match &self.reference {
            Reference::Tag(t) | Reference::Digest(t) => t,
        }
    }
}
