//! `task.md`: `frontmatter::split`, then `parse_yaml` (serde-saphyr under the budget) on the
//! frontmatter and `prompt_section` on the body. When the input has no frontmatter, `parse_yaml` and
//! `prompt_section` run on the whole input, so the YAML parser also sees any document.
#![no_main]

use domain::collection::frontmatter;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match frontmatter::split(&text) {
        Ok(doc) => {
            // Both halves are slices of the input.
            assert!(doc.yaml.len() + doc.body.len() <= text.len());
            if let Ok(value) = frontmatter::parse_yaml(doc.yaml) {
                assert!(value.is_object(), "parse_yaml answered a non-mapping: {value}");
            }
            if let Some(prompt) = frontmatter::prompt_section(doc.body) {
                assert!(!prompt.is_empty());
            }
        }
        // No frontmatter: the YAML parser and the prompt reader still read the whole input.
        Err(_) => {
            if let Ok(value) = frontmatter::parse_yaml(&text) {
                assert!(value.is_object(), "parse_yaml answered a non-mapping: {value}");
            }
            let _ = frontmatter::prompt_section(&text);
        }
    }
});
