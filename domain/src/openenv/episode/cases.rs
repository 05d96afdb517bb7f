//! The episode contract's shared cases: inputs and what this module answers for each, written to
//! `tests/fixtures/openenv-episode-cases.json`. The arena's trainer (`cluster/`, Python) replays
//! every case and must answer the same (`cluster/tests/test_contract.py`), so no rule lives in one
//! language only. The test fails when the file differs from what the rules give now; run it with
//! `ARENA_WRITE_FIXTURES=1` to write the file again, then commit it.

use crate::invalid::Invalid;
use serde_json::{json, Value};

use super::*;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/openenv-episode-cases.json");

fn task(limits: Value) -> (Value, TaskSpec) {
    let mut base = json!({"task_id": "t", "split": "train"});
    base.as_object_mut().unwrap().extend(limits.as_object().unwrap().clone());
    let spec = serde_json::from_value(base.clone()).unwrap();
    (base, spec)
}

fn end_json(end: &End) -> Value {
    match end {
        End::Done(r) => json!({"kind": "done", "reward": r}),
        End::Finished => json!({"kind": "finished"}),
        // The reason's words are each parser's own; the kind is the contract.
        End::InvalidReply(_) => json!({"kind": "invalid_reply"}),
        End::ToolCallsExhausted => json!({"kind": "tool_calls_exhausted"}),
        End::OutOfTokens(what) => json!({"kind": "out_of_tokens", "why": what}),
    }
}

fn validator(schema: &Value) -> impl Fn(&Value) -> Result<(), Invalid> {
    let v = jsonschema::validator_for(schema).expect("a valid schema");
    move |a: &Value| v.validate(a).map_err(|e| Invalid(e.to_string()))
}

fn echo_schema() -> Value {
    json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"],
        "additionalProperties": false})
}

fn json_texts() -> Value {
    let values = [
        json!({"b": 1, "a": [true, false, null], "c": {"z": "x", "y": 0.5}}),
        json!({"echoed_message": "Arena Echo environment ready!", "message_length": 0, "task_id": "echo-1"}),
        json!([0.1, 1.0, -0.0, 1e-7, 1e-5, 0.0001, 1e15, 1e16, 1e21, 123456789.125, 2.5e-300, -7.25]),
        json!([
            f64::MAX,
            5e-324,
            9.999e-6,
            0.3,
            2.0 / 3.0,
            1e100,
            -1e-100,
            1234567890123456.0,
            12345678901234567.0
        ]),
        json!([0, -1, 18446744073709551615u64, -9223372036854775808i64]),
        json!({"s": "quote \" back \\ nl \n tab \t cr \r bell \u{7} nul \u{0} del \u{7f} é ✓ 𝄞"}),
        json!({"Z": 1, "a": 2, "é": 3, "_": 4, "10": 5, "9": 6}),
        json!({}),
        json!(""),
    ];
    values.iter().map(|v| json!({"value": v, "text": v.to_string()})).collect()
}

fn replies() -> Value {
    let schemas = [
        echo_schema(),
        json!({"type": "object"}),
        json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}),
    ];
    let texts = [
        r#"{"message": "hi"}"#,
        " \n{\"message\": \"hi\"}\t\n",
        r#"{"finish": true}"#,
        r#"{"finish": false}"#,
        r#"{"action": {"message": "hi"}}"#,
        r#"{"action": {"text": "hi"}}"#,
        r#"{"action": {"message": "hi"}, "why": 1}"#,
        r#"{"action": "hi"}"#,
        r#"{"message": 3}"#,
        r#"{"message": "a", "extra": 1}"#,
        r#"{"n": 4}"#,
        r#"{"n": -1}"#,
        r#"{"n": 4.5}"#,
        "",
        "hello",
        r#"{"message": "a"} {"message": "b"}"#,
        "[1]",
        "\"x\"",
        "null",
        r#"Sure! {"message": "a"}"#,
        r#"{"message": "a""#,
        r#"{"n": NaN}"#,
        r#"{"message": "a",}"#,
        "<think>\n\n</think>\n\n{\"message\": \"a\"}",
    ];
    let mut out = Vec::new();
    for schema in &schemas {
        let valid = validator(schema);
        for text in texts {
            let expect = match read_reply(text, &valid) {
                Reply::Action(a) => json!({"kind": "action", "action": a}),
                Reply::Finish => json!({"kind": "finish"}),
                Reply::Invalid(_) => json!({"kind": "invalid"}),
            };
            out.push(json!({"schema": schema, "text": text, "expect": expect}));
        }
    }
    Value::Array(out)
}

fn pacing() -> Value {
    let plans: [(Value, &[u64]); 4] = [
        (json!({"tool_calls_per_minute": 60, "tool_calls_total": 7}), &[0, 0, 0, 0, 0, 0, 60_000, 60_000]),
        (json!({"tool_calls_per_minute": 6}), &[0, 0, 0, 0, 0, 10_000, 10_000, 35_000]),
        (
            json!({"tool_calls_per_minute": 7, "tool_calls_total": 9}),
            &[5, 5, 5, 5, 5, 5, 100_000, 100_001, 100_002, 100_003],
        ),
        (json!({"tool_calls_per_minute": 1, "tool_calls_total": 3}), &[1000, 500, 0]),
    ];
    plans
        .iter()
        .map(|(limits, nows)| {
            let (t, spec) = task(limits.clone());
            let mut p = Pacer::new(&spec, nows[0]);
            let takes: Vec<Value> = nows.iter().map(|&now| json!([now, p.take(now)])).collect();
            json!({"task": t, "start_ms": nows[0], "takes": takes})
        })
        .collect()
}

/// One scripted episode: its operations, what each answered, and the conversation at the end.
fn episode_case(limits: Value, schema: Value, reset: Value, tokens: (u64, u64), ops: Vec<Value>) -> Value {
    tools_episode_case(limits, schema, Vec::new(), reset, tokens, ops)
}

/// The same for a tools environment: its tools in the system message.
fn tools_episode_case(
    limits: Value,
    schema: Value,
    tools: Vec<Value>,
    reset: Value,
    tokens: (u64, u64),
    ops: Vec<Value>,
) -> Value {
    let (t, spec) = task(limits);
    let valid = validator(&schema);
    let mut e = Episode::start(&spec, &schema, &tools, &reset, tokens.0, tokens.1, 0);
    let mut steps = Vec::new();
    let started = e.ended().map(end_json);
    for op in ops {
        let mut step = op.clone();
        if let Some(text) = op["reply"].as_str() {
            let turn = e.reply(text, op["tokens"].as_u64().unwrap(), &valid, op["now_ms"].as_u64().unwrap());
            step["expect"] = match turn {
                Turn::Call { action, at_ms } => json!({"call": action, "at_ms": at_ms}),
                Turn::End(end) => json!({"end": end_json(&end)}),
            };
        } else {
            let end = e.observe(
                &op["observe"],
                op["tokens"].as_u64().unwrap(),
                op["reward"].as_f64(),
                op["done"].as_bool().unwrap(),
            );
            step["expect"] = json!({"end": end.as_ref().map(end_json)});
        }
        steps.push(step);
    }
    let messages: Vec<Value> =
        e.messages.iter().map(|m| json!({"role": m.role, "content": m.content})).collect();
    json!({"task": t, "schema": schema, "tools": tools, "reset": reset, "system_tokens": tokens.0,
        "observation_tokens": tokens.1, "started": started, "steps": steps, "messages": messages})
}

fn reply(text: &str, tokens: u64, now_ms: u64) -> Value {
    json!({"reply": text, "tokens": tokens, "now_ms": now_ms})
}

fn observe(obs: Value, tokens: u64, reward: Option<f64>, done: bool) -> Value {
    json!({"observe": obs, "tokens": tokens, "reward": reward, "done": done})
}

fn episodes() -> Value {
    let echo = echo_schema;
    json!([
        episode_case(
            json!({}),
            echo(),
            json!({"prompt": "echo", "n": 0.5}),
            (50, 10),
            vec![
                reply(r#"{"message": "a"}"#, 5, 0),
                observe(json!({"echoed": "a", "len": 1}), 5, Some(0.0), false),
                reply(r#"{"action": {"message": "done"}}"#, 7, 10),
                observe(json!({}), 5, Some(0.7), true),
            ]
        ),
        episode_case(
            json!({}),
            echo(),
            json!({}),
            (50, 10),
            vec![reply("not json", 3, 0), reply(r#"{"message": "a"}"#, 3, 0)]
        ),
        episode_case(json!({}), echo(), json!({}), (50, 10), vec![reply(r#"{"finish": true}"#, 3, 0)]),
        episode_case(
            json!({"completion_tokens": 100, "context_tokens": 16384}),
            echo(),
            json!({}),
            (50, 10),
            vec![reply(r#"{"message": "a"}"#, 60, 0), observe(json!({"x": 1}), 41, None, false),]
        ),
        episode_case(
            json!({"completion_tokens": 100}),
            echo(),
            json!({}),
            (50, 10),
            vec![reply(r#"{"message": "a"}"#, 101, 0)]
        ),
        episode_case(
            json!({"completion_tokens": 100}),
            echo(),
            json!({}),
            (50, 10),
            vec![reply(r#"{"message": "a"}"#, 100, 0), observe(json!({}), 0, None, false)]
        ),
        episode_case(
            json!({"context_tokens": 100}),
            json!({}),
            json!({}),
            (50, 51),
            vec![reply(r#"{"a": 1}"#, 1, 0)]
        ),
        episode_case(json!({"context_tokens": 100}), echo(), json!({}), (60, 40), vec![]),
        episode_case(
            json!({"context_tokens": 100}),
            echo(),
            json!({}),
            (50, 10),
            vec![reply(r#"{"message": "a"}"#, 30, 0), observe(json!({"y": [1, 2]}), 11, None, false),]
        ),
        episode_case(
            json!({"tool_calls_total": 5, "tool_calls_per_minute": 30}),
            echo(),
            json!({}),
            (1, 1),
            vec![
                reply(r#"{"message": "a"}"#, 1, 0),
                observe(json!({"i": 1}), 1, None, false),
                reply(r#"{"message": "a"}"#, 1, 0),
                observe(json!({"i": 2}), 1, None, false),
                reply(r#"{"message": "a"}"#, 1, 0),
                observe(json!({"i": 3}), 1, None, false),
                reply(r#"{"message": "a"}"#, 1, 0),
                observe(json!({"i": 4}), 1, None, false),
                reply(r#"{"message": "a"}"#, 1, 0),
                observe(json!({"i": 5}), 1, None, false),
                reply(r#"{"message": "a"}"#, 1, 2000),
            ]
        ),
        episode_case(
            json!({}),
            echo(),
            json!({}),
            (1, 1),
            vec![
                reply(r#"{"message": "a"}"#, 1, 0),
                observe(json!({"z": "last"}), 1, Some(1.5), true),
                reply(r#"{"message": "b"}"#, 1, 0),
                observe(json!({}), 1, Some(0.5), true),
            ]
        ),
        tools_episode_case(
            json!({}),
            call_tool_schema(),
            tools(),
            json!({}),
            (200, 2),
            vec![
                reply(r#"{"type": "call_tool", "tool_name": "echo", "arguments": {"message": "hi"}}"#, 9, 0),
                observe(json!({"tool_name": "echo", "result": "hi", "error": null}), 12, None, false),
                reply(r#"{"tool_name": "finish", "arguments": {}}"#, 7, 10),
                observe(json!({"tool_name": "finish", "result": "done", "error": null}), 12, Some(1.0), true),
            ]
        ),
    ])
}

/// openenv 0.10's `CallToolAction` schema, as a tools environment's `/schema` serves it.
fn call_tool_schema() -> Value {
    json!({"additionalProperties": false, "title": "CallToolAction", "type": "object", "required": ["tool_name"],
        "properties": {
            "metadata": {"additionalProperties": true, "type": "object"},
            "type": {"const": "call_tool", "default": "call_tool", "type": "string"},
            "tool_name": {"type": "string"},
            "arguments": {"additionalProperties": true, "type": "object"}}})
}

/// A tools environment's tools as the system message shows them (`admission::tool_list`).
fn tools() -> Vec<Value> {
    vec![
        json!({"name": "echo", "description": "Echo a message back.",
            "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}}),
        json!({"name": "finish", "description": "End the episode with a reward of 1.", "input_schema": {"type": "object"}}),
    ]
}

fn scores() -> Value {
    let ends = [
        End::Done(Some(0.5)),
        End::Done(Some(1.5)),
        End::Done(Some(-0.1)),
        End::Done(None),
        End::Done(Some(1.0)),
        End::Done(Some(0.0)),
        End::Finished,
        End::InvalidReply(String::new()),
        End::ToolCallsExhausted,
        End::OutOfTokens("the reply"),
    ];
    let finishes = [None, Some(0.25), Some(1.0), Some(2.0)];
    let mut out = Vec::new();
    for end in &ends {
        for f in finishes {
            out.push(json!({"end": end_json(end), "finish_reward": f, "score": score(end, f)}));
        }
    }
    Value::Array(out)
}

fn groups() -> Value {
    let cases: [Vec<Option<f64>>; 5] = [
        vec![Some(0.1), None, Some(0.2), Some(0.3), Some(0.4), Some(0.5)],
        vec![Some(1.0), None, Some(0.0), Some(0.5), None],
        vec![Some(0.0); 5],
        vec![None; 5],
        vec![Some(0.5), Some(1.0), Some(0.0), Some(0.25)],
    ];
    cases.iter().map(|s| json!({"scores": s, "group": training_group(s)})).collect()
}

fn no_signals() -> Value {
    let (t, f, n) = (Some(true), Some(false), None);
    let cases: [&[Option<bool>]; 10] = [
        &[f, f, f, f, f],
        &[f, f, f, f],
        &[t, f, f, f, f, f],
        &[f, f, f, f, t],
        &[f, f, t, f, f, f, f],
        &[t, t, t, t, t, t],
        &[],
        // Steps the platform spoiled are not counted, either way.
        &[f, f, n, n, f, f],
        &[f, f, n, f, f, f],
        &[n, n, n, n, n, n],
    ];
    cases.iter().map(|c| json!({"trained": c, "ends": no_signal(c)})).collect()
}

fn step_counts() -> Value {
    let (a, b) = (Some(1.0), Some(0.0));
    let cases: [(&[Option<f64>], usize); 10] = [
        (&[a, b, a, a, b], 0),
        (&[a, a, a, a, b], 0),
        (&[a, a, a, a], 0),
        (&[b, b, None, b, b], 1),
        (&[a, None, b, None, None], 1),
        (&[a, None, b, None, None], 2),
        (&[a, None, None, None, None], 2),
        (&[None, None, None, None, None], 5),
        (&[None, None, None, None, None], 0),
        (&[], 0),
    ];
    cases
        .iter()
        .map(|&(scores, lost)| json!({"scores": scores, "lost": lost, "trained": step_trained(scores, lost)}))
        .collect()
}

fn steps() -> Value {
    let tasks = json!([
        {"task_id": "a", "split": "train", "rollout_wall_s": 60},
        {"task_id": "e", "split": "eval"},
        {"task_id": "b", "split": "train", "reset_wall_s": 120, "verifier_wall_s": 30},
    ]);
    let specs: Vec<TaskSpec> = serde_json::from_value(tasks.clone()).unwrap();
    let mut order = Vec::new();
    for step in 0..5u64 {
        order.push(json!({"step": step, "task_id": step_task(&specs, step).map(|t| t.task_id.clone())}));
    }
    let eval_only: Vec<TaskSpec> = specs[1..2].to_vec();
    order.push(
        json!({"step": 0, "only_eval": true, "task_id": step_task(&eval_only, 0).map(|t| t.task_id.clone())}),
    );
    let mut fits = Vec::new();
    for (t, spec) in tasks.as_array().unwrap().iter().zip(&specs) {
        for (elapsed, update, limit) in
            [(0, 300, RUN_LIMIT_S), (12_000, 300, RUN_LIMIT_S), (14_000, 10, RUN_LIMIT_S), (0, 300, 1000)]
        {
            fits.push(json!({"task": t, "elapsed_s": elapsed, "update_s": update, "limit_s": limit,
                "allowance_s": step_allowance_s(spec, update), "fits": step_fits(elapsed, spec, update, limit)}));
        }
    }
    json!({"tasks": tasks, "order": order, "fits": fits})
}

fn ws() -> Value {
    let messages = [
        json!({"type": "observation", "data": {"observation": {"x": 1}, "reward": 0.5, "done": true}}),
        // openenv 0.10: `metadata` inside the observation (and beside it); never shown to the model.
        json!({"type": "observation", "data": {"observation": {"metadata": {"step": 1}, "echoed_message": "hi"},
            "reward": 0.0, "done": false, "metadata": {"step": 1}}}),
        json!({"type": "observation", "data": {"observation": {"metadata": {"prompt": "2+2?",
            "task_spec": {"question": "2+2?", "answer": "4"}}}, "reward": null, "done": false}}),
        json!({"type": "observation", "data": {"observation": {"x": 1}, "reward": 1, "done": false}}),
        json!({"type": "observation", "data": {"observation": "text", "reward": null}}),
        json!({"type": "observation", "data": {"reward": "0.5", "done": "yes"}}),
        json!({"type": "error", "data": {"message": "bad"}}),
        json!({"data": {}}),
    ];
    let answers: Vec<Value> =
        messages.iter().map(|m| json!({"message": m, "observation": ws_observation(m)})).collect();
    json!({"messages": answers, "reset": ws_reset(&reset_for("echo-1")),
        "task_api_reset": ws_reset(&json!({"split": "train", "index": 1})), "step": ws_step(&json!({"message": "a"}))})
}

fn system_prompts() -> Value {
    [(echo_schema(), Vec::new()), (json!({"type": "object"}), Vec::new()), (call_tool_schema(), tools())]
        .iter()
        .map(|(s, tools)| json!({"schema": s, "tools": tools, "text": system_prompt(s, tools)}))
        .collect()
}

fn all_cases() -> Value {
    json!({
        "about": "The episode contract's shared cases, written by domain/src/openenv/episode/cases.rs; the trainer's tests replay them (cluster/tests/test_contract.py).",
        "constants": {"episodes_per_step": EPISODES_PER_STEP, "episodes_that_train": EPISODES_THAT_TRAIN,
            "tool_call_burst": TOOL_CALL_BURST, "run_limit_s": RUN_LIMIT_S, "no_update_steps": NO_UPDATE_STEPS},
        "json_text": json_texts(),
        "system_prompt": system_prompts(),
        "replies": replies(),
        "pacing": pacing(),
        "episodes": episodes(),
        "scores": scores(),
        "groups": groups(),
        "no_signal": no_signals(),
        "step_trained": step_counts(),
        "steps": steps(),
        "ws": ws(),
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
        "{FIXTURE} is not what the contract answers now: run `ARENA_WRITE_FIXTURES=1 cargo test -p domain --lib shared_cases`, then commit it"
    );
}
