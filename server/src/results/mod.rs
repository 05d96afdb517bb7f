//! Results: collect a scored run's evidence, the editor's review, the leaderboard.

pub mod api;
pub mod repo;
pub mod service;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::features::Feature;
use crate::AppState;

pub const FEATURE: Feature = Feature { router, passes: &[] };

fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(api::collect, api::result))
        .routes(routes!(api::review))
        .routes(routes!(api::leaderboard))
}
