//! The address a request came from, for limits per client. Behind `hops` trusted proxies (HF's
//! Space proxy is one) it is the `X-Forwarded-For` entry that the outermost of them added, counted
//! from the right, since a client can write any entries it likes to the left of those; with no
//! trusted proxy it is the connection's peer.

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::request::Parts;

pub fn address(parts: &Parts, hops: usize) -> Option<IpAddr> {
    if hops == 0 {
        return parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    }
    // Every header line counts, in order, as one list.
    let entries: Vec<&str> = parts
        .headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    let entry = entries.len().checked_sub(hops).and_then(|i| entries.get(i))?;
    entry.parse().ok().or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
}
