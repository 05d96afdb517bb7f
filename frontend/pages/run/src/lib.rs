//! The wasm of a run's page (`/arena/runs/ID`): only its islands, the live run: its state, timeline and events.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    app::page_modules::hydrate();
}
