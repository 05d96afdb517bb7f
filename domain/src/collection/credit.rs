//! Task credit metadata: `author_hub`, `license` (an SPDX expression), `category` (a fixed list),
//! `origin` (original, adapted or generated) and `origin_url` when adapted. Missing or invalid fields
//! are warnings, never errors: each names the field and how many tasks lack it. A flat `license:`
//! or `origin:` in `submission.yaml` applies to every task that leaves it out.

use serde::{Deserialize, Serialize};

/// The categories Harbor `task.toml` files use, so adapted tasks keep theirs.
pub const CATEGORIES: &[&str] = &[
    "software-engineering",
    "system-administration",
    "security",
    "scientific-computing",
    "data-science",
    "data-processing",
    "data-querying",
    "file-operations",
    "debugging",
    "machine-learning",
    "model-training",
    "mathematics",
    "optimization",
    "games",
    "personal-assistant",
    "video-processing",
    "tool-use",
    "other",
];

pub const ORIGINS: &[&str] = &["original", "adapted", "generated"];

/// Flat defaults from `submission.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    pub license: Option<String>,
    pub origin: Option<String>,
}

/// A task's credit: as its `metadata:` block declares it (already parsed from the frontmatter or
/// `task.toml`), and after `resolve`, with the collection's defaults applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Credit {
    pub author_hub: Option<String>,
    pub author_name: Option<String>,
    pub license: Option<String>,
    pub category: Option<String>,
    pub origin: Option<String>,
    pub origin_url: Option<String>,
}

/// One warning: a field that some tasks lack or declare wrongly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreditWarning {
    pub field: String,
    pub missing: usize,
    pub invalid: usize,
    /// Up to ten of the tasks concerned.
    pub tasks: Vec<String>,
    pub message: String,
}

/// Why a declared value is not acceptable, or `None` when it is.
fn problem(field: &str, value: &str, credit: &Credit) -> Option<String> {
    match field {
        "author_hub" => {
            (!is_hub_handle(value)).then(|| format!("`{value}` is not a Hub account or organization handle"))
        }
        "license" => spdx::Expression::parse(value)
            .err()
            .map(|e| format!("`{value}` is not an SPDX expression ({})", e.reason)),
        "category" => {
            (!CATEGORIES.contains(&value)).then(|| format!("`{value}` is not one of the categories"))
        }
        "origin" => {
            (!ORIGINS.contains(&value)).then(|| format!("`{value}` is not original, adapted or generated"))
        }
        "origin_url" => (!(value.starts_with("https://") || value.starts_with("http://"))
            || value.contains(char::is_whitespace))
        .then(|| format!("`{value}` is not a web address"))
        .filter(|_| credit.origin.as_deref() == Some("adapted")),
        _ => None,
    }
}

/// A Hub handle: letters, digits, `-`, `_` or `.`, starting with a letter or digit, at most 96.
pub fn is_hub_handle(s: &str) -> bool {
    (1..=96).contains(&s.len())
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

pub fn resolve(declared: &Credit, defaults: &Defaults) -> Credit {
    let clean = |v: &Option<String>| v.as_ref().map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    Credit {
        author_hub: clean(&declared.author_hub),
        author_name: clean(&declared.author_name),
        license: clean(&declared.license).or_else(|| clean(&defaults.license)),
        category: clean(&declared.category),
        origin: clean(&declared.origin).or_else(|| clean(&defaults.origin)),
        origin_url: clean(&declared.origin_url),
    }
}

/// Resolves every task's credit and gathers the warnings, one per field.
pub fn judge(tasks: &[(String, Credit)], defaults: &Defaults) -> (Vec<(String, Credit)>, Vec<CreditWarning>) {
    let resolved: Vec<(String, Credit)> =
        tasks.iter().map(|(name, d)| (name.clone(), resolve(d, defaults))).collect();
    let total = resolved.len();
    let mut warnings = Vec::new();
    for field in ["author_hub", "license", "category", "origin", "origin_url"] {
        let mut missing = Vec::new();
        let mut invalid = Vec::new();
        for (name, credit) in &resolved {
            let value = match field {
                "author_hub" => &credit.author_hub,
                "license" => &credit.license,
                "category" => &credit.category,
                "origin" => &credit.origin,
                _ => &credit.origin_url,
            };
            match value {
                // origin_url is only needed when the task says it was adapted.
                None if field == "origin_url" && credit.origin.as_deref() != Some("adapted") => {}
                // A legacy author_name still credits the author.
                None if field == "author_hub" && credit.author_name.is_some() => {}
                None => missing.push(name.clone()),
                Some(v) => {
                    if let Some(reason) = problem(field, v, credit) {
                        invalid.push((name.clone(), reason));
                    }
                }
            }
        }
        if missing.is_empty() && invalid.is_empty() {
            continue;
        }
        let mut parts = Vec::new();
        if !missing.is_empty() {
            parts.push(format!("missing in {} of {total} task(s)", missing.len()));
        }
        if !invalid.is_empty() {
            parts.push(format!("invalid in {} (e.g. {}: {})", invalid.len(), invalid[0].0, invalid[0].1));
        }
        let hint = match field {
            "author_hub" => "set metadata.author_hub to the Hub account that wrote the task",
            "license" => "set metadata.license to an SPDX expression such as Apache-2.0, or a flat license: in submission.yaml",
            "category" => "set metadata.category to one of the listed categories",
            "origin" => "set metadata.origin to original, adapted or generated, or a flat origin: in submission.yaml",
            _ => "adapted tasks give metadata.origin_url, the source they were adapted from",
        };
        let tasks_named: Vec<String> =
            missing.iter().cloned().chain(invalid.iter().map(|(n, _)| n.clone())).take(10).collect();
        warnings.push(CreditWarning {
            field: field.to_string(),
            missing: missing.len(),
            invalid: invalid.len(),
            tasks: tasks_named,
            message: format!("`{field}` is {}: {hint}", parts.join(", ")),
        });
    }
    (resolved, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(license: Option<&str>, category: Option<&str>, origin: Option<&str>) -> Credit {
        Credit {
            author_hub: Some("benchflow".into()),
            license: license.map(String::from),
            category: category.map(String::from),
            origin: origin.map(String::from),
            ..Default::default()
        }
    }

    #[test]
    fn complete_metadata_has_no_warning() {
        let tasks = vec![(
            "t1".to_string(),
            declared(Some("Apache-2.0"), Some("data-processing"), Some("generated")),
        )];
        let (credits, warnings) = judge(&tasks, &Defaults::default());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(credits[0].1.license.as_deref(), Some("Apache-2.0"));
    }

    #[test]
    fn submission_defaults_fill_license_and_origin() {
        let tasks = vec![("t1".to_string(), declared(None, Some("games"), None))];
        let defaults = Defaults { license: Some("MIT".into()), origin: Some("original".into()) };
        let (credits, warnings) = judge(&tasks, &defaults);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            (credits[0].1.license.as_deref(), credits[0].1.origin.as_deref()),
            (Some("MIT"), Some("original"))
        );
    }

    #[test]
    fn warnings_name_the_field_and_count_the_tasks() {
        let tasks = vec![
            ("a".to_string(), declared(None, Some("cooking"), Some("original"))),
            ("b".to_string(), declared(Some("Apache-2.0 OR MIT"), None, Some("adapted"))),
            ("c".to_string(), declared(Some("Not-A-License"), Some("games"), Some("borrowed"))),
        ];
        let (_, warnings) = judge(&tasks, &Defaults::default());
        let by_field =
            |f: &str| warnings.iter().find(|w| w.field == f).unwrap_or_else(|| panic!("no {f} warning"));
        let license = by_field("license");
        assert_eq!((license.missing, license.invalid), (1, 1));
        assert!(license.message.contains("missing in 1 of 3 task(s)"), "{}", license.message);
        assert!(license.message.contains("not an SPDX expression"));
        let category = by_field("category");
        assert_eq!((category.missing, category.invalid), (1, 1));
        assert_eq!(by_field("origin").invalid, 1);
        let url = by_field("origin_url");
        assert_eq!((url.missing, url.tasks.clone()), (1, vec!["b".to_string()]));
        assert!(warnings.iter().all(|w| w.field != "author_hub"));
    }

    #[test]
    fn legacy_author_name_is_accepted_and_bad_handles_are_not() {
        let mut d = declared(Some("MIT"), Some("other"), Some("original"));
        d.author_hub = None;
        d.author_name = Some("Xiangyi Li".into());
        let (_, warnings) = judge(&[("t".into(), d.clone())], &Defaults::default());
        assert!(warnings.is_empty(), "{warnings:?}");
        d.author_hub = Some("not a handle".into());
        let (_, warnings) = judge(&[("t".into(), d)], &Defaults::default());
        assert_eq!(warnings[0].field, "author_hub");
        assert!(
            is_hub_handle("openenvarena")
                && is_hub_handle("Qwen")
                && !is_hub_handle("-x")
                && !is_hub_handle("")
        );
    }
}
