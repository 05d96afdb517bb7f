//! whoami answers cached by a hash of the token for a few minutes: HF rate-limits that endpoint
//! hard, and an agent sends the same token on every call. Concurrent misses for one token share a
//! single HF call and count as one miss. A token HF refused is remembered (by hash) for a minute; outages are not cached.
//!
//! A token nobody has seen costs one HF call, so those calls are capped (`MISS_LIMITS`): per
//! client address and in all, each over a sliding minute, and a few at once with a short queue.
//! Past a cap the caller gets `Throttled` (429 with `Retry-After`): a flood of made-up tokens
//! cannot get the Space rate-limited by HF, and known tokens are never affected.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use domain::identity::{HubAccount, HubError};

use crate::ports::identity::HubIdentity;
use domain::limits::{Window, Windows};
use sha2::{Digest, Sha256};

/// What tokens nobody has seen may cost, per server.
#[derive(Debug, Clone, Copy)]
pub struct MissLimits {
    /// HF calls for unseen tokens from one client address.
    pub per_client: Window,
    /// HF calls for unseen tokens from everyone.
    pub total: Window,
    /// Such calls in flight at once, and waiting for a turn.
    pub at_once: usize,
    pub waiting: usize,
}

pub const MISS_LIMITS: MissLimits = MissLimits {
    per_client: Window { cap: 10, window_ms: 60_000 },
    total: Window { cap: 120, window_ms: 60_000 },
    at_once: 4,
    waiting: 16,
};

/// Client addresses kept for the per-client window.
const MAX_CLIENTS: usize = 10_000;

pub struct CachedHub {
    inner: std::sync::Arc<dyn HubIdentity>,
    cache: moka::future::Cache<[u8; 32], HubAccount>,
    refused: moka::future::Cache<[u8; 32], ()>,
    lookups: AtomicU64,
    hub_calls: AtomicU64,
    limits: MissLimits,
    /// Unseen tokens' calls: per client (`None`: a caller without an address) and in all.
    misses: Mutex<(Windows<Option<IpAddr>>, Windows<()>)>,
    slots: tokio::sync::Semaphore,
    waiting: AtomicUsize,
    started: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CacheStats {
    pub lookups: u64,
    pub hub_calls: u64,
}

impl CachedHub {
    pub fn new(inner: std::sync::Arc<dyn HubIdentity>, ttl: Duration) -> CachedHub {
        CachedHub::with_limits(inner, ttl, MISS_LIMITS)
    }

    pub fn with_limits(
        inner: std::sync::Arc<dyn HubIdentity>,
        ttl: Duration,
        limits: MissLimits,
    ) -> CachedHub {
        CachedHub {
            inner,
            cache: moka::future::Cache::builder().max_capacity(100_000).time_to_live(ttl).build(),
            refused: moka::future::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(Duration::from_secs(60))
                .build(),
            lookups: AtomicU64::new(0),
            hub_calls: AtomicU64::new(0),
            limits,
            misses: Mutex::new((Windows::new(limits.per_client, MAX_CLIENTS), Windows::new(limits.total, 1))),
            slots: tokio::sync::Semaphore::new(limits.at_once.max(1)),
            waiting: AtomicUsize::new(0),
            started: Instant::now(),
        }
    }

    /// Who `token` is, asking HF only for a token not seen lately, within the miss limits of the
    /// `client` address.
    pub async fn whoami(&self, token: &str, client: Option<IpAddr>) -> Result<HubAccount, HubError> {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if self.refused.contains_key(&key) {
            return Err(HubError::InvalidToken);
        }
        if let Some(known) = self.cache.get(&key).await {
            return Ok(known);
        }
        // Only the first of concurrent lookups for one token runs this: the others wait for its
        // answer, so one client's parallel requests with a new token cost one miss and one call.
        let answer = self
            .cache
            .try_get_with(key, async {
                self.admit_miss(client)?;
                let _slot = self.miss_slot().await?;
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

    /// Counts one unseen token's call against the client's window and the total, or refuses.
    fn admit_miss(&self, client: Option<IpAddr>) -> Result<(), HubError> {
        let now = self.started.elapsed().as_millis() as u64;
        let mut misses = self.misses.lock().unwrap_or_else(|p| p.into_inner());
        let (clients, total) = &mut *misses;
        let refuse = |who: &str, wait_ms: u64| HubError::Throttled {
            reason: format!("{who} sent too many tokens the arena has not seen"),
            retry_after_s: wait_ms.div_ceil(1000).max(1),
        };
        clients.check(&client, now).map_err(|w| refuse("this address", w))?;
        total.check(&(), now).map_err(|w| refuse("everyone together", w))?;
        clients.record(&client, now);
        total.record(&(), now);
        Ok(())
    }

    /// A turn to ask HF: a few at once, a short queue behind them.
    async fn miss_slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>, HubError> {
        if let Ok(slot) = self.slots.try_acquire() {
            return Ok(slot);
        }
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let waiting = Waiting(&self.waiting);
        let busy =
            || HubError::Throttled { reason: "too many identity checks at once".into(), retry_after_s: 1 };
        if waiting.0.fetch_add(1, Ordering::SeqCst) >= self.limits.waiting {
            return Err(busy());
        }
        let slot = self.slots.acquire().await.map_err(|_| busy());
        drop(waiting);
        slot
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            lookups: self.lookups.load(Ordering::Relaxed),
            hub_calls: self.hub_calls.load(Ordering::Relaxed),
        }
    }
}
