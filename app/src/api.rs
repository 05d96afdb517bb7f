//! Server functions the pages call, and the read port they pull from context on the server.

use domain::views::{ChallengeList, ChallengeView, VersionView};
use leptos::prelude::*;

#[cfg(feature = "ssr")]
pub use port::{ArenaReads, BoxFuture};

#[cfg(feature = "ssr")]
mod port {
    use std::future::Future;
    use std::pin::Pin;

    use domain::views::{ChallengeList, ChallengeView, VersionView};

    pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

    /// What the pages read. The server implements it over its registry and database; server
    /// functions cannot be generic, so they take it from context as `Arc<dyn ArenaReads>`.
    pub trait ArenaReads: Send + Sync + 'static {
        fn challenges(&self) -> BoxFuture<'_, Result<ChallengeList, String>>;
        fn challenge<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<ChallengeView>, String>>;
        fn version(&self) -> VersionView;
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
