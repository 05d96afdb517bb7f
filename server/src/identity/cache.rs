//! whoami answers cached by a hash of the token for a few minutes: HF rate-limits that endpoint
//! hard, and an agent sends the same token on every call. Concurrent misses for one token share a
//! single HF call. A token HF refused is remembered (by hash) for a minute, so a stream of bad
//! tokens cannot spend HF's rate limit for everyone; outages are not cached.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use domain::identity::{HubAccount, HubError, HubIdentity};
use sha2::{Digest, Sha256};

pub struct CachedHub<H> {
    inner: H,
    cache: moka::future::Cache<[u8; 32], HubAccount>,
    refused: moka::future::Cache<[u8; 32], ()>,
    lookups: AtomicU64,
    hub_calls: AtomicU64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CacheStats {
    pub lookups: u64,
    pub hub_calls: u64,
}

impl<H: HubIdentity> CachedHub<H> {
    pub fn new(inner: H, ttl: Duration) -> CachedHub<H> {
        CachedHub {
            inner,
            cache: moka::future::Cache::builder().max_capacity(100_000).time_to_live(ttl).build(),
            refused: moka::future::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(Duration::from_secs(60))
                .build(),
            lookups: AtomicU64::new(0),
            hub_calls: AtomicU64::new(0),
        }
    }

    pub async fn whoami(&self, token: &str) -> Result<HubAccount, HubError> {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if self.refused.contains_key(&key) {
            return Err(HubError::InvalidToken);
        }
        let answer = self
            .cache
            .try_get_with(key, async {
                self.hub_calls.fetch_add(1, Ordering::Relaxed);
                self.inner.whoami(token).await
            })
            .await
            .map_err(|e: Arc<HubError>| (*e).clone());
        if let Err(HubError::InvalidToken) = answer {
            self.refused.insert(key, ()).await;
        }
        answer
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            lookups: self.lookups.load(Ordering::Relaxed),
            hub_calls: self.hub_calls.load(Ordering::Relaxed),
        }
    }
}
