use std::sync::Arc;

use axum::extract::FromRef;
use domain::Registry;
use leptos::config::LeptosOptions;

use crate::config::Config;
use crate::db::Db;
use crate::version::BuildInfo;

/// Everything a handler may need; each takes what it uses.
#[derive(Clone)]
pub struct AppState {
    pub registry: Arc<Registry>,
    pub db: Db,
    pub build: Arc<BuildInfo>,
    pub leptos: LeptosOptions,
}

impl AppState {
    pub fn new(registry: Arc<Registry>, db: Db, config: &Config) -> AppState {
        let leptos = LeptosOptions::builder()
            .output_name("arena")
            .site_root(config.site_root.to_string_lossy().to_string())
            .site_pkg_dir("pkg")
            .build();
        AppState {
            registry,
            db,
            build: Arc::new(BuildInfo::capture(&config.site_root)),
            leptos,
        }
    }
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}
