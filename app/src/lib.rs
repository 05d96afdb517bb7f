//! The arena's pages: Leptos components rendered on the server and hydrated in the browser.
//! Data comes through server functions (under `/sfn`, never the guide's `/api` paths), which pull
//! the server's read service from context.

pub mod api;
mod board;
mod client;
mod collections;
mod components;
mod pages;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{path, SsrMode, StaticSegment};

use collections::{CheckPage, SubmissionPage, SubmitPage};
use components::Footer;
use pages::{ArenaPage, ChallengePage, HomePage, NotFound};

/// The HTML document around the app, rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Set once the wasm is live, so tests (and curious people) can tell a hydrated page.
    Effect::new(move |_| {
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
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
                    <Route path=StaticSegment("") view=HomePage/>
                    <Route path=path!("/arena") view=ArenaPage/>
                    <Route path=path!("/arena/challenges/:id") view=ChallengePage/>
                    // Rendered whole before sending, so its title and preview tags are in the head.
                    <Route path=path!("/arena/submissions/:id") view=SubmissionPage ssr=SsrMode::Async/>
                    <Route path=path!("/arena/submit") view=SubmitPage/>
                    <Route path=path!("/arena/check") view=CheckPage/>
                </Routes>
            </main>
            <Footer/>
        </Router>
    }
}
