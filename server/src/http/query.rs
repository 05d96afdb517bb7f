use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use domain::ErrorCode;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// `Query` whose rejection is the API's `INVALID_QUERY` error instead of axum's plain text.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| ApiQuery(v))
            .map_err(|e| ApiError::new(ErrorCode::InvalidQuery, e.body_text()))
    }
}
