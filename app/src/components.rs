use domain::views::{ChallengeView, Health};
use leptos::prelude::*;
use leptos_meta::{Meta, Title};

use crate::api::reads;

/// The build fingerprint of the running server, from the same data as `/api/version`.
#[component]
pub fn Footer() -> impl IntoView {
    let version = reads().map(|r| r.version());
    view! {
        <footer class="footer">
            <span>"Open Env Arena · "</span>
            <a href="/openapi.json">"API schema"</a>
            <span>" · "</span>
            {match version {
                Ok(v) => {
                    let short: String = v.commit.chars().take(12).collect();
                    view! {
                        <span class="build" title=format!("started {}", v.started_at)>
                            "build " <code>{short}</code> " · " {v.build_time.clone()}
                            {v.files_changed.then(|| view! {
                                <strong class="warn">" · files changed since the server started"</strong>
                            })}
                        </span>
                    }
                    .into_any()
                }
                Err(_) => view! { <span class="build">"build unknown"</span> }.into_any(),
            }}
        </footer>
    }
}

#[component]
pub fn HealthBadge(health: Option<Health>, status: &'static str) -> impl IntoView {
    match health {
        Some(h) if h.accepting_runs => view! { <span class="badge ok">"accepting runs"</span> }.into_any(),
        Some(_) => view! { <span class="badge paused">"runs paused"</span> }.into_any(),
        None => view! { <span class="badge muted">{status}</span> }.into_any(),
    }
}

/// A challenge in a list: what it binds and whether it takes runs now.
#[component]
pub fn ChallengeCard(challenge: ChallengeView) -> impl IntoView {
    let href = format!("/arena/challenges/{}", challenge.id);
    let status = challenge.status.as_str();
    let model = challenge
        .base_model
        .as_ref()
        .map(|m| format!("{} @ {}", m.repo, m.revision))
        .unwrap_or_else(|| challenge.binding.model.clone());
    let reason = challenge.health.as_ref().and_then(|h| h.reason.clone());
    view! {
        <article class="card challenge" data-status=status>
            <h3>
                <a href=href>{challenge.title.clone()}</a>
                " "
                <code>{challenge.id.clone()}</code>
            </h3>
            <p class="meta">
                <span class=format!("status {status}")>{status}</span>
                " · "
                <HealthBadge health=challenge.health.clone() status/>
            </p>
            <p>{challenge.summary.clone()}</p>
            <dl class="facts">
                <dt>"Model"</dt>
                <dd>{model}</dd>
                <dt>"Recipe"</dt>
                <dd>{challenge.binding.method.clone()}</dd>
                <dt>"Held-out"</dt>
                <dd>{challenge.binding.suites.join(", ")}</dd>
            </dl>
            {reason.map(|r| view! { <p class="reason">{r}</p> })}
        </article>
    }
}

/// A page's title, its description for search engines and its link preview (`og:` and Twitter's
/// card tags): what a shared link shows, named `preview` (the page's title when not given), so a
/// collection's link previews as the collection.
#[component]
pub fn PageMeta(
    #[prop(into)] title: String,
    #[prop(into)] description: String,
    #[prop(optional, into)] preview: Option<String>,
) -> impl IntoView {
    let preview = preview.unwrap_or_else(|| title.clone());
    view! {
        <Title text=title/>
        <Meta name="description" content=description.clone()/>
        <Meta property="og:site_name" content="Open Env Arena"/>
        <Meta property="og:type" content="website"/>
        <Meta property="og:title" content=preview.clone()/>
        <Meta property="og:description" content=description.clone()/>
        <Meta name="twitter:card" content="summary"/>
        <Meta name="twitter:title" content=preview/>
        <Meta name="twitter:description" content=description/>
    }
}
