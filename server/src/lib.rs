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
pub mod webhooks;

// What the features share.
pub mod api;
pub mod caches;
pub mod changes;
mod clock;
pub mod config;
pub mod db;
pub mod endings;
pub mod engine;
pub mod feature_list;
pub mod features;
pub mod heldout;
pub mod http;
pub mod local;
pub mod mcp;
pub mod overlay;
mod pages;
pub mod ports;
pub mod registry_files;
pub mod signing;
pub mod sources;
pub mod state;
pub mod version;
pub mod workers;

use std::sync::Arc;

use anyhow::Context;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue};
use axum::middleware;
use axum::routing::get;
use axum::Router;
use tower_http::set_header::SetResponseHeaderLayer;

pub use config::Config;
pub use state::AppState;

pub use feature_list::FEATURES;

/// Builds the whole application: loads the registry, opens and migrates the database, and
/// returns the router with its state.
pub async fn build(config: &Config) -> anyhow::Result<(Router, AppState)> {
    build_with(config, ports::Deps::real(config)).await
}

/// `build` with the given adapters (tests pass a fixed clock or scripted clients).
pub async fn build_with(config: &Config, deps: ports::Deps) -> anyhow::Result<(Router, AppState)> {
    let registry = registry_files::load(&config.configs_dir, config.private_overlay.as_deref())?;
    let reader = check_sandbox_reader(config, deps.hub.as_ref()).await?;
    let service = service_accounts(config, deps.hub.as_ref(), reader).await;
    let key = signing_key(config)?;
    let restored = match &key {
        Some(key) => restore_if_needed(config, &deps, key).await?,
        None => None,
    };
    let url = config.database_url()?;
    let db = db::Db::connect(&url).await?;
    db.migrate().await?;
    let sessions = identity::sessions::SqlStore::open(&url, db.backend).await?;
    let fingerprints =
        heldout::load_all(config.fingerprints_dir().as_deref(), &registry, &config.configs_dir)?;
    let mut state = AppState::new(Arc::new(registry), db, config, fingerprints, deps, service)?;
    webhooks::sealed::check_at_start(&state.db, state.webhook_key.as_deref()).await?;
    state.signing = key.clone().map(Arc::new);
    state.sessions = Some(sessions.clone());
    if let (Some(repo), Some(path), Some(key)) = (&config.backup_repo, config.sqlite_path(), key) {
        let backups = Arc::new(backup::Backups::new(
            repo.clone(),
            config.backup_every_s,
            config.backup_keep,
            key,
            path,
            restored,
        ));
        state.backups = Some(backups);
    }
    // Not a pass: the read caches are only right while it listens, so it runs wherever this
    // state serves requests (tests and tools that start no workers included).
    if state.db.backend == db::Backend::Postgres {
        state.changes.spawn_listener(url.clone());
    }
    let router = router(state.clone(), &config.frame_ancestors)?
        .layer(identity::sessions::layer(sessions, config.cookie_secure))
        // Outside the session layer, so it sees the cookie that layer sets.
        .layer(middleware::from_fn(identity::sessions::partition_cookie));
    Ok((router, state))
}

/// The arena's signing key (`ARENA_BACKUP_KEY`): required with `ARENA_BACKUP_REPO`, which is
/// refused with PostgreSQL (it keeps its own backups).
fn signing_key(config: &Config) -> anyhow::Result<Option<signing::SigningKey>> {
    if config.backup_repo.is_some() && config.sqlite_path().is_none() {
        anyhow::bail!(
            "ARENA_BACKUP_REPO backs up the SQLite database; with PostgreSQL (DATABASE_URL) keep the \
             server's own backups (pg_dump on a schedule) and unset ARENA_BACKUP_REPO"
        );
    }
    let Some(secret) = &config.backup_key else {
        if config.backup_repo.is_none() {
            return Ok(None);
        }
        anyhow::bail!(
            "ARENA_BACKUP_REPO needs ARENA_BACKUP_KEY, the secret the arena signs its snapshots with (a \
             restore believes only what it signed): set it as a Space secret (`openssl rand -hex 32`)"
        );
    };
    Ok(Some(signing::SigningKey::new(secret)?))
}

/// On SQLite with backups on, the database restored from its newest verified snapshot when its
/// file is missing or `ARENA_RESTORE` asks.
async fn restore_if_needed(
    config: &Config,
    deps: &ports::Deps,
    key: &signing::SigningKey,
) -> anyhow::Result<Option<backup::Restored>> {
    let (Some(repo), Some(path)) = (&config.backup_repo, config.sqlite_path()) else { return Ok(None) };
    if path.exists() && !config.restore {
        return Ok(None);
    }
    std::fs::create_dir_all(&config.data_dir)?;
    let restore = backup::Restore {
        datasets: deps.datasets.as_ref(),
        repo,
        key,
        now_epoch: deps.clock.epoch(),
        max_database_bytes: config.backup_max_db_mib.saturating_mul(1 << 20),
        named: config.restore_snapshot.as_deref().filter(|n| !n.is_empty()),
    };
    let restored = backup::restore(&restore, &path).await?;
    match &restored {
        backup::Restored::Empty => {
            tracing::info!(repo, "the backup dataset holds no snapshot: a fresh database")
        }
        backup::Restored::From { skipped, .. } if !skipped.is_empty() => {
            tracing::warn!(?skipped, "newer backups were passed over")
        }
        backup::Restored::From { .. } => {}
    }
    Ok(Some(restored))
}

/// The arena's own accounts, never callers (`domain::identity::ServiceAccounts`): those
/// `ARENA_SERVICE_ACCOUNTS` lists, the sandbox reader's, `HF_TOKEN`'s (asked of HF once; HF away
/// leaves it to the namespaces' rule, since the bot starts sandboxes there and is a member), and
/// every member of the sandbox and evaluation namespaces.
async fn service_accounts(
    config: &Config,
    hub: &dyn ports::identity::HubIdentity,
    reader: Option<domain::identity::HubAccount>,
) -> domain::identity::ServiceAccounts {
    let namespaces = [&config.sandbox_namespace, &config.eval_namespace].into_iter().flatten().cloned();
    let mut service =
        domain::identity::ServiceAccounts::new(config.service_accounts.iter().cloned(), namespaces);
    if let Some(reader) = reader {
        service.add(&reader.id);
    }
    if let Some(token) = &config.hf_token {
        match hub.whoami(&token.0).await {
            Ok(bot) => service.add(&bot.id),
            Err(e) => {
                tracing::warn!(error = %e, "HF_TOKEN's account could not be named at start: it is refused as a caller by its token and its namespaces only")
            }
        }
    }
    service
}

/// With `ARENA_SANDBOX_TOKEN`: the token participants' sandboxes may receive must be worth
/// nothing to steal, and the namespaces must be apart (`domain::identity::namespace_refusal`,
/// `sandbox_reader_refusal`), checked with HF's whoami before the server starts; its account. HF
/// unreachable is tried again for a while, then stops the start too.
async fn check_sandbox_reader(
    config: &Config,
    hub: &dyn ports::identity::HubIdentity,
) -> anyhow::Result<Option<domain::identity::HubAccount>> {
    let Some(token) = &config.sandbox_token else { return Ok(None) };
    let Some(namespace) = config.sandbox_namespace.as_deref().filter(|n| !n.is_empty()) else {
        anyhow::bail!(
            "ARENA_SANDBOX_TOKEN is set without ARENA_SANDBOX_NAMESPACE: participants' sandboxes run in an \
             HF organization of their own, which holds nothing else"
        );
    };
    let mut protected: Vec<&str> = vec![config.jobs_namespace.as_str(), config.editor_org.as_str()];
    let datasets = [
        Some(&config.runs_dataset),
        Some(&config.leaderboard_dataset),
        config.backup_repo.as_ref(),
        config.private_repo.as_ref(),
    ];
    protected.extend(datasets.into_iter().flatten().filter_map(|repo| repo.split_once('/').map(|(o, _)| o)));
    let eval = config.eval_namespace.as_deref().filter(|n| !n.is_empty());
    if let Some(why) = domain::identity::namespace_refusal(namespace, eval, &protected) {
        anyhow::bail!("{why}. Not starting");
    }
    let mut tries = 0;
    let account = loop {
        match hub.whoami(&token.0).await {
            Ok(account) => break account,
            Err(domain::identity::HubError::Unavailable { reason, .. }) if tries < 20 => {
                tries += 1;
                tracing::info!(reason, "checking ARENA_SANDBOX_TOKEN: HF did not answer; trying again");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            Err(e) => anyhow::bail!("checking ARENA_SANDBOX_TOKEN with HF's whoami: {e}; not starting"),
        }
    };
    let also_protected: Vec<&str> = protected.iter().copied().chain(eval).collect();
    if let Some(why) = domain::identity::sandbox_reader_refusal(&account, namespace, &also_protected) {
        anyhow::bail!(
            "ARENA_SANDBOX_TOKEN must be worth nothing to a participant who receives it, and is not: {why}. Not \
             starting"
        );
    }
    Ok(Some(account))
}

/// The routes and their headers, without the session layer (which `build` adds).
pub fn router(state: AppState, frame_ancestors: &str) -> anyhow::Result<Router> {
    let (api, mut openapi) = api::router().split_for_parts();
    api::document_extractor_errors(&mut openapi);
    api::document_unique_refs(&mut openapi);
    // The MCP tools call the JSON API's routes in-process, under the API's own body limit, a
    // panic answered as the API answers it.
    let api_only = api
        .clone()
        .layer(DefaultBodyLimit::max(64 * 1024))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(http::panicked))
        .with_state(state.clone());
    let mcp = mcp::router(&state, api_only, &serde_json::to_value(&openapi)?)
        .context("the MCP tools do not match the API's document")?;
    let openapi = Arc::new(openapi);
    // Framing is allowed from huggingface.co (the Space page) and nowhere else unless configured.
    let csp = HeaderValue::from_str(&format!("frame-ancestors 'self' {frame_ancestors}"))
        .unwrap_or_else(|_| HeaderValue::from_static("frame-ancestors 'self'"));
    let routes = Router::new()
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
        .merge(mcp)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), identity::refuse_own_tokens));
    Ok(edge(routes, csp).with_state(state))
}

/// What every route answers through: the body limit, tracing, the security headers, and a
/// handler's panic caught and answered (`http::panicked`) while the server serves on.
pub fn edge(routes: Router<AppState>, csp: HeaderValue) -> Router<AppState> {
    routes
        // JSON bodies here are small; anything larger is refused before it is read.
        .layer(DefaultBodyLimit::max(64 * 1024))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(http::panicked))
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
}
