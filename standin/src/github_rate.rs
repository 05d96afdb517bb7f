//! The GitHub API's hourly rate-limit window the stand-in plays: what the hub holds, apart from
//! the GitHub routes (`crate::github`) that read the hub.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

const WINDOW_S: u64 = 3600;

/// One hourly window shared by every caller, as for anonymous calls from one address.
#[derive(Debug, Clone)]
pub(crate) struct RateLimit {
    limit: u32,
    used: u32,
    /// Epoch seconds when the window ends.
    reset: u64,
}

/// The window as the headers and `GET /_standin/github` report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RateLimitState {
    pub rate_limit: u32,
    pub remaining: u32,
    pub used: u32,
    pub reset: u64,
}

/// `PUT /_standin/github`: starts a new window. Absent fields keep the current limit, give a full
/// window (`remaining` = the limit) and an hour to the reset.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitUpdate {
    pub rate_limit: Option<u32>,
    pub remaining: Option<u32>,
    pub reset_in_s: Option<u64>,
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl RateLimit {
    pub(crate) fn new(limit: u32) -> Self {
        RateLimit { limit, used: 0, reset: now_s() + WINDOW_S }
    }

    fn roll(&mut self) {
        let now = now_s();
        if now >= self.reset {
            self.used = 0;
            self.reset = now + WINDOW_S;
        }
    }

    pub(crate) fn state(&mut self) -> RateLimitState {
        self.roll();
        RateLimitState {
            rate_limit: self.limit,
            remaining: self.limit.saturating_sub(self.used),
            used: self.used,
            reset: self.reset,
        }
    }

    /// Counts one call; `Err` when the window is spent.
    pub(crate) fn take(&mut self) -> Result<RateLimitState, RateLimitState> {
        self.roll();
        if self.used >= self.limit {
            return Err(self.state());
        }
        self.used += 1;
        Ok(self.state())
    }

    pub(crate) fn update(&mut self, update: RateLimitUpdate) -> RateLimitState {
        self.limit = update.rate_limit.unwrap_or(self.limit);
        self.used = self.limit.saturating_sub(update.remaining.unwrap_or(self.limit).min(self.limit));
        self.reset = now_s() + update.reset_in_s.unwrap_or(WINDOW_S);
        self.state()
    }
}
