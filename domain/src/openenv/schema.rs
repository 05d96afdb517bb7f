//! A submission's JSON Schemas are data, never addresses. A validator that resolves a `$ref` may
//! fetch it (Python's `jsonschema` follows files and URLs), and what it fetches can come back in
//! its error: so a schema may point only inside itself (`#…`), may not rename its base with an
//! `$id`, and names its draft, if at all, by one of the drafts' own URIs. The draft it is compiled
//! with is decided here once and travels with the assignment, so the arena and the trainer judge
//! an action by the same rules.

mod in_place;

use crate::invalid::Invalid;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use in_place::MAX_IN_PLACE;

/// The drafts a schema may be written in, by the `$schema` URI each one publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaDraft {
    Draft4,
    Draft6,
    Draft7,
    Draft201909,
    Draft202012,
}

impl SchemaDraft {
    const ALL: [SchemaDraft; 5] = [
        SchemaDraft::Draft4,
        SchemaDraft::Draft6,
        SchemaDraft::Draft7,
        SchemaDraft::Draft201909,
        SchemaDraft::Draft202012,
    ];

    /// The name the assignment carries (`schema_draft`).
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaDraft::Draft4 => "draft4",
            SchemaDraft::Draft6 => "draft6",
            SchemaDraft::Draft7 => "draft7",
            SchemaDraft::Draft201909 => "draft2019-09",
            SchemaDraft::Draft202012 => "draft2020-12",
        }
    }

    /// A draft by the name the assignment carries.
    pub fn parse(name: &str) -> Option<SchemaDraft> {
        SchemaDraft::ALL.into_iter().find(|d| d.as_str() == name)
    }

    /// The draft's own meta-schema URI, as its specification writes it.
    pub fn uri(self) -> &'static str {
        match self {
            SchemaDraft::Draft4 => "http://json-schema.org/draft-04/schema#",
            SchemaDraft::Draft6 => "http://json-schema.org/draft-06/schema#",
            SchemaDraft::Draft7 => "http://json-schema.org/draft-07/schema#",
            SchemaDraft::Draft201909 => "https://json-schema.org/draft/2019-09/schema",
            SchemaDraft::Draft202012 => "https://json-schema.org/draft/2020-12/schema",
        }
    }

    /// A `$schema` value as one of the drafts: its URI with or without the trailing `#`, over
    /// http or https (both are written in the wild, pydantic and OpenEnv write 2020-12's).
    fn from_uri(uri: &str) -> Option<SchemaDraft> {
        let bare = |u: &str| u.trim_end_matches('#').replacen("https://", "http://", 1);
        SchemaDraft::ALL.into_iter().find(|d| bare(d.uri()) == bare(uri))
    }
}

/// What a schema without `$schema` is compiled as: the newest draft, as OpenEnv writes them.
pub const DEFAULT_DRAFT: SchemaDraft = SchemaDraft::Draft202012;

/// Keywords whose value is a reference a validator resolves.
const REFERENCES: [&str; 3] = ["$ref", "$dynamicRef", "$recursiveRef"];
/// Deeper than this is not a schema anyone writes (serde_json parses up to 128 levels).
const MAX_DEPTH: usize = 64;

/// The draft `schema` is compiled with, or why it may not be used: a reference that is not a
/// local JSON pointer or anchor, an `$id` that names an address, a `$schema` that is not one of the
/// drafts' own URIs (or not at the root), `$vocabulary` (which names meta-schemas by address), or
/// keywords that apply it to the same value without end or past [`MAX_IN_PLACE`] subschemas.
pub fn draft_of(schema: &Value) -> Result<SchemaDraft, Invalid> {
    check(schema, "", 0)?;
    in_place::check(schema).map_err(|why| match why {
        in_place::Unbounded::Loop { path } => Invalid::from(format!(
            "it applies itself to the same value without end ({}): a reference loop no validator can \
             finish; reach a schema again only through a keyword that descends into the value (`properties`, \
             `items`, …)",
            path.join(" → ")
        )),
        in_place::Unbounded::TooMany { at } => Invalid::from(format!(
            "it is too complex to check: `{at}` checks one value against more than {MAX_IN_PLACE} subschemas \
             through `$ref`, `allOf`, `anyOf` and the like"
        )),
    })?;
    match schema.get("$schema") {
        None => Ok(DEFAULT_DRAFT),
        Some(Value::String(uri)) => SchemaDraft::from_uri(uri).ok_or_else(|| {
            format!(
                "`$schema` is `{}`: a schema names its draft by one of the drafts' own URIs ({})",
                shown(uri),
                SchemaDraft::ALL.map(|d| d.uri()).join(", ")
            )
            .into()
        }),
        Some(_) => Err("`$schema` must be a string: one of the drafts' own URIs".into()),
    }
}

fn check(value: &Value, at: &str, depth: usize) -> Result<(), Invalid> {
    if depth > MAX_DEPTH {
        return Err(format!("`{at}` is nested deeper than {MAX_DEPTH} levels").into());
    }
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let here = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                if REFERENCES.contains(&key.as_str()) {
                    let local = inner.as_str().is_some_and(|r| r.starts_with('#'));
                    if !local {
                        return Err(format!(
                            "`{here}` points outside the schema ({}): only references inside it (`#…`) are \
                             allowed, never an address or a file",
                            shown_value(inner)
                        )
                        .into());
                    }
                } else if key == "$id" && !inner.as_str().is_some_and(|id| id.starts_with('#')) {
                    return Err(format!(
                        "`{here}` names an address ({}): references would resolve against it; remove the `$id`",
                        shown_value(inner)
                    ).into());
                } else if key == "$schema" && depth > 0 {
                    return Err(format!("`{here}`: `$schema` belongs at the schema's root only").into());
                } else if key == "$vocabulary" {
                    return Err(
                        format!("`{here}`: `$vocabulary` names meta-schemas by address; remove it").into()
                    );
                }
                check(inner, &here, depth + 1)?;
            }
            Ok(())
        }
        Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, v)| check(v, &format!("{at}/{i}"), depth + 1))
        }
        _ => Ok(()),
    }
}

fn shown(text: &str) -> String {
    let cut: String = text.chars().take(100).collect();
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

fn shown_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("`{}`", shown(s)),
        other => kind(other).to_string(),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Backtracking steps a `pattern` may take on one string (the crate's default is 1,000,000).
pub const PATTERN_BACKTRACK_LIMIT: usize = 100_000;
/// Bytes a compiled `pattern` may take, and its lazy DFA's cache.
pub const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// A validator for `schema` compiled as `draft`, which resolves nothing outside the schema (the
/// crate is built without its file and network resolvers; [`draft_of`] refused every other
/// reference first). Its `pattern`s are bounded in steps and size; `format` is not asserted, as
/// the trainer's Python validator does not assert it either.
#[cfg(feature = "validate")]
pub fn validator(schema: &Value, draft: SchemaDraft) -> Result<jsonschema::Validator, Invalid> {
    let draft = match draft {
        SchemaDraft::Draft4 => jsonschema::Draft::Draft4,
        SchemaDraft::Draft6 => jsonschema::Draft::Draft6,
        SchemaDraft::Draft7 => jsonschema::Draft::Draft7,
        SchemaDraft::Draft201909 => jsonschema::Draft::Draft201909,
        SchemaDraft::Draft202012 => jsonschema::Draft::Draft202012,
    };
    let patterns = jsonschema::PatternOptions::fancy_regex()
        .backtrack_limit(PATTERN_BACKTRACK_LIMIT)
        .size_limit(PATTERN_SIZE_LIMIT)
        .dfa_size_limit(PATTERN_SIZE_LIMIT);
    jsonschema::options()
        .with_draft(draft)
        .should_validate_formats(false)
        .with_pattern_options(patterns)
        .build(schema)
        .map_err(|e| Invalid(e.to_string()))
}

/// What the arena checks of a submission's schemas: both compile with the draft they name, and
/// each named action is valid under the action schema. Participant data all of it, so it is run
/// where a runaway cannot stop the arena (the server's `openenv::schema_guard`: a process of its
/// own, bounded in time and memory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaCheck {
    /// `{"action": …, "observation": …}` as submitted.
    pub schema: Value,
    /// Each action with the name a refusal calls it by (`example action 1`, `` `finish_action` ``).
    pub actions: Vec<(String, Value)>,
}

#[cfg(feature = "validate")]
impl SchemaCheck {
    /// The first rule the schemas or actions break, in the words the submitter reads.
    pub fn run(&self) -> Result<(), Invalid> {
        let compile = |part: &str| {
            let invalid =
                |why: Invalid| Invalid(format!("`schema.{part}` is not a usable JSON Schema: {why}"));
            let draft = draft_of(&self.schema[part]).map_err(invalid)?;
            validator(&self.schema[part], draft).map_err(invalid)
        };
        let action = compile("action")?;
        compile("observation")?;
        for (name, a) in &self.actions {
            if let Err(e) = action.validate(a) {
                return Err(Invalid(format!(
                    "{name} does not match the action schema: {e} (at `{}`)",
                    e.instance_path()
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_pydantic_and_openenv_write_passes_with_its_draft() {
        let pydantic = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": {"Msg": {"type": "object", "properties": {"text": {"type": "string"}}}},
            "type": "object",
            "properties": {"message": {"$ref": "#/$defs/Msg"}, "tags": {"type": "array", "items": {"$ref": "#/$defs/Msg"}}},
        });
        assert_eq!(draft_of(&pydantic), Ok(SchemaDraft::Draft202012));
        assert_eq!(draft_of(&json!({"type": "object"})), Ok(DEFAULT_DRAFT));
        let seven = json!({"$schema": "http://json-schema.org/draft-07/schema", "definitions": {"a": {}},
            "properties": {"x": {"$ref": "#/definitions/a"}}});
        assert_eq!(draft_of(&seven), Ok(SchemaDraft::Draft7));
        assert_eq!(
            draft_of(&json!({"$schema": "https://json-schema.org/draft-04/schema#"})),
            Ok(SchemaDraft::Draft4)
        );
        assert_eq!(draft_of(&json!({"$defs": {"a": {"$id": "#anchor"}}})), Ok(DEFAULT_DRAFT));
        assert_eq!(SchemaDraft::Draft201909.as_str(), "draft2019-09");
        assert!(SchemaDraft::ALL.iter().all(|d| SchemaDraft::parse(d.as_str()) == Some(*d)));
    }

    #[test]
    fn every_reference_outside_the_schema_is_refused() {
        let refused = [
            json!({"$dynamicRef": "file:///var/lib/arena-agent/done/run/assignment.json#/nope"}),
            json!({"$schema": "https://json-schema.org/draft-07/schema", "$dynamicRef": "file:///etc/passwd"}),
            json!({"properties": {"a": {"$ref": "http://169.254.169.254/latest/meta-data"}}}),
            json!({"$recursiveRef": "https://evil.example/s.json"}),
            json!({"items": [{"$ref": "other.json#/x"}]}),
            json!({"$ref": 3}),
            json!({"$id": "https://evil.example/base", "$ref": "#/x"}),
            json!({"$id": "relative/base.json"}),
            json!({"$schema": "https://evil.example/schema"}),
            json!({"$schema": 7}),
            json!({"properties": {"a": {"$schema": "https://json-schema.org/draft/2020-12/schema"}}}),
            json!({"$vocabulary": {"https://evil.example/v": true}}),
        ];
        for schema in refused {
            assert!(draft_of(&schema).is_err(), "{schema}");
        }
        let why = draft_of(&json!({"properties": {"a/b": {"$ref": "file:///x"}}})).unwrap_err();
        assert!(why.contains("`/properties/a~1b/$ref`") && why.contains("file:///x"), "{why}");
    }

    #[test]
    fn a_schema_too_deep_is_refused_not_walked_forever() {
        let mut deep = json!({"type": "object"});
        for _ in 0..80 {
            deep = json!({"properties": {"a": deep}});
        }
        assert!(draft_of(&deep).unwrap_err().contains("deeper"));
    }
}
