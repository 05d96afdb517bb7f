//! The Leptos pages: server rendering with the read service in context, server functions, and
//! the static site (wasm, CSS, public files) with the app's own 404 page behind it.

use std::sync::Arc;

use app::api::{ArenaReads, BoxFuture};
use app::{shell, App};
use axum::Router;
use domain::catalog;
use domain::views::{ChallengeList, ChallengeView, VersionView};
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, LeptosRoutes};

use crate::{repo, AppState};

impl ArenaReads for AppState {
    fn challenges(&self) -> BoxFuture<'_, Result<ChallengeList, String>> {
        Box::pin(async move {
            let live = repo::budget::live_state(&self.db, &self.registry).await.map_err(|e| e.to_string())?;
            Ok(catalog::challenge_list(&self.registry, &live))
        })
    }

    fn challenge<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<ChallengeView>, String>> {
        Box::pin(async move {
            let Some(challenge) = self.registry.challenge(id) else {
                return Ok(None);
            };
            let live = repo::budget::live_state(&self.db, &self.registry).await.map_err(|e| e.to_string())?;
            Ok(Some(catalog::challenge_view(&self.registry, challenge, &live)))
        })
    }

    fn version(&self) -> VersionView {
        self.build.view()
    }
}

pub fn router(state: &AppState) -> Router<AppState> {
    let reads: Arc<dyn ArenaReads> = Arc::new(state.clone());
    let context = move || provide_context(reads.clone());
    let options = state.leptos.clone();
    Router::new()
        .leptos_routes_with_context(state, generate_route_list(App), context.clone(), {
            let options = options.clone();
            move || shell(options.clone())
        })
        .fallback(leptos_axum::file_and_error_handler_with_context::<AppState, _>(context, shell))
}
