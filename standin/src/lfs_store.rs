//! The LFS objects the stand-in stores, beside its repositories (`lfs/objects/{oid}`): what the
//! hub holds, apart from the LFS routes (`crate::lfs`) that read the hub.

use std::path::PathBuf;

use axum::http::StatusCode;
use sha2::{Digest, Sha256};

use crate::lfs_pointer::is_oid;

/// The stored objects.
pub struct Store {
    pub(crate) dir: PathBuf,
}

impl Store {
    pub fn new(root: PathBuf) -> Store {
        Store { dir: root.join("lfs") }
    }

    pub(crate) fn object(&self, oid: &str) -> PathBuf {
        self.dir.join("objects").join(oid)
    }

    /// The stored object's size, if it is stored.
    pub fn size(&self, oid: &str) -> Option<u64> {
        is_oid(oid).then(|| std::fs::metadata(self.object(oid)).ok().map(|m| m.len())).flatten()
    }

    pub fn read(&self, oid: &str) -> Option<Vec<u8>> {
        is_oid(oid).then(|| std::fs::read(self.object(oid)).ok()).flatten()
    }

    /// Stores bytes as `oid` when they hash to it.
    pub(crate) fn put(&self, oid: &str, bytes: &[u8]) -> Result<(), PutError> {
        if !is_oid(oid) || hex::encode(Sha256::digest(bytes)) != oid {
            return Err(PutError::NotItsHash(oid.to_string()));
        }
        let path = self.object(oid);
        std::fs::create_dir_all(path.parent().expect("objects/"))?;
        let partial = path.with_extension("partial");
        std::fs::write(&partial, bytes)?;
        Ok(std::fs::rename(&partial, &path)?)
    }

    pub(crate) fn part(&self, oid: &str, n: u32) -> PathBuf {
        self.dir.join("parts").join(oid).join(n.to_string())
    }
}

/// Why an object was not stored: the client's bytes (400) or the stand-in's disk (500).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PutError {
    #[error("the bytes do not hash to {0}")]
    NotItsHash(String),
    #[error("storing the object: {0}")]
    Disk(#[from] std::io::Error),
}

impl PutError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            PutError::NotItsHash(_) => StatusCode::BAD_REQUEST,
            PutError::Disk(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}
