//! A structural problem of a collection or one of its tasks: what the package reader finds and
//! the report lists.

use serde::{Deserialize, Serialize};

/// A structural problem: the collection's (no `task`) or a task's, with its file and field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Issue {
    pub code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
}

impl Issue {
    pub fn collection(code: &str, message: impl Into<String>) -> Self {
        Issue { code: code.into(), task: None, file: None, field: None, message: message.into() }
    }
}
