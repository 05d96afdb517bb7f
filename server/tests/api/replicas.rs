//! Two servers on one PostgreSQL: what one writes, the other never serves stale from its cache.

use std::time::{Duration, Instant};

use server::changes::Topic;

use crate::harness::{Backend, TestApp, ALICE};

/// Waits until a server's change listener is connected (until then it caches nothing).
async fn listening(app: &TestApp) {
    let start = Instant::now();
    while app.state.changes.version(Topic::Board).is_none() {
        assert!(start.elapsed() < Duration::from_secs(60), "the change listener did not connect");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads `uri` on `app` until `fresh` holds; answers how long that took.
async fn until_fresh(app: &TestApp, uri: &str, fresh: impl Fn(&serde_json::Value) -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if fresh(&app.get(uri).await.json()) {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{uri} stayed stale on the other replica");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_on_one_replica_reaches_the_others_cache() {
    let a = TestApp::new(Backend::Postgres).await;
    let b = a.replica().await;
    listening(&a).await;
    listening(&b).await;

    // B caches the empty board and the untouched budget.
    assert_eq!(b.get("/api/board/messages").await.json()["messages"], serde_json::json!([]));
    assert_eq!(b.get("/api/arena/budget").await.json()["committed_usd"], 0.0);

    // A post through A: B's cached first page is dropped by the table's notification.
    let posted = a
        .post_as(
            "/api/board/messages",
            r#"{"request_id":"replica-test-1","body":"written on A","refs":[],"broadcast":false}"#,
            ALICE,
        )
        .await;
    assert_eq!(posted.status, 201, "{}", posted.text());
    let lag =
        until_fresh(&b, "/api/board/messages", |j| j["messages"].as_array().is_some_and(|m| m.len() == 1))
            .await;
    eprintln!("board: the other replica read the post {lag:?} after it was answered");

    // A write by hand (no server made it): every replica hears it from the trigger.
    sqlx::query(
        "INSERT INTO budget_ledger (id, challenge_id, run_id, amount_cents, state, created_at, updated_at) \
         VALUES ('r1', 'openenv-9b', 'run-1', 12345, 'settled', 't', 't')",
    )
    .execute(&a.state.db.pool)
    .await
    .unwrap();
    for app in [&a, &b] {
        until_fresh(app, "/api/arena/budget", |j| j["committed_usd"] == 123.45).await;
        until_fresh(app, "/api/challenges", |j| j["challenges"].as_array().is_some()).await;
    }
    b.finish().await;
    a.finish().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_lost_its_listener_caches_nothing_until_it_is_back() {
    let a = TestApp::new(Backend::Postgres).await;
    listening(&a).await;
    // Cut every listening connection of this database, as a network drop would.
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
    )
    .execute(&a.state.db.pool)
    .await
    .unwrap();
    let start = Instant::now();
    while a.state.changes.version(Topic::Board).is_some() {
        assert!(start.elapsed() < Duration::from_secs(60), "the dropped listener went unnoticed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Meanwhile a write goes unheard; the next read still sees it.
    sqlx::query(
        "INSERT INTO budget_ledger (id, challenge_id, run_id, amount_cents, state, created_at, updated_at) \
         VALUES ('r1', 'openenv-9b', 'run-1', 500, 'settled', 't', 't')",
    )
    .execute(&a.state.db.pool)
    .await
    .unwrap();
    assert_eq!(a.get("/api/arena/budget").await.json()["committed_usd"], 5.0);
    listening(&a).await;
    assert_eq!(a.get("/api/arena/budget").await.json()["committed_usd"], 5.0);
    a.finish().await;
}
