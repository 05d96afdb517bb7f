use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use domain::{ApiErrorBody, ErrorCode};

/// An error answer: the guide's stable code, a message, the matching HTTP status.
#[derive(Debug)]
pub struct ApiError {
    body: ApiErrorBody,
    /// Fields the guide promises beside `code` and `message` on some errors (`launched`,
    /// `retry_with_same_request_id`, `run_id`, …).
    extra: serde_json::Map<String, serde_json::Value>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError { body: ApiErrorBody::new(code, message), extra: serde_json::Map::new() }
    }

    /// Adds a field to the answer's body.
    pub fn with(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        self.extra.insert(key.to_string(), value.into());
        self
    }

    /// Adds `retry_after_s` to the body and a `Retry-After` header.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.body.retry_after_s = Some(seconds);
        self
    }

    pub fn code(&self) -> ErrorCode {
        self.body.code
    }

    /// An internal failure: logged with its source chain (`{:#}`: anyhow's causes on one line),
    /// answered with a generic message.
    pub fn internal(error: impl std::fmt::Display) -> Self {
        tracing::error!(error = format!("{error:#}"), "internal error");
        ApiError::new(ErrorCode::Internal, "the arena hit an internal error; try again shortly")
    }
}

/// `CODE: message`, for logs.
impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.body.code.as_str(), self.body.message)
    }
}

impl std::error::Error for ApiError {}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::internal(e)
    }
}

impl From<serde_json::Error> for ApiError {
    fn from(e: serde_json::Error) -> Self {
        ApiError::internal(e)
    }
}

impl ApiError {
    /// The answer's body, for callers that show it rather than send it (the pages).
    pub fn into_body(self) -> ApiErrorBody {
        self.body
    }
}

/// A handler that panicked (tower-http's `CatchPanicLayer` caught the unwind): logged under a
/// request id, answered 500 `INTERNAL` with that id, and the server serves on. The panic's text
/// stays in the log.
pub fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message");
    let request_id = crate::identity::random_hex(8);
    tracing::error!(request_id, panic = what, "a handler panicked");
    ApiError::new(
        ErrorCode::Internal,
        format!("the arena hit an internal error (request {request_id}); try again shortly"),
    )
    .with("request_id", request_id)
    .into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.body.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry = self.body.retry_after_s;
        let mut body = serde_json::to_value(&self.body).unwrap_or_default();
        if let Some(fields) = body.as_object_mut() {
            fields.extend(self.extra);
        }
        let mut resp = (status, Json(body)).into_response();
        if let Some(s) = retry.and_then(|s| HeaderValue::from_str(&s.to_string()).ok()) {
            resp.headers_mut().insert("retry-after", s);
        }
        resp
    }
}
