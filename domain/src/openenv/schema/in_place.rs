//! What a validator does to one value: apply every subschema reached through keywords that apply
//! to the same value (`$ref`, `$dynamicRef`, `$recursiveRef`, `allOf`, `anyOf`, `oneOf`, `not`,
//! `if`/`then`/`else`, `dependentSchemas`, `dependencies`). A loop among those never ends (the
//! validator applies the schema to the same value again, forever: a stack overflow, and the
//! `unevaluated*` keywords walk the same loop while they compile), and a schema that fans out
//! through them (`allOf` of two references to `allOf`s of two…) costs exponential time. Both are
//! refused here, before any validator sees the schema. References that descend into the value
//! (`properties`, `items`, …) are bounded by the value's own depth and are not followed.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

/// Subschemas one value may be checked against at most, through in-place keywords.
pub const MAX_IN_PLACE: u64 = 10_000;

/// Keywords whose value is a schema applied to the same value.
const ONE: [&str; 4] = ["not", "if", "then", "else"];
/// Keywords whose value is a list of schemas applied to the same value.
const LISTS: [&str; 3] = ["allOf", "anyOf", "oneOf"];
/// Keywords whose value maps names to schemas applied to the same value.
const MAPS: [&str; 2] = ["dependentSchemas", "dependencies"];

/// Why a schema's in-place keywords cannot be applied: a loop (from `at`, through `path`), or more
/// subschemas per value than [`MAX_IN_PLACE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unbounded {
    Loop { path: Vec<String> },
    TooMany { at: String },
}

/// Every schema position of `root` (JSON pointers), and where references and anchors point.
struct Schema<'a> {
    root: &'a Value,
    /// `$anchor`/`$dynamicAnchor` names (and `#name` ids) → the pointers of the schemas naming them.
    anchors: HashMap<String, Vec<String>>,
    /// The schemas with `$recursiveAnchor: true`.
    recursive: Vec<String>,
}

impl<'a> Schema<'a> {
    fn new(root: &'a Value) -> Schema<'a> {
        let mut s = Schema { root, anchors: HashMap::new(), recursive: Vec::new() };
        let mut stack = vec![(String::new(), root)];
        while let Some((at, v)) = stack.pop() {
            match v {
                Value::Object(map) => {
                    for key in ["$anchor", "$dynamicAnchor"] {
                        if let Some(name) = map.get(key).and_then(Value::as_str) {
                            s.anchors.entry(name.to_string()).or_default().push(at.clone());
                        }
                    }
                    for key in ["$id", "id"] {
                        if let Some(name) =
                            map.get(key).and_then(Value::as_str).and_then(|i| i.strip_prefix('#'))
                        {
                            s.anchors.entry(name.to_string()).or_default().push(at.clone());
                        }
                    }
                    if map.get("$recursiveAnchor") == Some(&Value::Bool(true)) {
                        s.recursive.push(at.clone());
                    }
                    stack.extend(map.iter().map(|(k, v)| (format!("{at}/{}", escape(k)), v)));
                }
                Value::Array(items) => {
                    stack.extend(items.iter().enumerate().map(|(i, v)| (format!("{at}/{i}"), v)))
                }
                _ => {}
            }
        }
        s
    }

    fn at(&self, pointer: &str) -> Option<&'a Value> {
        self.root.pointer(pointer)
    }

    /// The schemas a reference may land on (a dynamic one, any of its anchor's).
    fn targets(&self, keyword: &str, reference: &str) -> Vec<String> {
        let Some(fragment) = reference.strip_prefix('#') else { return Vec::new() };
        let fragment = percent_decoded(fragment);
        if fragment.is_empty() || fragment.starts_with('/') {
            let mut out = vec![fragment];
            if keyword == "$recursiveRef" {
                out.extend(self.recursive.iter().cloned());
            }
            return out;
        }
        self.anchors.get(&fragment).cloned().unwrap_or_default()
    }

    /// The schemas applied to the same value as the schema at `at`.
    fn in_place(&self, at: &str) -> Vec<String> {
        let Some(Value::Object(map)) = self.at(at) else { return Vec::new() };
        let mut out = Vec::new();
        for (key, value) in map {
            let here = format!("{at}/{}", escape(key));
            match (key.as_str(), value) {
                ("$ref" | "$dynamicRef" | "$recursiveRef", Value::String(r)) => {
                    out.extend(self.targets(key, r))
                }
                (k, _) if ONE.contains(&k) => out.push(here),
                (k, Value::Array(items)) if LISTS.contains(&k) => {
                    out.extend((0..items.len()).map(|i| format!("{here}/{i}")))
                }
                (k, Value::Object(m)) if MAPS.contains(&k) => out.extend(
                    m.iter()
                        .filter(|(_, v)| v.is_object())
                        .map(|(name, _)| format!("{here}/{}", escape(name))),
                ),
                _ => {}
            }
        }
        out.retain(|p| self.at(p).is_some());
        out
    }
}

/// Refuses a schema whose in-place keywords loop or fan out past [`MAX_IN_PLACE`]: walks the graph
/// of in-place applications from every schema without recursion (a long chain of references costs
/// no stack), counting each schema's applications once.
pub fn check(root: &Value) -> Result<(), Unbounded> {
    let s = Schema::new(root);
    // Every object is where a reference may land, so each is a start; `count` memoises.
    let mut starts: Vec<String> = Vec::new();
    let mut stack = vec![(String::new(), root)];
    while let Some((at, v)) = stack.pop() {
        match v {
            Value::Object(map) => {
                starts.push(at.clone());
                stack.extend(map.iter().map(|(k, v)| (format!("{at}/{}", escape(k)), v)));
            }
            Value::Array(items) => {
                stack.extend(items.iter().enumerate().map(|(i, v)| (format!("{at}/{i}"), v)))
            }
            _ => {}
        }
    }
    let mut count: BTreeMap<String, u64> = BTreeMap::new();
    for start in starts {
        walk(&s, start, &mut count)?;
    }
    Ok(())
}

/// Depth-first from `start`: `count[p]` is how many schemas applying `p` applies, itself included.
fn walk(s: &Schema, start: String, count: &mut BTreeMap<String, u64>) -> Result<(), Unbounded> {
    if count.contains_key(&start) {
        return Ok(());
    }
    // The path being walked, each with its children still to visit.
    let mut path: Vec<(String, Vec<String>)> = vec![(start.clone(), s.in_place(&start))];
    let mut on_path: HashMap<String, usize> = HashMap::from([(start, 0)]);
    while let Some((at, children)) = path.last_mut() {
        match children.pop() {
            Some(child) if count.contains_key(&child) => {}
            Some(child) => {
                if let Some(&from) = on_path.get(&child) {
                    let mut loop_path: Vec<String> = path[from..].iter().map(|(p, _)| shown(p)).collect();
                    loop_path.push(shown(&child));
                    return Err(Unbounded::Loop { path: loop_path });
                }
                on_path.insert(child.clone(), path.len());
                let next = s.in_place(&child);
                path.push((child, next));
            }
            None => {
                let at = at.clone();
                let total = s
                    .in_place(&at)
                    .iter()
                    .map(|c| count.get(c).copied().unwrap_or(0))
                    .fold(1u64, u64::saturating_add);
                if total > MAX_IN_PLACE {
                    return Err(Unbounded::TooMany { at: shown(&at) });
                }
                on_path.remove(&at);
                count.insert(at, total);
                path.pop();
            }
        }
    }
    Ok(())
}

fn shown(pointer: &str) -> String {
    if pointer.is_empty() {
        "#".into()
    } else {
        format!("#{pointer}")
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A URI fragment's percent-escapes decoded (a JSON pointer in a `$ref` is written as a fragment);
/// a malformed escape is kept as it is.
fn percent_decoded(fragment: &str) -> String {
    let bytes = fragment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, ..) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn looped(schema: Value) -> bool {
        matches!(check(&schema), Err(Unbounded::Loop { .. }))
    }

    #[test]
    fn references_to_the_same_value_that_come_back_are_loops() {
        assert!(looped(json!({"type": "object", "$ref": "#", "unevaluatedProperties": false})));
        assert!(looped(
            json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
            "$ref": "#/$defs/a"})
        ));
        assert!(looped(json!({"$dynamicAnchor": "meta", "anyOf": [{"$dynamicRef": "#meta"}]})));
        assert!(looped(json!({"$recursiveAnchor": true, "not": {"$recursiveRef": "#"}})));
        assert!(looped(json!({"definitions": {"x": {"$id": "#x", "oneOf": [{"$ref": "#x"}]}}})));
        assert!(looped(json!({"$defs": {"a b": {"$ref": "#/$defs/a%20b"}}})));
        assert!(looped(json!({"if": {"$ref": "#"}})));
        assert!(looped(json!({"dependentSchemas": {"a": {"$ref": "#"}}})));
        let Err(Unbounded::Loop { path }) = check(&json!({"$defs": {"a": {"$ref": "#/$defs/a"}}})) else {
            panic!("a loop")
        };
        assert_eq!(path, ["#/$defs/a", "#/$defs/a"]);
    }

    #[test]
    fn recursion_through_the_value_is_what_trees_are_and_passes() {
        let tree = json!({"$defs": {"node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"});
        assert_eq!(check(&tree), Ok(()));
        assert_eq!(
            check(&json!({"properties": {"self": {"$ref": "#"}}, "unevaluatedProperties": false})),
            Ok(())
        );
        // A property named like a keyword is not one.
        assert_eq!(check(&json!({"properties": {"not": {"$ref": "#"}}})), Ok(()));
        assert_eq!(check(&json!(true)), Ok(()));
    }

    #[test]
    fn a_schema_that_doubles_at_each_level_is_refused_before_it_is_applied() {
        let mut defs = serde_json::Map::new();
        defs.insert("d0".into(), json!({"type": "string"}));
        for i in 1..=20 {
            let prev = format!("#/$defs/d{}", i - 1);
            defs.insert(format!("d{i}"), json!({"allOf": [{"$ref": prev}, {"$ref": prev}]}));
        }
        let schema = json!({"$defs": defs, "$ref": "#/$defs/d20"});
        assert!(matches!(check(&schema), Err(Unbounded::TooMany { .. })));
        // Eleven levels of doubling is about 4,000 applications: written by nobody, but allowed.
        let mut defs = serde_json::Map::new();
        defs.insert("d0".into(), json!({"type": "string"}));
        for i in 1..=10 {
            let prev = format!("#/$defs/d{}", i - 1);
            defs.insert(format!("d{i}"), json!({"allOf": [{"$ref": prev}, {"$ref": prev}]}));
        }
        assert_eq!(check(&json!({"$defs": defs, "$ref": "#/$defs/d10"})), Ok(()));
    }

    #[test]
    fn a_long_chain_of_references_costs_no_stack() {
        let mut defs = serde_json::Map::new();
        defs.insert("d0".into(), json!({}));
        for i in 1..5_000 {
            defs.insert(format!("d{i}"), json!({"$ref": format!("#/$defs/d{}", i - 1)}));
        }
        assert_eq!(check(&json!({"$defs": defs, "$ref": "#/$defs/d4999"})), Ok(()));
    }
}
