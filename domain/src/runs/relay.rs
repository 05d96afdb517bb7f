//! A run's relay as the arena sees it: what the views show and the follower reads.

use serde::{Deserialize, Serialize};

/// A relay's state as the arena sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum RelayState {
    /// The job never connected.
    None,
    Connected,
    /// Dropped, inside its grace period.
    Reconnecting,
    Gone,
}

impl RelayState {
    pub fn as_str(self) -> &'static str {
        match self {
            RelayState::None => "none",
            RelayState::Connected => "connected",
            RelayState::Reconnecting => "reconnecting",
            RelayState::Gone => "gone",
        }
    }

    pub fn parse(s: &str) -> RelayState {
        match s {
            "connected" => RelayState::Connected,
            "reconnecting" => RelayState::Reconnecting,
            "gone" => RelayState::Gone,
            _ => RelayState::None,
        }
    }
}
