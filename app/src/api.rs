//! Server functions the pages call, and the read port they pull from context on the server.

use domain::board::Message;
use domain::collection::record::{EnvironmentRecord, SubmissionDetail};
use domain::views::{ChallengeList, ChallengeView, SessionView, VersionView};
use leptos::prelude::*;

#[cfg(feature = "ssr")]
pub use port::{ArenaReads, BoxFuture};

#[cfg(feature = "ssr")]
mod port {
    use std::future::Future;
    use std::pin::Pin;

    use domain::board::Message;
    use domain::collection::record::{EnvironmentRecord, SubmissionDetail};
    use domain::views::{ChallengeList, ChallengeView, SessionView, VersionView};

    pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

    /// What the pages read. The server implements it over its registry and database; server
    /// functions cannot be generic, so they take it from context as `Arc<dyn ArenaReads>`.
    pub trait ArenaReads: Send + Sync + 'static {
        fn challenges(&self) -> BoxFuture<'_, Result<ChallengeList, String>>;
        fn challenge<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<ChallengeView>, String>>;
        fn version(&self) -> VersionView;
        /// Who the requester is, from the session in the request's extensions.
        fn session<'a>(
            &'a self,
            request: &'a http::request::Parts,
        ) -> BoxFuture<'a, Result<SessionView, String>>;
        /// The newest board messages, newest first.
        fn messages(&self, limit: u32) -> BoxFuture<'_, Result<Vec<Message>, String>>;
        /// Submitted collections, newest first.
        fn environments(&self, limit: u32) -> BoxFuture<'_, Result<Vec<EnvironmentRecord>, String>>;
        /// One collection's page.
        fn submission<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<SubmissionDetail>, String>>;
    }
}

#[cfg(feature = "ssr")]
fn reads() -> Result<std::sync::Arc<dyn ArenaReads>, ServerFnError> {
    use_context::<std::sync::Arc<dyn ArenaReads>>()
        .ok_or_else(|| ServerFnError::new("the read service is not in context"))
}

#[server(prefix = "/sfn", endpoint = "challenges")]
pub async fn list_challenges() -> Result<ChallengeList, ServerFnError> {
    reads()?.challenges().await.map_err(ServerFnError::new)
}

#[server(prefix = "/sfn", endpoint = "challenge")]
pub async fn get_challenge(id: String) -> Result<Option<ChallengeView>, ServerFnError> {
    reads()?.challenge(&id).await.map_err(ServerFnError::new)
}

#[server(prefix = "/sfn", endpoint = "version")]
pub async fn get_version() -> Result<VersionView, ServerFnError> {
    Ok(reads()?.version())
}

#[server(prefix = "/sfn", endpoint = "session")]
pub async fn get_session() -> Result<SessionView, ServerFnError> {
    let parts = use_context::<http::request::Parts>()
        .ok_or_else(|| ServerFnError::new("the request is not in context"))?;
    reads()?.session(&parts).await.map_err(ServerFnError::new)
}

/// The messages the front page shows (and polls for new ones).
#[server(prefix = "/sfn", endpoint = "messages")]
pub async fn get_messages() -> Result<Vec<Message>, ServerFnError> {
    reads()?.messages(100).await.map_err(ServerFnError::new)
}

/// Every submitted collection, newest first.
#[server(prefix = "/sfn", endpoint = "environments")]
pub async fn list_environments() -> Result<Vec<EnvironmentRecord>, ServerFnError> {
    reads()?.environments(200).await.map_err(ServerFnError::new)
}

#[server(prefix = "/sfn", endpoint = "submission")]
pub async fn get_submission(id: String) -> Result<Option<SubmissionDetail>, ServerFnError> {
    reads()?.submission(&id).await.map_err(ServerFnError::new)
}
