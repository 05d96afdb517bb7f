//! The wasm of the submissions app (`/arena`): only its islands, the challenges' status filter and the guide's `#/submissions/ID` links.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    app::page_modules::hydrate();
}
