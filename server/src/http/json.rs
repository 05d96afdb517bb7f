use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use domain::ErrorCode;
use serde::de::DeserializeOwned;

use super::ApiError;

/// `Json` whose rejections are the API's errors: malformed or mistyped JSON is `INVALID_JSON`
/// (with serde's description of where), a body over the limit `PAYLOAD_TOO_LARGE`, and a body
/// that is not declared JSON `UNSUPPORTED_MEDIA_TYPE`.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(JsonRejection::MissingJsonContentType(_)) => Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "send the body as JSON with `Content-Type: application/json`",
            )),
            Err(JsonRejection::BytesRejection(e))
                if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE =>
            {
                Err(ApiError::new(ErrorCode::PayloadTooLarge, "the body is larger than this route accepts"))
            }
            Err(e) => Err(ApiError::new(ErrorCode::InvalidJson, e.body_text())),
        }
    }
}
