//! `submission.yaml` beside `envs/` (or a Harbor `tasks/`): flat `key: value` lines. `team_name`
//! and `track: environments` are expected; flat `license:` and `origin:` are defaults for every task
//! that leaves them out. Other (legacy) keys are kept as they are.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Submission {
    pub team_name: Option<String>,
    pub track: Option<String>,
    pub license: Option<String>,
    pub origin: Option<String>,
    pub other: BTreeMap<String, String>,
}

/// A line that could not be read, with its 1-based number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineProblem {
    pub line: usize,
    pub message: String,
}

pub const MAX_BYTES: usize = 16 * 1024;

pub fn parse(text: &str) -> (Submission, Vec<LineProblem>) {
    let mut out = Submission::default();
    let mut problems = Vec::new();
    if text.len() > MAX_BYTES {
        problems.push(LineProblem { line: 0, message: format!("submission.yaml is over {MAX_BYTES} bytes") });
        return (out, problems);
    }
    let mut seen = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim_end();
        if trimmed.trim_start().is_empty() || trimmed.trim_start().starts_with('#') || trimmed == "---" {
            continue;
        }
        if trimmed.starts_with([' ', '\t']) {
            problems.push(LineProblem {
                line,
                message: "nested values are not read: use flat `key: value` lines".into(),
            });
            continue;
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            problems.push(LineProblem { line, message: "expected `key: value`".into() });
            continue;
        };
        let key = key.trim();
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            problems.push(LineProblem { line, message: format!("`{key}` is not a plain key") });
            continue;
        }
        let value = unquote(strip_comment(value.trim()));
        if let Some(first) = seen.insert(key.to_string(), line) {
            problems
                .push(LineProblem { line, message: format!("`{key}` is set again (first on line {first})") });
            continue;
        }
        match key {
            "team_name" => out.team_name = Some(value),
            "track" => out.track = Some(value),
            "license" => out.license = Some(value),
            "origin" => out.origin = Some(value),
            _ => {
                out.other.insert(key.to_string(), value);
            }
        }
    }
    if out.track.as_deref().is_some_and(|t| t != "environments") {
        problems.push(LineProblem {
            line: seen.get("track").copied().unwrap_or(0),
            message: format!(
                "`track` is `{}`; collections use `track: environments`",
                out.track.clone().unwrap_or_default()
            ),
        });
    }
    (out, problems)
}

/// ` # comment` after an unquoted value.
fn strip_comment(value: &str) -> &str {
    if value.starts_with(['"', '\'']) {
        return value;
    }
    match value.find(" #") {
        Some(i) => value[..i].trim_end(),
        None => value,
    }
}

fn unquote(value: &str) -> String {
    let bytes = value.as_bytes();
    if bytes.len() >= 2 && (bytes[0] == b'"' || bytes[0] == b'\'') && bytes[bytes.len() - 1] == bytes[0] {
        value[1..value.len() - 1].to_string()
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_flat_fields_and_defaults() {
        let (s, problems) = parse(
            "# my team\nteam_name: alice-agent\ntrack: environments\nlicense: \"Apache-2.0\"\norigin: generated # all of them\ncontact: legacy@example.com\n",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(s.team_name.as_deref(), Some("alice-agent"));
        assert_eq!(s.track.as_deref(), Some("environments"));
        assert_eq!(s.license.as_deref(), Some("Apache-2.0"));
        assert_eq!(s.origin.as_deref(), Some("generated"));
        assert_eq!(s.other["contact"], "legacy@example.com");
    }

    #[test]
    fn names_each_unreadable_line() {
        let (_, problems) =
            parse("team_name: a\nmetadata:\n  license: MIT\nnot a pair\nteam_name: b\ntrack: challenges\n");
        let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, vec![3, 4, 5, 6], "{problems:?}");
        assert!(problems[0].message.contains("flat"));
        assert!(problems[2].message.contains("first on line 1"));
        assert!(problems[3].message.contains("track: environments"));
    }

    #[test]
    fn refuses_oversize_files() {
        let (_, problems) = parse(&"a: b\n".repeat(5000));
        assert_eq!(problems.len(), 1);
        assert!(problems[0].message.contains("bytes"));
    }
}
