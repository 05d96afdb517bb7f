//! The wasm of the pages that have no module of their own (`app::page_modules`): the OpenEnv
//! track's form and sign-in. Leptos' island script
//! calls `hydrate`, then the islands this module exports.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    app::page_modules::hydrate();
}
