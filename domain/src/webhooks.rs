//! Webhooks: an account's receivers for what ended (`crate::endings`). The rules here are pure:
//! which events and formats there are, which addresses a receiver may never be (the arena must
//! not be made to call its own network), how a delivery is retried, and the sentence the chat
//! formats post. The server registers, signs and sends them (`server::webhooks`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

/// Webhooks one account may keep.
pub const MAX_PER_ACCOUNT: usize = 5;
/// The longest URL a webhook may have.
pub const MAX_URL: usize = 2048;
/// How long one delivery may take (connect, send, read the answer), in seconds.
pub const TIMEOUT_S: u64 = 10;
/// How much of a receiver's answer is read (the rest is not needed).
pub const MAX_ANSWER_BYTES: usize = 16 << 10;
/// Redeliveries an account may ask of one webhook per window, and the window (seconds): past
/// them, 429 with `Retry-After`. A delivery's own tries stay bounded by `retry_after_s`.
pub const REDELIVERIES_PER_WINDOW: i64 = 10;
pub const REDELIVERY_WINDOW_S: i64 = 3600;

/// What a webhook can be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Event {
    /// A run of either track ended (`scored`, `completed`, `failed`, `canceled`/`cancelled`).
    #[serde(rename = "run.ended")]
    RunEnded,
    /// An OpenEnv submission's admission decided it (`validated` or `rejected`).
    #[serde(rename = "submission.decided")]
    SubmissionDecided,
    /// An editor reviewed a collected result (accepted or rejected).
    #[serde(rename = "result.verified")]
    ResultVerified,
}

impl Event {
    pub const ALL: [Event; 3] = [Event::RunEnded, Event::SubmissionDecided, Event::ResultVerified];

    pub fn as_str(self) -> &'static str {
        match self {
            Event::RunEnded => "run.ended",
            Event::SubmissionDecided => "submission.decided",
            Event::ResultVerified => "result.verified",
        }
    }

    pub fn parse(s: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

/// How a delivery's body is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// The event as JSON, signed (`X-Arena-Signature`).
    #[default]
    Json,
    /// Slack's incoming-webhook body: `{"text": …}`.
    Slack,
    /// Discord's: `{"content": …}`.
    Discord,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Slack => "slack",
            Format::Discord => "discord",
        }
    }

    pub fn parse(s: &str) -> Option<Format> {
        [Format::Json, Format::Slack, Format::Discord].into_iter().find(|f| f.as_str() == s)
    }

    /// The body for this format: the event itself, or the chat service's message.
    pub fn body(self, event: &serde_json::Value, sentence: &str) -> serde_json::Value {
        match self {
            Format::Json => event.clone(),
            Format::Slack => serde_json::json!({"text": sentence}),
            Format::Discord => serde_json::json!({"content": sentence}),
        }
    }
}

/// Why a receiver's address is one the arena never calls (`None`: it may): anything but a global
/// unicast address: loopback, private (RFC 1918), shared (100.64/10), link-local (the cloud
/// metadata address 169.254.169.254 among them), unique-local (fc00::/7, AWS's fd00:ec2::254),
/// unspecified, broadcast, multicast, documentation and reserved ranges, and IPv4 addresses
/// written as IPv6. `loopback_allowed` lets loopback through (a local trial of `dev/run`).
pub fn address_refusal(ip: IpAddr, loopback_allowed: bool) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_refusal(v4, loopback_allowed),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return v4_refusal(v4, loopback_allowed).or(Some("an IPv4 address written as IPv6"));
            }
            let first = v6.segments()[0];
            if v6.is_loopback() {
                (!loopback_allowed).then_some("a loopback address")
            } else if v6.is_unspecified() {
                Some("the unspecified address")
            } else if first & 0xfe00 == 0xfc00 {
                Some("a unique-local address")
            } else if first & 0xffc0 == 0xfe80 {
                Some("a link-local address")
            } else if v6.is_multicast() {
                Some("a multicast address")
            } else if first == 0x2001 && v6.segments()[1] == 0x0db8 {
                Some("a documentation address")
            } else if first & 0xe000 != 0x2000 {
                // Only 2000::/3 is global unicast (NAT64, 6to4 relays and the rest embed other ranges).
                Some("not a global unicast address")
            } else if first == 0x2002 || (first == 0x2001 && v6.segments()[1] == 0) {
                Some("an IPv4 address tunnelled in IPv6")
            } else {
                None
            }
        }
    }
}

fn v4_refusal(v4: Ipv4Addr, loopback_allowed: bool) -> Option<&'static str> {
    let [a, b, ..] = v4.octets();
    if v4.is_loopback() {
        (!loopback_allowed).then_some("a loopback address")
    } else if v4.is_private() {
        Some("a private address")
    } else if v4.is_link_local() {
        Some("a link-local address (the cloud metadata address among them)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a shared (carrier-grade NAT) address")
    } else if v4.is_unspecified() || a == 0 {
        Some("the unspecified address")
    } else if v4.is_broadcast() || v4.is_multicast() || a >= 240 {
        Some("a broadcast, multicast or reserved address")
    } else if v4.is_documentation() || (a == 198 && (18..20).contains(&b)) || (a == 192 && b == 0) {
        Some("a documentation, benchmarking or protocol address")
    } else {
        None
    }
}

/// When a failed delivery is tried again: seconds after its `attempts`-th try, or `None` when its
/// time is up (nine tries over about eight hours).
pub fn retry_after_s(attempts: u32) -> Option<i64> {
    const DELAYS: [i64; 8] = [10, 30, 120, 600, 1800, 3600, 7200, 14400];
    DELAYS.get(attempts.saturating_sub(1) as usize).copied()
}

/// The IPv6 form of the cloud metadata address (AWS's), named for the tests and the guide.
pub const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_global_unicast_addresses_are_called() {
        let refused = [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "240.0.0.1",
            "192.0.2.1",
            "198.18.0.1",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "2001:db8::1",
            "2002:7f00:1::",
            "64:ff9b::7f00:1",
        ];
        for ip in refused {
            assert!(address_refusal(ip.parse().unwrap(), false).is_some(), "{ip}");
        }
        assert!(address_refusal(IpAddr::V6(METADATA_V6), false).is_some());
        for ip in ["1.1.1.1", "52.1.2.3", "2606:4700:4700::1111", "2a00:1450:4001::1"] {
            assert_eq!(address_refusal(ip.parse().unwrap(), false), None, "{ip}");
        }
        // A local trial lets loopback through, and nothing else.
        assert_eq!(address_refusal("127.0.0.1".parse().unwrap(), true), None);
        assert_eq!(address_refusal("::1".parse().unwrap(), true), None);
        assert!(address_refusal("10.0.0.1".parse().unwrap(), true).is_some());
    }

    #[test]
    fn deliveries_back_off_for_a_bounded_time_and_formats_are_known() {
        let delays: Vec<i64> = (1..=9).filter_map(retry_after_s).collect();
        assert!(delays.windows(2).all(|w| w[0] < w[1]), "{delays:?}");
        assert!(delays.iter().sum::<i64>() < 8 * 3600 && retry_after_s(9).is_none());
        assert_eq!(Event::parse("run.ended"), Some(Event::RunEnded));
        assert_eq!(Format::parse("slack"), Some(Format::Slack));
        let body = Format::Discord.body(&serde_json::json!({"x": 1}), "Run ended.");
        assert_eq!(body, serde_json::json!({"content": "Run ended."}));
    }
}
