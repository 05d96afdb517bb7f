//! What every HTTP route shares: the error answer and the JSON and query extractors whose
//! rejections are that error. Handlers (`api`), sign-in (`identity`) and services use it.

pub mod client;
mod error;
pub mod ids;
pub mod json;
mod query;

pub use error::{panicked, ApiError};
pub use json::ApiJson;
pub use query::ApiQuery;

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

/// A cached read answers the JSON it was stored with.
impl<T> IntoResponse for crate::changes::Snapshot<T> {
    fn into_response(self) -> Response {
        ([(CONTENT_TYPE, "application/json")], self.json).into_response()
    }
}
