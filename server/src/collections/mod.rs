//! Collections of task packages: validate, check an upload, submit, list and read; the re-check of collections judged by older gates.

pub mod api;
pub mod repo;
pub mod service;
pub mod submit;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::features::{Feature, Pass, PassFuture};
use crate::AppState;

pub const FEATURE: Feature = Feature { router, passes: &[Pass::new("re-check", 10, recheck)] };

fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(api::validate))
        .routes(routes!(api::submit, api::list))
        .routes(routes!(api::get))
        .routes(routes!(api::app_submission))
        .routes(routes!(api::gates))
        .merge(
            // Uploaded collections are larger than the other bodies.
            OpenApiRouter::new()
                .routes(routes!(api::check))
                .layer(axum::extract::DefaultBodyLimit::max(api::CHECK_BODY_LIMIT)),
        )
}

/// Gates change rarely; a pass that finds nothing to re-check is one query.
fn recheck(s: &AppState) -> PassFuture<'_> {
    crate::features::logged(service::recheck_pass(s))
}
