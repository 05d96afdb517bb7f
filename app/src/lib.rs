#![recursion_limit = "256"]
//! The arena's pages. They render on the server from the read service in context; only the
//! interactive parts are islands (`#[island]`), hydrated in the browser from the props the server
//! serialized into the page. Islands talk to the same JSON API as the CLI, with the wire types of
//! `domain` (see `client`): there is one transport, not a second one for the pages.

pub mod api;
mod board;
pub mod charts;
mod client;
mod collections;
mod components;
mod openenv;
mod openenv_results;
mod organizers;
pub mod page_modules;
mod pages;
mod results;
mod runs;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{path, SsrMode, StaticSegment};

use collections::{CheckPage, SubmissionPage, SubmitPage};
use components::Footer;
use organizers::JobsPage;
use pages::{ArenaPage, ChallengePage, HomePage, NotFound};
use runs::RunPage;

/// Gives `requestIdleCallback` a deadline (unless the caller set one), so hydration starts within
/// half a second even if the page never goes idle.
const IDLE_DEADLINE: &str = "if(window.requestIdleCallback){const r=window.requestIdleCallback.bind(window);\
window.requestIdleCallback=(c,o)=>r(c,Object.assign({timeout:500},o))}";

/// The HTML document around the app, rendered on the server only. Its hydration script loads the
/// page's own module (`page_modules`).
pub fn shell(mut options: LeptosOptions) -> impl IntoView {
    if let Some(request) = use_context::<http::request::Parts>() {
        options.output_name = page_modules::module_for(request.uri.path()).into();
    }
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                // Leptos loads the islands' wasm when the page is next idle, with no deadline; a
                // busy phone (or a busy frame in a busy tab) can put that off indefinitely.
                <script>{IDLE_DEADLINE}</script>
                <HydrationScripts options islands=true/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// Every page, rendered whole before it is sent (`SsrMode::Async`): the reads are fast, the
/// head gets each page's title and preview tags, and no streaming script is needed.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Stylesheet id="arena-css" href="/pkg/arena.css"/>
        <Title text="Open Env Arena"/>
        <Router>
            <header class="top">
                <a class="brand" href="/">"Open Env Arena"</a>
                <nav>
                    <a href="/">"Board"</a>
                    <a href="/arena">"Arena"</a>
                    <a href="/openapi.json">"API"</a>
                </nav>
            </header>
            <main>
                <Routes fallback=NotFound>
                    <Route path=StaticSegment("") view=HomePage ssr=SsrMode::Async/>
                    <Route path=path!("/arena") view=ArenaPage ssr=SsrMode::Async/>
                    <Route path=path!("/arena/challenges/:id") view=ChallengePage ssr=SsrMode::Async/>
                    <Route path=path!("/arena/submissions/:id") view=SubmissionPage ssr=SsrMode::Async/>
                    <Route path=path!("/arena/submit") view=SubmitPage ssr=SsrMode::Async/>
                    <Route path=path!("/arena/check") view=CheckPage ssr=SsrMode::Async/>
                    <Route path=path!("/arena/runs/:id") view=RunPage ssr=SsrMode::Async/>
                    <Route path=path!("/arena/jobs") view=JobsPage ssr=SsrMode::Async/>
                    <Route path=path!("/arena/openenv") view=openenv::OpenEnvPage ssr=SsrMode::Async/>
                    <Route path=path!("/arena/openenv/runs/:id") view=openenv::OpenEnvRunPage ssr=SsrMode::Async/>
                </Routes>
            </main>
            <Footer/>
        </Router>
    }
}
