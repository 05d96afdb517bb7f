//! The base model's baseline measurement: launched by editors through the runs' launcher, collected like a result.

pub mod api;
pub mod repo;
pub mod service;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::features::Feature;
use crate::AppState;

pub const FEATURE: Feature = Feature { router, passes: &[] };

fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(api::launch, api::get)).routes(routes!(api::collect))
}
