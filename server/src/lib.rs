#![recursion_limit = "256"]
//! The arena server: configuration, storage, the REST API, the pages, and the wiring between them.

// The features, one folder each (`features::ALL` lists them).
pub mod agents;
pub mod backup;
pub mod baselines;
pub mod board;
pub mod catalog;
pub mod collections;
pub mod gates;
pub mod identity;
pub mod jobs;
pub mod legacy;
pub mod openenv;
pub mod results;
pub mod runs;

// What the features share.
pub mod api;
pub mod caches;
pub mod changes;
mod clock;
pub mod config;
pub mod db;
pub mod engine;
pub mod features;
pub mod heldout;
pub mod http;
pub mod local;
pub mod overlay;
mod pages;
pub mod ports;
pub mod registry_files;
pub mod sources;
pub mod state;
pub mod version;
pub mod workers;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue};
use axum::middleware;
use axum::routing::get;
use axum::Router;
use tower_http::set_header::SetResponseHeaderLayer;

pub use config::Config;
pub use state::AppState;

/// Every feature, once: the API merges their routers and the workers start their passes.
pub const FEATURES: &[features::Feature] = &[
    crate::catalog::FEATURE,
    crate::identity::api::FEATURE,
    crate::agents::FEATURE,
    crate::board::FEATURE,
    crate::collections::FEATURE,
    crate::gates::FEATURE,
    crate::runs::FEATURE,
    crate::results::FEATURE,
    crate::baselines::FEATURE,
    crate::jobs::FEATURE,
    crate::openenv::FEATURE,
    crate::legacy::FEATURE,
];

/// Builds the whole application: loads the registry, opens and migrates the database, and
/// returns the router with its state.
pub async fn build(config: &Config) -> anyhow::Result<(Router, AppState)> {
    build_with(config, ports::Deps::real(config)).await
}

/// `build` with the given adapters (tests pass a fixed clock or scripted clients).
pub async fn build_with(config: &Config, deps: ports::Deps) -> anyhow::Result<(Router, AppState)> {
    let registry = registry_files::load(&config.configs_dir, config.private_overlay.as_deref())?;
    let restored = restore_if_needed(config, deps.datasets.as_ref()).await?;
    let url = config.database_url()?;
    let db = db::Db::connect(&url).await?;
    db.migrate().await?;
    let sessions = identity::sessions::SqlStore::open(&url, db.backend).await?;
    sessions.spawn_cleanup();
    let fingerprints =
        heldout::load_all(config.fingerprints_dir().as_deref(), &registry, &config.configs_dir)?;
    let mut state = AppState::new(Arc::new(registry), db, config, fingerprints, deps)?;
    if let (Some(repo), Some(path)) = (&config.backup_repo, config.sqlite_path()) {
        let backups = Arc::new(backup::Backups::new(
            repo.clone(),
            config.backup_every_s,
            config.backup_keep,
            path,
            restored,
        ));
        backup::spawn(state.clone(), backups.clone());
        state.backups = Some(backups);
    }
    if state.db.backend == db::Backend::Postgres {
        state.changes.spawn_listener(url.clone());
    }
    identity::oauth::spawn_purge(state.clone());
    let router = router(state.clone(), &config.frame_ancestors)
        .layer(identity::sessions::layer(sessions, config.cookie_secure))
        // Outside the session layer, so it sees the cookie that layer sets.
        .layer(middleware::from_fn(identity::sessions::partition_cookie));
    Ok((router, state))
}

/// With `ARENA_BACKUP_REPO`: refused with PostgreSQL (it keeps its own backups); on SQLite, the
/// database restored from its newest good snapshot when its file is missing or `ARENA_RESTORE`
/// asks. Answers what was restored (`path@revision`).
async fn restore_if_needed(
    config: &Config,
    datasets: &dyn ports::datasets::DatasetWriter,
) -> anyhow::Result<Option<String>> {
    let Some(repo) = &config.backup_repo else { return Ok(None) };
    let Some(path) = config.sqlite_path() else {
        anyhow::bail!(
            "ARENA_BACKUP_REPO backs up the SQLite database; with PostgreSQL (DATABASE_URL) keep the \
             server's own backups (pg_dump on a schedule) and unset ARENA_BACKUP_REPO"
        );
    };
    if path.exists() && !config.restore {
        return Ok(None);
    }
    std::fs::create_dir_all(&config.data_dir)?;
    match backup::restore(datasets, repo, &path).await? {
        backup::Restored::Empty => {
            tracing::info!(repo, "the backup dataset holds no snapshot: a fresh database");
            Ok(None)
        }
        backup::Restored::From { path, revision, skipped } => {
            if !skipped.is_empty() {
                tracing::warn!(?skipped, "newer backups did not check out");
            }
            Ok(Some(format!("{path}@{revision}")))
        }
    }
}

/// The routes and their headers, without the session layer (which `build` adds).
pub fn router(state: AppState, frame_ancestors: &str) -> Router {
    let (api, mut openapi) = api::router().split_for_parts();
    api::document_extractor_errors(&mut openapi);
    api::document_unique_refs(&mut openapi);
    let openapi = Arc::new(openapi);
    // Framing is allowed from huggingface.co (the Space page) and nowhere else unless configured.
    let csp = HeaderValue::from_str(&format!("frame-ancestors 'self' {frame_ancestors}"))
        .unwrap_or_else(|_| HeaderValue::from_static("frame-ancestors 'self'"));
    Router::new()
        .merge(api)
        .merge(identity::oauth::router())
        .route("/openapi.json", get(move || async move { axum::Json(openapi.as_ref().clone()) }))
        // A bare route, for health checks and as the baseline of the load measurements.
        .route("/healthz", get(|| async { "ok" }))
        // The job script this build's runs pin by hash: served from the binary, so the bytes a
        // job fetches are the ones the arena hashed.
        .route(
            "/arena_job.py",
            get(|| async { ([(header::CONTENT_TYPE, "text/x-python; charset=utf-8")], state::JOB_SCRIPT) }),
        )
        .merge(pages::router(&state))
        .method_not_allowed_fallback(api::method_not_allowed)
        // JSON bodies here are small; anything larger is refused before it is read.
        .layer(DefaultBodyLimit::max(64 * 1024))
        // Spans carry the method and path only: headers (and so tokens) are never recorded.
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .layer(SetResponseHeaderLayer::overriding(header::CONTENT_SECURITY_POLICY, csp))
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
