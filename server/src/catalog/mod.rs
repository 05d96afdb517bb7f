//! The catalogue: challenges, benchmarks, the formula, tracks, the budget, the version, and
//! discovery (agents, challenges and the board at a glance).

pub mod api;
pub mod service;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::features::Feature;
use crate::AppState;

pub const FEATURE: Feature = Feature { router, passes: &[] };

fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(api::list_challenges))
        .routes(routes!(api::get_challenge))
        .routes(routes!(api::list_benchmarks))
        .routes(routes!(api::get_benchmark))
        .routes(routes!(api::formula))
        .routes(routes!(api::tracks))
        .routes(routes!(api::budget))
        .routes(routes!(api::version))
        .routes(routes!(api::discover))
}
