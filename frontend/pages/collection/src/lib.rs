//! The wasm of a collection's page (`/arena/submissions/ID`): only its islands, the launch of a run from a preflight.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    app::page_modules::hydrate();
}
