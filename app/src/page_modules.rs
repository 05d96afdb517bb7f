//! Each page loads only the wasm its islands need. The islands are grouped by the pages that show
//! them (the `*-islands` features); each crate under `frontend/` is one module holding one group,
//! and the shell names the page's module in its hydration script. One module for every page cost
//! each first visit 227 KB of script and wasm, most of it islands the page does not have.

/// The module (its wasm-bindgen output name, served from `/pkg`) that hydrates the page at `path`,
/// The four pages a visitor opens most have their own, and so do the collection forms; the others
/// share `arena` (sign-in and the OpenEnv form).
pub fn module_for(path: &str) -> &'static str {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        [""] => "page_board",
        ["arena"] => "page_arena",
        ["arena", "submissions", _] => "page_collection",
        ["arena", "runs", _] => "page_run",
        ["arena", "submit" | "check"] => "page_submit",
        _ => "arena",
    }
}

/// What every module's `hydrate` does: hydrate the page's islands, then mark the page (tests and
/// curious people read the mark). An island this module does not export is named on the body
/// (`data-missing-islands`) instead of passing unnoticed, so a page mapped to the wrong module
/// fails its tests.
#[cfg(feature = "hydrate")]
pub fn hydrate() {
    use leptos::prelude::{document, set_timeout};
    use wasm_bindgen::JsValue;

    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
    let exports = wasm_bindgen::exports();
    let mut missing = Vec::new();
    if let Ok(islands) = document().query_selector_all("leptos-island") {
        for i in 0..islands.length() {
            let name = islands
                .item(i)
                .and_then(|node| wasm_bindgen::JsCast::dyn_into::<web_sys::Element>(node).ok())
                .and_then(|el| el.get_attribute("data-component"))
                .unwrap_or_default();
            if !js_sys::Reflect::has(&exports, &JsValue::from_str(&name)).unwrap_or(false) {
                missing.push(name);
            }
        }
    }
    // The island script walks the page right after this returns, without yielding to the event
    // loop; a zero timeout runs once it is done.
    set_timeout(
        move || {
            if let Some(body) = document().body() {
                if !missing.is_empty() {
                    let _ = body.set_attribute("data-missing-islands", &missing.join(" "));
                }
                let _ = body.set_attribute("data-hydrated", "true");
            }
        },
        std::time::Duration::ZERO,
    );
}

#[cfg(test)]
mod tests {
    use super::module_for;

    #[test]
    fn each_page_names_its_module() {
        assert_eq!(module_for("/"), "page_board");
        assert_eq!(module_for("/arena"), "page_arena");
        assert_eq!(module_for("/arena/"), "page_arena");
        assert_eq!(module_for("/arena/submissions/col-1"), "page_collection");
        assert_eq!(module_for("/arena/runs/r-1"), "page_run");
        assert_eq!(module_for("/arena/submit"), "page_submit");
        assert_eq!(module_for("/arena/check"), "page_submit");
        for other in ["/arena/jobs", "/arena/openenv", "/arena/challenges/x", "/nope"] {
            assert_eq!(module_for(other), "arena", "{other}");
        }
    }
}
