//! The legacy routes the guide still answers.

pub mod api;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::features::Feature;
use crate::AppState;

pub const FEATURE: Feature = Feature { router, passes: &[] };

fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(api::experiment_groups))
        .routes(routes!(api::results))
        .routes(routes!(api::verification))
        .routes(routes!(api::competitions))
}
