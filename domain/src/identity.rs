//! Who is calling: a Hugging Face account as HF's whoami (or OAuth userinfo) describes it.

use serde::{Deserialize, Serialize};

/// A membership as HF reports it: the organization and the caller's role in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgRole {
    pub org: String,
    /// `read`, `contributor`, `write` or `admin`; absent when HF does not say.
    pub role: Option<String>,
}

/// A Hugging Face account, as the arena learned it from HF.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubAccount {
    /// HF's stable id for the account. Names can change hands; this cannot.
    pub id: String,
    pub name: String,
    pub fullname: String,
    pub orgs: Vec<OrgRole>,
}

impl HubAccount {
    /// Editors are members of the editor organization with the write or admin role.
    pub fn is_editor(&self, editor_org: &str) -> bool {
        self.orgs.iter().any(|o| o.org == editor_org && matches!(o.role.as_deref(), Some("write" | "admin")))
    }
}

/// Why HF could not say who a token belongs to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    /// HF answered that the credential is not valid.
    #[error("Hugging Face does not accept this token")]
    InvalidToken,
    /// HF was unreachable, slow, failing or rate-limiting: nothing can be decided now.
    #[error("Hugging Face is unavailable: {reason}")]
    Unavailable { reason: String, retry_after_s: Option<u64> },
    /// The arena would not ask HF now: too many tokens it has not seen, from this client or in all.
    #[error("too many unknown tokens: {reason}")]
    Throttled { reason: String, retry_after_s: u64 },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(orgs: &[(&str, Option<&str>)]) -> HubAccount {
        HubAccount {
            id: "user-a".into(),
            name: "a".into(),
            fullname: "A".into(),
            orgs: orgs
                .iter()
                .map(|(o, r)| OrgRole { org: o.to_string(), role: r.map(String::from) })
                .collect(),
        }
    }

    #[test]
    fn editors_hold_write_or_admin_in_the_editor_org() {
        assert!(account(&[("benchflow", Some("write"))]).is_editor("benchflow"));
        assert!(account(&[("benchflow", Some("admin"))]).is_editor("benchflow"));
        assert!(!account(&[("benchflow", Some("read"))]).is_editor("benchflow"));
        assert!(!account(&[("benchflow", Some("contributor"))]).is_editor("benchflow"));
        assert!(!account(&[("benchflow", None)]).is_editor("benchflow"));
        assert!(!account(&[("other", Some("admin"))]).is_editor("benchflow"));
        assert!(!account(&[]).is_editor("benchflow"));
    }
}
