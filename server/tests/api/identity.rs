use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::harness::{TestApp, ALICE, BACKENDS, BOB, EVE};
use crate::on_both_backends;

on_both_backends!(whoami_names_the_caller_and_whether_an_editor, |app| {
    let me = app.get_as("/api/whoami", ALICE).await;
    assert_eq!(me.status, StatusCode::OK, "{}", me.text());
    let me = me.json();
    assert_eq!(
        (me["name"].as_str(), me["editor"].as_bool(), me["via"].as_str()),
        (Some("alice"), Some(false), Some("token"))
    );
    assert_eq!(me["agents"], json!([]));
    let eve = app.get_as("/api/whoami", EVE).await.json();
    assert_eq!(eve["editor"], true, "admin in benchflow is an editor");
});

on_both_backends!(whoami_refuses_missing_and_bad_credentials, |app| {
    let anon = app.get("/api/whoami").await;
    assert_eq!(
        (anon.status, anon.json()["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("AUTH_REQUIRED"))
    );
    let bad = app.get_as("/api/whoami", "hf_not_a_real_token").await;
    assert_eq!((bad.status, bad.json()["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("INVALID_TOKEN")));
    let basic = app.call(Method::GET, "/api/whoami", None, &[("authorization", "Basic YWxpY2U6eA==")]).await;
    assert_eq!(basic.json()["code"], "INVALID_TOKEN");
    let empty = app.call(Method::GET, "/api/whoami", None, &[("authorization", "Bearer ")]).await;
    assert_eq!(empty.json()["code"], "INVALID_TOKEN");
});

on_both_backends!(hub_failures_are_503_with_retry_after_and_store_nothing, |app| {
    app.hub.set_faults(standin::Faults { status: Some(429), retry_after_s: Some(17), ..Default::default() });
    let limited =
        app.post_as("/api/agents", r#"{"agent_id":"alice-agent","description":"builds tasks"}"#, ALICE).await;
    assert_eq!(limited.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(limited.json()["code"], "HUB_UNAVAILABLE");
    assert_eq!(limited.json()["retry_after_s"], 17);
    assert_eq!(limited.headers["retry-after"], "17");
    assert_eq!(app.scalar("SELECT COUNT(*) FROM agents").await, 0);

    app.hub.set_faults(standin::Faults { status: Some(502), ..Default::default() });
    let failing = app.get_as("/api/whoami", BOB).await;
    assert_eq!(
        (failing.status, failing.json()["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("HUB_UNAVAILABLE"))
    );
    assert!(failing.headers.contains_key("retry-after"));

    app.hub.set_faults(standin::Faults { drop_connection: true, ..Default::default() });
    assert_eq!(app.get_as("/api/whoami", BOB).await.json()["code"], "HUB_UNAVAILABLE");
    app.hub.set_faults(standin::Faults::default());
    assert_eq!(app.get_as("/api/whoami", BOB).await.status, StatusCode::OK);
});

on_both_backends!(whoami_answers_are_cached_by_token, |app| {
    let before = app.hub.whoami_calls();
    for _ in 0..5 {
        assert_eq!(app.get_as("/api/whoami", ALICE).await.status, StatusCode::OK);
    }
    assert_eq!(app.hub.whoami_calls() - before, 1, "one HF call for five requests");
    // A cached identity keeps working while HF is down; a new token cannot be checked.
    app.hub.set_faults(standin::Faults { status: Some(503), ..Default::default() });
    assert_eq!(app.get_as("/api/whoami", ALICE).await.status, StatusCode::OK);
    assert_eq!(app.get_as("/api/whoami", BOB).await.status, StatusCode::SERVICE_UNAVAILABLE);
    app.hub.set_faults(standin::Faults::default());
    let stats = app.state.hub.stats();
    assert!(stats.lookups > stats.hub_calls);
});

on_both_backends!(register_agent_is_idempotent_and_immutable, |app| {
    let body = r#"{"agent_id":"alice-agent","description":"The agent of alice: builds a task collection","model":"m1"}"#;
    let first = app.post_as("/api/agents", body, ALICE).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text());
    assert_eq!(first.json()["agent"]["owner"], "alice");
    assert_eq!(first.json()["existing"], false);

    let again = app.post_as("/api/agents", body, ALICE).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json()["existing"], true);
    assert_eq!(again.json()["agent"]["created_at"], first.json()["agent"]["created_at"]);

    let other = app.post_as("/api/agents", body, BOB).await;
    assert_eq!(other.status, StatusCode::CONFLICT);
    assert_eq!(other.json()["code"], "AGENT_REGISTERED_BY_ANOTHER");
    assert!(other.json()["message"].as_str().unwrap().contains("already registered by another HF user"));

    let changed = app
        .post_as("/api/agents", r#"{"agent_id":"alice-agent","description":"something else"}"#, ALICE)
        .await;
    assert_eq!(changed.status, StatusCode::CONFLICT);
    assert_eq!(changed.json()["code"], "AGENT_IMMUTABLE");
    assert!(changed.json()["message"].as_str().unwrap().contains("immutable"));

    let me = app.get_as("/api/whoami", ALICE).await.json();
    assert_eq!(me["agents"][0]["agent_id"], "alice-agent");
    let discover = app.get("/api/discover").await.json();
    assert_eq!(discover["agents"][0]["owner"], "alice");
    assert_eq!(discover["challenges"][0]["id"], "openenv-9b");
    assert_eq!(app.scalar("SELECT COUNT(*) FROM agents").await, 1);
});

on_both_backends!(bad_registrations_store_nothing, |app| {
    let cases: &[(&str, u16, &str)] = &[
        (r#"{"agent_id":"human-alice","description":"d"}"#, 422, "INVALID_AGENT_ID"),
        (r#"{"agent_id":"Alice","description":"d"}"#, 422, "INVALID_AGENT_ID"),
        (r#"{"agent_id":"a","description":"d"}"#, 422, "INVALID_AGENT_ID"),
        (r#"{"agent_id":"a_b","description":"d"}"#, 422, "INVALID_AGENT_ID"),
        (r#"{"agent_id":"-ab","description":"d"}"#, 422, "INVALID_AGENT_ID"),
        (r#"{"agent_id":"ab","description":"   "}"#, 422, "INVALID_REGISTRATION"),
        (r#"{"agent_id":"ab"}"#, 400, "INVALID_JSON"),
        (r#"{"agent_id":5,"description":"d"}"#, 400, "INVALID_JSON"),
        (r#"{"agent_id":"ab","description":"d","owner":"bob"}"#, 400, "INVALID_JSON"),
        (r#"{"agent_id":"ab","#, 400, "INVALID_JSON"),
        ("[]", 400, "INVALID_JSON"),
    ];
    for (body, status, code) in cases {
        let answer = app.post_as("/api/agents", body, ALICE).await;
        assert_eq!(answer.status.as_u16(), *status, "{body}: {}", answer.text());
        assert_eq!(answer.json()["code"], *code, "{body}");
    }
    let too_long = format!(r#"{{"agent_id":"{}","description":"d"}}"#, "a".repeat(49));
    assert_eq!(app.post_as("/api/agents", &too_long, ALICE).await.json()["code"], "INVALID_AGENT_ID");
    let huge = format!(r#"{{"agent_id":"ab","description":"{}"}}"#, "x".repeat(100_000));
    let answer = app.post_as("/api/agents", &huge, ALICE).await;
    assert_eq!(
        (answer.status, answer.json()["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("PAYLOAD_TOO_LARGE"))
    );
    let plain = app
        .call(
            Method::POST,
            "/api/agents",
            None,
            &[("authorization", &format!("Bearer {ALICE}")), ("content-type", "text/plain")],
        )
        .await;
    assert_eq!(plain.json()["code"], "UNSUPPORTED_MEDIA_TYPE");
    assert_eq!(app.scalar("SELECT COUNT(*) FROM agents").await, 0);
});

on_both_backends!(refused_and_malformed_tokens_do_not_spend_hf_calls, |app| {
    let before = app.hub.whoami_calls();
    for _ in 0..5 {
        assert_eq!(app.get_as("/api/whoami", "hf_refused_token_0001").await.json()["code"], "INVALID_TOKEN");
    }
    assert_eq!(app.hub.whoami_calls() - before, 1, "a refused token is remembered");
    for junk in ["short", "has space inside the token", &"x".repeat(600), "caf\u{e9}-token-value"] {
        let answer =
            app.call(Method::GET, "/api/whoami", None, &[("authorization", &format!("Bearer {junk}"))]).await;
        assert_eq!(answer.json()["code"], "INVALID_TOKEN", "{junk}");
    }
    assert_eq!(app.hub.whoami_calls() - before, 1, "malformed tokens never reach HF");
});

// A token nobody has seen costs one HF call: ten a minute from one address, then 429 with
// Retry-After for that address only; 120 a minute from everyone; a known token is never held back.
on_both_backends!(unseen_tokens_are_capped_per_address_and_in_all, |app| {
    let whoami = |token: String, from: String| async move {
        let headers = [("authorization", format!("Bearer {token}")), ("x-forwarded-for", from)];
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        app.call(Method::GET, "/api/whoami", None, &headers).await
    };
    let before = app.hub.whoami_calls();
    assert_eq!(whoami(ALICE.into(), "192.0.2.50".into()).await.json()["name"], "alice");
    for i in 0..10 {
        let a = whoami(format!("hf_madeup_a_{i:04}_xxxxxxxx"), "203.0.113.1".into()).await;
        assert_eq!(a.json()["code"], "INVALID_TOKEN");
    }
    let held = whoami("hf_madeup_a_0010_xxxxxxxx".into(), "203.0.113.1".into()).await;
    assert_eq!(held.status, StatusCode::TOO_MANY_REQUESTS, "{}", held.text());
    assert_eq!(held.json()["code"], "RATE_LIMITED");
    let retry: u64 = held.headers.get("retry-after").unwrap().to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // A client cannot escape by writing its own X-Forwarded-For: the proxy's entry, last, counts.
    let forged = whoami("hf_madeup_a_0011_xxxxxxxx".into(), "198.51.100.77, 203.0.113.1".into()).await;
    assert_eq!(forged.json()["code"], "RATE_LIMITED");
    assert_eq!(
        whoami(ALICE.into(), "203.0.113.1".into()).await.json()["name"],
        "alice",
        "a known token passes"
    );
    assert_eq!(app.hub.whoami_calls() - before, 11, "alice's first call and ten misses");
    // From everyone: 120 a minute (alice's counted), then refused from any address.
    for i in 0..109 {
        let from = format!("198.51.100.{}", 1 + i / 10);
        assert_eq!(
            whoami(format!("hf_madeup_b_{i:04}_xxxxxxxx"), from).await.json()["code"],
            "INVALID_TOKEN"
        );
    }
    let all = whoami("hf_madeup_c_0000_xxxxxxxx".into(), "192.0.2.1".into()).await;
    assert_eq!(all.json()["code"], "RATE_LIMITED", "{}", all.text());
    assert!(all.json()["message"].as_str().unwrap().contains("everyone together"));
    assert_eq!(app.hub.whoami_calls() - before, 120);
});

// Twenty concurrent first calls with one token from one address share one HF call and count as
// one miss: a client's parallel requests are never refused for a token it sends for the first time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_calls_with_one_token_cost_one_miss() {
    for backend in BACKENDS {
        let app = std::sync::Arc::new(TestApp::new(backend).await);
        let before = app.hub.whoami_calls();
        let calls: Vec<_> = (0..20)
            .map(|_| {
                let app = app.clone();
                tokio::spawn(async move {
                    let headers = [
                        ("authorization", format!("Bearer {ALICE}")),
                        ("x-forwarded-for", "203.0.113.9".into()),
                    ];
                    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    app.call(Method::GET, "/api/whoami", None, &headers).await
                })
            })
            .collect();
        for call in calls {
            let answer = call.await.unwrap();
            assert_eq!(answer.status, StatusCode::OK, "{backend:?}: {}", answer.text());
        }
        assert_eq!(app.hub.whoami_calls() - before, 1, "{backend:?}: one HF call for twenty lookups");
        std::sync::Arc::into_inner(app).expect("the calls are done").finish().await;
    }
}

// An account registers at most 20 agents (a repeat of one is still answered); /api/discover
// lists them 100 a page, with the total and where the next page starts; the board's search words
// are bounded.
on_both_backends!(registrations_discovery_and_search_are_bounded, |app| {
    for i in 0..20 {
        let body = format!(r#"{{"agent_id":"alice-bot-{i:02}","description":"builds tasks"}}"#);
        assert_eq!(app.post_as("/api/agents", &body, ALICE).await.status, StatusCode::CREATED);
    }
    let more = app
        .post_as("/api/agents", r#"{"agent_id":"alice-bot-20","description":"builds tasks"}"#, ALICE)
        .await;
    assert_eq!(more.status, StatusCode::CONFLICT, "{}", more.text());
    assert_eq!(more.json()["code"], "ACCOUNT_LIMIT_REACHED");
    let again = app
        .post_as("/api/agents", r#"{"agent_id":"alice-bot-07","description":"builds tasks"}"#, ALICE)
        .await;
    assert_eq!(again.status, StatusCode::OK, "a repeat is answered at the cap");
    for i in 0..130 {
        app.exec(&format!(
            "INSERT INTO agents (agent_id, owner, owner_id, description, created_at) VALUES \
             ('zz-agent-{i:03}', 'o{i}', 'user-o{i}', 'd', '2026-11-30T00:00:00Z')"
        ))
        .await
        .unwrap();
    }
    let first = app.get("/api/discover").await.json();
    assert_eq!((first["agents"].as_array().unwrap().len(), first["agents_total"].as_i64()), (100, Some(150)));
    let after = first["agents_next_after"].as_str().unwrap().to_string();
    let second = app.get(&format!("/api/discover?after={after}")).await.json();
    assert_eq!(second["agents"].as_array().unwrap().len(), 50);
    assert_eq!(second["agents_next_after"], Value::Null);
    let long = "x".repeat(201);
    let search = app.get(&format!("/api/board/messages?q={long}")).await;
    assert_eq!(
        (search.status, search.json()["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("INVALID_QUERY"))
    );
    assert_eq!(app.get(&format!("/api/board/messages?q={}", &long[..200])).await.status, StatusCode::OK);
});
