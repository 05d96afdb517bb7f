//! Webhooks: what ended (a run of either track, an admission, a review) told to the receivers an
//! account registers, signed, through one guarded client.

pub mod api;
pub mod client;
pub mod repo;
pub mod sealed;
pub mod service;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::features::{logged, Feature, Pass, PassFuture};
use crate::AppState;

pub const FEATURE: Feature =
    Feature { router, passes: &[Pass::new("webhooks", 1, deliver).woken_by(ending_written)] };

fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(api::register, api::list))
        .routes(routes!(api::delete))
        .routes(routes!(api::deliveries))
        .routes(routes!(api::redeliver))
        .routes(routes!(api::rotate_secret))
}

fn deliver(s: &AppState) -> PassFuture<'_> {
    logged(service::pass(s))
}

/// Deliveries go out as soon as an ending is committed on this server (another replica's wait
/// for their tick).
fn ending_written(s: &AppState) -> &tokio::sync::Notify {
    &s.db.endings
}
