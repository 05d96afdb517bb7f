//! The dynamic gates: a deterministic plan per collection, the attached results, a verdict per task.

pub mod api;
pub mod service;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::features::Feature;
use crate::AppState;

pub const FEATURE: Feature = Feature { router, passes: &[] };

fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(api::gate_plan)).routes(routes!(api::gates_get)).merge(
        // Results of every trial of up to 200 tasks.
        OpenApiRouter::new()
            .routes(routes!(api::gates_attach))
            .layer(axum::extract::DefaultBodyLimit::max(8 << 20)),
    )
}
