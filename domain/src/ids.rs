//! The ids that name the arena's records. Each is its own type, so a run id cannot be passed where
//! a challenge id is expected; each is parsed once at the edge (a path, a query, a body, a row) and
//! is a plain string on the wire and in the database (`serde(try_from)`, `sqlx(transparent)`), so
//! the API's documents keep their string fields.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest id any record has (agents and submissions allow 64, runs are 12).
pub const MAX_ID_CHARS: usize = 128;

/// Why a string is not an id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{shown}` is not {} {what}: 1 to {MAX_ID_CHARS} letters, digits, '-', '_' or '.', starting with a letter or digit", article(what))]
pub struct IdError {
    pub what: &'static str,
    /// The first 80 characters of what was given.
    pub shown: String,
}

fn article(what: &str) -> &'static str {
    if what.starts_with(['a', 'e', 'i', 'o', 'u', 'O']) {
        "an"
    } else {
        "a"
    }
}

/// The one shape every record id has; each record's own rules (a registry file's name, a
/// submission's 64 characters) are checked where the record is made, not where it is named.
fn check(raw: &str, what: &'static str) -> Result<(), IdError> {
    let ok = (1..=MAX_ID_CHARS).contains(&raw.len())
        && raw.as_bytes()[0].is_ascii_alphanumeric()
        && raw.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(IdError { what, shown: raw.chars().take(80).collect() })
    }
}

macro_rules! record_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        #[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
        pub struct $name(String);

        impl $name {
            pub fn parse(raw: &str) -> Result<$name, IdError> {
                check(raw, $what).map(|()| $name(raw.to_string()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(raw: String) -> Result<$name, IdError> {
                check(&raw, $what).map(|()| $name(raw))
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(raw: &str) -> Result<$name, IdError> {
                $name::parse(raw)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        /// Read as the string it is (SQL binds, formats, lookups by `&str`).
        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl From<&$name> for String {
            fn from(id: &$name) -> String {
                id.0.clone()
            }
        }

        impl PartialEq<&$name> for $name {
            fn eq(&self, other: &&$name) -> bool {
                self.0 == other.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<&$name> for String {
            fn eq(&self, other: &&$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

record_id!(
    /// A challenge of the registry (`openenv-9b`): its file's name.
    ChallengeId,
    "challenge id"
);
record_id!(
    /// A validated collection (`env-…`), the record a run trains on.
    EnvironmentId,
    "environment id"
);
record_id!(
    /// A collection run or a baseline measurement (`run-…`).
    RunId,
    "run id"
);
record_id!(
    /// A run of the OpenEnv track (`oe-…`).
    OpenEnvRunId,
    "OpenEnv run id"
);
record_id!(
    /// An OpenEnv submission, chosen by its author (`my-env-v1`).
    SubmissionId,
    "submission id"
);
record_id!(
    /// A task of a collection or an OpenEnv submission.
    TaskId,
    "task id"
);
record_id!(
    /// An HF job (24 hex digits on HF; the stand-in's are alike).
    JobId,
    "job id"
);

record_id!(
    /// A benchmark: a held-out suite of the registry (its file's name).
    SuiteId,
    "benchmark id"
);
record_id!(
    /// A message of the board.
    MessageId,
    "message id"
);
record_id!(
    /// A webhook of an account (`wh-…`).
    WebhookId,
    "webhook id"
);
record_id!(
    /// One delivery of a webhook (`dl-…`).
    DeliveryId,
    "delivery id"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_take_the_shape_records_have() {
        for ok in ["openenv-9b", "env-0123abcd", "run-1f2e3d4c", "oe-00ff", "my_env.v1", "a"] {
            assert_eq!(RunId::parse(ok).unwrap().as_str(), ok);
        }
        for bad in ["", "-lead", ".hidden", "a/b", "../etc", "a b", "ü", "x\n", &"a".repeat(129)] {
            let e = ChallengeId::parse(bad).unwrap_err();
            assert_eq!(e.what, "challenge id");
            assert!(e.to_string().contains("is not a challenge id"), "{e}");
            assert!(EnvironmentId::parse(bad).unwrap_err().to_string().contains("is not an environment id"));
        }
    }

    #[test]
    fn ids_are_plain_strings_on_the_wire_and_refused_there_when_malformed() {
        let id: RunId = serde_json::from_str("\"run-0001\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"run-0001\"");
        let err = serde_json::from_str::<RunId>("\"run/0001\"").unwrap_err().to_string();
        assert!(err.contains("is not a run id"), "{err}");
    }

    #[test]
    fn an_id_reads_as_its_string_but_is_not_another_kind_of_id() {
        let run = RunId::parse("run-1").unwrap();
        let as_str: &str = &run;
        assert_eq!(as_str, "run-1");
        assert_eq!(run, "run-1");
        // `EnvironmentId::from(run)` does not compile: the kinds are apart.
        let env = EnvironmentId::parse(run.as_str()).unwrap();
        assert_eq!(env.as_str(), run.as_str());
    }
}
