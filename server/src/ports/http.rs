//! The one HTTP client setup every adapter uses: no redirects (a token never follows one to
//! another host), bounded connect and total time, and the arena's user agent.

use std::time::Duration;

pub fn client(timeout: Duration) -> reqwest::Client {
    builder(timeout).build().expect("a TLS backend is compiled in")
}

fn builder(timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .timeout(timeout)
        .user_agent(concat!("open-env-arena/", env!("CARGO_PKG_VERSION")))
}

/// `Retry-After` in seconds, when the answer has one.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()
}

/// Names under `localhost` resolve to the loopback address (RFC 6761 §6.3), whatever the
/// system resolver says of them; every other name goes to the system resolver. A sandbox's
/// exposed URL names its port in its host (`{job}--{port}.hf.jobs`); the HF stand-in's sandboxes
/// are at `{job}--{port}.localhost`, which glibc does not resolve by itself.
pub async fn resolve(host: &str, port: u16) -> std::io::Result<Vec<std::net::SocketAddr>> {
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return Ok(vec![std::net::SocketAddr::from(([127, 0, 0, 1], port))]);
    }
    Ok(tokio::net::lookup_host((host, port)).await?.collect())
}

struct LoopbackNames;

impl reqwest::dns::Resolve for LoopbackNames {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs = resolve(&host, 0).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The client for a sandbox's exposed URL: [`client`] (no redirects, no cookie store), with no
/// proxy taken from the environment (a proxy would see the reader's token) and `localhost` names
/// as [`resolve`] reads them.
pub fn sandbox_client(timeout: Duration) -> reqwest::Client {
    builder(timeout)
        .no_proxy()
        .dns_resolver(std::sync::Arc::new(LoopbackNames))
        .build()
        .expect("a TLS backend is compiled in")
}
