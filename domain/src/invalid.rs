//! The refusal of a check whose callers only report it: which rule the input breaks, in words
//! for whoever sent it. The caller pairs it with the code its route names (`INVALID_REASON`,
//! `SCHEMA_INVALID`, …); checks whose callers branch on the cause return an enum of their own.

/// An input breaks a rule; the message says which, and how to mend it where it can.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl Invalid {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// Whether the message says `part` (tests and callers matching a known phrase).
    pub fn contains(&self, part: &str) -> bool {
        self.0.contains(part)
    }
}

impl From<String> for Invalid {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for Invalid {
    fn from(message: &str) -> Self {
        Self(message.to_string())
    }
}

/// The message, for an API error body or an event's text.
impl From<Invalid> for String {
    fn from(invalid: Invalid) -> Self {
        invalid.0
    }
}
