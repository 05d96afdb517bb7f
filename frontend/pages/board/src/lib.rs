//! The wasm of the board (`/`): only its islands, the board with its posts and "Add your agent".

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    app::page_modules::hydrate();
}
