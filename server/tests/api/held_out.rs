//! The held-out benchmark stays held out, tried as a hostile participant would: a schema that
//! points outside itself, a cluster report that quotes what the trainer read, a demoted editor's
//! pages, an image that answers `/health` 401 to buy a returned slot, an image that never serves
//! holding admission for everyone, and slots returned again and again.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::controls::Cluster;
use crate::harness::{Answer, Backend, Options, TestApp, ALICE, BOB, EVE};
use crate::on_both_backends;
use crate::openenv::admitted;

fn submission(id: &str, image: &str, action: Value) -> Value {
    json!({
        "submission_id": id,
        "name": "Echo (held-out test)",
        "image": image,
        "schema": {"action": action, "observation": {"type": "object"}},
        "tasks": [{"task_id": "echo-1", "split": "train"}],
        "example_actions": [{"message": "hello"}, {"message": "done"}],
        "finish_action": {"message": "done"}
    })
}

fn echo_action() -> Value {
    json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"],
        "additionalProperties": false})
}

fn code(a: &Answer) -> (u16, String) {
    (a.status.as_u16(), a.json()["code"].as_str().unwrap_or("").to_string())
}

pub(crate) async fn connect(app: &TestApp) -> tokio::task::JoinHandle<()> {
    let cluster = standin::cluster::Cluster {
        node_id: None,
        gpus_free: 0,
        sandboxes_free: 0,
        heartbeat: Duration::from_millis(100),
        trainer: None,
    };
    let handle = standin::cluster::connect(&app.state.public_url, crate::harness::CLUSTER_SECRET, cluster);
    let start = std::time::Instant::now();
    while app.get("/api/openenv").await.json()["connected"] != true {
        assert!(start.elapsed() < Duration::from_secs(60), "the cluster never connected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    handle
}

// A schema that points at a file or an address would have the trainer fetch it (Python's
// `jsonschema` follows `$dynamicRef` to files and URLs, and its error quotes what it read): every
// such schema is refused at once, on both routes, nothing stored and no slot used. What pydantic
// and OpenEnv write still passes.
on_both_backends!(multi_thread, a_schema_that_points_outside_itself_is_refused_at_once, |app| {
    let cluster = connect(app).await;
    let secret = "file:///var/lib/arena-agent/done/oe-1/assignment.json#/nope";
    let hostile = [
        json!({"$dynamicRef": secret, "type": "object"}),
        json!({"$schema": "https://json-schema.org/draft-07/schema", "$dynamicRef": secret}),
        json!({"type": "object", "properties": {"message": {"$dynamicRef": "http://127.0.0.1:9/x#/y"}}}),
        json!({"allOf": [{"$dynamicRef": "file:///etc/hostname"}]}),
        json!({"type": "object", "properties": {"message": {"$ref": "http://169.254.169.254/latest/meta-data"}}}),
        json!({"$recursiveRef": "https://evil.example/s.json"}),
        json!({"$id": "https://evil.example/base/", "type": "object"}),
        json!({"$schema": "https://evil.example/schema", "type": "object"}),
    ];
    for (i, action) in hostile.into_iter().enumerate() {
        let body = submission(&format!("hostile-{i}"), "ghcr.io/test/echo-ok:v1", action.clone());
        for route in ["/api/openenv/check", "/api/openenv/submissions"] {
            let r = app.post_as(route, &body.to_string(), ALICE).await;
            assert_eq!(code(&r), (422, "SCHEMA_INVALID".into()), "{route} {action}: {}", r.text());
        }
    }
    assert_eq!(app.scalar("SELECT COUNT(*) FROM openenv_submissions").await, 0);
    assert_eq!(app.scalar("SELECT COUNT(*) FROM openenv_quota_slots").await, 0);
    let pydantic = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"Text": {"type": "string"}},
        "type": "object", "properties": {"message": {"$ref": "#/$defs/Text"}}, "required": ["message"],
    });
    let r = app
        .post_as(
            "/api/openenv/check",
            &submission("ok", "ghcr.io/test/echo-ok:v1", pydantic).to_string(),
            ALICE,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    cluster.abort();
});

// What the cluster reports is kept for editors; participants read the arena's own sentences. The
// report here quotes what a trainer could have read (a held-out task id, a benchmark image, the
// run's assignment) on every kind of event.
on_both_backends!(multi_thread, participants_read_the_arenas_sentences_never_the_clusters_words, |app| {
    let secret =
        "heldout-task-7 ghcr.io/benchflow/bench@sha256:0ab1 /var/lib/arena-agent/done/assignment.json";
    let mut cluster = Cluster::connect(app).await;
    let r = app
        .post_as(
            "/api/openenv/submissions",
            &submission("worded", "ghcr.io/test/echo-ok:v1", echo_action()).to_string(),
            ALICE,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    admitted(&app.state).await;
    cluster.send(json!({"kind": "heartbeat", "gpus_free": 1, "sandboxes_free": 5})).await;
    let run = cluster.next_where(|m| m["kind"] == "assign").await["run_id"].as_str().unwrap().to_string();
    cluster.send(json!({"kind": "accepted", "run_id": run})).await;
    let at = "2026-12-01T12:00:01Z";
    let events = [
        json!({"state": "loading", "message": format!("loading {secret}")}),
        json!({"state": "rolling", "task_id": "echo-1", "message": format!("step 1 {secret}")}),
        json!({"state": "rolling", "alert": "sandbox_failed", "message": format!("never served: {secret}")}),
        json!({"state": "updating", "task_id": secret, "rewards": [], "alert": "no_update", "message": secret}),
        json!({"state": "rolling", "task_id": "echo-1", "message": secret}),
        json!({"state": "updating", "task_id": "echo-1", "rewards": [0.0, 1.0, 1.0, 0.5], "message": secret}),
        json!({"state": "failed", "message": format!("RUN_TRAINER_FAILED: Unresolvable: {secret}")}),
    ];
    for (seq, e) in events.into_iter().enumerate() {
        let mut e = e;
        e["seq"] = json!(seq + 1);
        e["policy_version"] = json!(if seq >= 5 { 1 } else { 0 });
        e["at"] = json!(at);
        cluster.event(&run, e).await;
    }
    let (alice, _) = crate::session::sign_in(app, "alice").await;
    let run_view = app.get_as(&format!("/api/openenv/runs/{run}"), ALICE).await.text();
    let events = app.get_as(&format!("/api/openenv/runs/{run}/events"), ALICE).await.text();
    let page = app
        .call(Method::GET, &format!("/arena/openenv/runs/{run}"), None, &[("cookie", &alice)])
        .await
        .text();
    assert!(page.contains("RUN_TRAINER_FAILED"), "the run's page shows the run: {page}");
    let participant = format!("{run_view}\n{events}\n{page}");
    for part in secret.split(' ') {
        assert!(!participant.contains(part), "{part} reached the participant: {participant}");
    }
    let events = app.get_as(&format!("/api/openenv/runs/{run}/events"), ALICE).await.json();
    let messages: Vec<&str> =
        events["events"].as_array().unwrap().iter().filter_map(|e| e["message"].as_str()).collect();
    assert!(messages.iter().any(|m| m.contains("five episodes of `echo-1`")), "{messages:?}");
    let failure = &app.get_as(&format!("/api/openenv/runs/{run}"), ALICE).await.json()["error"];
    assert_eq!(failure["code"], "RUN_TRAINER_FAILED", "{failure}");
    assert!(failure["reported"].is_null(), "{failure}");
    // The editor reads what the cluster wrote.
    let editor = app.get_as(&format!("/api/openenv/runs/{run}"), EVE).await.json();
    assert!(editor["error"]["reported"].as_str().unwrap().contains("Unresolvable"), "{editor:#}");
    let editor_events = app.get_as(&format!("/api/openenv/runs/{run}/events"), EVE).await.text();
    assert!(editor_events.contains("heldout-task-7"), "{editor_events}");
});

// A page re-checks an editor's role with HF as the API does: once HF no longer says the person
// is an editor, the next page shows the participant's view (the jobs and every participant's
// submissions are gone from it).
#[tokio::test]
async fn a_demoted_editors_pages_show_the_participants_view() {
    let start = time::macros::datetime!(2026-11-30 12:00 UTC);
    let clock = Arc::new(server::ports::clock::FixedClock::new(start));
    let app =
        TestApp::with(Backend::Sqlite, Options { clock: Some(clock.clone()), ..Options::default() }).await;
    let (eve, _) = crate::session::sign_in(&app, "eve").await;
    let page = |path: &'static str| {
        let eve = eve.clone();
        let app = &app;
        async move { app.call(Method::GET, path, None, &[("cookie", &eve)]).await.text() }
    };
    let editor_jobs = page("/arena/jobs").await;
    assert!(editor_jobs.contains("Committed spend"), "an editor's jobs page: {editor_jobs}");
    app.hub.revoke_oauth_tokens();
    clock.advance(time::Duration::seconds(301));
    let jobs = page("/arena/jobs").await;
    assert!(!jobs.contains("Committed spend"), "{jobs}");
    assert!(jobs.contains("This page is for BenchFlow editors"), "{jobs}");
    app.finish().await;
}

// Blame that cannot be bought. An image whose `/health` asks for credentials while the arena's
// reader is good is its author's failure, and the slot counts: the same account's next
// submission within the window is refused 429, not accepted on a returned slot.
on_both_backends!(multi_thread, a_health_that_answers_401_to_a_good_reader_is_the_authors_failure, |app| {
    let cluster = connect(app).await;
    let r = app
        .post_as(
            "/api/openenv/submissions",
            &submission("adm-401", "ghcr.io/test/echo-health-401:v1", echo_action()).to_string(),
            ALICE,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    admitted(&app.state).await;
    let v = app.get_as("/api/openenv/submissions/adm-401", ALICE).await.json();
    let got = (v["state"].as_str(), v["slot"]["state"].as_str(), v["error_origin"].as_str());
    assert_eq!(got, (Some("rejected"), Some("used"), Some("author")), "{v:#}");
    assert_eq!(v["report"]["errors"][0]["code"], "OPENENV_ENDPOINT_INVALID", "{v:#}");
    let again = app
        .post_as(
            "/api/openenv/submissions",
            &submission("adm-401-again", "ghcr.io/test/echo-ok:v1", echo_action()).to_string(),
            ALICE,
        )
        .await;
    assert_eq!(code(&again), (429, "SUBMISSION_QUOTA_EXCEEDED".into()), "{}", again.text());
    cluster.abort();
});

// An image that never serves spends a few probes, not one per task, and does not hold admission
// for another account: both are worked on side by side.
on_both_backends!(multi_thread, an_image_that_never_serves_holds_no_one_else_up, |app| {
    let cluster = connect(app).await;
    let mut never = submission("never-serves", "ghcr.io/test/echo-no-health:v1", echo_action());
    never["tasks"] =
        json!((0..10).map(|i| json!({"task_id": format!("t{i}"), "split": "train"})).collect::<Vec<_>>());
    assert_eq!(
        app.post_as("/api/openenv/submissions", &never.to_string(), ALICE).await.status,
        StatusCode::ACCEPTED
    );
    let ok = submission("serves", "ghcr.io/test/echo-ok:v1", echo_action());
    assert_eq!(
        app.post_as("/api/openenv/submissions", &ok.to_string(), BOB).await.status,
        StatusCode::ACCEPTED
    );
    // The first pass decides Bob's while Alice's is still being probed.
    server::openenv::admission::pass(&app.state).await.unwrap();
    let bob = app.get_as("/api/openenv/submissions/serves", BOB).await.json();
    assert_eq!(bob["state"], "validated", "{bob:#}");
    // The later passes probe only the image that never serves: a short health wait.
    let quick = crate::harness::with_health_wait(&app.state, 3);
    for _ in 0..10 {
        let alice = app.get_as("/api/openenv/submissions/never-serves", ALICE).await.json();
        if alice["state"] != "validating" {
            break;
        }
        server::openenv::admission::pass(&quick).await.unwrap();
    }
    let alice = app.get_as("/api/openenv/submissions/never-serves", ALICE).await.json();
    let got = (alice["state"].as_str(), alice["slot"]["state"].as_str(), alice["error_origin"].as_str());
    assert_eq!(got, (Some("rejected"), Some("returned"), Some("platform")), "{alice:#}");
    let started = app
        .hub
        .jobs
        .jobs
        .lock()
        .unwrap()
        .iter()
        .filter(|j| j.view.labels.get("arena-submission").map(String::as_str) == Some("never-serves"))
        .count();
    let cap = app.state.openenv.allowance.platform_failures as usize;
    assert!(
        started <= cap + app.state.openenv.sandbox_limit,
        "{started} sandboxes for an image that never serves"
    );
    assert!(
        alice["report"]["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["message"].as_str().unwrap().contains("allowance")),
        "{alice:#}"
    );
    cluster.abort();
});

// Returned slots are capped per quota window: past the cap, a submission is accepted but waits
// before admission takes it, and says until when and why.
on_both_backends!(multi_thread, an_account_past_its_returned_slots_waits, |app| {
    let cluster = connect(app).await;
    let cap = app.state.openenv.returned_slots_per_window;
    for i in 0..cap {
        let id = format!("returned-{i}");
        let r = app
            .post_as(
                "/api/openenv/submissions",
                &submission(&id, "ghcr.io/test/echo-no-health:v1", echo_action()).to_string(),
                ALICE,
            )
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
        // An image that never serves: a short health wait.
        admitted(&crate::harness::with_health_wait(&app.state, 3)).await;
        let v = app.get_as(&format!("/api/openenv/submissions/{id}"), ALICE).await.json();
        assert_eq!(v["slot"]["state"], "returned", "{v:#}");
        assert!(v["waiting"].is_null(), "{v:#}");
    }
    let r = app
        .post_as(
            "/api/openenv/submissions",
            &submission("waits", "ghcr.io/test/echo-ok:v1", echo_action()).to_string(),
            ALICE,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let waiting = &r.json()["waiting"];
    assert!(waiting["reason"].as_str().unwrap().contains("returned"), "{waiting}");
    assert!(waiting["until_epoch"].as_i64().unwrap() > app.state.now().epoch, "{waiting}");
    assert_eq!(server::openenv::admission::pass(&app.state).await.unwrap(), 0, "admission leaves it waiting");
    let v = app.get_as("/api/openenv/submissions/waits", ALICE).await.json();
    assert_eq!(v["state"], "validating", "{v:#}");
    // Another account is not held up by it.
    let r = app
        .post_as(
            "/api/openenv/submissions",
            &submission("bob-now", "ghcr.io/test/echo-ok:v1", echo_action()).to_string(),
            BOB,
        )
        .await;
    assert!(r.json()["waiting"].is_null());
    admitted(&app.state).await;
    assert_eq!(app.get_as("/api/openenv/submissions/bob-now", BOB).await.json()["state"], "validated");
    cluster.abort();
});
