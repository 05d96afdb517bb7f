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

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(xff: &[&str]) -> Parts {
        let mut req = axum::http::Request::builder();
        for v in xff {
            req = req.header("x-forwarded-for", *v);
        }
        let mut parts = req.body(()).unwrap().into_parts().0;
        parts.extensions.insert(ConnectInfo("10.0.0.9:4000".parse::<SocketAddr>().unwrap()));
        parts
    }

    #[test]
    fn the_trusted_proxys_entry_counts_and_what_a_client_wrote_does_not() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(address(&parts(&["203.0.113.7"]), 1), ip("203.0.113.7"));
        // A client that sends its own header gets its forgery to the left of the proxy's entry.
        assert_eq!(address(&parts(&["1.2.3.4, 203.0.113.7"]), 1), ip("203.0.113.7"));
        assert_eq!(address(&parts(&["1.2.3.4", "203.0.113.7"]), 1), ip("203.0.113.7"));
        assert_eq!(address(&parts(&["198.51.100.1, 203.0.113.7"]), 2), ip("198.51.100.1"));
        assert_eq!(address(&parts(&[]), 1), None, "behind a proxy that added nothing");
        assert_eq!(address(&parts(&["junk"]), 1), None);
        assert_eq!(address(&parts(&["1.2.3.4"]), 0), ip("10.0.0.9"), "no trusted proxy: the peer");
    }
}
