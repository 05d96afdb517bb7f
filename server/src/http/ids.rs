//! Ids read from a path, a query or a body: parsed into their `domain::ids` type here, at the
//! edge, so services never see a bare string. A string that is no id of its kind names no record,
//! so it answers the not-found code a lookup of a well-formed id would.

use domain::ids::{
    ChallengeId, DeliveryId, EnvironmentId, IdError, MessageId, OpenEnvRunId, RunId, SubmissionId, SuiteId,
    WebhookId,
};
use domain::ErrorCode;

use super::error::ApiError;

/// An id type and the code that says its record is missing.
pub trait Named: Sized {
    const MISSING: ErrorCode;
    fn parse(raw: &str) -> Result<Self, IdError>;
}

macro_rules! named {
    ($($id:ty => $code:ident),* $(,)?) => {$(
        impl Named for $id {
            const MISSING: ErrorCode = ErrorCode::$code;
            fn parse(raw: &str) -> Result<Self, IdError> {
                <$id>::parse(raw)
            }
        }
    )*};
}

named!(
    ChallengeId => ChallengeNotFound,
    EnvironmentId => EnvironmentNotFound,
    RunId => RunNotFound,
    OpenEnvRunId => RunNotFound,
    SubmissionId => SubmissionNotFound,
    SuiteId => BenchmarkNotFound,
    MessageId => NotFound,
    WebhookId => WebhookNotFound,
    DeliveryId => NotFound,
);

/// `raw` as an id of kind `T`, or `T`'s not-found error.
pub fn id<T: Named>(raw: &str) -> Result<T, ApiError> {
    T::parse(raw).map_err(|e| ApiError::new(T::MISSING, e.to_string()))
}

/// An optional id (a query filter): empty is absent.
pub fn optional<T: Named>(raw: Option<&str>) -> Result<Option<T>, ApiError> {
    raw.filter(|r| !r.is_empty()).map(id).transpose()
}

/// A route's one path id, parsed (`IdPath<ChallengeId>`): a string that is no id of its kind
/// answers the kind's not-found code, as a lookup of a well-formed id would.
pub struct IdPath<T>(pub T);

/// A route's two path ids, parsed (`IdPaths<ChallengeId, RunId>`).
pub struct IdPaths<A, B>(pub A, pub B);

fn no_path(e: axum::extract::rejection::PathRejection) -> ApiError {
    ApiError::new(ErrorCode::NotFound, e.body_text())
}

impl<S: Send + Sync, T: Named> axum::extract::FromRequestParts<S> for IdPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state).await.map_err(no_path)?;
        id(&raw).map(IdPath)
    }
}

impl<S: Send + Sync, A: Named, B: Named> axum::extract::FromRequestParts<S> for IdPaths<A, B> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path((a, b)) =
            axum::extract::Path::<(String, String)>::from_request_parts(parts, state)
                .await
                .map_err(no_path)?;
        Ok(IdPaths(id(&a)?, id(&b)?))
    }
}
