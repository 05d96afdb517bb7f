//! What the islands do in the browser: calls to the JSON API (typed with `domain`'s wire types,
//! the CSRF token on writes), the clipboard, sign-in in a new tab when framed, and the hand-off
//! from that tab. They only run after hydration (in event handlers and effects), so the server
//! build compiles them to nothing.

/// Whether the page is inside a frame (the huggingface.co Space page).
pub fn is_framed() -> bool {
    #[cfg(feature = "hydrate")]
    {
        let window = leptos::prelude::window();
        match window.top() {
            Ok(Some(top)) => !js_sys::Object::is(&top, &window),
            _ => true,
        }
    }
    #[cfg(not(feature = "hydrate"))]
    false
}

/// Why a call to the API did not give the answer asked for.
#[derive(Debug, Clone)]
// The server build never calls the API, so it never makes a refusal.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub enum Failure {
    /// The API answered an error: its status, stable code and message, and the whole body (some
    /// refusals carry more, such as the report of a failed validation).
    Refused { status: u16, code: String, message: String, body: String },
    /// No answer, or not the API's JSON.
    Unreachable(String),
}

impl Failure {
    /// One line for a person: the message, then the code.
    pub fn describe(&self) -> String {
        match self {
            Failure::Refused { code, message, .. } => format!("{message} ({code})"),
            Failure::Unreachable(e) => e.clone(),
        }
    }

    /// Whether the request may have taken effect (no answer, or a 5xx): a retry keeps its id.
    pub fn maybe_applied(&self) -> bool {
        match self {
            Failure::Refused { status, .. } => *status >= 500,
            Failure::Unreachable(_) => true,
        }
    }
}

#[cfg(feature = "hydrate")]
#[derive(serde::Deserialize)]
struct ErrorWire {
    code: String,
    message: String,
}

/// Sends a request to the API and decodes its JSON answer (`()` for an empty one). Writes carry
/// the session's CSRF token, as the API requires of cookie-authenticated calls.
pub async fn call<T: serde::de::DeserializeOwned>(
    method: &str,
    url: &str,
    csrf: Option<&str>,
    body: Option<&(impl serde::Serialize + ?Sized)>,
) -> Result<T, Failure> {
    let body = match body {
        Some(b) => Some(serde_json::to_string(b).map_err(|e| Failure::Unreachable(e.to_string()))?),
        None => None,
    };
    exchange(method, url, csrf, body).await
}

/// `call` with a body that is already JSON text (sent as it is; the arena checks it).
pub async fn call_text<T: serde::de::DeserializeOwned>(
    method: &str,
    url: &str,
    csrf: Option<&str>,
    json: String,
) -> Result<T, Failure> {
    exchange(method, url, csrf, Some(json)).await
}

async fn exchange<T: serde::de::DeserializeOwned>(
    method: &str,
    url: &str,
    csrf: Option<&str>,
    body: Option<String>,
) -> Result<T, Failure> {
    let text = send(method, url, csrf, body).await?;
    let text = if text.is_empty() { "null" } else { text.as_str() };
    serde_json::from_str(text)
        .map_err(|e| Failure::Unreachable(format!("the arena's answer was not understood ({e})")))
}

/// The request itself, not generic, so the browser bundle holds it once: the answer's text, or
/// the API's refusal.
async fn send(method: &str, url: &str, csrf: Option<&str>, body: Option<String>) -> Result<String, Failure> {
    #[cfg(feature = "hydrate")]
    {
        use gloo_net::http::RequestBuilder;
        let mut builder = RequestBuilder::new(url).method(match method {
            "POST" => gloo_net::http::Method::POST,
            _ => gloo_net::http::Method::GET,
        });
        if let Some(csrf) = csrf {
            builder = builder.header("x-csrf-token", csrf);
        }
        let request = match body {
            Some(body) => builder
                .header("content-type", "application/json")
                .body(body)
                .map_err(|e| Failure::Unreachable(e.to_string()))?,
            None => builder.build().map_err(|e| Failure::Unreachable(e.to_string()))?,
        };
        let resp = request
            .send()
            .await
            .map_err(|e| Failure::Unreachable(format!("no answer from the arena ({e})")))?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !(200..300).contains(&status) {
            return Err(match serde_json::from_str::<ErrorWire>(&text) {
                Ok(e) => Failure::Refused { status, code: e.code, message: e.message, body: text },
                Err(_) => Failure::Unreachable(format!("the arena answered {status} without its JSON")),
            });
        }
        Ok(text)
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = (method, url, csrf, body);
        Err(Failure::Unreachable("only in the browser".into()))
    }
}

pub fn copy_text(text: &str) {
    #[cfg(feature = "hydrate")]
    {
        let clipboard = leptos::prelude::window().navigator().clipboard();
        let _ = clipboard.write_text(text);
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = text;
}

pub fn reload() {
    #[cfg(feature = "hydrate")]
    let _ = leptos::prelude::window().location().reload();
}

/// Opens sign-in in a new tab that keeps this page as its opener, so it can hand the sign-in back.
pub fn open_sign_in_tab() {
    #[cfg(feature = "hydrate")]
    let _ = leptos::prelude::window().open_with_url_and_target("/auth/login?popup=1", "_blank");
}

/// Calls `on_code` with each hand-off code a same-origin sign-in tab posts to this page.
pub fn listen_for_handoff(on_code: impl Fn(String) + 'static) {
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        let window = leptos::prelude::window();
        let origin = window.location().origin().unwrap_or_default();
        let handler = wasm_bindgen::closure::Closure::<dyn Fn(web_sys::MessageEvent)>::new(
            move |e: web_sys::MessageEvent| {
                if e.origin() != origin {
                    return;
                }
                let data = e.data();
                let field =
                    |name: &str| js_sys::Reflect::get(&data, &name.into()).ok().and_then(|v| v.as_string());
                if field("type").as_deref() == Some("arena-signed-in") {
                    if let Some(code) = field("code") {
                        on_code(code);
                    }
                }
            },
        );
        let _ = window.add_event_listener_with_callback("message", handler.as_ref().unchecked_ref());
        handler.forget();
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = on_code;
}

/// The browser's clock, in seconds since the epoch.
pub fn now_seconds() -> f64 {
    #[cfg(feature = "hydrate")]
    {
        js_sys::Date::now() / 1000.0
    }
    #[cfg(not(feature = "hydrate"))]
    0.0
}

/// A fresh idempotency key for one submission of a form.
pub fn new_request_id(prefix: &str) -> String {
    #[cfg(feature = "hydrate")]
    {
        let mut bytes = [0u8; 8];
        if let Ok(crypto) = leptos::prelude::window().crypto() {
            let _ = crypto.get_random_values_with_u8_array(&mut bytes);
        }
        let suffix = domain::digest::hex(bytes);
        format!("{prefix}-web-{suffix}")
    }
    #[cfg(not(feature = "hydrate"))]
    format!("{prefix}-web")
}

/// Reads the files of a folder picked with `<input webkitdirectory>`, as paths relative to the
/// collection root: a collection folder loses its own name, an `envs/` or `tasks/` folder keeps
/// it, and a single task goes under `envs/`. Bounded like the arena's own reads.
#[cfg(feature = "hydrate")]
pub async fn read_folder(input: &web_sys::HtmlInputElement) -> Result<Vec<(String, Vec<u8>)>, String> {
    use domain::collection::listing::{MAX_FILES, MAX_READ_BYTES};
    let files = input.files().ok_or("no folder was picked")?;
    if files.length() as usize > MAX_FILES {
        return Err(format!("{} files: at most {MAX_FILES} are checked", files.length()));
    }
    let mut picked = Vec::new();
    let mut total = 0u64;
    for i in 0..files.length() {
        let Some(file) = files.get(i) else { continue };
        // `webkitRelativePath` is not in web-sys' stable bindings; read the property directly.
        let path = js_sys::Reflect::get(&file, &wasm_bindgen::JsValue::from_str("webkitRelativePath"))
            .ok()
            .and_then(|v| v.as_string())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| file.name());
        if path.split('/').any(|c| c == ".git") {
            continue;
        }
        total += file.size() as u64;
        if total > MAX_READ_BYTES {
            return Err(format!("the folder holds more than {} MiB", MAX_READ_BYTES >> 20));
        }
        let buffer = wasm_bindgen_futures::JsFuture::from(file.array_buffer())
            .await
            .map_err(|_| format!("could not read {path}"))?;
        picked.push((path, js_sys::Uint8Array::new(&buffer).to_vec()));
    }
    Ok(normalise(picked))
}

/// Runs the checks on picked files in the checker module (`/pkg/checker.js`), loaded on first
/// use so the pages' own bundle stays small; answers the report's JSON.
#[cfg(feature = "hydrate")]
pub async fn check_in_browser(files: Vec<(String, Vec<u8>)>) -> Result<String, String> {
    use wasm_bindgen::JsCast;
    let paths = js_sys::Array::new();
    let contents = js_sys::Array::new();
    for (path, bytes) in files {
        paths.push(&wasm_bindgen::JsValue::from_str(&path));
        contents.push(&js_sys::Uint8Array::from(bytes.as_slice()));
    }
    let run = js_sys::Function::new_with_args(
        "paths, contents",
        "return import('/pkg/checker.js').then(async (m) => { await m.default(); return m.check_files(paths, contents); });",
    );
    let promise = run
        .call2(&wasm_bindgen::JsValue::NULL, &paths, &contents)
        .map_err(|_| "the checker could not start".to_string())?
        .dyn_into::<js_sys::Promise>()
        .map_err(|_| "the checker could not start".to_string())?;
    let answer = wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .map_err(|e| format!("the checker failed: {}", e.as_string().unwrap_or_default()))?;
    answer.as_string().ok_or_else(|| "the checker gave no report".to_string())
}

/// Maps picked paths (`TOP/...`) to paths relative to a collection root.
#[cfg(any(feature = "hydrate", test))]
pub fn normalise(files: Vec<(String, Vec<u8>)>) -> Vec<(String, Vec<u8>)> {
    let top = files.first().and_then(|(p, _)| p.split('/').next()).unwrap_or("").to_string();
    let rest = |p: &str| p.split_once('/').map(|(_, r)| r.to_string()).unwrap_or_default();
    let is_collection = files.iter().any(|(p, _)| {
        let r = rest(p);
        r.starts_with("envs/") || r.starts_with("tasks/")
    });
    files
        .into_iter()
        .map(|(p, b)| {
            let path = if is_collection {
                rest(&p)
            } else if top == "envs" || top == "tasks" {
                p
            } else {
                format!("envs/{p}")
            };
            (path, b)
        })
        .filter(|(p, _)| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::normalise;

    fn paths(picked: &[&str]) -> Vec<String> {
        normalise(picked.iter().map(|p| (p.to_string(), Vec::new())).collect())
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    }

    #[test]
    fn picked_folders_map_to_collection_paths() {
        assert_eq!(
            paths(&["my/submission.yaml", "my/envs/t/task.md"]),
            ["submission.yaml", "envs/t/task.md"]
        );
        assert_eq!(paths(&["envs/t/task.md"]), ["envs/t/task.md"]);
        assert_eq!(paths(&["t/task.md", "t/oracle/solve.sh"]), ["envs/t/task.md", "envs/t/oracle/solve.sh"]);
    }
}
