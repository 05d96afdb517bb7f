//! The Leptos pages: server rendering with the read service in context, server functions, and
//! the static site (wasm, CSS, public files) with the app's own 404 page behind it.

use std::sync::Arc;

use app::api::{ArenaReads, BoxFuture};
use app::{shell, App};
use axum::Router;
use domain::board::Message;
use domain::catalog;
use domain::collection::record::{EnvironmentRecord, SubmissionDetail};
use domain::views::{ChallengeList, ChallengeView, SessionView, VersionView, Viewer};
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

    fn environments(&self, limit: u32) -> BoxFuture<'_, Result<Vec<EnvironmentRecord>, String>> {
        Box::pin(async move {
            repo::environments::list(&self.db, None, false, i64::from(limit)).await.map_err(|e| e.to_string())
        })
    }

    fn submission<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<SubmissionDetail>, String>> {
        Box::pin(async move {
            let Some((environment, report)) =
                repo::environments::get(&self.db, id).await.map_err(|e| e.to_string())?
            else {
                return Ok(None);
            };
            let validation: domain::collection::Report =
                serde_json::from_str(&report).map_err(|e| e.to_string())?;
            let posttrain = domain::collection::record::posttrain(&environment, &validation);
            Ok(Some(SubmissionDetail { environment, validation, posttrain }))
        })
    }

    fn version(&self) -> VersionView {
        self.build.view()
    }

    fn session<'a>(
        &'a self,
        request: &'a axum::http::request::Parts,
    ) -> BoxFuture<'a, Result<SessionView, String>> {
        Box::pin(async move {
            let sign_in = self.auth.oauth.is_some();
            let Some(session) = request.extensions.get::<tower_sessions::Session>() else {
                return Ok(SessionView { viewer: None, sign_in });
            };
            let Some(user) = crate::identity::session_user(session).await else {
                return Ok(SessionView { viewer: None, sign_in });
            };
            let agents = repo::agents::list(&self.db, Some(&user.id)).await.map_err(|e| e.to_string())?;
            Ok(SessionView {
                viewer: Some(Viewer {
                    name: user.name,
                    fullname: user.fullname,
                    editor: user.editor,
                    csrf: user.csrf,
                    agents: agents.into_iter().map(|a| a.agent_id).collect(),
                }),
                sign_in,
            })
        })
    }

    fn messages(&self, limit: u32) -> BoxFuture<'_, Result<Vec<Message>, String>> {
        Box::pin(async move {
            let filter = repo::board::Filter { limit, ..Default::default() };
            repo::board::list(&self.db, &filter).await.map(|(m, _)| m).map_err(|e| e.to_string())
        })
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
