//! The Leptos pages: server rendering with the read service in context, and the static site
//! (wasm, CSS, public files) with the app's own 404 page behind it. Pages read through the same
//! services as the API, and show a failed read as the API would answer it.

use std::sync::Arc;

use app::api::{ArenaReads, BoxFuture, Read};
use app::{shell, App};
use axum::http::header::CACHE_CONTROL;
use axum::http::HeaderValue;
use axum::Router;
use domain::board::Message;
use domain::collection::record::{EnvironmentRecord, SubmissionDetail};
use domain::gates::dynamic::TaskVerdict;
use domain::ids::{ChallengeId, EnvironmentId, OpenEnvRunId, RunId};
use domain::registry::ChallengeStatus;
use domain::results::ResultView;
use domain::runs::{Preflight, RunDetail, RunView};
use domain::views::{ChallengeList, ChallengeView, JobsView, Leaderboard, SessionView, VersionView, Viewer};
use domain::ErrorCode;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, LeptosRoutes};
use tower_http::services::ServeDir;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::http::ApiError;
use crate::identity::Identity;
use crate::AppState;
use domain::board::MessageFilter;

fn shown(e: ApiError) -> domain::ApiErrorBody {
    e.into_body()
}

impl ArenaReads for AppState {
    fn challenges(&self) -> BoxFuture<'_, Read<ChallengeList>> {
        Box::pin(async move {
            Ok(crate::catalog::service::challenges(self).await.map_err(shown)?.value.as_ref().clone())
        })
    }

    fn challenge<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Read<Option<ChallengeView>>> {
        Box::pin(async move {
            let Ok(id) = ChallengeId::parse(id) else { return Ok(None) };
            match crate::catalog::service::challenge(self, &id).await {
                Ok(c) => Ok(Some(c)),
                Err(e) if e.code() == ErrorCode::ChallengeNotFound => Ok(None),
                Err(e) => Err(shown(e)),
            }
        })
    }

    fn environments(&self, limit: u32) -> BoxFuture<'_, Read<Vec<EnvironmentRecord>>> {
        Box::pin(async move {
            let list = crate::collections::service::list(self, None, false, limit).await.map_err(shown)?;
            Ok(list.value.environments.clone())
        })
    }

    fn submission<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Read<Option<SubmissionDetail>>> {
        Box::pin(async move {
            let Ok(id) = EnvironmentId::parse(id) else { return Ok(None) };
            match crate::collections::service::submission(self, &id).await {
                Ok(d) => Ok(Some(d)),
                Err(e) if e.code() == ErrorCode::EnvironmentNotFound => Ok(None),
                Err(e) => Err(shown(e)),
            }
        })
    }

    fn version(&self) -> VersionView {
        let mut view = self.build.view();
        view.backup = self.backups.as_ref().map(|b| b.view().health());
        view
    }

    fn session<'a>(&'a self, request: &'a axum::http::request::Parts) -> BoxFuture<'a, Read<SessionView>> {
        Box::pin(async move {
            let sign_in = self.auth.oauth.is_some();
            let Some(session) = request.extensions.get::<tower_sessions::Session>() else {
                return Ok(SessionView { viewer: None, sign_in });
            };
            let Some(user) = crate::identity::session_user(session).await else {
                return Ok(SessionView { viewer: None, sign_in });
            };
            let editor = page_identity(self, request).await.is_some_and(|me| me.editor);
            let agents = crate::agents::service::owned_by(self, Some(&user.id)).await.map_err(shown)?;
            Ok(SessionView {
                viewer: Some(Viewer {
                    name: user.name,
                    fullname: user.fullname,
                    editor,
                    csrf: user.csrf,
                    agents: agents.into_iter().map(|a| a.agent_id).collect(),
                }),
                sign_in,
            })
        })
    }

    fn preflights<'a>(
        &'a self,
        environment_id: &'a str,
        request: &'a axum::http::request::Parts,
    ) -> BoxFuture<'a, Read<Vec<Preflight>>> {
        Box::pin(async move {
            let viewer = page_identity(self, request).await;
            let mut out = Vec::new();
            let Ok(environment_id) = EnvironmentId::parse(environment_id) else { return Ok(out) };
            for c in
                self.registry.challenges.iter().filter(|c| c.spec.challenge.status == ChallengeStatus::Open)
            {
                let p = crate::runs::service::preflight(self, c.id(), &environment_id, viewer.as_ref())
                    .await
                    .map_err(shown)?;
                out.push(p);
            }
            Ok(out)
        })
    }

    fn openenv<'a>(
        &'a self,
        request: &'a axum::http::request::Parts,
    ) -> BoxFuture<'a, Read<(bool, Vec<domain::openenv::SubmissionView>)>> {
        Box::pin(async move {
            let connected = crate::openenv::service::connected(self).await.map_err(shown)?;
            let Some(me) = page_identity(self, request).await else { return Ok((connected, Vec::new())) };
            Ok((connected, crate::openenv::service::visible_to(self, &me).await.map_err(shown)?))
        })
    }

    fn openenv_run<'a>(
        &'a self,
        request: &'a axum::http::request::Parts,
        run_id: &'a str,
    ) -> BoxFuture<'a, Read<Option<app::api::OpenEnvRun>>> {
        Box::pin(async move {
            let Some(me) = page_identity(self, request).await else { return Ok(None) };
            let run_id = crate::http::ids::id::<OpenEnvRunId>(run_id).map_err(shown)?;
            Ok(Some(
                crate::openenv::runs::service::view_with_events(self, &me, &run_id).await.map_err(shown)?,
            ))
        })
    }

    fn openenv_leaderboard(&self) -> BoxFuture<'_, Read<domain::openenv::evaluation::Leaderboard>> {
        Box::pin(async move {
            let board = crate::openenv::runs::service::leaderboard(self).await.map_err(shown)?;
            Ok(board.value.as_ref().clone())
        })
    }

    fn openenv_quota<'a>(
        &'a self,
        request: &'a axum::http::request::Parts,
    ) -> BoxFuture<'a, Read<Option<domain::openenv::quota::QuotaView>>> {
        Box::pin(async move {
            let Some(me) = page_identity(self, request).await else { return Ok(None) };
            Ok(Some(crate::openenv::standing::quota(self, &me).await.map_err(shown)?))
        })
    }

    fn openenv_accounts<'a>(
        &'a self,
        request: &'a axum::http::request::Parts,
        cursor: Option<String>,
    ) -> BoxFuture<'a, Read<domain::openenv::by_account::AccountPage>> {
        Box::pin(async move {
            let me = page_identity(self, request).await;
            let limit = domain::openenv::by_account::DEFAULT_PAGE;
            crate::openenv::standing::by_account(self, me.as_ref(), cursor.as_deref(), limit)
                .await
                .map_err(shown)
        })
    }

    fn openenv_intake(&self) -> BoxFuture<'_, Read<domain::openenv::controls::Intake>> {
        Box::pin(async move { crate::openenv::intake::read(&self.db).await.map_err(|e| shown(e.into())) })
    }

    fn jobs<'a>(&'a self, request: &'a axum::http::request::Parts) -> BoxFuture<'a, Read<Option<JobsView>>> {
        Box::pin(async move {
            match page_identity(self, request).await {
                Some(me) if me.editor => Ok(Some(crate::jobs::service::list(self).await.map_err(shown)?)),
                _ => Ok(None),
            }
        })
    }

    fn leaderboards(&self, only: Option<String>) -> BoxFuture<'_, Read<Vec<Leaderboard>>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for c in
                self.registry.challenges.iter().filter(|c| c.spec.challenge.status == ChallengeStatus::Open)
            {
                if only.as_deref().is_some_and(|o| o != c.id().as_str()) {
                    continue;
                }
                let board = crate::results::service::leaderboard(self, c.id(), None).await.map_err(shown)?;
                out.push(board.value.as_ref().clone());
            }
            Ok(out)
        })
    }

    fn gate_verdicts<'a>(
        &'a self,
        challenge_id: &'a str,
        environment_id: &'a str,
    ) -> BoxFuture<'a, Read<Option<Vec<TaskVerdict>>>> {
        Box::pin(async move {
            let (Ok(challenge_id), Ok(environment_id)) =
                (ChallengeId::parse(challenge_id), EnvironmentId::parse(environment_id))
            else {
                return Ok(None);
            };
            let view =
                crate::gates::service::get(self, &challenge_id, &environment_id).await.map_err(shown)?;
            Ok(view.verdict.map(|v| v.tasks))
        })
    }

    fn result<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Read<Option<ResultView>>> {
        Box::pin(async move {
            let Ok(run_id) = RunId::parse(run_id) else { return Ok(None) };
            crate::results::service::of_run(self, &run_id).await.map_err(shown)
        })
    }

    fn latest_runs(&self) -> BoxFuture<'_, Read<std::collections::BTreeMap<String, RunView>>> {
        Box::pin(async move {
            let runs = crate::runs::service::all(self, None).await.map_err(shown)?;
            let mut latest = std::collections::BTreeMap::new();
            // Newest first: the first seen of each collection is its latest.
            for r in &runs {
                if let Some(env) = &r.environment_id {
                    latest.entry(env.to_string()).or_insert_with(|| crate::runs::service::view(self, r));
                }
            }
            Ok(latest)
        })
    }

    fn run<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Read<Option<RunDetail>>> {
        Box::pin(async move {
            let Ok(run_id) = RunId::parse(run_id) else { return Ok(None) };
            match crate::runs::service::detail(self, None, &run_id).await {
                Ok(d) => Ok(Some(d)),
                Err(e) if e.code() == ErrorCode::RunNotFound => Ok(None),
                Err(e) => Err(shown(e)),
            }
        })
    }

    fn runs_of<'a>(&'a self, environment_id: &'a str) -> BoxFuture<'a, Read<Vec<RunView>>> {
        Box::pin(async move {
            let Ok(environment_id) = EnvironmentId::parse(environment_id) else { return Ok(Vec::new()) };
            let runs = crate::runs::service::all(self, Some(&environment_id)).await.map_err(shown)?;
            Ok(runs.iter().map(|r| crate::runs::service::view(self, r)).collect())
        })
    }

    fn messages(&self, limit: u32) -> BoxFuture<'_, Read<Vec<Message>>> {
        Box::pin(async move {
            let page = crate::board::service::list(self, MessageFilter { limit, ..Default::default() })
                .await
                .map_err(shown)?;
            Ok(page.value.messages.clone())
        })
    }
}

pub fn router(state: &AppState) -> Router<AppState> {
    let reads: Arc<dyn ArenaReads> = Arc::new(state.clone());
    let context = move || provide_context(reads.clone());
    let options = state.leptos.clone();
    // The build writes `.br` and `.gz` beside each file here; the names carry no hash, so
    // browsers revalidate (a 304 when unchanged) instead of keeping a stale copy.
    let pkg =
        ServeDir::new(std::path::Path::new(options.site_root.as_ref()).join(options.site_pkg_dir.as_ref()))
            .precompressed_br()
            .precompressed_gzip();
    let pkg = tower::ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::overriding(CACHE_CONTROL, HeaderValue::from_static("no-cache")))
        .service(pkg);
    Router::new()
        .nest_service("/pkg", pkg)
        .leptos_routes_with_context(state, generate_route_list(App), context.clone(), {
            let options = options.clone();
            move || shell(options.clone())
        })
        .fallback(leptos_axum::file_and_error_handler_with_context::<AppState, _>(context, shell))
}

/// Who is signed in on the page's request, as the API sees them: the same function, so an editor
/// role is re-checked with HF as often (a demoted editor sees the participant's view at the next
/// page). A page reads; it carries no CSRF token.
async fn page_identity(s: &AppState, request: &axum::http::request::Parts) -> Option<Identity> {
    crate::identity::session_caller(request, s, None).await.ok().flatten()
}
