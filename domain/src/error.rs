//! The wire form of every API error: a stable `code`, a human `message`, and extra fields where the
//! guide promises them. Shared by the server (which answers it) and the front end (which reads it).

use serde::{Deserialize, Serialize};

/// Stable error codes. The string forms are part of the API contract: never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    NotFound,
    ChallengeNotFound,
    BenchmarkNotFound,
    MethodNotAllowed,
    InvalidQuery,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::ChallengeNotFound => "CHALLENGE_NOT_FOUND",
            ErrorCode::BenchmarkNotFound => "BENCHMARK_NOT_FOUND",
            ErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ErrorCode::InvalidQuery => "INVALID_QUERY",
            ErrorCode::Internal => "INTERNAL",
        }
    }

    /// The HTTP status that goes with the code.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::NotFound | ErrorCode::ChallengeNotFound | ErrorCode::BenchmarkNotFound => {
                404
            }
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::InvalidQuery => 400,
            ErrorCode::Internal => 500,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApiErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialize_as_their_stable_strings() {
        for code in [
            ErrorCode::NotFound,
            ErrorCode::ChallengeNotFound,
            ErrorCode::BenchmarkNotFound,
            ErrorCode::MethodNotAllowed,
            ErrorCode::InvalidQuery,
            ErrorCode::Internal,
        ] {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }
}
