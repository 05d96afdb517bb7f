//! The one client that calls an address a participant gave (a webhook's receiver). It calls
//! `https` only (plain `http` to loopback only when `ARENA_WEBHOOKS_ALLOW_LOOPBACK` is on, as
//! `dev/run` sets it for a local trial), never an address the arena must not be made to reach
//! (`domain::webhooks::address_refusal`: loopback, private, link-local, unique-local, metadata…),
//! checked when a webhook is registered and again when each delivery connects (the name is
//! resolved anew, and every address it has must be allowed), follows no redirect, takes no proxy
//! from the environment, sends no cookie, and is bounded in time and in what it reads.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use domain::webhooks::{address_refusal, MAX_ANSWER_BYTES, MAX_URL, TIMEOUT_S};

use crate::ports::names::NameLookup;

/// Why an address will not be called, in words a participant can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// What a receiver answered: its status, or why there was no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answered {
    Status(u16),
    NoAnswer(String),
}

pub struct Guarded {
    names: Arc<dyn NameLookup>,
    loopback_allowed: bool,
    client: reqwest::Client,
}

impl Guarded {
    pub fn new(names: Arc<dyn NameLookup>, loopback_allowed: bool) -> Guarded {
        let resolver = Arc::new(CheckedNames { names: names.clone(), loopback_allowed });
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(TIMEOUT_S))
            .user_agent(concat!("open-env-arena-webhooks/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(resolver)
            .build()
            .expect("a TLS backend is compiled in");
        Guarded { names, loopback_allowed, client }
    }

    /// The receiver's URL as it will be called, or why it will not be: its scheme and shape, and
    /// every address its host has now.
    pub async fn check(&self, raw: &str) -> Result<url::Url, Refused> {
        let url = self.shape(raw)?;
        let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']).to_string();
        let addresses = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => self
                .names
                .lookup(&host)
                .await
                .map_err(|e| Refused(format!("`{host}` does not resolve ({e})")))?,
        };
        allowed(&host, &addresses, self.loopback_allowed)?;
        Ok(url)
    }

    fn shape(&self, raw: &str) -> Result<url::Url, Refused> {
        if raw.len() > MAX_URL {
            return Err(Refused(format!("the URL is over {MAX_URL} characters")));
        }
        let url = url::Url::parse(raw).map_err(|e| Refused(format!("not a URL: {e}")))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refused("a URL with credentials in it".into()));
        }
        let host = url.host_str().ok_or_else(|| Refused("a URL without a host".into()))?;
        match url.scheme() {
            "https" => {}
            "http" if self.loopback_allowed && is_loopback_name(host) => {}
            "http" => return Err(Refused("plain http: a webhook's URL is https".into())),
            other => return Err(Refused(format!("`{other}:`: a webhook's URL is https"))),
        }
        Ok(url)
    }

    /// POSTs one delivery; the address is checked again as it connects (`CheckedNames`).
    pub async fn post(&self, url: &str, headers: &[(&str, String)], body: Vec<u8>) -> Answered {
        let url = match self.shape(url) {
            Ok(url) => url,
            Err(why) => return Answered::NoAnswer(why.0),
        };
        // An IP literal is not resolved by the client: it is checked here.
        if let Ok(ip) = url.host_str().unwrap_or_default().trim_matches(['[', ']']).parse::<IpAddr>() {
            if let Err(why) = allowed(&ip.to_string(), &[ip], self.loopback_allowed) {
                return Answered::NoAnswer(why.0);
            }
        }
        let mut request = self.client.post(url).header(reqwest::header::CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        match request.body(body).send().await {
            Ok(mut answer) => {
                let status = answer.status().as_u16();
                // Read a little of the answer, so that the connection ends cleanly; the rest is not
                // wanted.
                let mut read = 0;
                while let Ok(Some(chunk)) = answer.chunk().await {
                    read += chunk.len();
                    if read > MAX_ANSWER_BYTES {
                        break;
                    }
                }
                Answered::Status(status)
            }
            Err(e) => Answered::NoAnswer(words(&e)),
        }
    }
}

/// Why a request failed, without its URL (which the participant knows) or internals.
fn words(e: &reqwest::Error) -> String {
    use std::error::Error;
    let mut why = if e.is_timeout() {
        format!("no answer within {TIMEOUT_S} s")
    } else if e.is_connect() {
        "the connection failed".to_string()
    } else {
        "the request failed".to_string()
    };
    // The refusal of an address says why (its source is ours: `Refused`).
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(refused) = s.downcast_ref::<Refused>() {
            why = format!("refused: {refused}");
            break;
        }
        source = s.source();
    }
    why
}

fn is_loopback_name(host: &str) -> bool {
    let host = host.trim_matches(['[', ']']);
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn allowed(host: &str, addresses: &[IpAddr], loopback_allowed: bool) -> Result<(), Refused> {
    if addresses.is_empty() {
        return Err(Refused(format!("`{host}` has no address")));
    }
    for ip in addresses {
        if let Some(why) = address_refusal(*ip, loopback_allowed) {
            // The rule, never the address: what a name resolves to inside the arena's network
            // is not the participant's to learn.
            return Err(Refused(format!("`{host}` resolves to {why}: the arena does not call it")));
        }
    }
    Ok(())
}

/// The client's resolver: the port's answer, refused whole when any address is not allowed.
struct CheckedNames {
    names: Arc<dyn NameLookup>,
    loopback_allowed: bool,
}

impl reqwest::dns::Resolve for CheckedNames {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let (names, loopback_allowed) = (self.names.clone(), self.loopback_allowed);
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addresses = names.lookup(&host).await?;
            allowed(&host, &addresses, loopback_allowed)
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            let at: Vec<SocketAddr> = addresses.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect();
            Ok(Box::new(at.into_iter()) as reqwest::dns::Addrs)
        })
    }
}
