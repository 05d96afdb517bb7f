//! The arena's signatures: HMAC-SHA-256 with its backup key (`ARENA_BACKUP_KEY`, a Space secret)
//! over what it believes later only when it wrote it itself: its backup snapshots and the origins
//! of its runs. Anyone who can write the backup dataset, or start a job, can write a file; only
//! the arena can sign one.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::config::Secret;

/// The shortest key accepted: 32 characters (`openssl rand -hex 32` gives 64).
pub const MIN_KEY_CHARS: usize = 32;

#[derive(Clone)]
pub struct SigningKey(Vec<u8>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey([redacted])")
    }
}

/// A secret too short to sign with.
#[derive(Debug, thiserror::Error)]
#[error("ARENA_BACKUP_KEY must be at least {} characters (`openssl rand -hex 32` makes one)", MIN_KEY_CHARS)]
pub struct ShortKey;

impl SigningKey {
    /// The key from its secret, or why it is not one.
    pub fn new(secret: &Secret) -> Result<SigningKey, ShortKey> {
        let key = secret.0.trim();
        if key.chars().count() < MIN_KEY_CHARS {
            return Err(ShortKey);
        }
        Ok(SigningKey(key.as_bytes().to_vec()))
    }

    fn mac(&self, parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        for part in parts {
            mac.update(part);
        }
        mac
    }

    /// The signature of the concatenated parts, lower-case hex.
    pub fn sign(&self, parts: &[&[u8]]) -> String {
        hex::encode(self.mac(parts).finalize().into_bytes())
    }

    /// Whether `signature` (hex) is this key's signature of the parts; compared in constant time.
    pub fn verify(&self, parts: &[&[u8]], signature: &str) -> bool {
        match hex::decode(signature) {
            Ok(bytes) => self.mac(parts).verify_slice(&bytes).is_ok(),
            Err(_) => false,
        }
    }
}
