//! The arena server: configuration, storage, the REST API, the pages, and the wiring between them.

pub mod api;
pub mod config;
pub mod db;
mod pages;
pub mod registry_files;
pub mod repo;
pub mod state;
pub mod version;

use std::sync::Arc;

use axum::http::{header, HeaderValue};
use axum::routing::get;
use axum::Router;
use tower_http::set_header::SetResponseHeaderLayer;

pub use config::Config;
pub use state::AppState;

/// Builds the whole application: loads the registry, opens and migrates the database, and
/// returns the router with its state.
pub async fn build(config: &Config) -> anyhow::Result<(Router, AppState)> {
    let registry = registry_files::load(&config.configs_dir, config.private_overlay.as_deref())?;
    let db = db::Db::connect(&config.database_url()?).await?;
    db.migrate().await?;
    let state = AppState::new(Arc::new(registry), db, config);
    Ok((router(state.clone(), &config.frame_ancestors), state))
}

pub fn router(state: AppState, frame_ancestors: &str) -> Router {
    let (api, openapi) = api::router().split_for_parts();
    let openapi = Arc::new(openapi);
    // Framing is allowed from huggingface.co (the Space page) and nowhere else unless configured.
    let csp = HeaderValue::from_str(&format!("frame-ancestors 'self' {frame_ancestors}"))
        .unwrap_or_else(|_| HeaderValue::from_static("frame-ancestors 'self'"));
    Router::new()
        .merge(api)
        .route(
            "/openapi.json",
            get(move || async move { axum::Json(openapi.as_ref().clone()) }),
        )
        // A bare route, for health checks and as the baseline of the load measurements.
        .route("/healthz", get(|| async { "ok" }))
        .merge(pages::router(&state))
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            csp,
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("strict-origin-when-cross-origin"),
        ))
        .with_state(state)
}
