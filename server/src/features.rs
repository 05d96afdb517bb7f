//! What a feature declares. A feature is a folder: `api.rs` (its routes, thin), `service.rs` (its
//! rules and reads, called by handlers, pages and background work), `repo.rs` (its SQL), and a
//! `mod.rs` declaring its `FEATURE`: the router and the background passes. `crate::FEATURES` (feature_list.rs) lists
//! them; a new feature is its folder and two lines in `lib.rs` (its `mod` and its entry there).

use std::future::Future;
use std::pin::Pin;

use utoipa_axum::router::OpenApiRouter;

use crate::AppState;

pub struct Feature {
    /// Its routes, documented in `/openapi.json` by their `#[utoipa::path]`.
    pub router: fn() -> OpenApiRouter<AppState>,
    /// Its background work, started with the server (`crate::workers`).
    pub passes: &'static [Pass],
}

pub type PassFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// One piece of background work: it asks the database what is unfinished and takes it a step.
pub struct Pass {
    /// Names the pass in its log lines.
    pub name: &'static str,
    /// Runs every this many worker ticks.
    pub every_ticks: u32,
    pub run: for<'a> fn(&'a AppState) -> PassFuture<'a>,
    /// Also runs as soon as this fires, for work that should not wait for the next tick.
    pub wake: Option<for<'a> fn(&'a AppState) -> &'a tokio::sync::Notify>,
}

impl Pass {
    pub const fn new(
        name: &'static str,
        every_ticks: u32,
        run: for<'a> fn(&'a AppState) -> PassFuture<'a>,
    ) -> Pass {
        Pass { name, every_ticks, run, wake: None }
    }

    pub const fn woken_by(self, wake: for<'a> fn(&'a AppState) -> &'a tokio::sync::Notify) -> Pass {
        Pass { wake: Some(wake), ..self }
    }
}

/// A pass's work, its failure logged with its causes on one line (`{:#}`, in the span `workers`
/// opens with the pass's name; a pass is tried again on the next tick).
pub fn logged<'a, T, E: std::fmt::Display + 'a>(
    work: impl Future<Output = Result<T, E>> + Send + 'a,
) -> PassFuture<'a> {
    Box::pin(async move {
        if let Err(e) = work.await {
            tracing::error!(error = format!("{e:#}"), "the pass failed");
        }
    })
}
