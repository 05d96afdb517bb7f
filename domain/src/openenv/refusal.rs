//! A refusal at submission, as every check of the OpenEnv track answers it.

use crate::error::ErrorCode;

/// A refusal at submission: the guide's code and a message that names the field.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}
