//! Collection runs: preflight, the durable launch, the relay and the reconciler that follows each run to its end.

pub mod api;
pub mod launch;
pub mod reconcile;
pub mod recover;
pub mod relay;
pub mod relay_messages;
pub mod repo;
pub mod service;
pub mod settings;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::features::{Feature, Pass, PassFuture};
use crate::AppState;

pub const FEATURE: Feature = Feature {
    router,
    passes: &[
        // Finishes launches a crash or an HF outage left unfinished.
        Pass::new("launcher", 1, launcher),
        // Follows each launched run to its end.
        Pass::new("reconciler", 1, reconciler),
        // With backups on, takes back runs whose jobs HF knows and the database does not.
        Pass::new("recover", 1, recoverer),
    ],
};

fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(api::preflight))
        .routes(routes!(api::launch, api::list))
        .routes(routes!(api::get))
        .routes(routes!(api::cancel))
        // The jobs' relay: a WebSocket, authenticated by each run's own secret.
        .route("/api/relay/runs/{run_id}", axum::routing::get(relay::relay))
}

fn launcher(s: &AppState) -> PassFuture<'_> {
    crate::features::logged(launch::resume_launches(s))
}

fn reconciler(s: &AppState) -> PassFuture<'_> {
    crate::features::logged(reconcile::pass(s))
}

fn recoverer(s: &AppState) -> PassFuture<'_> {
    Box::pin(async move {
        let Some(backups) = s.backups.as_ref().filter(|b| b.finding_runs()) else { return };
        match recover::pass(s).await {
            Ok(found) => backups.found_runs(found.taken_back, &found.waiting, found.skipped),
            // HF did not answer: the next pass lists again.
            Err(e) => backups.found_runs(Vec::new(), &[format!("{e:#}")], Vec::new()),
        }
    })
}
