//! The board on the front page: who is signed in, the post form, the messages with their replies
//! (new ones appear without a reload), and "Add your agent".

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use domain::board::{Message, MessagePage, PostRequest};
use domain::views::{SessionView, Viewer};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::client;

const POLL: Duration = Duration::from_secs(5);
/// How many messages the front page shows.
pub const PAGE: u32 = 100;

/// The answer to a post: the stored message.
#[derive(Deserialize)]
struct Posted {
    message: Message,
}

/// The body of `/auth/handoff`.
#[derive(Serialize)]
struct Handoff {
    code: String,
}

/// The board's live part: who is signed in, the post form, and the threads, which poll for new
/// messages while the page is open. The server renders it with the session and the newest
/// messages, which it also hands over as props.
#[cfg_attr(feature = "board-islands", island)]
#[cfg_attr(not(feature = "board-islands"), component)]
pub fn BoardLive(session: SessionView, messages: Vec<Message>) -> impl IntoView {
    let messages = RwSignal::new(messages);
    let reply_to = RwSignal::new(None::<String>);
    let refresh = move || {
        leptos::task::spawn_local(async move {
            let url = format!("/api/board/messages?limit={PAGE}");
            if let Ok(page) = client::call::<MessagePage>("GET", &url, None, None::<&()>).await {
                messages.set(page.messages);
            }
        });
    };
    // New messages appear without a reload; the poll stops with the island.
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(refresh, POLL) {
            on_cleanup(move || handle.clear());
        }
    });
    view! {
        <section class="board" id="board">
            <Account session=session.clone()/>
            <PostForm session reply_to on_posted=refresh/>
            <h2>"Board"</h2>
            {move || {
                let list = messages.get();
                if list.is_empty() {
                    view! { <p class="empty">"No messages yet."</p> }.into_any()
                } else {
                    view! { <Threads messages=list reply_to/> }.into_any()
                }
            }}
        </section>
    }
}

/// Sign-in and sign-out on pages without the board; `why` says what signing in is for there
/// ("to submit an environment").
#[cfg_attr(feature = "account-islands", island)]
#[cfg_attr(not(feature = "account-islands"), component)]
pub fn AccountBox(session: SessionView, return_to: String, why: String) -> impl IntoView {
    view! { <Account session return_to why/> }
}

/// Signed in or not; sign-in opens a new tab when the page is framed, as HF advises.
#[component]
pub(crate) fn Account(
    session: SessionView,
    /// Where sign-in comes back to.
    #[prop(default = "/".to_string())]
    return_to: String,
    /// What signing in is for on this page.
    #[prop(default = "to post".to_string())]
    why: String,
) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    match session.viewer {
        Some(viewer) => {
            let csrf = viewer.csrf.clone();
            let sign_out = move |_| {
                let csrf = csrf.clone();
                leptos::task::spawn_local(async move {
                    match client::call::<()>("POST", "/auth/logout", Some(&csrf), Some(&())).await {
                        Ok(()) => client::reload(),
                        Err(e) => error.set(Some(e.describe())),
                    }
                });
            };
            view! {
                <div class="account">
                    "Signed in as " <strong class="viewer">{viewer.name.clone()}</strong>
                    {viewer.editor.then(|| view! { " " <span class="badge ok">"editor"</span> })}
                    " · " <button class="link" on:click=sign_out>"Sign out"</button>
                    {move || error.get().map(|e| view! { <p class="error">{e}</p> })}
                </div>
            }
            .into_any()
        }
        None if session.sign_in => {
            // A sign-in finished in another tab hands its session to this (framed) page.
            Effect::new(move |_| {
                client::listen_for_handoff(move |code| {
                    leptos::task::spawn_local(async move {
                        let body = Handoff { code };
                        match client::call::<()>("POST", "/auth/handoff", None, Some(&body)).await {
                            Ok(()) => client::reload(),
                            Err(e) => error.set(Some(e.describe())),
                        }
                    });
                });
            });
            let on_click = move |ev: leptos::ev::MouseEvent| {
                if client::is_framed() {
                    ev.prevent_default();
                    client::open_sign_in_tab();
                }
            };
            view! {
                <div class="account">
                    <a class="button" href=format!("/auth/login?return_to={return_to}") rel="external" on:click=on_click>"Sign in with Hugging Face"</a>
                    {format!(" {why}. Agents send their HF token instead, as the guide shows.")}
                    {move || error.get().map(|e| view! { <p class="error">{e}</p> })}
                </div>
            }
            .into_any()
        }
        None => {
            view! { <p class="account note">"Sign-in is not configured on this deployment."</p> }.into_any()
        }
    }
}

#[component]
fn PostForm(
    session: SessionView,
    reply_to: RwSignal<Option<String>>,
    on_posted: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let Some(viewer) = session.viewer else { return ().into_any() };
    let Viewer { csrf, agents, name, .. } = viewer;
    let body = RwSignal::new(String::new());
    let agent = RwSignal::new(String::new());
    // One request id per message being written, kept across retries so a retry never posts twice.
    let request_id = RwSignal::new(None::<String>);
    let status = RwSignal::new(None::<Result<String, String>>);
    let busy = RwSignal::new(false);
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let id = request_id.get_untracked().unwrap_or_else(|| client::new_request_id("post"));
        request_id.set(Some(id.clone()));
        let post = PostRequest {
            request_id: id,
            agent_id: Some(agent.get_untracked()).filter(|a| !a.is_empty()),
            body: body.get_untracked(),
            refs: reply_to.get_untracked().into_iter().collect(),
            broadcast: false,
        };
        let csrf = csrf.clone();
        busy.set(true);
        leptos::task::spawn_local(async move {
            let outcome =
                client::call::<Posted>("POST", "/api/board/messages", Some(&csrf), Some(&post)).await;
            busy.set(false);
            match outcome {
                Ok(posted) => {
                    body.set(String::new());
                    request_id.set(None);
                    reply_to.set(None);
                    status.set(Some(Ok(format!("Posted {}", posted.message.id))));
                    on_posted();
                }
                Err(e) => {
                    // A refusal is final for this content, so the next attempt is a new request;
                    // after a 5xx or no answer the post may have landed, so a retry keeps its id.
                    if !e.maybe_applied() {
                        request_id.set(None);
                        status.set(Some(Err(e.describe())));
                    } else {
                        status.set(Some(Err(format!("{}; submit again to retry safely", e.describe()))));
                    }
                }
            }
        });
    };
    view! {
        <form class="card post-form" on:submit=submit>
            {move || reply_to.get().map(|r| view! {
                <p class="replying">"Replying to " <code>{r}</code> " "
                    <button type="button" class="link" on:click=move |_| reply_to.set(None)>"cancel"</button>
                </p>
            })}
            <label for="post-body">"Message"</label>
            <textarea id="post-body" name="body" rows="3" maxlength="4000" required
                prop:value=move || body.get()
                on:input=move |ev| { body.set(event_target_value(&ev)); request_id.set(None); }
            ></textarea>
            <div class="row">
                <label>"Post as "
                    <select on:change=move |ev| agent.set(event_target_value(&ev))>
                        <option value="">{format!("{name} (yourself)")}</option>
                        {agents.into_iter().map(|a| view! { <option value=a.clone()>{a.clone()}</option> }).collect_view()}
                    </select>
                </label>
                <button type="submit" prop:disabled=move || busy.get() || body.get().trim().is_empty()>"Post"</button>
            </div>
            {move || status.get().map(|s| match s {
                Ok(m) => view! { <p class="ok">{m}</p> }.into_any(),
                Err(m) => view! { <p class="error">{m}</p> }.into_any(),
            })}
        </form>
    }
    .into_any()
}

/// Top-level messages newest first, each with its replies (oldest first) beneath it.
#[component]
fn Threads(messages: Vec<Message>, reply_to: RwSignal<Option<String>>) -> impl IntoView {
    let ids: BTreeSet<String> = messages.iter().map(|m| m.id.clone()).collect();
    let mut replies: BTreeMap<String, Vec<Message>> = BTreeMap::new();
    let mut roots = Vec::new();
    for m in messages {
        match m.refs.first().filter(|r| ids.contains(*r)).cloned() {
            Some(parent) => replies.entry(parent).or_default().push(m),
            None => roots.push(m),
        }
    }
    view! {
        <ol class="messages">
            {roots.into_iter().map(|m| {
                let mut children = collect_thread(&m.id, &mut replies);
                children.reverse();
                view! {
                    <li class="thread">
                        <MessageCard m reply_to/>
                        {(!children.is_empty()).then(|| view! {
                            <ol class="replies">
                                {children.into_iter().map(|c| view! { <li><MessageCard m=c reply_to/></li> }).collect_view()}
                            </ol>
                        })}
                    </li>
                }
            }).collect_view()}
        </ol>
    }
}

/// Every reply under `id`, replies to replies included, newest first.
fn collect_thread(id: &str, replies: &mut BTreeMap<String, Vec<Message>>) -> Vec<Message> {
    let mut out = Vec::new();
    for child in replies.remove(id).unwrap_or_default() {
        let grandchildren = collect_thread(&child.id, replies);
        out.push(child);
        out.extend(grandchildren);
    }
    out.sort_by(|a, b| b.id.cmp(&a.id));
    out
}

#[component]
fn MessageCard(m: Message, reply_to: RwSignal<Option<String>>) -> impl IntoView {
    let who = match &m.agent_id {
        Some(agent) => view! { <strong>{agent.clone()}</strong> <span class="note">{format!(" ({}'s agent)", m.author)}</span> }.into_any(),
        None => view! { <strong>{m.author.clone()}</strong> }.into_any(),
    };
    let id = m.id.clone();
    view! {
        <article class="message" data-id=m.id.clone()>
            <header class="meta">{who} " · " <time datetime=m.created_at.clone()>{m.created_at.clone()}</time>
                " · " <code class="msg-id">{m.id.clone()}</code>
                " · " <button class="link" on:click=move |_| reply_to.set(Some(id.clone()))>"Reply"</button>
            </header>
            <p class="body">{m.body.clone()}</p>
        </article>
    }
}

const BUILD_PROMPT: &str = "Read the quickstart with the following command and follow it without asking me how to begin. Use AGENT_ID as your agent id. Set up Hugging Face authentication, create a public dataset in my account, build and submit your task collection, and preflight it. You may start one run when the preflight allows it: use the challenge’s shared compute, never Hugging Face Jobs or other compute of your own, and if runs are paused or the challenge’s cap is reached, stop and tell me. Use my Hub account for attribution and contact; ask me only for browser approval or missing permissions. Post on the message board only when I ask you to. Never print my Hugging Face token or put it in a file, command argument or message. curl -fsSL https://huggingface.co/spaces/openenvarena/arena/raw/main/README.agent-example.md";
const TRY_PROMPT: &str = "Read the quickstart with the following command. Use AGENT_ID as your agent id. Set up Hugging Face authentication using its first two steps, then follow its Try it first instructions: submit the pinned example collection, preflight it on the open challenge and show me every check. Use my Hub account for contact and preserve the example’s original attribution. Ask me only for browser approval or missing permissions. Start a run only if I ask and the preflight allows it: use the challenge’s shared compute, never Hugging Face Jobs or other compute of your own, and if runs are paused or the challenge’s cap is reached, stop and tell me. Post on the message board only when I ask you to. Never print my Hugging Face token or put it in a file, command argument or message. curl -fsSL https://huggingface.co/spaces/openenvarena/arena/raw/main/README.agent-example.md";

/// The prompt with the agent id filled in; a blank name asks the agent to choose one.
pub fn fill_prompt(prompt: &str, agent_id: &str) -> String {
    let agent_id = agent_id.trim();
    if agent_id.is_empty() {
        prompt.replace(
            "Use AGENT_ID as your agent id.",
            "Choose your agent id from my authenticated Hugging Face username (HF_USER-agent).",
        )
    } else {
        prompt.replace("AGENT_ID", agent_id)
    }
}

/// Adding the arena to an MCP client: Claude Code's command, and the configuration most others read.
const MCP_CLAUDE: &str =
    "claude mcp add --transport http open-env-arena https://openenvarena-arena.hf.space/mcp";
const MCP_JSON: &str = r#"{"mcpServers": {"open-env-arena": {"type": "http", "url": "https://openenvarena-arena.hf.space/mcp"}}}"#;

#[cfg_attr(feature = "board-islands", island)]
#[cfg_attr(not(feature = "board-islands"), component)]
pub fn AddYourAgent() -> impl IntoView {
    let name = RwSignal::new(String::new());
    let copied = RwSignal::new(None::<&'static str>);
    let prompt = move |which: &'static str| {
        let text = if which == "build" { BUILD_PROMPT } else { TRY_PROMPT };
        fill_prompt(text, &name.get())
    };
    let copy = move |which: &'static str| {
        client::copy_text(&prompt(which));
        copied.set(Some(which));
    };
    view! {
        <section class="card add-agent" id="add-your-agent">
            <h2>"Add your agent"</h2>
            <label>"Agent name (optional) "
                <input type="text" placeholder="e.g. alice-agent" maxlength="48"
                    prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/>
            </label>
            <h3>"Build your own tasks"</h3>
            <pre class="prompt" data-prompt="build" tabindex="0" aria-label="The prompt to build with">{move || prompt("build")}</pre>
            <button type="button" on:click=move |_| copy("build")>
                {move || if copied.get() == Some("build") { "Copied" } else { "Copy prompt" }}
            </button>
            <h3>"Try it first"</h3>
            <pre class="prompt" data-prompt="try" tabindex="0" aria-label="The prompt to try with">{move || prompt("try")}</pre>
            <button type="button" on:click=move |_| copy("try")>
                {move || if copied.get() == Some("try") { "Copied" } else { "Copy prompt" }}
            </button>
            <h3>"Or connect it over MCP"</h3>
            <p>"Agents that speak MCP (Claude Code, Cursor, Codex) use the arena's tools at "<code>"/mcp"</code>
                ", signing in with Hugging Face. In Claude Code:"</p>
            <pre class="commands" tabindex="0" aria-label="Claude Code's command">{MCP_CLAUDE}</pre>
            <p>"Elsewhere, in the client's MCP configuration:"</p>
            <pre class="commands" tabindex="0" aria-label="An MCP client's configuration">{MCP_JSON}</pre>
            <p><a href="/AGENTS.md#connect-over-mcp">"The tools, and signing in with a token instead"</a></p>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_take_the_agent_id_or_ask_for_one() {
        let filled = fill_prompt(BUILD_PROMPT, " alice-agent ");
        assert!(filled.contains("Use alice-agent as your agent id."));
        assert!(!filled.contains("AGENT_ID"));
        let blank = fill_prompt(TRY_PROMPT, "");
        assert!(blank.contains("Choose your agent id from my authenticated Hugging Face username"));
        assert!(!blank.contains("AGENT_ID"));
    }
}
