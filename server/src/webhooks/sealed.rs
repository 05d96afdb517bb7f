//! Webhook secrets at rest: sealed with XChaCha20-Poly1305 under `ARENA_WEBHOOK_KEY`, a Space
//! secret that is never in the database, so neither the database nor a backup snapshot of it holds
//! a secret a receiver trusts. A stored secret is `v1:` and the base64 of a random 24-byte nonce
//! followed by the ciphertext; the webhook's id is the associated data, so a sealed secret copied
//! onto another webhook does not open.

use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

const PREFIX: &str = "v1:";
const NONCE: usize = 24;

/// The key, from 64 hex digits.
pub struct SealKey(XChaCha20Poly1305);

impl SealKey {
    pub fn from_hex(hex_key: &str) -> anyhow::Result<SealKey> {
        let bytes = hex::decode(hex_key.trim()).ok().filter(|b| b.len() == 32).ok_or_else(|| {
            anyhow::anyhow!("ARENA_WEBHOOK_KEY must be 64 hex digits (32 bytes: `openssl rand -hex 32`)")
        })?;
        Ok(SealKey(XChaCha20Poly1305::new_from_slice(&bytes).expect("a 32-byte key")))
    }

    /// `secret` sealed for the webhook `id`.
    pub fn seal(&self, id: &str, secret: &str) -> String {
        let mut nonce = [0u8; NONCE];
        getrandom::fill(&mut nonce).expect("the OS has randomness");
        let sealed = self
            .0
            .encrypt(XNonce::from_slice(&nonce), Payload { msg: secret.as_bytes(), aad: id.as_bytes() })
            .expect("sealing a short secret cannot fail");
        let mut out = nonce.to_vec();
        out.extend(sealed);
        format!("{PREFIX}{}", base64::engine::general_purpose::STANDARD.encode(out))
    }

    /// The secret of webhook `id` as stored; None when it is not one this key sealed for it.
    pub fn open(&self, id: &str, stored: &str) -> Option<String> {
        let raw = base64::engine::general_purpose::STANDARD.decode(stored.strip_prefix(PREFIX)?).ok()?;
        let (nonce, sealed) = raw.split_at_checked(NONCE)?;
        let plain =
            self.0.decrypt(XNonce::from_slice(nonce), Payload { msg: sealed, aad: id.as_bytes() }).ok()?;
        String::from_utf8(plain).ok()
    }
}

/// Whether a stored secret is sealed (a webhook registered before sealing holds it in clear).
pub fn is_sealed(stored: &str) -> bool {
    stored.starts_with(PREFIX)
}

/// At start: webhooks exist only with a key that opens their secrets, and any secret still in
/// clear (stored before this version) is sealed in place. Without the key and without webhooks,
/// registering one is refused (`WEBHOOKS_NOT_CONFIGURED`) until it is set.
pub async fn check_at_start(db: &crate::db::Db, key: Option<&SealKey>) -> anyhow::Result<()> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT id, secret FROM webhooks").fetch_all(&db.pool).await?;
    let Some(key) = key else {
        if rows.is_empty() {
            return Ok(());
        }
        anyhow::bail!(
            "{} webhook(s) are registered and ARENA_WEBHOOK_KEY is not set: their secrets are sealed with it (set \
             it as a Space secret, the same key as before); not starting",
            rows.len()
        );
    };
    for (id, stored) in rows {
        if !is_sealed(&stored) {
            sqlx::query("UPDATE webhooks SET secret = $2 WHERE id = $1 AND secret = $3")
                .bind(&id)
                .bind(key.seal(&id, &stored))
                .bind(&stored)
                .execute(&db.writer)
                .await?;
        } else if key.open(&id, &stored).is_none() {
            anyhow::bail!(
                "ARENA_WEBHOOK_KEY does not open the secret of webhook {id}: it is not the key they were sealed \
                 with; not starting"
            );
        }
    }
    Ok(())
}
