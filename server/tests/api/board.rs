use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::harness::{TestApp, ALICE, BACKENDS, BOB, EVE, NEW_ALICE};
use crate::on_both_backends;

fn post_body(request_id: &str, agent: Option<&str>, body: &str, refs: &[&str]) -> String {
    json!({"request_id": request_id, "agent_id": agent, "body": body, "refs": refs, "broadcast": false})
        .to_string()
}

async fn register(app: &TestApp, id: &str, token: &str) {
    let body = json!({"agent_id": id, "description": format!("agent {id}")}).to_string();
    assert!(app.post_as("/api/agents", &body, token).await.status.is_success());
}

on_both_backends!(posts_list_newest_first_and_repeat_idempotently, |app| {
    register(app, "alice-agent", ALICE).await;
    let first = app
        .post_as(
            "/api/board/messages",
            &post_body("alice-hello-1", Some("alice-agent"), "Hello, I am alice-agent.", &[]),
            ALICE,
        )
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text());
    let first = first.json();
    let id = first["message"]["id"].as_str().unwrap().to_string();
    assert!(id.ends_with(".md") && id.contains("-alice-agent-"), "{id}");
    assert_eq!(first["message"]["author"], "alice");

    let again = app
        .post_as(
            "/api/board/messages",
            &post_body("alice-hello-1", Some("alice-agent"), "Hello, I am alice-agent.", &[]),
            ALICE,
        )
        .await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json()["existing"], true);
    assert_eq!(again.json()["message"]["id"], id.as_str());

    let reused = app
        .post_as(
            "/api/board/messages",
            &post_body("alice-hello-1", Some("alice-agent"), "Different body", &[]),
            ALICE,
        )
        .await;
    assert_eq!(
        (reused.status, reused.json()["code"].as_str()),
        (StatusCode::CONFLICT, Some("REQUEST_ID_REUSED"))
    );

    // The same request_id from another person is another message.
    let bob =
        app.post_as("/api/board/messages", &post_body("alice-hello-1", None, "Welcome!", &[&id]), BOB).await;
    assert_eq!(bob.status, StatusCode::CREATED, "{}", bob.text());
    assert_eq!(bob.json()["message"]["refs"], json!([id]));

    let list = app.get("/api/board/messages").await.json();
    let ids: Vec<&str> =
        list["messages"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[1], id, "newest first");
    assert_eq!(list["next_before"], Value::Null);
});

on_both_backends!(listing_filters_and_pages, |app| {
    register(app, "alice-agent", ALICE).await;
    for i in 0..5 {
        let agent = if i % 2 == 0 { Some("alice-agent") } else { None };
        let body =
            post_body(&format!("alice-msg-{i:03}"), agent, &format!("Alice note {i} about Finance"), &[]);
        assert_eq!(app.post_as("/api/board/messages", &body, ALICE).await.status, StatusCode::CREATED);
    }
    assert_eq!(
        app.post_as("/api/board/messages", &post_body("bob-msg-0001", None, "bob here", &[]), BOB)
            .await
            .status,
        StatusCode::CREATED
    );

    let count = |v: &Value| v["messages"].as_array().unwrap().len();
    assert_eq!(count(&app.get("/api/board/messages?agent=alice-agent").await.json()), 3);
    assert_eq!(count(&app.get("/api/board/messages?author=alice").await.json()), 5);
    assert_eq!(count(&app.get("/api/board/messages?author=bob").await.json()), 1);
    assert_eq!(count(&app.get("/api/board/messages?q=finance").await.json()), 5);
    assert_eq!(count(&app.get("/api/board/messages?q=nothing-matches").await.json()), 0);
    assert_eq!(count(&app.get("/api/board/messages?since=2000-01-01T00:00:00Z").await.json()), 6);
    assert_eq!(count(&app.get("/api/board/messages?since=2999-01-01T00:00:00Z").await.json()), 0);

    let mut seen = Vec::new();
    let mut uri = "/api/board/messages?limit=4".to_string();
    loop {
        let page = app.get(&uri).await.json();
        seen.extend(
            page["messages"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_string()),
        );
        match page["next_before"].as_str() {
            Some(next) => uri = format!("/api/board/messages?limit=4&before={next}"),
            None => break,
        }
    }
    assert_eq!(seen.len(), 6);
    let mut unique = seen.clone();
    unique.dedup();
    assert_eq!(unique.len(), 6, "pages do not overlap");

    for bad in ["limit=0", "limit=201", "since=yesterday", "limit=x"] {
        let answer = app.get(&format!("/api/board/messages?{bad}")).await;
        assert_eq!(
            (answer.status, answer.json()["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("INVALID_QUERY")),
            "{bad}"
        );
    }
    // A well-formed `before` that names no message is a missing thing, not a malformed query; an
    // empty one is no `before` at all.
    let missing = app.get("/api/board/messages?before=no-such-message.md").await;
    assert_eq!((missing.status, missing.json()["code"].as_str()), (StatusCode::NOT_FOUND, Some("NOT_FOUND")));
    assert_eq!(app.get("/api/board/messages?before=").await.status, StatusCode::OK);
});

on_both_backends!(bad_posts_get_their_codes_and_store_nothing, |app| {
    register(app, "bob-agent", BOB).await;
    let long_body = "x".repeat(4001);
    let too_many: Vec<String> = (0..11).map(|i| format!("m{i}.md")).collect();
    let cases: Vec<(String, u16, &str)> = vec![
        (post_body("alice-0001", Some("bob-agent"), "as bob's agent", &[]), 403, "AGENT_NOT_OWNED"),
        (post_body("alice-0002", Some("nobody-agent"), "unknown agent", &[]), 404, "AGENT_NOT_FOUND"),
        (post_body("alice-0003", Some("human-alice"), "reserved", &[]), 422, "INVALID_AGENT_ID"),
        (post_body("alice-0004", None, "reply", &["20990101-000000-ghost-000000.md"]), 422, "UNKNOWN_REFS"),
        (json!({"request_id": "alice-0005", "agent_id": null, "body": "hi", "refs": [], "broadcast": true}).to_string(), 422, "INVALID_POST"),
        (post_body("alice-0006", None, "   ", &[]), 422, "INVALID_POST"),
        (post_body("alice-0007", None, &long_body, &[]), 422, "INVALID_POST"),
        (post_body("short", None, "hi", &[]), 422, "INVALID_POST"),
        (post_body(&"r".repeat(121), None, "hi", &[]), 422, "INVALID_POST"),
        (json!({"request_id": "alice-0008", "body": "hi", "refs": too_many}).to_string(), 422, "INVALID_POST"),
        (json!({"request_id": "alice-0009", "body": 7}).to_string(), 400, "INVALID_JSON"),
        (json!({"request_id": "alice-0010", "body": "hi", "extra": 1}).to_string(), 400, "INVALID_JSON"),
        ("{\"request_id\": \"alice-0011\", ".to_string(), 400, "INVALID_JSON"),
    ];
    for (body, status, code) in &cases {
        let answer = app.post_as("/api/board/messages", body, ALICE).await;
        assert_eq!(answer.status.as_u16(), *status, "{body}: {}", answer.text());
        assert_eq!(answer.json()["code"], *code, "{body}");
    }
    let anon = app
        .request(
            axum::http::Method::POST,
            "/api/board/messages",
            Some(&post_body("anon-0001", None, "hi", &[])),
        )
        .await;
    assert_eq!(
        (anon.status, anon.json()["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("AUTH_REQUIRED"))
    );
    let expired = app
        .post_as("/api/board/messages", &post_body("alice-0012", None, "hi", &[]), "hf_expired_or_revoked")
        .await;
    assert_eq!(
        (expired.status, expired.json()["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("INVALID_TOKEN"))
    );
    assert_eq!(app.scalar("SELECT COUNT(*) FROM messages").await, 0);
});

on_both_backends!(posting_is_rate_limited_per_identity, |app| {
    for i in 0..6 {
        let answer = app
            .post_as("/api/board/messages", &post_body(&format!("alice-rate-{i}"), None, "hi", &[]), ALICE)
            .await;
        assert_eq!(answer.status, StatusCode::CREATED);
    }
    let limited =
        app.post_as("/api/board/messages", &post_body("alice-rate-6", None, "hi", &[]), ALICE).await;
    assert_eq!(
        (limited.status, limited.json()["code"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("RATE_LIMITED"))
    );
    let wait: u64 = limited.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait));
    // A retry of an earlier request is still answered; another identity is not limited.
    assert_eq!(
        app.post_as("/api/board/messages", &post_body("alice-rate-0", None, "hi", &[]), ALICE).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.post_as("/api/board/messages", &post_body("bob-rate-0", None, "hi", &[]), BOB).await.status,
        StatusCode::CREATED
    );
    assert_eq!(app.scalar("SELECT COUNT(*) FROM messages").await, 7);
});

/// Twenty concurrent posts with one request_id leave one message, on both backends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_posts_with_one_request_id_leave_one_message() {
    for backend in BACKENDS {
        let app = std::sync::Arc::new(TestApp::new(backend).await);
        let body = post_body("alice-concurrent-1", None, "once only", &[]);
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let app = app.clone();
                let body = body.clone();
                tokio::spawn(async move { app.post_as("/api/board/messages", &body, ALICE).await })
            })
            .collect();
        let mut ids = std::collections::BTreeSet::new();
        let mut created = 0;
        for t in tasks {
            let answer = t.await.unwrap();
            assert!(answer.status.is_success(), "{backend:?}: {}", answer.text());
            created += usize::from(answer.status == StatusCode::CREATED);
            ids.insert(answer.json()["message"]["id"].as_str().unwrap().to_string());
        }
        assert_eq!(ids.len(), 1, "{backend:?}: every answer names the same message");
        assert_eq!(created, 1, "{backend:?}");
        assert_eq!(app.scalar("SELECT COUNT(*) FROM messages").await, 1, "{backend:?}");
        std::sync::Arc::try_unwrap(app).ok().unwrap().finish().await;
    }
}

// Who may call each write route: anonymous, a participant, another participant, an editor.
on_both_backends!(authorization_matrix_of_the_write_routes, |app| {
    register(app, "alice-agent", ALICE).await;
    struct Case {
        route: &'static str,
        body: String,
        expect: [(Option<&'static str>, u16, Option<&'static str>); 4],
    }
    let cases = [
        Case {
            route: "/api/agents",
            body: json!({"agent_id": "matrix-agent", "description": "d"}).to_string(),
            // The first registrant owns the id; the others are refused as another user.
            expect: [
                (None, 401, Some("AUTH_REQUIRED")),
                (Some(ALICE), 201, None),
                (Some(BOB), 409, Some("AGENT_REGISTERED_BY_ANOTHER")),
                (Some(EVE), 409, Some("AGENT_REGISTERED_BY_ANOTHER")),
            ],
        },
        Case {
            route: "/api/board/messages",
            body: post_body("matrix-post-1", Some("alice-agent"), "as alice-agent", &[]),
            // Only the agent's owner may post as it; editors have no say over someone's agent.
            expect: [
                (None, 401, Some("AUTH_REQUIRED")),
                (Some(ALICE), 201, None),
                (Some(BOB), 403, Some("AGENT_NOT_OWNED")),
                (Some(EVE), 403, Some("AGENT_NOT_OWNED")),
            ],
        },
        Case {
            route: "/api/board/messages",
            body: post_body("matrix-post-2", None, "as myself", &[]),
            expect: [
                (None, 401, Some("AUTH_REQUIRED")),
                (Some(ALICE), 201, None),
                (Some(BOB), 201, None),
                (Some(EVE), 201, None),
            ],
        },
        Case {
            route: "/auth/logout",
            body: "{}".into(),
            // A token caller has no session to end; the route accepts and does nothing.
            expect: [
                (None, 204, None),
                (Some(ALICE), 204, None),
                (Some(BOB), 204, None),
                (Some(EVE), 204, None),
            ],
        },
    ];
    for case in cases {
        for (token, status, code) in case.expect {
            let answer = match token {
                Some(t) => app.post_as(case.route, &case.body, t).await,
                None => app.request(axum::http::Method::POST, case.route, Some(&case.body)).await,
            };
            assert_eq!(answer.status.as_u16(), status, "{} as {token:?}: {}", case.route, answer.text());
            if let Some(code) = code {
                assert_eq!(answer.json()["code"], code, "{} as {token:?}", case.route);
            }
        }
    }
});

/// The rate limit holds under concurrent posts with different request ids, on both backends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_rate_limit_holds_under_concurrency() {
    for backend in BACKENDS {
        let app = std::sync::Arc::new(TestApp::new(backend).await);
        let tasks: Vec<_> = (0..12)
            .map(|i| {
                let app = app.clone();
                tokio::spawn(async move {
                    app.post_as(
                        "/api/board/messages",
                        &post_body(&format!("alice-burst-{i:03}"), None, "burst", &[]),
                        ALICE,
                    )
                    .await
                })
            })
            .collect();
        let mut created = 0;
        let mut limited = 0;
        for t in tasks {
            match t.await.unwrap().status {
                StatusCode::CREATED => created += 1,
                StatusCode::TOO_MANY_REQUESTS => limited += 1,
                other => panic!("{backend:?}: unexpected {other}"),
            }
        }
        assert_eq!((created, limited), (6, 6), "{backend:?}");
        assert_eq!(app.scalar("SELECT COUNT(*) FROM messages").await, 6, "{backend:?}");
        std::sync::Arc::try_unwrap(app).ok().unwrap().finish().await;
    }
}

on_both_backends!(text_search_is_literal, |app| {
    for (i, body) in ["50% done", "5000 done", "snake_case", "snakeXcase", "back\\slash"].iter().enumerate() {
        let answer = app
            .post_as("/api/board/messages", &post_body(&format!("bob-like-{i:03}"), None, body, &[]), BOB)
            .await;
        assert_eq!(answer.status, StatusCode::CREATED);
    }
    let count = |v: Value| v["messages"].as_array().unwrap().len();
    assert_eq!(count(app.get("/api/board/messages?q=%25").await.json()), 1, "% matches itself only");
    assert_eq!(count(app.get("/api/board/messages?q=_").await.json()), 1, "_ matches itself only");
    assert_eq!(count(app.get("/api/board/messages?q=%5C").await.json()), 1, "a backslash matches itself");
    assert_eq!(count(app.get("/api/board/messages?q=DONE").await.json()), 2, "ASCII case is folded");
});

on_both_backends!(ownership_follows_the_hf_id_not_the_name, |app| {
    register(app, "alice-agent", ALICE).await;
    let body = post_body("new-alice-0001", Some("alice-agent"), "I am alice now", &[]);
    let answer = app.post_as("/api/board/messages", &body, NEW_ALICE).await;
    assert_eq!(
        (answer.status, answer.json()["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("AGENT_NOT_OWNED"))
    );
    let again = app
        .post_as("/api/agents", r#"{"agent_id":"alice-agent","description":"agent alice-agent"}"#, NEW_ALICE)
        .await;
    assert_eq!(again.json()["code"], "AGENT_REGISTERED_BY_ANOTHER");
    assert_eq!(app.get_as("/api/whoami", NEW_ALICE).await.json()["agents"], json!([]));
    // Her request ids are her own: the same id from the first alice is another message.
    let first =
        app.post_as("/api/board/messages", &post_body("shared-id-001", None, "one", &[]), ALICE).await;
    let second =
        app.post_as("/api/board/messages", &post_body("shared-id-001", None, "two", &[]), NEW_ALICE).await;
    assert_eq!((first.status, second.status), (StatusCode::CREATED, StatusCode::CREATED));
});
