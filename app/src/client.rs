//! Browser-side effects the pages need: JSON writes with the CSRF token, the clipboard, sign-in in a
//! new tab when framed, and the hand-off from that tab. They only run after hydration (in event
//! handlers and effects), so the server build compiles them to nothing.

use serde_json::Value;

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

/// POSTs JSON (with the session's CSRF token) and returns the status and the JSON answer.
pub async fn post_json(url: &str, csrf: &str, body: &Value) -> Result<(u16, Value), String> {
    #[cfg(feature = "hydrate")]
    {
        let resp = gloo_net::http::Request::post(url)
            .header("x-csrf-token", csrf)
            .json(body)
            .map_err(|e| e.to_string())?
            .send()
            .await
            .map_err(|e| format!("no answer from the arena ({e})"))?;
        let status = resp.status();
        let json =
            if status == 204 { Value::Null } else { resp.json::<Value>().await.unwrap_or(Value::Null) };
        Ok((status, json))
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = (url, csrf, body);
        Err("only in the browser".into())
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

/// A fresh idempotency key for one submission of a form.
pub fn new_request_id(prefix: &str) -> String {
    #[cfg(feature = "hydrate")]
    {
        let mut bytes = [0u8; 8];
        if let Ok(crypto) = leptos::prelude::window().crypto() {
            let _ = crypto.get_random_values_with_u8_array(&mut bytes);
        }
        let suffix: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
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
