use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use domain::ErrorCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::ApiError;

/// `Json` whose rejections are the API's errors: malformed or mistyped JSON is `INVALID_JSON`
/// (with serde's description of where), a body over the limit `PAYLOAD_TOO_LARGE`, and a body
/// that is not declared JSON `UNSUPPORTED_MEDIA_TYPE`.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !declared_json(req.headers()) {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "send the body as JSON with `Content-Type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(ErrorCode::PayloadTooLarge, "the body is larger than this route accepts")
            } else {
                ApiError::new(ErrorCode::InvalidJson, e.body_text())
            }
        })?;
        match axum::Json::<T>::from_bytes(&bytes) {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(first) => match with_integral_floats(&bytes) {
                Some(value) => serde_json::from_value(value)
                    .map(ApiJson)
                    .map_err(|_| ApiError::new(ErrorCode::InvalidJson, first.body_text())),
                None => Err(ApiError::new(ErrorCode::InvalidJson, first.body_text())),
            },
        }
    }
}

/// `application/json`, or another `application/…+json` type, as axum's `Json` accepts.
pub fn declared_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// JSON (and JSON Schema) counts `3300.0` as the integer 3300; serde does not. The body with every
/// such number written as an integer, when it has any; `None` otherwise (or when it is not JSON).
pub fn with_integral_floats(bytes: &[u8]) -> Option<Value> {
    fn fix(v: &mut Value) -> bool {
        match v {
            Value::Number(n) if n.is_f64() => {
                let f = n.as_f64().unwrap_or(f64::NAN);
                // Within i64 and exact: 2^53 is where every integer stops being representable.
                if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 {
                    *v = Value::from(f as i64);
                    true
                } else {
                    false
                }
            }
            Value::Array(items) => items.iter_mut().fold(false, |changed, x| fix(x) | changed),
            Value::Object(map) => map.values_mut().fold(false, |changed, x| fix(x) | changed),
            _ => false,
        }
    }
    let mut value: Value = serde_json::from_slice(bytes).ok()?;
    fix(&mut value).then_some(value)
}
