//! JSON Schemas for tools, taken from the OpenAPI document: a tool's schema must stand alone, so
//! every component it refers to comes with it, under `$defs`.

use anyhow::Context;
use serde_json::{json, Map, Value};

const COMPONENTS: &str = "#/components/schemas/";

/// The components one tool's schema needs, gathered as its parts are taken.
pub struct Bundle<'a> {
    components: &'a Map<String, Value>,
    defs: Map<String, Value>,
}

impl<'a> Bundle<'a> {
    pub fn new(components: &'a Map<String, Value>) -> Self {
        Bundle { components, defs: Map::new() }
    }

    /// `schema` with its references pointing into this bundle, the components they name taken in.
    pub fn take(&mut self, schema: &Value) -> anyhow::Result<Value> {
        Ok(match schema {
            Value::Object(fields) => {
                let mut out = Map::new();
                for (key, value) in fields {
                    let value = match (key.as_str(), value.as_str()) {
                        ("$ref", Some(target)) => json!(format!("#/$defs/{}", self.component(target)?)),
                        _ => self.take(value)?,
                    };
                    out.insert(key.clone(), value);
                }
                Value::Object(out)
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.take(v)).collect::<anyhow::Result<_>>()?)
            }
            other => other.clone(),
        })
    }

    /// Like `take`, but a root that only names a component is that component itself (a tool's
    /// schemas must say `"type": "object"` at their root).
    pub fn take_inlined(&mut self, schema: &Value) -> anyhow::Result<Value> {
        let taken = self.take(schema)?;
        let named = taken.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/"));
        Ok(match named {
            Some(name) => self.defs.get(name).cloned().unwrap_or(taken),
            None => taken,
        })
    }

    /// Whether `schema` describes a JSON object: says so, or every part of its `allOf` does (the
    /// shape `#[serde(flatten)]` gives), looked up in this bundle's components.
    pub fn describes_object(&self, schema: &Value) -> bool {
        if is_object(schema) {
            return true;
        }
        let resolved = |part: &Value| -> Option<Value> {
            match part.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
                Some(name) => self.defs.get(name).cloned(),
                None => Some(part.clone()),
            }
        };
        match schema.get("allOf").and_then(Value::as_array) {
            Some(parts) if !parts.is_empty() => {
                parts.iter().all(|p| resolved(p).is_some_and(|p| self.describes_object(&p)))
            }
            _ => false,
        }
    }

    /// `root` with the gathered components as its `$defs`.
    pub fn attach(self, mut root: Value) -> Value {
        if !self.defs.is_empty() {
            root["$defs"] = Value::Object(self.defs);
        }
        root
    }

    fn component(&mut self, target: &str) -> anyhow::Result<String> {
        let name = target
            .strip_prefix(COMPONENTS)
            .with_context(|| format!("a reference outside the components: {target}"))?;
        if !self.defs.contains_key(name) {
            let component = self.components.get(name).with_context(|| format!("no component {name}"))?;
            // Claimed before it is taken, so a component that refers to itself ends.
            self.defs.insert(name.to_string(), Value::Null);
            let taken = self.take(component)?;
            self.defs.insert(name.to_string(), taken);
        }
        Ok(name.to_string())
    }
}

/// Whether a schema describes a JSON object at its root.
pub fn is_object(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}
