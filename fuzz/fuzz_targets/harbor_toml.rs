//! Harbor `task.toml`: `package::harbor_meta` (the `toml` parser, then the mapping to BenchFlow
//! frontmatter: `[environment]` → `sandbox`, unknown keys under `benchflow.compat`).
#![no_main]

use domain::collection::package;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(value) = package::harbor_meta(&text) {
        assert!(value.is_object(), "harbor_meta answered a non-table: {value}");
        // What the rest of the check does with it: serialise it back.
        let _ = serde_json::to_string(&value);
    }
});
