#![recursion_limit = "256"]
//! The wasm entry point. The pages are server-rendered; this hydrates their islands (the
//! interactive parts, exported by `app` and found in the page by Leptos' island script).

use std::time::Duration;

use app as _;
use leptos::prelude::{document, set_timeout};

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
    // The island script walks the page right after this returns, without yielding to the event
    // loop; a zero timeout runs once it is done. Tests (and curious people) read the mark.
    set_timeout(
        || {
            if let Some(body) = document().body() {
                let _ = body.set_attribute("data-hydrated", "true");
            }
        },
        Duration::ZERO,
    );
}
