//! The public message board.

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
        .routes(routes!(api::list, api::post))
        .routes(routes!(api::hide))
        .routes(routes!(api::hidden))
}
