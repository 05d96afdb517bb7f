//! A moment as the arena keeps it: the text shown and stored (RFC 3339, UTC, which sorts as it
//! reads) and the Unix seconds compared with limits, read once from the clock port so the two
//! never disagree.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timestamp {
    pub text: String,
    pub epoch: i64,
}
