//! An OpenEnv body's schemas and actions through the check the arena runs on them
//! (`openenv::schema::SchemaCheck::run`: the reference and in-place-loop rules, then the
//! `jsonschema` compiler and validator), in-process: a crash or hang here is one the arena's
//! schema guard (a child process under a deadline) would contain, and a refusal rule is missing.
//! The input is JSON: `{"schema": {"action": …, "observation": …}, "actions": [["name", …]]}`, or
//! any JSON value taken as the action schema with one action `{}`.
#![no_main]

use domain::openenv::schema::SchemaCheck;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let check = serde_json::from_value::<SchemaCheck>(value.clone()).unwrap_or_else(|_| SchemaCheck {
        schema: serde_json::json!({"action": value, "observation": {}}),
        actions: vec![("example action 0".into(), serde_json::json!({}))],
    });
    let _ = check.run();
});
