//! The reason an organizer gives for a control (pausing intake, releasing a cleanup, hiding a
//! board message): shown to participants and kept for audit, so it is short plain text.

use serde::Deserialize;

/// The longest reason, in characters.
pub const MAX_REASON: usize = 500;

/// A body that is only a reason: `{"reason": "…"}`.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReasonRequest {
    /// 1 to 500 characters of plain text, shown with what it explains.
    pub reason: String,
}

/// The reason trimmed, or why it is refused.
pub fn check(text: &str) -> Result<String, crate::invalid::Invalid> {
    let text = text.trim();
    if text.is_empty() {
        return Err("`reason` is empty: say why, in 1 to 500 characters".into());
    }
    if text.chars().count() > MAX_REASON {
        return Err(format!("`reason` is over {MAX_REASON} characters").into());
    }
    if text.chars().any(char::is_control) {
        return Err("`reason` holds control characters (line breaks included): one line of plain text".into());
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_one_short_line() {
        assert_eq!(check("  spam  ").unwrap(), "spam");
        assert!(check(" ").is_err());
        assert!(check(&"x".repeat(501)).is_err());
        assert!(check(&"é".repeat(500)).is_ok(), "characters, not bytes");
        assert!(check("two\nlines").is_err() && check("bell\u{7}").is_err());
    }
}
