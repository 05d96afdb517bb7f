//! Where a participant stands: their OpenEnv quota, and the leaderboard by account (one row per
//! HF account, its best submission and its best Δ per domain, the caller's row pinned, pages from
//! a snapshot frozen at the first page), on both databases.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::controls::Cluster;
use crate::harness::{Options, TestApp, ALICE, BACKENDS, BOB, EVE};

const OFFICE: [&str; 3] = ["reply-hello", "reply-done", "reply-echo"];
const MATH: [&str; 3] = ["count-1", "count-2", "count-3"];

/// Every held-out task of the demo benchmark at one reward per domain, in a phase.
fn evaluating(phase: &str, office: f64, math: f64) -> Value {
    let records: Vec<Value> = OFFICE
        .iter()
        .map(|t| (t, office))
        .chain(MATH.iter().map(|t| (t, math)))
        .map(|(t, r)| json!({"task_id": t, "trial": 0, "reward": r}))
        .collect();
    json!({"phase": phase, "done": 6, "planned": 6, "records": records})
}

/// Submits, admits and plays one run to `completed`: every held-out task at 0.5 before training,
/// at (office, math) after.
async fn completed(app: &TestApp, cluster: &mut Cluster, id: &str, token: &str, after: (f64, f64)) {
    let body = crate::openenv::echo_submission(id, "ghcr.io/test/echo-ok:v1");
    let answer = app.post_as("/api/openenv/submissions", &body.to_string(), token).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.text());
    server::openenv::admission::pass(&app.state).await.unwrap();
    cluster.send(json!({"kind": "heartbeat", "gpus_free": 1, "sandboxes_free": 5})).await;
    let run = cluster.next_where(|m| m["kind"] == "assign").await["run_id"].as_str().unwrap().to_string();
    cluster.send(json!({"kind": "accepted", "run_id": run})).await;
    let at = "2026-12-01T12:00:01Z";
    let events = [
        json!({"state": "loading", "policy_version": 0}),
        json!({"state": "evaluating", "policy_version": 0, "evaluation": evaluating("before", 0.5, 0.5)}),
        json!({"state": "rolling", "policy_version": 0}),
        json!({"state": "updating", "policy_version": 1, "rewards": [0.0, 1.0, 1.0, 0.5]}),
        json!({"state": "evaluating", "policy_version": 1, "evaluation": evaluating("after", after.0, after.1)}),
        json!({"state": "cleanup", "policy_version": 1}),
        json!({"state": "completed", "policy_version": 1}),
    ];
    for (seq, mut e) in events.into_iter().enumerate() {
        e["seq"] = json!(seq + 1);
        e["at"] = json!(at);
        cluster.event(&run, e).await;
    }
    let v = app.get_as(&format!("/api/openenv/runs/{run}"), token).await.json();
    assert_eq!(
        (v["state"].as_str(), v["evaluation"]["state"].as_str()),
        (Some("completed"), Some("complete")),
        "{v:#}"
    );
}

fn accounts(page: &Value) -> Vec<(String, f64)> {
    page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["account"].as_str().unwrap().to_string(), r["delta_pp"].as_f64().unwrap()))
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_and_the_leaderboard_by_account() {
    for backend in BACKENDS {
        let clock =
            Arc::new(server::ports::clock::FixedClock::new(time::macros::datetime!(2026-12-01 12:00 UTC)));
        let app = TestApp::with(backend, Options { clock: Some(clock.clone()), ..Options::local() }).await;
        let mut cluster = Cluster::connect(&app).await;
        // Quota before anything: nothing used, nothing to wait for; editors have none.
        let q = app.get_as("/api/openenv/quota", BOB).await.json();
        assert_eq!(
            q,
            json!({"limit": 1, "window_s": 86400, "used": 0, "next_free_at": null, "exempt": false})
        );
        assert_eq!(app.get("/api/openenv/quota").await.status, StatusCode::UNAUTHORIZED);
        // Alice: office +50, math 0 (Δ +25). Eve (an editor, no quota), two submissions: e1 math
        // +25 (Δ +12.5), e2 office +30 (Δ +15). Bob: -10 everywhere.
        completed(&app, &mut cluster, "a1", ALICE, (1.0, 0.5)).await;
        completed(&app, &mut cluster, "e1", EVE, (0.5, 0.75)).await;
        completed(&app, &mut cluster, "e2", EVE, (0.8, 0.5)).await;
        completed(&app, &mut cluster, "b1", BOB, (0.4, 0.4)).await;
        let q = app.get_as("/api/openenv/quota", ALICE).await.json();
        assert_eq!(
            q,
            json!({"limit": 1, "window_s": 86400, "used": 1, "next_free_at": "2026-12-02T12:00:00Z", "exempt": false})
        );
        let q = app.get_as("/api/openenv/quota", EVE).await.json();
        // An exempt account's submissions hold no slot.
        assert_eq!((q["exempt"].as_bool(), q["used"].as_u64()), (Some(true), Some(0)), "{q}");

        // One row per account, best first; Eve's row is her best submission, with her best Δ in
        // each domain across both.
        let page = app.get_as("/api/openenv/leaderboard?by=account", BOB).await.json();
        let rows = accounts(&page);
        assert_eq!(
            rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
            ["alice", "eve", "bob"],
            "{page:#}"
        );
        assert!(close(rows[0].1, 25.0) && close(rows[1].1, 15.0) && close(rows[2].1, -10.0), "{rows:?}");
        let eve = &page["rows"][1];
        assert_eq!((eve["submission_id"].as_str(), eve["submissions"].as_u64()), (Some("e2"), Some(2)));
        let best: Vec<f64> =
            eve["domains"].as_array().unwrap().iter().map(|d| d["delta_pp"].as_f64().unwrap()).collect();
        assert!(close(best[0], 30.0) && close(best[1], 25.0), "{eve:#}");
        assert!(eve["stderr_pp"].is_f64() && eve["ci95_pp"].is_array(), "{eve:#}");
        assert_eq!(
            (page["rows"][0]["rank"].as_u64(), page["rows"][0]["tie_group"].as_u64()),
            (Some(1), Some(1))
        );
        assert_eq!(page["me"]["account"], "bob", "the caller's row pinned: {page:#}");
        assert_eq!(app.get("/api/openenv/leaderboard?by=account").await.json()["me"], Value::Null);
        // Pages of one: the snapshot holds while a new run ranks Eve first.
        let first = app.get_as("/api/openenv/leaderboard?by=account&limit=1", ALICE).await.json();
        assert_eq!((accounts(&first).len(), first["total"].as_u64()), (1, Some(3)));
        completed(&app, &mut cluster, "e3", EVE, (1.0, 1.0)).await;
        let mut seen = accounts(&first);
        let mut cursor = first["next_cursor"].as_str().unwrap().to_string();
        loop {
            let next =
                app.get(&format!("/api/openenv/leaderboard?by=account&limit=1&cursor={cursor}")).await.json();
            assert_eq!(next["snapshot_at"], first["snapshot_at"]);
            seen.extend(accounts(&next));
            match next["next_cursor"].as_str() {
                Some(c) => cursor = c.to_string(),
                None => break,
            }
        }
        assert_eq!(
            seen.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
            ["alice", "eve", "bob"],
            "frozen: {seen:?}"
        );
        assert!(close(seen[1].1, 15.0), "{seen:?}");
        let fresh = app.get("/api/openenv/leaderboard?by=account").await.json();
        assert_eq!(accounts(&fresh)[0].0, "eve", "{fresh:#}");
        assert!(close(accounts(&fresh)[0].1, 50.0), "{fresh:#}");
        // The submissions' board still ranks every submission: five, Eve's three among them.
        let board = app.get("/api/openenv/leaderboard").await.json();
        assert_eq!(board["rows"].as_array().unwrap().len(), 5, "{board:#}");
        // Refused: an unknown view, a bad page size, a cursor that is not one.
        for query in [
            "by=nope",
            "by=",
            "by=account&limit=0",
            "by=account&limit=101",
            "by=account&cursor=zz.1",
            "by=account&cursor=0123456789abcdef.x",
        ] {
            let a = app.get(&format!("/api/openenv/leaderboard?{query}")).await;
            assert_eq!(
                (a.status, a.json()["code"].as_str().map(str::to_string)),
                (StatusCode::BAD_REQUEST, Some("INVALID_QUERY".into())),
                "{query}"
            );
        }
        // A cursor of a snapshot that never was (or is gone) is not found, not a bad query.
        let gone = app.get("/api/openenv/leaderboard?by=account&cursor=0123456789abcdef.0").await;
        assert_eq!((gone.status, gone.json()["code"].clone()), (StatusCode::NOT_FOUND, json!("NOT_FOUND")));
        // The window passes: the slot frees.
        clock.advance(time::Duration::days(1));
        assert_eq!(app.get_as("/api/openenv/quota", ALICE).await.json()["used"], 0);
        // The page shows both views.
        let html = app.get("/arena/openenv").await.text();
        assert!(
            html.contains("Leaderboard by participant") && html.contains(r#"data-account="bob""#),
            "{html}"
        );
        app.finish().await;
    }
}
