//! Who a request is from, once HF named them: what the features key ownership and roles by.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    Token,
    Session,
}

/// A caller whose HF identity is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// HF's stable account id: what ownership is keyed by.
    pub id: String,
    /// The HF user name, for display and filters.
    pub name: String,
    pub fullname: String,
    pub editor: bool,
    pub via: Via,
}
