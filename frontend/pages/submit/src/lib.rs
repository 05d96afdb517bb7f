//! The wasm of the pages that submit a collection (`/arena/submit`) or check a folder in the
//! browser (`/arena/check`, which loads the checker module too): sign-in and those two forms.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    app::page_modules::hydrate();
}
