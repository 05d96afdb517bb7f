//! What the pages read, as a port the server implements over its services. Pages render on the
//! server only (islands get their data as props), so they call it directly: no server functions,
//! and no second route surface beside the API.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use domain::board::Message;
use domain::collection::record::{EnvironmentRecord, SubmissionDetail};
use domain::gates::dynamic::TaskVerdict;
use domain::results::ResultView;
use domain::runs::{Preflight, RunDetail, RunView};
use domain::views::{ChallengeList, ChallengeView, JobsView, Leaderboard, SessionView, VersionView};
use domain::{ApiErrorBody, ErrorCode};
use leptos::prelude::*;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A read's outcome: the value, or the API's stable error (the detail is logged on the server).
pub type Read<T> = Result<T, ApiErrorBody>;

/// What the pages read. `Arc<dyn ArenaReads>` is in the context of every server render.
pub trait ArenaReads: Send + Sync + 'static {
    fn challenges(&self) -> BoxFuture<'_, Read<ChallengeList>>;
    fn challenge<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Read<Option<ChallengeView>>>;
    fn version(&self) -> VersionView;
    /// Who the requester is, from the session in the request's extensions.
    fn session<'a>(&'a self, request: &'a http::request::Parts) -> BoxFuture<'a, Read<SessionView>>;
    /// The newest board messages, newest first.
    fn messages(&self, limit: u32) -> BoxFuture<'_, Read<Vec<Message>>>;
    /// Submitted collections, newest first.
    fn environments(&self, limit: u32) -> BoxFuture<'_, Read<Vec<EnvironmentRecord>>>;
    /// One collection's page.
    fn submission<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Read<Option<SubmissionDetail>>>;
    /// The preflight of the collection on every open challenge, as the requester would get it.
    fn preflights<'a>(
        &'a self,
        environment_id: &'a str,
        request: &'a http::request::Parts,
    ) -> BoxFuture<'a, Read<Vec<Preflight>>>;
    /// Each collection's newest run, by collection id.
    fn latest_runs(&self) -> BoxFuture<'_, Read<std::collections::BTreeMap<String, RunView>>>;
    /// The organizers' jobs view, when the requester is a BenchFlow editor.
    fn jobs<'a>(&'a self, request: &'a http::request::Parts) -> BoxFuture<'a, Read<Option<JobsView>>>;
    /// The leaderboard of every open challenge (or of one).
    fn leaderboards(&self, only: Option<String>) -> BoxFuture<'_, Read<Vec<Leaderboard>>>;
    /// The dynamic gates' verdict attached to a collection for a challenge, if any.
    fn gate_verdicts<'a>(
        &'a self,
        challenge_id: &'a str,
        environment_id: &'a str,
    ) -> BoxFuture<'a, Read<Option<Vec<TaskVerdict>>>>;
    /// A run's collected result, if any.
    fn result<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Read<Option<ResultView>>>;
    /// One run with its stages and events.
    fn run<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Read<Option<RunDetail>>>;
    /// The collection's runs on every challenge, newest first.
    fn runs_of<'a>(&'a self, environment_id: &'a str) -> BoxFuture<'a, Read<Vec<RunView>>>;
    /// Whether the OpenEnv training cluster is connected, and the requester's OpenEnv submissions
    /// (every one for an editor; none when not signed in).
    fn openenv<'a>(
        &'a self,
        request: &'a http::request::Parts,
    ) -> BoxFuture<'a, Read<(bool, Vec<domain::openenv::SubmissionView>)>>;
    /// An OpenEnv run and its events, if the requester may see it (its submitter, or an editor);
    /// `None` when not signed in.
    fn openenv_run<'a>(
        &'a self,
        request: &'a http::request::Parts,
        run_id: &'a str,
    ) -> BoxFuture<'a, Read<Option<OpenEnvRun>>>;
    /// The OpenEnv leaderboard (public).
    fn openenv_leaderboard(&self) -> BoxFuture<'_, Read<domain::openenv::evaluation::Leaderboard>>;
    /// Whether the OpenEnv track takes new submissions (public).
    fn openenv_intake(&self) -> BoxFuture<'_, Read<domain::openenv::controls::Intake>>;
    /// The signed-in requester's OpenEnv quota (`None` when not signed in).
    fn openenv_quota<'a>(
        &'a self,
        request: &'a http::request::Parts,
    ) -> BoxFuture<'a, Read<Option<domain::openenv::quota::QuotaView>>>;
    /// A page of the OpenEnv leaderboard by account (the first without a cursor), the requester's
    /// row pinned (public).
    fn openenv_accounts<'a>(
        &'a self,
        request: &'a http::request::Parts,
        cursor: Option<String>,
    ) -> BoxFuture<'a, Read<domain::openenv::by_account::AccountPage>>;
}

/// An OpenEnv run as its page shows it: the run and its events.
pub type OpenEnvRun = (domain::openenv::run::OpenEnvRunView, Vec<domain::openenv::run::RunEvent>);

fn missing() -> ApiErrorBody {
    ApiErrorBody::new(ErrorCode::Internal, "the page was rendered without the arena's read service")
}

/// The read service of this render.
pub fn reads() -> Read<Arc<dyn ArenaReads>> {
    use_context::<Arc<dyn ArenaReads>>().ok_or_else(missing)
}

/// The session of the request being rendered (the context is read now, the session when awaited).
pub fn session() -> BoxFuture<'static, Read<SessionView>> {
    let reads = reads();
    let parts = use_context::<http::request::Parts>();
    Box::pin(async move { reads?.session(&parts.ok_or_else(missing)?).await })
}

/// The request being rendered, for reads that depend on who asks.
pub fn request_parts() -> Read<http::request::Parts> {
    use_context::<http::request::Parts>().ok_or_else(missing)
}

/// A read that failed, as the API would say it: the stable code and the message.
#[component]
pub fn ReadError(#[prop(into)] what: String, error: ApiErrorBody) -> impl IntoView {
    view! {
        <p class="error" data-code=error.code.as_str()>
            {format!("Could not load {what}: {} ({})", error.message, error.code.as_str())}
        </p>
    }
}
