//! Name resolution, as a port: the webhooks' guarded client asks it where a receiver's host is,
//! both when a webhook is registered and when each delivery connects (a name may point elsewhere
//! by then). The real one is the system's resolver; tests give names of their own.

use std::net::IpAddr;

use async_trait::async_trait;

#[async_trait]
pub trait NameLookup: Send + Sync {
    /// Every address `host` has now.
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>>;
}

/// The system's resolver (`getaddrinfo`, through tokio).
pub struct SystemNames;

#[async_trait]
impl NameLookup for SystemNames {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        Ok(tokio::net::lookup_host((host, 0)).await?.map(|a| a.ip()).collect())
    }
}
