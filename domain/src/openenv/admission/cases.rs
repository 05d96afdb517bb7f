//! Admission's shared cases: inputs and what these rules answer for each, written to
//! `tests/fixtures/openenv-admission-cases.json`. The participant's local check
//! (`scripts/openenv_check.py`) replays every case and must answer the same
//! (`tests/cli/test_openenv_check.py`), so the check a participant runs before spending a slot is
//! the arena's. The test fails when the file differs from what the rules give now; run it with
//! `ARENA_WRITE_FIXTURES=1` to write the file again, then commit it.

use serde_json::{json, Value};

use super::*;
use crate::openenv::evidence;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/openenv-admission-cases.json");

fn answer_json(a: &Option<Answer>) -> Value {
    a.as_ref().map_or(Value::Null, |a| json!({"status": a.status, "json": a.json}))
}

fn ok(v: Value) -> Option<Answer> {
    Some(Answer { status: 200, json: Some(v) })
}

fn criteria_cases() -> Value {
    let echo = Probe {
        openapi: ok(
            json!({"info": {"version": "1.0.0"}, "paths": {"/reset": {}, "/step": {}, "/state": {}, "/health": {}}}),
        ),
        health: ok(json!({"status": "healthy"})),
        metadata: ok(json!({"name": "echo_env", "description": "Echo"})),
        schema: ok(json!({"action": {}, "observation": {}, "state": {}})),
        mcp: ok(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32603, "message": "no MCP"}})),
    };
    let probes = [
        echo.clone(),
        Probe { health: None, ..echo.clone() },
        Probe { health: ok(json!({"status": "starting"})), ..echo.clone() },
        Probe { mcp: Some(Answer { status: 404, json: None }), ..echo.clone() },
        Probe { schema: ok(json!({"action": {}, "observation": {}})), ..echo.clone() },
        Probe { metadata: ok(json!({"name": "x"})), ..echo.clone() },
        Probe {
            openapi: ok(json!({"info": {"version": "1"}, "paths": {"/reset": {}, "/health": {}}})),
            ..echo.clone()
        },
        Probe { openapi: ok(json!({"info": {"version": "1"}, "paths": {"/health": {}}})), ..echo.clone() },
        Probe { openapi: ok(json!({"info": {"version": 1}, "paths": {"/health": {}}})), ..echo.clone() },
        Probe { openapi: ok(json!({"info": {"version": "1"}, "paths": {}})), ..echo.clone() },
        Probe { openapi: Some(Answer { status: 500, json: None }), ..echo },
        Probe::default(),
    ];
    probes
        .iter()
        .map(|p| {
            let failed: Vec<String> = criteria(p).into_iter().filter(|c| !c.passed).map(|c| c.id).collect();
            json!({"probe": {"openapi": answer_json(&p.openapi), "health": answer_json(&p.health),
                "metadata": answer_json(&p.metadata), "schema": answer_json(&p.schema), "mcp": answer_json(&p.mcp)},
                "failed": failed})
        })
        .collect()
}

fn schema_diff_cases() -> Value {
    let base = json!({"action": {"type": "object", "properties": {"answer": {"type": "string", "description": "the answer"}},
        "required": ["answer"]}, "observation": {"type": "object"}});
    let mut described = base.clone();
    described["action"]["properties"]["answer"]["description"] = json!("The answer");
    let many: serde_json::Map<String, Value> =
        (0..12).map(|i| (format!("p{i:02}"), json!("x".repeat(150)))).collect();
    let pairs = [
        (base.clone(), base.clone()),
        (described, base.clone()),
        (
            json!({"action": {"a/b": 1, "n": 1, "t": true}, "observation": {}, "state": {}}),
            json!({"action": {"n": 1.0, "t": 1}, "observation": {"extra": [1, 2]}}),
        ),
        (
            json!({"action": {"enum": [1, 2, 3]}, "observation": {}}),
            json!({"action": {"enum": [1, 2]}, "observation": {}}),
        ),
        (json!({"action": many, "observation": {}}), json!({"action": {}, "observation": {}})),
        (json!({"action": {"é~": "ü"}}), json!({"action": {"é~": "u"}, "observation": {}})),
    ];
    pairs
        .iter()
        .map(|(served, submitted)| {
            let (differences, more) = evidence::schema_differences(served, submitted);
            json!({"served": served, "submitted": submitted, "differences": differences, "more": more})
        })
        .collect()
}

fn episode_cases() -> Value {
    let step = |reward: Option<f64>, done| Step { reward, done };
    let cases: Vec<(Step, Vec<Step>, usize)> = vec![
        (step(None, false), vec![step(Some(0.0), false), step(Some(1.0), true)], 2),
        (step(None, false), vec![step(Some(0.5), false)], 1),
        (step(None, false), vec![step(Some(1.5), true)], 1),
        (step(None, false), vec![step(None, true)], 1),
        (step(None, true), vec![], 1),
        (step(Some(0.0), false), vec![step(Some(0.0), true)], 3),
        (step(None, false), vec![step(Some(-0.1), true)], 1),
    ];
    cases
        .iter()
        .map(|(reset, steps, n)| {
            let steps_json: Vec<Value> =
                steps.iter().map(|s| json!({"reward": s.reward, "done": s.done})).collect();
            json!({"reset": {"reward": reset.reward, "done": reset.done}, "steps": steps_json, "actions": n,
                "reward": judge_episode(reset, steps, *n).ok()})
        })
        .collect()
}

fn finish_cases() -> Value {
    [(Some(0.5), true), (Some(0.0), false), (Some(2.0), true), (None, true), (Some(1.0), true), (None, false)]
        .iter()
        .map(|(reward, done)| {
            let s = Step { reward: *reward, done: *done };
            json!({"step": {"reward": reward, "done": done}, "reward": judge_finish(&s, "from a fresh reset").ok()})
        })
        .collect()
}

fn warning_cases() -> Value {
    let obs = |s: &str| json!({"board": s}).to_string();
    let cases: Vec<Vec<(&str, Vec<String>)>> = vec![
        vec![("a", vec![obs("x"), obs("x")]), ("b", vec![obs("x"), obs("x")])],
        vec![("a", vec![obs("x"), obs("x")]), ("b", vec![obs("y"), obs("y")])],
        vec![("a", vec![obs("x"), obs("x")])],
        vec![("a", vec![obs("x"), obs("z")]), ("b", vec![obs("x"), obs("x")])],
        vec![("a", vec![obs("x")]), ("b", vec![obs("x"), obs("x")])],
    ];
    cases
        .iter()
        .map(|tasks| {
            let fingerprints: Vec<(String, Vec<String>)> = tasks
                .iter()
                .map(|(t, o)| {
                    (
                        t.to_string(),
                        o.iter()
                            .map(|text| evidence::fingerprint(&serde_json::from_str(text).unwrap()))
                            .collect(),
                    )
                })
                .collect();
            let observations: serde_json::Map<String, Value> =
                tasks.iter().map(|(t, o)| (t.to_string(), json!(o))).collect();
            json!({"tasks": observations, "warned": evidence::ignored_task_ids(&fingerprints)})
        })
        .collect()
}

fn all_cases() -> Value {
    json!({
        "about": "Admission's shared cases, written by domain/src/openenv/admission/cases.rs; the participant's check (scripts/openenv_check.py) replays them (tests/cli/test_openenv_check.py).",
        "limits": {"max_differences": evidence::MAX_DIFFERENCES, "max_value_chars": evidence::MAX_VALUE_CHARS,
            "max_observation_chars": evidence::MAX_OBSERVATION_CHARS, "max_evidence_bytes": evidence::MAX_EVIDENCE_BYTES,
            "absent": evidence::ABSENT},
        "criteria": criteria_cases(),
        "schema_diff": schema_diff_cases(),
        "episodes": episode_cases(),
        "finish": finish_cases(),
        "warnings": warning_cases(),
    })
}

#[test]
fn the_shared_cases_are_what_the_rules_answer() {
    let now = serde_json::to_string_pretty(&all_cases()).unwrap() + "\n";
    if std::env::var_os("ARENA_WRITE_FIXTURES").is_some() {
        std::fs::write(FIXTURE, &now).unwrap();
    }
    let written = std::fs::read_to_string(FIXTURE).unwrap_or_default();
    assert!(
        written == now,
        "{FIXTURE} is not what admission answers now: run `ARENA_WRITE_FIXTURES=1 cargo test -p domain --lib shared_cases`, then commit it"
    );
}
