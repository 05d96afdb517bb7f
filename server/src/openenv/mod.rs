//! The OpenEnv track: submissions checked at once, admission probes in sandboxes, runs on the arena's cluster.

pub mod admission;
pub mod api;
pub mod intake;
pub mod queue;
pub mod repo;
pub mod runs;
pub mod schema_guard;
pub mod service;
pub mod standing;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::features::{Feature, Pass, PassFuture};
use crate::AppState;

pub const FEATURE: Feature = Feature {
    router,
    passes: &[
        Pass::new("admission", 1, admission),
        // Fails runs stuck in the cluster's queue.
        Pass::new("OpenEnv runs' sweep", 1, sweep),
        // Counts what stalled cleanups left running.
        Pass::new("OpenEnv cleanups", 1, cleanups),
    ],
};

fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(api::status))
        .routes(routes!(api::intake))
        .routes(routes!(api::capacity))
        .routes(routes!(api::leaderboard))
        .routes(routes!(api::quota))
        .routes(routes!(api::submit, api::list))
        .routes(routes!(api::get))
        .routes(routes!(api::check))
        .routes(routes!(api::run))
        .routes(routes!(api::run_events))
        .routes(routes!(api::cancel_run))
        .routes(routes!(api::release_run))
        // The training cluster's connection: a WebSocket, authenticated by the cluster's secret.
        .route("/api/relay/cluster", axum::routing::get(api::cluster))
}

fn admission(s: &AppState) -> PassFuture<'_> {
    crate::features::logged(admission::pass(s))
}

fn sweep(s: &AppState) -> PassFuture<'_> {
    crate::features::logged(runs::service::sweep(s))
}

fn cleanups(s: &AppState) -> PassFuture<'_> {
    crate::features::logged(runs::cleanup::sweep(s))
}
