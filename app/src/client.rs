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
