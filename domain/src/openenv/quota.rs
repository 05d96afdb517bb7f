//! The OpenEnv track's submission quota: at most `limit` accepted submissions per account in any
//! rolling `window_s`, counted from each acceptance (`arena.toml [openenv.quota]`; the guide's
//! default is one per 24 hours). Editors and the HF accounts on the exemption list have none:
//! listed by HF's account id, which stays with the account, never by its name, which can change
//! hands.

use serde::{Deserialize, Serialize};

/// The window's bounds: a minute to 30 days.
pub const MIN_WINDOW_S: i64 = 60;
pub const MAX_WINDOW_S: i64 = 30 * 24 * 3600;
/// At most this many accepted submissions per window.
pub const MAX_LIMIT: u32 = 1000;

/// `GET /api/openenv/quota`: where one account stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = OpenEnvQuota))]
pub struct QuotaView {
    /// Accepted submissions per window.
    pub limit: u32,
    pub window_s: i64,
    /// Slots the account holds in the window now.
    pub used: u32,
    /// When its oldest held slot frees (null: it holds none).
    pub next_free_at: Option<String>,
    /// Editors and the accounts the organizers list have no quota.
    pub exempt: bool,
}

/// `[openenv.quota]` of `arena.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaPolicy {
    #[serde(default = "one")]
    pub limit: u32,
    #[serde(default = "a_day")]
    pub window_s: i64,
    /// HF account ids (whoami's `id`) with no quota (editors have none either).
    #[serde(default)]
    pub exempt: Vec<String>,
}

fn one() -> u32 {
    1
}

fn a_day() -> i64 {
    24 * 3600
}

impl Default for QuotaPolicy {
    fn default() -> Self {
        QuotaPolicy { limit: one(), window_s: a_day(), exempt: Vec::new() }
    }
}

impl QuotaPolicy {
    /// What the registry refuses: (field, reason).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !(1..=MAX_LIMIT).contains(&self.limit) {
            out.push(("openenv.quota.limit", format!("{}: must be 1 to {MAX_LIMIT}", self.limit)));
        }
        if !(MIN_WINDOW_S..=MAX_WINDOW_S).contains(&self.window_s) {
            out.push((
                "openenv.quota.window_s",
                format!("{}: must be {MIN_WINDOW_S} s to {MAX_WINDOW_S} s (30 days)", self.window_s),
            ));
        }
        for id in &self.exempt {
            let shaped = (1..=64).contains(&id.len())
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !shaped {
                out.push(("openenv.quota.exempt", format!("`{id}` is not an HF account id")));
            }
        }
        out
    }

    /// Whether the account (its HF id) submits without a quota.
    pub fn exempts(&self, account_id: &str, editor: bool) -> bool {
        editor || self.exempt.iter().any(|e| e == account_id)
    }

    /// Seconds until one of the account's held slots frees, given when each was taken; `None`
    /// when a slot is free now.
    pub fn wait_s(&self, accepted_epochs: &[i64], now: i64) -> Option<i64> {
        let held: Vec<i64> = accepted_epochs.iter().copied().filter(|t| t + self.window_s > now).collect();
        if held.len() < self.limit as usize {
            return None;
        }
        held.iter().map(|t| t + self.window_s - now).min()
    }

    /// The quota in words: "1 accepted submission per 24 hours".
    pub fn words(&self) -> String {
        let s = if self.limit == 1 { "" } else { "s" };
        format!("{} accepted submission{s} per {}", self.limit, window_words(self.window_s))
    }
}

/// A window in words: "24 hours", "7 days", "90 minutes", "61 s".
fn window_words(s: i64) -> String {
    let unit = |n: i64, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
    match s {
        s if s % 86_400 == 0 && s >= 2 * 86_400 => unit(s / 86_400, "day"),
        s if s % 3600 == 0 => unit(s / 3600, "hour"),
        s if s % 60 == 0 => unit(s / 60, "minute"),
        s => format!("{s} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_guides_one_per_day() {
        let p = QuotaPolicy::default();
        assert_eq!((p.limit, p.window_s), (1, 86_400));
        assert_eq!(p.words(), "1 accepted submission per 24 hours");
        assert!(p.problems().is_empty());
    }

    #[test]
    fn a_slot_frees_a_window_after_its_acceptance() {
        let p = QuotaPolicy::default();
        assert_eq!(p.wait_s(&[], 1000), None);
        assert_eq!(p.wait_s(&[1000], 1000), Some(86_400));
        assert_eq!(p.wait_s(&[1000], 1000 + 86_399), Some(1));
        assert_eq!(p.wait_s(&[1000], 1000 + 86_400), None);
        let three = QuotaPolicy { limit: 3, window_s: 3600, exempt: vec![] };
        assert_eq!(three.wait_s(&[0, 100], 200), None, "two of three held");
        assert_eq!(three.wait_s(&[0, 100, 200], 300), Some(3300), "the oldest frees first");
        assert_eq!(three.words(), "3 accepted submissions per 1 hour");
        assert_eq!(window_words(7 * 86_400), "7 days");
        assert_eq!(window_words(5400), "90 minutes");
        assert_eq!(window_words(61), "61 s");
    }

    #[test]
    fn out_of_range_values_and_bad_names_are_refused() {
        let p =
            QuotaPolicy { limit: 0, window_s: 59, exempt: vec!["64a1f0c2e4b0".into(), "no spaces".into()] };
        let fields: Vec<&str> = p.problems().iter().map(|(f, _)| *f).collect();
        assert_eq!(fields, ["openenv.quota.limit", "openenv.quota.window_s", "openenv.quota.exempt"]);
        let p = QuotaPolicy { limit: 1001, window_s: MAX_WINDOW_S + 1, exempt: vec![] };
        assert_eq!(p.problems().len(), 2);
        let p = QuotaPolicy { limit: 1000, window_s: MAX_WINDOW_S, exempt: vec![] };
        assert!(p.problems().is_empty());
    }

    #[test]
    fn editors_and_the_listed_accounts_are_exempt_by_id_not_name() {
        let p = QuotaPolicy { exempt: vec!["64a1f0c2e4b0".into()], ..QuotaPolicy::default() };
        assert!(p.exempts("64a1f0c2e4b0", false) && p.exempts("bob-id", true));
        assert!(!p.exempts("bob-id", false));
        assert!(!p.exempts("64A1F0C2E4B0", false), "an id is exact");
    }
}
