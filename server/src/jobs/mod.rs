//! Jobs and spend: the reservation ledger, HF's jobs priced, the job secrets.

pub mod api;
pub mod forms;
pub mod repo;
pub mod service;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::features::Feature;
use crate::AppState;

pub const FEATURE: Feature = Feature { router, passes: &[] };

fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(api::ledger))
        .routes(routes!(api::hf_jobs))
        // The jobs page's controls, as plain forms.
        .route("/arena/jobs/intake", axum::routing::post(forms::intake))
        .route("/arena/jobs/release", axum::routing::post(forms::release))
        .route("/arena/jobs/hide", axum::routing::post(forms::hide))
}
