//! `task.md`: YAML frontmatter between `---` lines, then Markdown with a `## prompt` section. The
//! YAML parser runs under a budget (events, aliases, depth, nodes, scalar bytes) so an alias bomb
//! or a deeply nested document is refused quickly instead of expanding.

use serde_json::Value;

use crate::invalid::Invalid;

/// The frontmatter and the Markdown body after it.
pub struct Document<'a> {
    pub yaml: &'a str,
    pub body: &'a str,
}

/// Splits `task.md` into frontmatter and body; `Err` says what is wrong.
pub fn split(text: &str) -> Result<Document<'_>, Invalid> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text.strip_prefix("---").filter(|r| r.starts_with('\n') || r.starts_with("\r\n")) else {
        return Err("task.md must start with a `---` line opening the YAML frontmatter".into());
    };
    let rest = rest.trim_start_matches('\r').strip_prefix('\n').unwrap_or(rest);
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare == "---" || bare == "..." {
            return Ok(Document { yaml: &rest[..offset], body: &rest[offset + line.len()..] });
        }
        offset += line.len();
    }
    Err("the YAML frontmatter is never closed by a `---` line".into())
}

/// Parses the frontmatter into a JSON value (a mapping), within the budget.
pub fn parse_yaml(yaml: &str) -> Result<Value, Invalid> {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_events = 50_000;
    budget.max_aliases = 64;
    budget.max_anchors = 64;
    budget.max_depth = 32;
    budget.max_nodes = 20_000;
    budget.max_total_scalar_bytes = 256 * 1024;
    budget.max_documents = 1;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    let value: Value =
        serde_saphyr::from_str_with_options(yaml, options).map_err(|e| first_line(&e.to_string()))?;
    match value {
        Value::Object(_) => Ok(value),
        Value::Null => Err("the YAML frontmatter is empty".into()),
        _ => Err("the YAML frontmatter must be a mapping of keys to values".into()),
    }
}

fn first_line(message: &str) -> String {
    let line = message.lines().find(|l| !l.trim().is_empty()).unwrap_or("unreadable YAML").trim();
    let mut out: String = line.chars().take(300).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    out
}

/// The text of the `## prompt` section, up to the next heading of the same or a higher level
/// (`#` or `##`) outside a code fence, trimmed. Lines inside ``` or ~~~ fences are prompt text
/// even when they start with `#` (a shell comment in an example).
pub fn prompt_section(body: &str) -> Option<&str> {
    let mut start = None;
    let mut offset = 0;
    let mut fence: Option<&str> = None;
    for line in body.split_inclusive('\n') {
        let bare = line.trim();
        let marker = ["```", "~~~"].into_iter().find(|m| bare.starts_with(m));
        match (fence, marker) {
            (Some(open), Some(m)) if m == open => fence = None,
            (None, Some(m)) => fence = Some(m),
            _ => {}
        }
        let heading = marker.is_none()
            && fence.is_none()
            && (bare.starts_with("# ") || bare.starts_with("## ") || bare == "#" || bare == "##");
        match start {
            None if heading && bare.trim_start_matches('#').trim().eq_ignore_ascii_case("prompt") => {
                start = Some(offset + line.len());
            }
            Some(s) if heading => return Some(body[s..offset].trim()).filter(|p| !p.is_empty()),
            _ => {}
        }
        offset += line.len();
    }
    start.map(|s| body[s..].trim()).filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_reads_the_prompt() {
        let doc = split("---\nversion: \"1.0\"\nmetadata:\n  license: MIT\n---\n# T\n\n## Prompt\nDo it.\n\n## Notes\nx\n")
            .unwrap();
        let v = parse_yaml(doc.yaml).unwrap();
        assert_eq!(v["metadata"]["license"], "MIT");
        assert_eq!(prompt_section(doc.body), Some("Do it."));
        assert_eq!(prompt_section("## prompt\n\n  \n"), None);
        assert_eq!(prompt_section("## prompt\nlast section\n"), Some("last section"));
        let fenced = "## prompt\nRun this:\n```sh\n# install deps\npip install x\n```\nthen write /app/out.txt\n### Detail\nmore\n## Notes\nx\n";
        assert_eq!(
            prompt_section(fenced),
            Some("Run this:\n```sh\n# install deps\npip install x\n```\nthen write /app/out.txt\n### Detail\nmore")
        );
    }

    #[test]
    fn refuses_missing_or_unclosed_frontmatter() {
        assert!(split("# no frontmatter\n").is_err());
        assert!(split("---\nversion: 1\n").is_err());
        assert!(split("----\nx: 1\n---\n").is_err());
    }

    #[test]
    fn refuses_broken_yaml_and_alias_bombs_quickly() {
        assert!(parse_yaml("a: [1, 2\nb: c").is_err());
        assert!(parse_yaml("- 1\n- 2\n").is_err());
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let err = parse_yaml(&bomb).unwrap_err().0;
        assert!(err.to_lowercase().contains("alias") || err.to_lowercase().contains("budget"), "{err}");
    }
}
