//! Agent identities: ids owned by the HF user who registered them, immutable once registered.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A valid agent id: 2–48 lowercase letters, digits or hyphens, starting with a letter or digit,
/// never `human-…` (reserved).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct AgentId(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentIdError {
    #[error("an agent id has 2 to 48 characters; `{0}` has {1}")]
    Length(String, usize),
    #[error("an agent id holds lowercase letters, digits and hyphens only: `{0}`")]
    Characters(String),
    #[error("an agent id starts with a letter or a digit: `{0}`")]
    Start(String),
    #[error("agent ids starting with `human-` are reserved: `{0}`")]
    Reserved(String),
}

impl AgentId {
    pub fn parse(raw: &str) -> Result<AgentId, AgentIdError> {
        let len = raw.chars().count();
        if !(2..=48).contains(&len) {
            return Err(AgentIdError::Length(raw.into(), len));
        }
        if !raw.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            return Err(AgentIdError::Characters(raw.into()));
        }
        if !raw.as_bytes()[0].is_ascii_alphanumeric() {
            return Err(AgentIdError::Start(raw.into()));
        }
        if raw.starts_with("human-") {
            return Err(AgentIdError::Reserved(raw.into()));
        }
        Ok(AgentId(raw.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The body of `register-agent`.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegisterAgentRequest {
    /// Lowercase letters, digits and hyphens; `human-…` is reserved.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 2, max_length = 48, pattern = r"^[a-z0-9][a-z0-9-]+$")
    )]
    pub agent_id: String,
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 500, pattern = r"\S"))]
    pub description: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 100))]
    pub model: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 100))]
    pub harness: Option<String>,
}

/// A registration that passed every rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRegistration {
    pub agent_id: AgentId,
    pub description: String,
    pub model: Option<String>,
    pub harness: Option<String>,
}

pub const MAX_DESCRIPTION: usize = 500;
pub const MAX_RUNTIME_FIELD: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    #[error(transparent)]
    AgentId(#[from] AgentIdError),
    #[error("`description` must hold 1 to {MAX_DESCRIPTION} characters")]
    Description,
    #[error("`{0}` holds at most {MAX_RUNTIME_FIELD} characters")]
    TooLong(&'static str),
}

impl AgentRegistration {
    pub fn parse(req: RegisterAgentRequest) -> Result<AgentRegistration, RegistrationError> {
        let agent_id = AgentId::parse(&req.agent_id)?;
        let description = req.description.trim().to_string();
        if description.is_empty() || description.chars().count() > MAX_DESCRIPTION {
            return Err(RegistrationError::Description);
        }
        let optional = |v: Option<String>,
                        field: &'static str|
         -> Result<Option<String>, RegistrationError> {
            match v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()) {
                Some(s) if s.chars().count() > MAX_RUNTIME_FIELD => Err(RegistrationError::TooLong(field)),
                other => Ok(other),
            }
        };
        Ok(AgentRegistration {
            agent_id,
            description,
            model: optional(req.model, "model")?,
            harness: optional(req.harness, "harness")?,
        })
    }
}

/// A stored agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentRecord {
    pub agent_id: String,
    /// The HF user who registered it (their name when they did).
    pub owner: String,
    /// HF's stable id of that user: ownership is decided by it, since names can change hands.
    #[serde(default, skip_serializing)]
    pub owner_id: String,
    pub description: String,
    pub model: Option<String>,
    pub harness: Option<String>,
    pub created_at: String,
}

/// What a registration means next to the record already stored under its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// The same owner repeating the same registration: answer the existing record.
    Same,
    /// Another HF user holds the id.
    OtherOwner,
    /// The owner asked for different fields: registrations are immutable.
    Changed,
}

/// `caller_id` is the caller's stable HF id.
pub fn compare(existing: &AgentRecord, caller_id: &str, reg: &AgentRegistration) -> Repeat {
    if existing.owner_id != caller_id {
        Repeat::OtherOwner
    } else if existing.description == reg.description
        && existing.model == reg.model
        && existing.harness == reg.harness
    {
        Repeat::Same
    } else {
        Repeat::Changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_ids_follow_the_guide() {
        for ok in ["ab", "alice-agent", "7up", "a-b-c", &"x".repeat(48)] {
            assert!(AgentId::parse(ok).is_ok(), "{ok}");
        }
        assert!(matches!(AgentId::parse("a"), Err(AgentIdError::Length(_, 1))));
        assert!(matches!(AgentId::parse(&"x".repeat(49)), Err(AgentIdError::Length(_, 49))));
        for bad in ["Alice", "al ice", "al_ice", "ali.ce", "agént"] {
            assert!(matches!(AgentId::parse(bad), Err(AgentIdError::Characters(_))), "{bad}");
        }
        assert!(matches!(AgentId::parse("-abc"), Err(AgentIdError::Start(_))));
        assert!(matches!(AgentId::parse("human-bob"), Err(AgentIdError::Reserved(_))));
        assert!(AgentId::parse("humans").is_ok());
    }

    fn req(description: &str) -> RegisterAgentRequest {
        RegisterAgentRequest {
            agent_id: "alice-agent".into(),
            description: description.into(),
            model: None,
            harness: None,
        }
    }

    #[test]
    fn registrations_need_a_description_and_bounded_fields() {
        assert_eq!(AgentRegistration::parse(req("  ")), Err(RegistrationError::Description));
        assert_eq!(AgentRegistration::parse(req(&"d".repeat(501))), Err(RegistrationError::Description));
        let mut r = req("ok");
        r.model = Some("m".repeat(101));
        assert_eq!(AgentRegistration::parse(r), Err(RegistrationError::TooLong("model")));
        let mut r = req("ok");
        r.harness = Some("  ".into());
        assert_eq!(AgentRegistration::parse(r).unwrap().harness, None);
    }

    #[test]
    fn repeats_are_same_other_owner_or_changed() {
        let reg = AgentRegistration::parse(req("builds tasks")).unwrap();
        let record = AgentRecord {
            agent_id: "alice-agent".into(),
            owner: "alice".into(),
            owner_id: "user-1".into(),
            description: "builds tasks".into(),
            model: None,
            harness: None,
            created_at: "t".into(),
        };
        assert_eq!(compare(&record, "user-1", &reg), Repeat::Same);
        assert_eq!(compare(&record, "user-2", &reg), Repeat::OtherOwner);
        // Whoever holds the name "alice" now is not the owner unless they hold the id.
        assert_eq!(compare(&record, "alice", &reg), Repeat::OtherOwner);
        let changed = AgentRegistration::parse(req("something else")).unwrap();
        assert_eq!(compare(&record, "user-1", &changed), Repeat::Changed);
    }
}
