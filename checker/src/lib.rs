//! The checks of `domain` for the browser, as their own wasm module: the YAML, TOML and SPDX
//! parsers they need are large, so the pages' bundle leaves them out and `/arena/check` loads this
//! module only when someone picks a folder. Nothing is uploaded; the private held-out suites are
//! not compared (only validation on the arena does that).

use domain::collection::listing::from_files;
use domain::gates::fingerprint::HeldOut;
use wasm_bindgen::prelude::wasm_bindgen;

/// Checks files given as parallel arrays of paths (relative to the collection root) and their
/// bytes; answers the report as JSON.
#[wasm_bindgen]
pub fn check_files(paths: Vec<String>, contents: Vec<js_sys::Uint8Array>) -> String {
    let bytes: Vec<Vec<u8>> = contents.iter().map(|c| c.to_vec()).collect();
    check_json(&paths, &bytes)
}

/// The same on plain Rust values (tested on the host).
pub fn check_json(paths: &[String], bytes: &[Vec<u8>]) -> String {
    let (listing, contents) =
        from_files(paths.iter().zip(bytes).map(|(p, b)| (p.as_str(), b.as_slice(), false)));
    let report = domain::collection::check_tasks(&listing, &contents, &HeldOut::none());
    serde_json::to_string(&report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_the_report_as_json() {
        let json = check_json(&["envs/t/task.md".to_string()], &[b"no frontmatter".to_vec()]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["valid"], false);
        assert_eq!(v["errors"][0]["code"], "S-FRONTMATTER");
    }
}
