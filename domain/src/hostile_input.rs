//! Every reader of participant data, fed the shapes that take parsers down: nesting far past any
//! real file, alias expansion, endless continuation lines. Each answers (a refusal or a bounded
//! reading) on the test thread's own stack, which is smaller than a tokio worker's; none recurses
//! without bound. `fuzz/` fuzzes the same readers for longer (`fuzz/README.md`).

use serde_json::json;

#[test]
fn deep_yaml_and_alias_bombs_are_refused_within_the_budget() {
    let deep = format!("a: {}1{}", "[".repeat(50_000), "]".repeat(50_000));
    assert!(crate::collection::frontmatter::parse_yaml(&deep).is_err());
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..20 {
        bomb += &format!(
            "{}: &{} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n",
            (b'a' + i) as char,
            (b'a' + i) as char,
            p = (b'a' + i - 1) as char
        );
    }
    assert!(crate::collection::frontmatter::parse_yaml(&bomb).is_err());
}

#[test]
fn deep_toml_is_refused_not_overflowed() {
    let arrays = format!("a = {}1{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(crate::collection::package::harbor_meta(&arrays).is_err());
    let tables = format!("a = {}1{}", "{b = ".repeat(100_000), "}".repeat(100_000));
    assert!(crate::collection::package::harbor_meta(&tables).is_err());
}

#[test]
fn deep_json_is_refused_by_the_parser_every_body_goes_through() {
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(serde_json::from_str::<serde_json::Value>(&deep).is_err());
}

#[test]
fn dockerfiles_and_verifiers_are_read_to_a_bound() {
    let endless = format!("FROM x\nRUN a \\\n{}", "b \\\n".repeat(200_000));
    assert!(crate::gates::dockerfile::instructions(&endless).len() <= 2_000);
    let many = "RUN x\n".repeat(100_000);
    assert!(crate::gates::dockerfile::instructions(&many).len() <= 2_000);
    let nested = format!("x = {}1{}\nassert x", "(".repeat(200_000), ")".repeat(200_000));
    let tokens = crate::gates::python::tokenize(&nested);
    assert!(tokens.len() <= 200_001, "the bound and its closing newline");
    let _ = crate::gates::python::analyse(&nested);
}

#[test]
fn schemas_that_loop_or_explode_are_refused_before_a_validator_sees_them() {
    use crate::openenv::schema::draft_of;
    assert!(draft_of(&json!({"type": "object", "$ref": "#", "unevaluatedProperties": false})).is_err());
    assert!(draft_of(&json!({"$dynamicAnchor": "a", "anyOf": [{"$dynamicRef": "#a"}]})).is_err());
    let mut defs = serde_json::Map::new();
    defs.insert("d0".into(), json!({}));
    for i in 1..=40 {
        defs.insert(format!("d{i}"), json!({"anyOf": [{"$ref": format!("#/$defs/d{}", i - 1)}, {"$ref": format!("#/$defs/d{}", i - 1)}]}));
    }
    assert!(draft_of(&json!({"$defs": defs, "$ref": "#/$defs/d40"})).is_err());
}
