#![recursion_limit = "256"]
//! The wasm entry point: hydrates the pages the server rendered.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(app::App);
}
