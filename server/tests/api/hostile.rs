//! A participant playing the attacker at the edge (issue 56): schemas that sent the schema compiler
//! into unbounded recursion or exponential time, through the JSON API and MCP, each followed by
//! `/api/version` on the served port; generated recursive and reference-heavy schemas through the
//! same check (`openenv::schema_guard`); a handler's panic answered and survived; the arena's own
//! accounts refused as callers everywhere; webhooks' owner scoping, redelivery bound, sealed
//! secrets and refusals; `/mcp`'s `Origin` and `Host` checks.

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::harness::{Backend, Options, TestApp, ALICE, ARENA_BOT, BOB, LEAKY_READER, SANDBOX_TOKEN};
use crate::on_both_backends;

fn code(a: &crate::harness::Answer) -> (u16, String) {
    (a.status.as_u16(), a.json()["code"].as_str().unwrap_or("").to_string())
}

/// An echo submission whose action schema is `action` and whose one example action is `example`.
fn with_schema(id: &str, action: Value, example: Value) -> Value {
    let mut body = crate::openenv::echo_submission(id, "ghcr.io/test/echo-ok:v1");
    body["schema"]["action"] = action;
    body["example_actions"] = json!([example]);
    body.as_object_mut().unwrap().remove("finish_action");
    body
}

/// A JSON-RPC `tools/call` of `/mcp`, as an MCP client sends it (stateless: no session), to the
/// arena's own host unless `headers` name another.
async fn mcp_call(
    app: &TestApp,
    token: &str,
    tool: &str,
    arguments: Value,
    headers: &[(&str, &str)],
) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let bearer = format!("Bearer {token}");
    let host = app.url.split("://").nth(1).unwrap_or_default().to_string();
    let mut all = vec![("authorization", bearer.as_str()), ("accept", "application/json, text/event-stream")];
    if !headers.iter().any(|(k, _)| *k == "host") {
        all.push(("host", host.as_str()));
    }
    all.extend_from_slice(headers);
    let a = app.call(Method::POST, "/mcp", Some(&body.to_string()), &all).await;
    serde_json::from_slice(&a.body).unwrap_or_else(|_| json!({"status": a.status.as_u16(), "text": a.text()}))
}

/// The served port still answers, and fast: the process was not taken down.
async fn still_serving(app: &TestApp, after: &str) {
    let version = reqwest::Client::new()
        .get(format!("{}/api/version", app.url))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap_or_else(|e| panic!("after {after}: /api/version did not answer: {e}"));
    assert_eq!(version.status(), 200, "after {after}");
}

/// Doubling through `allOf` at each of `levels` levels: 2^levels applications of the leaf.
fn doubling(levels: usize) -> Value {
    let mut defs = serde_json::Map::new();
    defs.insert("d0".into(), json!({"type": "object"}));
    for i in 1..=levels {
        let prev = format!("#/$defs/d{}", i - 1);
        defs.insert(format!("d{i}"), json!({"allOf": [{"$ref": prev}, {"$ref": prev}]}));
    }
    json!({"$defs": defs, "$ref": format!("#/$defs/d{levels}")})
}

fn nested(depth: usize) -> Value {
    let mut v = json!({"type": "object"});
    for _ in 0..depth {
        v = json!({"properties": {"a": v}});
    }
    v
}

/// The shapes of the issue, and their kin: each is refused (nothing stored) and the server serves
/// on.
fn hostile_shapes() -> Vec<(&'static str, Value, Value)> {
    let message = json!({"message": "hi"});
    vec![
        (
            "$ref # beside unevaluatedProperties",
            json!({"type": "object", "$ref": "#", "unevaluatedProperties": false}),
            message.clone(),
        ),
        (
            "$dynamicRef loop",
            json!({"$dynamicAnchor": "a", "type": "object", "anyOf": [{"$dynamicRef": "#a"}], "unevaluatedProperties": false}),
            message.clone(),
        ),
        (
            "$recursiveRef loop",
            json!({"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveAnchor": true, "allOf": [{"$recursiveRef": "#"}], "unevaluatedItems": false}),
            message.clone(),
        ),
        (
            "two definitions referring to each other",
            json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a", "unevaluatedProperties": false}),
            message.clone(),
        ),
        ("not of itself", json!({"not": {"$ref": "#"}}), message.clone()),
        ("exponential allOf", doubling(30), message.clone()),
        ("nested past the depth bound", nested(100), message.clone()),
        (
            "catastrophic pattern",
            json!({"type": "object", "properties": {"message": {"type": "string", "pattern": "^(a+)+$"}}}),
            json!({"message": format!("{}!", "a".repeat(64))}),
        ),
    ]
}

// Every shape, by the JSON API (check and submission) and by MCP: refused, nothing stored, and the
// served port answers after each. On the code before the schema guard, the first shape aborted
// the whole process (a stack overflow on a tokio worker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_schemas_are_refused_and_the_server_serves_on() {
    let app = TestApp::new(Backend::Sqlite).await;
    let cluster = crate::held_out::connect(&app).await;
    for (i, (what, action, example)) in hostile_shapes().into_iter().enumerate() {
        let body = with_schema(&format!("hostile-{i}"), action, example);
        // Refused as a schema (422), or as a body past serde_json's nesting bound (400).
        let refused =
            |a: &crate::harness::Answer| matches!(code(a).1.as_str(), "SCHEMA_INVALID" | "INVALID_JSON");
        let checked = app.post_as("/api/openenv/check", &body.to_string(), ALICE).await;
        assert!(refused(&checked), "{what}: {}", checked.text());
        still_serving(&app, what).await;
        let submitted = app.post_as("/api/openenv/submissions", &body.to_string(), ALICE).await;
        assert!(refused(&submitted), "{what}: {}", submitted.text());
        still_serving(&app, what).await;
        // A tool error with the route's code, or rmcp's own refusal of a body past its nesting bound.
        let tool = mcp_call(&app, ALICE, "openenv_check", json!({"body": body}), &[]).await;
        let refused = (tool["result"]["isError"] == true
            && tool["result"].to_string().contains(&code(&checked).1))
            || tool["status"].as_u64().is_some_and(|s| (400..500).contains(&s));
        assert!(refused, "{what}: {tool}");
        still_serving(&app, what).await;
    }
    // The issue's own shape says why, in the submitter's words.
    let first = with_schema("why", hostile_shapes()[0].1.clone(), json!({"message": "hi"}));
    let why = app.post_as("/api/openenv/check", &first.to_string(), ALICE).await.json();
    assert_eq!(why["code"], "SCHEMA_INVALID");
    assert!(why["message"].as_str().unwrap().contains("without end"), "{why}");
    assert_eq!(app.scalar("SELECT COUNT(*) FROM openenv_submissions").await, 0, "nothing stored");
    // A recursive schema that descends into the value is what trees are: accepted.
    let tree = json!({"$defs": {"node": {"type": "object", "properties": {"message": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"});
    let ok = app
        .post_as(
            "/api/openenv/check",
            &with_schema("tree", tree, json!({"message": "hi"})).to_string(),
            ALICE,
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text());
    cluster.abort();
    app.finish().await;
}

mod generated {
    //! Recursive, reference-heavy and deeply nested schemas, generated (proptest, a fixed seed so
    //! CI replays the same ones), each checked through the guard the routes use.
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(json!({"type": "string"})),
            Just(json!(true)),
            Just(json!(false)),
            Just(json!({"$ref": "#"})),
            Just(json!({"$ref": "#/$defs/a"})),
            Just(json!({"$ref": "#/$defs/b"})),
            Just(json!({"$dynamicRef": "#dyn"})),
            Just(json!({"$recursiveRef": "#"})),
            Just(json!({"type": "string", "pattern": "^(a+)+$"})),
            Just(json!({"type": "string", "pattern": "(x|x|x)*y"})),
            Just(json!({"enum": [1, "a", null, {"b": [1]}]})),
        ]
    }

    fn schema() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(10, 96, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..4).prop_map(|v| json!({"allOf": v})),
                prop::collection::vec(inner.clone(), 1..4).prop_map(|v| json!({"anyOf": v})),
                prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"oneOf": v})),
                inner.clone().prop_map(|s| json!({"not": s})),
                (inner.clone(), inner.clone()).prop_map(|(i, t)| json!({"if": i, "then": t})),
                inner.clone().prop_map(|s| json!({"type": "object", "properties": {"message": s}})),
                inner.clone().prop_map(|s| json!({"type": "array", "items": s})),
                inner.clone().prop_map(|s| json!({"unevaluatedProperties": s})),
                inner.clone().prop_map(|s| json!({"dependentSchemas": {"message": s}})),
                inner.prop_map(|s| json!({"$dynamicAnchor": "dyn", "allOf": [s], "unevaluatedItems": false})),
            ]
        })
    }

    fn instance() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(json!("a")),
            Just(json!(format!("{}!", "a".repeat(40)))),
            Just(json!(1)),
            Just(json!(null)),
        ];
        leaf.prop_recursive(6, 24, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                inner.prop_map(|v| json!({"message": v})),
            ]
        })
    }

    /// A whole action schema: a root with two definitions, either of which the parts refer to.
    pub fn case() -> impl Strategy<Value = (Value, Value)> {
        (schema(), schema(), schema(), instance()).prop_map(|(root, a, b, i)| {
            let mut root = if root.is_object() { root } else { json!({"allOf": [root]}) };
            root["$defs"] = json!({"a": a, "b": b});
            (root, i)
        })
    }
}

// 256 generated schemas through the guard: each a verdict or a refusal as too complex, each within
// the deadline and a little, and the test process (which holds the server's code) lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_schemas_get_a_verdict_within_the_bounds() {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::{Config, TestRng, TestRunner};
    use server::openenv::schema_guard::{Bounds, SchemaGuard, Unchecked};
    // One account's 256 checks in a row: its share a minute lifted, the rest as deployed.
    let bounds = Bounds { per_minute: 1_000, ..Bounds::default() };
    let guard = SchemaGuard::new(env!("CARGO_BIN_EXE_arena").into(), bounds.clone());
    let config = Config { cases: 256, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha),
    );
    let started = Instant::now();
    let (mut verdicts, mut refused, mut too_complex, mut slowest) = (0, 0, 0, Duration::ZERO);
    for _ in 0..256 {
        let (schema, instance) = generated::case().new_tree(&mut runner).unwrap().current();
        let check = domain::openenv::schema::SchemaCheck {
            schema: json!({"action": schema, "observation": {"type": "object"}}),
            actions: vec![("example action 1".into(), instance)],
        };
        let one = Instant::now();
        match guard.check("generated", &check).await {
            Ok(Ok(())) => verdicts += 1,
            Ok(Err(_)) => refused += 1,
            Err(Unchecked::TooComplex(_)) => too_complex += 1,
            Err(other) => panic!("no verdict for {}: {other}", check.schema),
        }
        slowest = slowest.max(one.elapsed());
        assert!(one.elapsed() < bounds.deadline + Duration::from_secs(10), "{}", check.schema);
    }
    eprintln!(
        "generated schemas: 256 in {:.1} s (passed {verdicts}, refused {refused}, too complex {too_complex}; slowest {} ms)",
        started.elapsed().as_secs_f64(),
        slowest.as_millis()
    );
    assert!(refused > 0 && verdicts > 0, "the generator reaches both verdicts");
}

// A handler that panics answers 500 `INTERNAL` with a request id, and the same router serves on.
#[tokio::test]
async fn a_panicking_handler_is_answered_and_the_server_serves_on() {
    use tower::ServiceExt;
    let app = TestApp::new(Backend::Sqlite).await;
    let routes = axum::Router::new()
        .route("/boom", axum::routing::get(|| async { panic!("a handler bug") as &'static str }))
        .route("/fine", axum::routing::get(|| async { "fine" }));
    let router = server::edge(routes, axum::http::HeaderValue::from_static("frame-ancestors 'self'"))
        .with_state(app.state.clone());
    for _ in 0..3 {
        let boom = router
            .clone()
            .oneshot(axum::http::Request::get("/boom").body(axum::body::Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(boom.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body: Value = serde_json::from_slice(
            &http_body_util::BodyExt::collect(boom.into_body()).await.unwrap().to_bytes(),
        )
        .unwrap();
        assert_eq!(body["code"], "INTERNAL", "{body}");
        assert_eq!(body["request_id"].as_str().unwrap().len(), 16, "{body}");
        assert!(!body.to_string().contains("a handler bug"), "the panic's text stays in the log: {body}");
        let fine = router
            .clone()
            .oneshot(axum::http::Request::get("/fine").body(axum::body::Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(fine.status(), StatusCode::OK);
    }
    app.finish().await;
}

// The sandbox reader (which every participant's server receives), a member of the sandbox
// namespace and an account an organizer listed are refused on every route and through MCP, before
// anything is stored or counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_arenas_own_accounts_are_never_callers() {
    let app = TestApp::with(
        Backend::Sqlite,
        Options {
            service_accounts: vec!["user-bob".into()],
            eval_namespace: Some(standin::users::EVAL_ORG),
            ..Options::default()
        },
    )
    .await;
    let cluster = crate::held_out::connect(&app).await;
    let submission = crate::openenv::echo_submission("taken-slot", "ghcr.io/test/echo-ok:v1").to_string();
    let hook = json!({"url": "https://example.com/hook"}).to_string();
    for (who, token) in [
        ("the sandbox reader", SANDBOX_TOKEN),
        ("the evaluation reader", crate::harness::EVAL_READER),
        ("the arena's bot", ARENA_BOT),
        ("a namespace member", LEAKY_READER),
        ("a listed account", BOB),
    ] {
        for (method, path, body) in [
            (Method::GET, "/api/whoami", None),
            (Method::GET, "/api/openenv/quota", None),
            (Method::POST, "/api/openenv/submissions", Some(submission.as_str())),
            (Method::POST, "/api/webhooks", Some(hook.as_str())),
            (
                Method::POST,
                "/api/board/messages",
                Some(r#"{"request_id":"x-1","agent_id":null,"body":"hi","refs":[],"broadcast":false}"#),
            ),
        ] {
            let bearer = format!("Bearer {token}");
            let a = app.call(method.clone(), path, body, &[("authorization", &bearer)]).await;
            assert_eq!(code(&a), (403, "SERVICE_ACCOUNT".into()), "{who} {method} {path}: {}", a.text());
        }
        let tool = mcp_call(&app, token, "whoami", json!({}), &[]).await;
        assert!(tool.to_string().contains("SERVICE_ACCOUNT"), "{who} over MCP: {tool}");
    }
    // Nor does one sign in to the pages.
    let callback = crate::session::complete_sign_in(&app, "/auth/login?return_to=/arena", "bob").await;
    assert_eq!(code(&callback), (403, "SERVICE_ACCOUNT".into()), "{}", callback.text());
    // The arena's own token is refused even where no identity is needed, without asking HF.
    let public = app.get_as("/api/challenges", SANDBOX_TOKEN).await;
    assert_eq!(code(&public), (403, "SERVICE_ACCOUNT".into()));
    assert_eq!(app.get("/api/challenges").await.status, StatusCode::OK);
    for table in ["openenv_submissions", "openenv_quota_slots", "webhooks", "messages"] {
        assert_eq!(app.scalar(&format!("SELECT COUNT(*) FROM {table}")).await, 0, "{table}");
    }
    assert_eq!(app.get_as("/api/whoami", ALICE).await.status, StatusCode::OK);
    cluster.abort();
    app.finish().await;
}

/// Inserts a pending delivery of `webhook` straight into the database (an ending's fan-out, as
/// `webhooks::repo::fan_out` writes it), for the scoping checks.
async fn pending_delivery(app: &TestApp, webhook: &str, id: &str) {
    app.exec(&format!(
        "INSERT INTO webhook_deliveries (id, webhook_id, ending_seq, event, body, state, next_epoch, created_epoch, \
         ended_epoch) VALUES ('{id}', '{webhook}', 1, 'run.ended', '{{}}', 'pending', 4000000000, 1, 1)"
    ))
    .await
    .unwrap();
}

on_both_backends!(multi_thread, webhooks_are_scoped_bounded_and_sealed, |app| {
    // An address literal: the tests' resolver is the system's, and no delivery is sent here.
    let alice =
        app.post_as("/api/webhooks", &json!({"url": "https://93.184.216.34/h"}).to_string(), ALICE).await;
    assert_eq!(alice.status, StatusCode::CREATED, "{}", alice.text());
    let alice = alice.json();
    let id = alice["webhook_id"].as_str().unwrap().to_string();
    let secret = alice["secret"].as_str().unwrap().to_string();
    // Sealed at rest: neither the database nor a snapshot of it holds the secret.
    let stored = app.text(&format!("SELECT secret FROM webhooks WHERE id = '{id}'")).await;
    assert!(stored.starts_with("v1:") && !stored.contains(&secret) && !stored.contains("whsec_"), "{stored}");
    // Bob deletes alice's webhook: 404, and nothing of hers changes.
    pending_delivery(app, &id, "dl-pending").await;
    let delete = |token: &'static str| {
        let path = format!("/api/webhooks/{id}");
        async move {
            app.call(Method::DELETE, &path, None, &[("authorization", &format!("Bearer {token}"))]).await
        }
    };
    assert_eq!(code(&delete(BOB).await), (404, "WEBHOOK_NOT_FOUND".into()));
    assert_eq!(app.text("SELECT state FROM webhook_deliveries WHERE id = 'dl-pending'").await, "pending");
    assert_eq!(app.scalar(&format!("SELECT COUNT(*) FROM webhooks WHERE id = '{id}'")).await, 1);
    // Bob can neither redeliver nor rotate it.
    let redeliver = format!("/api/webhooks/{id}/deliveries/dl-pending/redeliver");
    assert_eq!(code(&app.post_as(&redeliver, "", BOB).await).0, 404);
    assert_eq!(
        code(&app.post_as(&format!("/api/webhooks/{id}/secret"), "", BOB).await),
        (404, "WEBHOOK_NOT_FOUND".into())
    );
    // Redeliveries are bounded per webhook: the eleventh within the hour is 429 with Retry-After.
    for _ in 0..domain::webhooks::REDELIVERIES_PER_WINDOW {
        assert_eq!(app.post_as(&redeliver, "", ALICE).await.status, StatusCode::ACCEPTED);
    }
    let spent = app.post_as(&redeliver, "", ALICE).await;
    assert_eq!(code(&spent), (429, "RATE_LIMITED".into()), "{}", spent.text());
    let wait: u64 = spent.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=3600).contains(&wait), "{wait}");
    // Rotation: a new secret shown once, sealed, the old one gone.
    let rotated = app.post_as(&format!("/api/webhooks/{id}/secret"), "", ALICE).await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text());
    let new_secret = rotated.json()["secret"].as_str().unwrap().to_string();
    assert!(new_secret.starts_with("whsec_") && new_secret != secret);
    let key = server::webhooks::sealed::SealKey::from_hex(crate::harness::WEBHOOK_KEY).unwrap();
    let stored = app.text(&format!("SELECT secret FROM webhooks WHERE id = '{id}'")).await;
    assert_eq!(key.open(&id, &stored).as_deref(), Some(new_secret.as_str()));
    assert!(!app.get_as("/api/webhooks", ALICE).await.text().contains("whsec_"));
    // A refusal names the rule, never the address a name resolved to.
    let inside = app.post_as("/api/webhooks", &json!({"url": "https://10.1.2.3/h"}).to_string(), ALICE).await;
    assert_eq!(code(&inside).1, "WEBHOOK_URL_REFUSED");
    assert!(inside.json()["message"].as_str().unwrap().contains("a private address"), "{}", inside.text());
    // At start, with a webhook stored: no key, or another key, stops the start; a secret left in
    // clear by an older version is sealed in place.
    use server::webhooks::sealed::{check_at_start, SealKey};
    assert!(check_at_start(&app.state.db, None).await.is_err(), "no key, webhooks stored");
    let other = SealKey::from_hex(&"ab".repeat(32)).unwrap();
    assert!(check_at_start(&app.state.db, Some(&other)).await.is_err(), "a key that does not open them");
    app.exec(&format!("UPDATE webhooks SET secret = 'whsec_in_clear' WHERE id = '{id}'")).await.unwrap();
    check_at_start(&app.state.db, Some(&key)).await.unwrap();
    let stored = app.text(&format!("SELECT secret FROM webhooks WHERE id = '{id}'")).await;
    assert!(!stored.contains("in_clear"), "{stored}");
    assert_eq!(key.open(&id, &stored).as_deref(), Some("whsec_in_clear"));
    // Alice deletes her own: her pending delivery fails with it.
    assert_eq!(delete(ALICE).await.status, StatusCode::NO_CONTENT);
    assert_eq!(app.text("SELECT state FROM webhook_deliveries WHERE id = 'dl-pending'").await, "failed");
});

// `/mcp` from a page of another origin, or for a host the arena does not serve, is refused before
// the token is looked at; agents (no `Origin`) and the arena's own origin pass.
#[tokio::test]
async fn mcp_refuses_other_origins_and_hosts() {
    let app = TestApp::new(Backend::Sqlite).await;
    let own = app.state.auth.public_origin.clone();
    let host = own.split("://").nth(1).unwrap().to_string();
    let ok = mcp_call(&app, ALICE, "whoami", json!({}), &[]).await;
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    let ok = mcp_call(&app, ALICE, "whoami", json!({}), &[("origin", &own), ("host", &host)]).await;
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    for headers in [
        vec![("origin", "http://attacker.example")],
        vec![("origin", "null")],
        vec![("host", "attacker.example")],
        vec![("host", "127.0.0.1:1")],
    ] {
        let refused = mcp_call(&app, ALICE, "whoami", json!({}), &headers).await;
        assert_eq!(refused["code"], "ORIGIN_REFUSED", "{headers:?}: {refused}");
    }
    app.finish().await;
}
