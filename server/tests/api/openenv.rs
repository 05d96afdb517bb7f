//! The OpenEnv track's submissions through the API, with the stand-in as Docker Hub and GHCR and a
//! simulated training cluster connected over the relay: every at-once refusal with its code and
//! nothing stored, the pinned digest, resends, the quota (a race and the rolling window on a fixed
//! clock), who may read what. Both backends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::harness::{Backend, Options, TestApp, ALICE, BOB, CLUSTER_SECRET, EVE};
use crate::on_both_backends;

fn submission(id: &str, image: &str) -> Value {
    json!({
        "submission_id": id,
        "name": "Echo environment",
        "image": image,
        "schema": {
            "action": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"], "additionalProperties": false},
            "observation": {"type": "object"}
        },
        "tasks": [{"task_id": "echo-1", "split": "train"}, {"task_id": "echo-2", "split": "eval"}],
        "example_actions": [{"message": "hello"}],
        "finish_action": {"message": "done"},
        "source": "https://huggingface.co/datasets/arena-demo/echo-env"
    })
}

fn code(a: &crate::harness::Answer) -> (u16, String) {
    (a.status.as_u16(), a.json()["code"].as_str().unwrap_or("").to_string())
}

async fn submit(app: &TestApp, body: &Value, token: &str) -> crate::harness::Answer {
    app.post_as("/api/openenv/submissions", &body.to_string(), token).await
}

/// Admission's passes, a round each as the worker runs them, until one decides a submission.
pub async fn admitted(state: &server::AppState) {
    for _ in 0..10 {
        if server::openenv::admission::pass(state).await.unwrap() == 1 {
            return;
        }
    }
    panic!("admission decided nothing in 10 rounds");
}

/// Connects the simulated cluster and waits until the arena says so.
async fn connect(app: &TestApp) -> tokio::task::JoinHandle<()> {
    let url = app.state.public_url.clone();
    let cluster = standin::cluster::Cluster {
        node_id: None,
        gpus_free: 1,
        sandboxes_free: 8,
        heartbeat: Duration::from_millis(100),
        trainer: None,
    };
    let handle = standin::cluster::connect(&url, CLUSTER_SECRET, cluster);
    let start = Instant::now();
    while app.get("/api/openenv").await.json()["connected"] != true {
        assert!(start.elapsed() < Duration::from_secs(60), "the cluster never connected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    handle
}

on_both_backends!(multi_thread, a_submission_is_checked_at_once_pinned_and_kept, |app| {
    // Not connected: every route but the status answers 503, and says when to retry.
    assert_eq!(
        app.get("/api/openenv").await.json(),
        json!({"connected": false, "intake": {"open": true, "reason": null, "since": null},
            "cluster": {"nodes_connected": 0, "gpus_busy": 0, "gpus_free": 0, "runs_waiting": 0, "median_wait_s": null}})
    );
    let r = submit(app, &submission("echo-v1", "ghcr.io/arena-demo/echo-env:v1"), ALICE).await;
    assert_eq!(code(&r), (503, "OPENENV_DISCONNECTED".into()));
    assert!(r.json()["retry_after_s"].as_u64().is_some(), "{}", r.text());
    assert_eq!(code(&app.get_as("/api/openenv/submissions/echo-v1", ALICE).await).0, 503);
    let check = app.post_as("/api/openenv/check", &submission("echo-v1", "echo").to_string(), ALICE).await;
    assert_eq!(code(&check), (503, "OPENENV_DISCONNECTED".into()));
    // A wrong credential does not connect.
    let wrong = standin::cluster::connect(
        &app.state.public_url,
        "not-the-credential",
        standin::cluster::Cluster {
            node_id: None,
            gpus_free: 1,
            sandboxes_free: 1,
            heartbeat: Duration::from_millis(50),
            trainer: None,
        },
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app.get("/api/openenv").await.json()["connected"], false);
    wrong.abort();
    let cluster = connect(app).await;

    // The checks that need no registry, alone: nothing stored, no image read.
    let before = app.hub.registry_requests();
    let checked = app.post_as("/api/openenv/check", &submission("x-1", "echo").to_string(), ALICE).await;
    assert_eq!(checked.json(), json!({"tasks": 2, "images": ["docker.io/library/echo:latest"]}));
    let refused =
        app.post_as("/api/openenv/check", &submission("x-1", "quay.io/a/b").to_string(), ALICE).await;
    assert_eq!(code(&refused), (422, "IMAGE_REGISTRY_UNSUPPORTED".into()));
    assert_eq!(app.hub.registry_requests(), before);
    let anonymous = app.request(Method::POST, "/api/openenv/submissions", Some("{}")).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let body = submission("echo-v1", "ghcr.io/arena-demo/echo-env:v1");
    let r = submit(app, &body, ALICE).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let v = r.json();
    assert_eq!((v["state"].clone(), v["slot"]["state"].clone()), (json!("validating"), json!("held")));
    let image = &v["images"][0];
    assert_eq!(image["submitted"], "ghcr.io/arena-demo/echo-env:v1");
    let resolved = image["resolved"].as_str().unwrap();
    assert!(
        resolved.starts_with("ghcr.io/arena-demo/echo-env@sha256:") && resolved.len() == 35 + 64,
        "{resolved}"
    );
    assert_eq!(image["port"], 8000);
    assert_eq!(
        image["labels"],
        json!({"org.opencontainers.image.source": "https://github.com/arena-demo/echo-env"})
    );
    assert_eq!(image["compatibility"]["echo-1"]["status"], "pending");
    assert_eq!((v["run"]["run_id"].clone(), v["existing"].clone()), (Value::Null, json!(false)));

    // The pinned digest is the amd64 image's manifest, as the registry names it.
    let pinned = resolved.split('@').nth(1).unwrap();
    let by_digest = submission("echo-v1-pinned", &format!("ghcr.io/arena-demo/echo-env@{pinned}"));
    let before = app.hub.registry_requests();
    let quota = submit(app, &by_digest, ALICE).await;
    assert_eq!(app.hub.registry_requests(), before, "a digest read before is not read again");
    assert_eq!(code(&quota), (429, "SUBMISSION_QUOTA_EXCEEDED".into()), "one accepted per account per day");
    // A held slot is answered before any registry request, even for an image never read.
    let before = app.hub.registry_requests();
    let unread = submit(app, &submission("echo-v2", "ghcr.io/arena-demo/never-read:v9"), ALICE).await;
    assert_eq!(code(&unread), (429, "SUBMISSION_QUOTA_EXCEEDED".into()));
    assert_eq!(app.hub.registry_requests(), before, "no registry request for a held slot");
    let wait = quota.json()["retry_after_s"].as_u64().unwrap();
    assert!(wait > 86_000 && wait <= 86_400, "{wait}");

    // Resends: unchanged, the same record; changed, a 409.
    let again = submit(app, &body, ALICE).await;
    assert_eq!(again.status, StatusCode::ACCEPTED);
    assert_eq!(
        (again.json()["existing"].clone(), again.json()["images"][0]["resolved"].clone()),
        (json!(true), json!(resolved))
    );
    let mut changed = body.clone();
    changed["name"] = json!("Another name");
    assert_eq!(code(&submit(app, &changed, ALICE).await), (409, "SUBMISSION_ID_REUSED".into()));

    // Only the submitter reads it; editors see every submission in the list.
    assert_eq!(app.get_as("/api/openenv/submissions/echo-v1", ALICE).await.json()["state"], "validating");
    assert_eq!(
        code(&app.get_as("/api/openenv/submissions/echo-v1", BOB).await),
        (404, "SUBMISSION_NOT_FOUND".into())
    );
    assert_eq!(app.get_as("/api/openenv/submissions", BOB).await.json()["submissions"], json!([]));
    let all = app.get_as("/api/openenv/submissions", EVE).await.json();
    assert_eq!(all["submissions"].as_array().unwrap().len(), 1);

    // Docker's shorthand on Docker Hub: /v2/, a token, the manifest, the config blob.
    let before = app.hub.registry_requests();
    let r = submit(app, &submission("hub-echo", "echo"), EVE).await;
    assert_eq!(app.hub.registry_requests() - before, 4);
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    assert!(r.json()["images"][0]["resolved"]
        .as_str()
        .unwrap()
        .starts_with("docker.io/library/echo@sha256:"));
    cluster.abort();
});

on_both_backends!(multi_thread, every_refusal_at_submission_has_its_code_and_stores_nothing, |app| {
    let cluster = connect(app).await;
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut b = submission("bob-env", "ghcr.io/arena-demo/echo-env:v1");
        edit(&mut b);
        b
    };
    let task_images = |images: Vec<String>| {
        let tasks: Vec<Value> = images
            .iter()
            .enumerate()
            .map(|(i, img)| json!({"task_id": format!("t{i}"), "split": "train", "image": img}))
            .collect();
        with(&|b: &mut Value| b["tasks"] = json!(tasks))
    };
    let cases: Vec<(Value, &str)> = vec![
        (with(&|b| b["tasks"][0]["rollout_wall_s"] = json!(3601)), "CONTRACT_INVALID"),
        (with(&|b| b["tasks"][0]["memory_gib"] = json!(32)), "ENVIRONMENT_TOO_LARGE_FOR_SANDBOX"),
        (with(&|b| b["example_actions"] = json!([{"message": 5}])), "SCHEMA_INVALID"),
        (with(&|b| b["example_actions"] = json!([{"finish": true}])), "SCHEMA_INVALID"),
        (with(&|b| b["schema"]["action"] = json!({"type": "no-such-type"})), "SCHEMA_INVALID"),
        (
            with(&|b| b["schema"]["action"] = json!({"$ref": "https://example.com/schema.json"})),
            "SCHEMA_INVALID",
        ),
        (with(&|b| b["image"] = json!("https://ghcr.io/arena-demo/echo-env:v1")), "IMAGE_REFERENCE_INVALID"),
        (with(&|b| b["image"] = json!("quay.io/arena-demo/echo-env:v1")), "IMAGE_REGISTRY_UNSUPPORTED"),
        (
            with(&|b| b["image"] = json!("https://huggingface.co/spaces/bob/echo")),
            "SUBMISSION_FORMAT_RETIRED",
        ),
        (
            task_images(
                (0..50)
                    .map(|i| format!("ghcr.io/test/many:t{}", i % 20))
                    .chain(["ghcr.io/a/b:1".into()])
                    .collect(),
            ),
            "CONTRACT_INVALID",
        ),
        (with(&|b| b["image"] = json!("ghcr.io/test/private:v1")), "IMAGE_INACCESSIBLE"),
        (with(&|b| b["image"] = json!("ghcr.io/arena-demo/echo-env:v2")), "IMAGE_INACCESSIBLE"),
        (with(&|b| b["image"] = json!("ghcr.io/nobody/nothing:v1")), "IMAGE_INACCESSIBLE"),
        (with(&|b| b["image"] = json!("ghcr.io/test/arm-only:v1")), "IMAGE_PLATFORM_UNSUPPORTED"),
        (with(&|b| b["image"] = json!("docker.io/test/old:v1")), "IMAGE_MANIFEST_UNSUPPORTED"),
        (with(&|b| b["image"] = json!("ghcr.io/test/no-command:v1")), "IMAGE_SERVER_INVALID"),
        (with(&|b| b["image"] = json!("ghcr.io/test/two-ports:v1")), "IMAGE_SERVER_INVALID"),
        (with(&|b| b["image"] = json!("ghcr.io/test/too-big:v1")), "IMAGE_COMPRESSED_SIZE_EXCEEDED"),
        (
            task_images((0..20).map(|i| format!("ghcr.io/test/many:t{i}")).collect()),
            "SUBMISSION_SIZE_EXCEEDED",
        ),
    ];
    for (body, want) in &cases {
        let r = submit(app, body, BOB).await;
        assert_eq!(code(&r), (r.status.as_u16(), want.to_string()), "{}", r.text());
        assert!(r.status.is_client_error(), "{want}: {}", r.text());
    }
    // More than fifty images: the submission's own and fifty task images.
    let mut fifty_one = task_images((0..50).map(|i| format!("ghcr.io/test/img{i}:v1")).collect());
    fifty_one["image"] = json!("ghcr.io/arena-demo/echo-env:v1");
    assert_eq!(code(&submit(app, &fifty_one, BOB).await), (422, "IMAGE_LIMIT_EXCEEDED".into()));

    // The registry limiting or not answering: 503, safe to resend.
    let body = submission("bob-env", "ghcr.io/arena-demo/echo-env:v1");
    app.hub.set_faults(standin::Faults {
        status: Some(429),
        retry_after_s: Some(7),
        count: Some(1),
        ..Default::default()
    });
    let limited = submit(app, &body, BOB).await;
    assert_eq!(code(&limited), (503, "REGISTRY_RATE_LIMITED".into()), "{}", limited.text());
    app.hub.set_faults(standin::Faults { status: Some(502), count: Some(1), ..Default::default() });
    assert_eq!(code(&submit(app, &body, BOB).await), (503, "IMAGE_UNAVAILABLE".into()));
    // Admission's queue full: CAPACITY_BUSY.
    for i in 0..20 {
        app.exec(&format!(
            "INSERT INTO openenv_submissions (account_id, account, submission_id, body_hash, body, images, state, slot_state, \
             report, accepted_at, accepted_epoch, updated_at) VALUES ('u-other{i}', 'other', 's', 'h', '{{}}', '[]', \
             'validating', 'held', '{{\"errors\":[]}}', 't', 0, 't')"
        ))
        .await
        .unwrap();
    }
    assert_eq!(code(&submit(app, &body, BOB).await), (503, "CAPACITY_BUSY".into()));
    let bob_rows = app.scalar("SELECT COUNT(*) FROM openenv_submissions WHERE account <> 'other'").await;
    assert_eq!(bob_rows, 0, "nothing stored by any refusal");
    assert_eq!(app.scalar("SELECT COUNT(*) FROM openenv_quota_slots").await, 0, "and no slot taken");
    cluster.abort();
});

on_both_backends!(multi_thread, two_first_submissions_at_once_give_one_acceptance, |app| {
    let cluster = connect(app).await;
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (router, body) =
            (app.router.clone(), submission(&format!("race-{i}"), "ghcr.io/arena-demo/echo-env:v1"));
        tasks.push(tokio::spawn(async move {
            use tower::ServiceExt;
            let req = axum::http::Request::post("/api/openenv/submissions")
                .header("authorization", format!("Bearer {ALICE}"))
                .header("content-type", "application/json")
                .body(axum::body::Body::from(body.to_string()))
                .unwrap();
            router.oneshot(req).await.unwrap().status()
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap().as_u16());
    }
    statuses.sort();
    assert_eq!(statuses, [202, 429, 429, 429, 429, 429]);
    assert_eq!(app.scalar("SELECT COUNT(*) FROM openenv_submissions").await, 1);
    cluster.abort();
});

/// The slot frees 24 hours after acceptance, not after the request: a fixed clock moves time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quota_is_a_rolling_day_from_acceptance() {
    let start = time::macros::datetime!(2026-11-30 12:00 UTC);
    let clock = Arc::new(server::ports::clock::FixedClock::new(start));
    let app =
        TestApp::with(Backend::Sqlite, Options { clock: Some(clock.clone()), ..Options::default() }).await;
    let cluster = connect(&app).await;
    assert_eq!(
        submit(&app, &submission("day-1", "ghcr.io/arena-demo/echo-env:v1"), ALICE).await.status,
        StatusCode::ACCEPTED
    );
    clock.advance(time::Duration::seconds(86_399));
    connect_again(&app).await;
    let r = submit(&app, &submission("day-2", "ghcr.io/arena-demo/echo-env:v1"), ALICE).await;
    assert_eq!(
        (code(&r), r.json()["retry_after_s"].clone()),
        ((429, "SUBMISSION_QUOTA_EXCEEDED".into()), json!(1))
    );
    clock.advance(time::Duration::seconds(1));
    connect_again(&app).await;
    let r = submit(&app, &submission("day-2", "ghcr.io/arena-demo/echo-env:v1"), ALICE).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    cluster.abort();
    app.finish().await;
}

/// After the clock jumps, the next heartbeat brings the cluster's last-seen time with it.
async fn connect_again(app: &TestApp) {
    let start = Instant::now();
    while app.get("/api/openenv").await.json()["connected"] != true {
        assert!(start.elapsed() < Duration::from_secs(60));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A pinned image the stand-in serves with a `serve` command runs as a sandbox job: the job exposes
/// the server's port at a URL, and canceling the job stops the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_job_serves_the_pinned_image_at_its_exposed_url() {
    use server::ports::jobs::JobSpec;
    let app = TestApp::new(Backend::Sqlite).await;
    let image = domain::openenv::ImageRef::parse("ghcr.io/test/served:v1").unwrap();
    let read = app.state.deps.registry.read(&image).await.unwrap();
    let spec = JobSpec {
        docker_image: image.pinned(&read.facts.digest),
        command: domain::openenv::sandbox_start(&read.facts).unwrap().command,
        arguments: Vec::new(),
        environment: Default::default(),
        secrets: Default::default(),
        flavor: "cpu-basic".into(),
        timeout_seconds: 60,
        labels: [("arena-purpose".to_string(), "openenv-admission".to_string())].into(),
        attempts: None,
        expose: Some(server::ports::jobs::Expose::private(8000)),
    };
    let sandboxes = app.state.deps.sandboxes.clone().expect("the sandbox namespace is set");
    let job = sandboxes.create(&spec).await.unwrap();
    let start = Instant::now();
    let url = loop {
        let j = sandboxes.inspect(&job.id).await.unwrap();
        if let Some(url) = j.status.expose_urls.first() {
            assert_eq!(j.status.stage, "RUNNING");
            break url.clone();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{j:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // A loopback port of its own, which every process resolves: the one URL of its one port.
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert_eq!(
        domain::openenv::exposed_url(std::slice::from_ref(&url), 8000, &[8000]).as_deref(),
        Some(url.as_str())
    );
    let http = server::ports::http::sandbox_client(Duration::from_secs(5));
    let start = Instant::now();
    let reader = crate::harness::SANDBOX_TOKEN;
    while !http.get(&url).bearer_auth(reader).send().await.is_ok_and(|r| r.status().is_success()) {
        assert!(start.elapsed() < Duration::from_secs(60), "the sandbox's server never answered at {url}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The port is exposed with a token only: none, or one outside the namespace, is refused.
    assert_eq!(http.get(&url).send().await.unwrap().status(), 401);
    assert_eq!(http.get(&url).bearer_auth(BOB).send().await.unwrap().status(), 401);
    sandboxes.cancel(&job.id).await.unwrap();
    assert_eq!(sandboxes.inspect(&job.id).await.unwrap().status.stage, "CANCELED");
    let start = Instant::now();
    while http.get(&url).send().await.is_ok() {
        assert!(start.elapsed() < Duration::from_secs(60), "canceling the job did not stop its server");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // As slow to start as HF: a sandbox stays SCHEDULING, with no address, for the stand-in's start
    // delay; one it was told never to start stays so until canceled.
    use std::sync::atomic::Ordering;
    app.hub.jobs.sandbox_start_ms.store(1_000, Ordering::Relaxed);
    app.hub.jobs.never_serve.store(1, Ordering::Relaxed);
    let never = sandboxes.create(&spec).await.unwrap();
    while app.hub.jobs.never_serve.load(Ordering::Relaxed) > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let slow = sandboxes.create(&spec).await.unwrap();
    let created = Instant::now();
    let running_at = loop {
        let j = sandboxes.inspect(&slow.id).await.unwrap();
        if j.status.stage == "RUNNING" {
            break created.elapsed();
        }
        assert!(j.status.expose_urls.is_empty() && j.status.stage == "SCHEDULING", "{j:?}");
        assert!(created.elapsed() < Duration::from_secs(60), "{j:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(running_at >= Duration::from_millis(900), "started after {running_at:?}");
    let j = sandboxes.inspect(&never.id).await.unwrap();
    assert_eq!((j.status.stage.to_string(), j.status.expose_urls.len()), ("SCHEDULING".into(), 0));
    for id in [&never.id, &slow.id] {
        sandboxes.cancel(id).await.unwrap();
    }
    app.finish().await;
}

pub(crate) fn echo_submission(id: &str, image: &str) -> Value {
    json!({
        "submission_id": id,
        "name": "Echo (admission test)",
        "image": image,
        "schema": {
            "action": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"], "additionalProperties": false},
            "observation": {"type": "object"}
        },
        "tasks": [{"task_id": "echo-1", "split": "train"}, {"task_id": "echo-2", "split": "train"}],
        "example_actions": [{"message": "hello"}, {"message": "done"}]
    })
}

// Admission through the stand-in's sandboxes, on each broken variant of the echo server: the right
// code and origin, the slot used or returned, and no sandbox left running.
on_both_backends!(multi_thread, admission_probes_every_task_in_a_fresh_sandbox_and_decides, |app| {
    let cluster = connect(app).await;
    let cases = [
        ("ok", "validated", "used", None, None),
        ("schema-differs", "rejected", "used", Some("author"), Some("IMAGE_SCHEMA_MISMATCH")),
        ("no-mcp", "rejected", "used", Some("author"), Some("OPENENV_ENDPOINT_INVALID")),
        ("never-ends", "rejected", "used", Some("author"), Some("ADMISSION_EPISODE_FAILED")),
        ("reward-too-high", "rejected", "used", Some("author"), Some("ADMISSION_EPISODE_FAILED")),
        ("no-health", "rejected", "returned", Some("platform"), Some("SANDBOX_STARTUP_FAILED")),
    ];
    for (variant, state, slot, origin, code) in cases {
        // Each case as a fresh day for the account.
        app.exec("DELETE FROM openenv_quota_slots").await.unwrap();
        let id = format!("adm-{variant}");
        let r = submit(app, &echo_submission(&id, &format!("ghcr.io/test/echo-{variant}:v1")), ALICE).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
        if variant == "no-health" {
            admitted(&crate::harness::with_health_wait(&app.state, 3)).await;
        } else {
            admitted(&app.state).await;
        }
        let v = app.get_as(&format!("/api/openenv/submissions/{id}"), ALICE).await.json();
        let got = (v["state"].as_str(), v["slot"]["state"].as_str(), v["error_origin"].as_str());
        assert_eq!(got, (Some(state), Some(slot), origin), "{variant}: {v:#}");
        assert_eq!(v["report"]["errors"][0]["code"].as_str(), code, "{variant}: {v:#}");
        if variant == "ok" {
            assert_eq!(v["images"][0]["compatibility"]["echo-2"]["status"], "passed");
        }
        let quota = app
            .scalar(&format!("SELECT COUNT(*) FROM openenv_quota_slots WHERE submission_id = '{id}'"))
            .await;
        assert_eq!(quota, i64::from(slot == "used"), "{variant}: a returned slot frees the quota");
    }
    // Every sandbox was stopped; a platform failure got one more fresh sandbox.
    let jobs = app.hub.jobs.jobs.lock().unwrap();
    let sandboxes: Vec<_> = jobs
        .iter()
        .filter(|j| j.view.labels.get("arena-purpose").map(String::as_str) == Some("openenv-admission"))
        .collect();
    assert!(sandboxes.iter().all(|j| j.finished()), "a sandbox is still running");
    let no_health = sandboxes
        .iter()
        .filter(|j| {
            j.view.labels["arena-submission"] == "adm-no-health"
                && j.view.labels["arena-task"] == domain::job_labels::opaque_task("adm-no-health", "echo-1")
        })
        .count();
    assert_eq!(no_health, 2);
    drop(jobs);
    cluster.abort();
});

// Admission plays what training plays and shows the participant what their own server answered
// (issues 57 and 58): a server that exits at start is seen at once in both sandboxes, with its exit
// and its last line; a finish action that does not end the episode is refused by name; a schema
// one field apart names where; an episode's transcript comes back without the arena's credential;
// each refusal says what to do next and, the slot used, when the next one frees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_plays_the_finish_action_sees_a_crash_at_once_and_shows_the_evidence() {
    let app = TestApp::new(Backend::Sqlite).await;
    let cluster = connect(&app).await;
    let decide = |id: &'static str, body: Value| {
        let app = &app;
        async move {
            app.exec("DELETE FROM openenv_quota_slots").await.unwrap();
            let r = submit(app, &body, ALICE).await;
            assert_eq!(r.status, StatusCode::ACCEPTED, "{id}: {}", r.text());
            admitted(&app.state).await;
            app.get_as(&format!("/api/openenv/submissions/{id}"), ALICE).await.json()
        }
    };
    // A server that exits at start: decided by its job's stage with its exit and log, not by a
    // health wait run out (that would say the image never answered GET /health).
    let v = decide("crash", echo_submission("crash", "ghcr.io/test/echo-exits-at-start:v1")).await;
    let e = &v["report"]["errors"][0];
    assert_eq!(
        (e["code"].as_str(), v["slot"]["state"].as_str()),
        (Some("SANDBOX_STARTUP_FAILED"), Some("returned")),
        "{v:#}"
    );
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("exited") && message.contains("no network"), "{message}");
    // Its stdout and stderr reach the log each in its own order.
    let log = e["evidence"]["log"].as_array().unwrap();
    assert!(log.contains(&json!("downloading word list from huggingface.co failed: no network")), "{log:?}");
    assert!(!message.contains("never answered"), "{message}");
    // A finish action that does not end the episode: refused by name, with the transcript.
    let mut never_finishes = echo_submission("finish", "ghcr.io/test/echo-ok:v1");
    never_finishes["finish_action"] = json!({"message": "still playing"});
    let v = decide("finish", never_finishes).await;
    let e = &v["report"]["errors"][0];
    assert_eq!(
        (e["code"].as_str(), v["error_origin"].as_str()),
        (Some("FINISH_ACTION_INVALID"), Some("author")),
        "{v:#}"
    );
    assert_eq!(e["evidence"]["transcript"][1]["sent"], json!({"message": "still playing"}), "{v:#}");
    assert_eq!(e["evidence"]["transcript"][1]["done"], false);
    assert!(e["fix"].as_str().unwrap().contains("finish_action"));
    assert!(v["slot"]["retry_after_s"].as_u64().is_some_and(|s| s > 3600), "the next slot's time: {v:#}");
    // A schema that differs: where, with both values.
    let v = decide("differs", echo_submission("differs", "ghcr.io/test/echo-schema-differs:v1")).await;
    let e = &v["report"]["errors"][0];
    assert_eq!(e["code"], "IMAGE_SCHEMA_MISMATCH");
    let pointers: Vec<&str> = e["evidence"]["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["pointer"].as_str().unwrap())
        .collect();
    assert!(
        pointers.contains(&"/action/properties/message") && pointers.contains(&"/action/properties/text"),
        "{pointers:?}"
    );
    assert!(e["message"].as_str().unwrap().contains("/action/"), "{e}");
    // A server that echoes the credential it received: the transcript comes back without it.
    let v = decide("leaks", echo_submission("leaks", "ghcr.io/test/echo-leaks-token:v1")).await;
    let e = &v["report"]["errors"][0];
    assert_eq!(e["code"], "ADMISSION_EPISODE_FAILED", "{v:#}");
    let text = v.to_string();
    assert!(text.contains("***") && !text.contains(crate::harness::SANDBOX_TOKEN), "{text}");
    assert!(!app
        .text("SELECT report FROM openenv_submissions WHERE submission_id = 'leaks'")
        .await
        .contains(crate::harness::SANDBOX_TOKEN));
    cluster.abort();
    app.finish().await;
}

/// A hostile image costs admission little: a 5 MiB answer is not read, a 5 MiB WebSocket message
/// is refused, and a server that answers just in time, message after message, meets the probe's
/// deadline; meanwhile the probing server keeps its lease (renewed every second here), so no
/// other server probes the submission a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_probes_are_bounded_in_size_and_time_and_keep_their_lease() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        admission_bounds_on(backend).await;
    }
}

async fn admission_bounds_on(backend: Backend) {
    let options = Options { probe_deadline_s: 6, admission_lease_s: 3, ..Options::default() };
    let app = TestApp::with(backend, options).await;
    let cluster = connect(&app).await;
    let cases = [
        ("huge-metadata", "OPENENV_ENDPOINT_INVALID", "metadata"),
        ("huge-observation", "ADMISSION_EPISODE_FAILED", "over 1024 KiB"),
        ("slow-steps", "ADMISSION_EPISODE_FAILED", "did not finish within 6 s"),
    ];
    for (variant, code, says) in cases {
        app.exec("DELETE FROM openenv_quota_slots").await.unwrap();
        let id = format!("adm-{variant}");
        let r = submit(&app, &echo_submission(&id, &format!("ghcr.io/test/echo-{variant}:v1")), ALICE).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
        // Six seconds for the server that answers just in time, which must meet the deadline;
        // the others must meet their size bounds however slowly a loaded machine starts their
        // sandbox, so the deadline is out of their way.
        let mut state = app.state.clone();
        if variant != "slow-steps" {
            state.openenv = std::sync::Arc::new(server::state::OpenEnvSettings {
                probe_deadline: Duration::from_secs(120),
                ..app.state.openenv.as_ref().clone()
            });
        }
        let probing = tokio::spawn(async move { server::openenv::admission::pass(&state).await.unwrap() });
        if variant == "slow-steps" {
            // Past the 3 s lease a holder that did not renew would have lost it.
            tokio::time::sleep(Duration::from_millis(4500)).await;
            let account: String = app
                .text(&format!("SELECT account_id FROM openenv_submissions WHERE submission_id = '{id}'"))
                .await;
            let now = app.state.now().epoch;
            let taken = server::openenv::repo::ADMISSION_LEASE
                .take(&app.state.db, &[&account, &id], "another-server", now, now + 3)
                .await
                .unwrap();
            assert!(!taken, "the probing server still holds the lease");
        }
        assert_eq!(probing.await.unwrap(), 1, "{variant}");
        let v = app.get_as(&format!("/api/openenv/submissions/{id}"), ALICE).await.json();
        assert_eq!(v["state"], "rejected", "{variant}: {v:#}");
        assert_eq!(v["report"]["errors"][0]["code"], code, "{variant}: {v:#}");
        let message = v["report"]["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains(says), "{variant}: {message}");
    }
    cluster.abort();
    app.finish().await;
}

/// A hostile server's huge answers come back bounded: 18,000 long OpenAPI paths and three
/// 300,000-character schema keys give refusals whose message is at most 2 KiB, whose evidence is
/// at most 32 KiB, and whose whole status answer stays under 64 KiB, saying what was left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_servers_huge_answers_are_refused_within_bounds() {
    use domain::openenv::evidence;
    let app = TestApp::new(Backend::Sqlite).await;
    let cluster = connect(&app).await;
    let cases = [
        ("many-paths", "OPENENV_ENDPOINT_INVALID", "more paths"),
        ("huge-keys", "IMAGE_SCHEMA_MISMATCH", "…"),
    ];
    for (variant, code, says) in cases {
        app.exec("DELETE FROM openenv_quota_slots").await.unwrap();
        let id = format!("hostile-{variant}");
        let r = submit(&app, &echo_submission(&id, &format!("ghcr.io/test/echo-{variant}:v1")), ALICE).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
        let mut passes = 0;
        while server::openenv::admission::pass(&app.state).await.unwrap() == 0 {
            passes += 1;
            assert!(passes < 50, "{variant}: admission never decided");
        }
        let answer = app.get_as(&format!("/api/openenv/submissions/{id}"), ALICE).await;
        let served = answer.text().len();
        let v = answer.json();
        assert_eq!(v["state"], "rejected", "{variant}: {}", evidence::cut(&v.to_string(), 4000));
        let error = &v["report"]["errors"][0];
        assert_eq!(error["code"], code, "{variant}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(message.chars().count() <= 2048 + 1 && message.contains(says), "{variant}: {message}");
        let evidence = serde_json::to_vec(&error["evidence"]).unwrap().len();
        assert!(evidence <= 32 << 10, "{variant}: {evidence} bytes of evidence");
        assert!(served <= 64 << 10, "{variant}: the status answer is {served} bytes");
    }
    cluster.abort();
    app.finish().await;
}

/// Time from acceptance to `validated` for a 50-task submission on the stand-in, one sandbox at a
/// time and eight at once (a fresh sandbox per task: a Python echo server started, health, the six
/// reads, the example episode).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: dev/bench-admission runs it"]
async fn measure_admission_of_a_50_task_submission() {
    let app = TestApp::new(Backend::Sqlite).await;
    let cluster = connect(&app).await;
    for limit in [1usize, 8] {
        app.exec("DELETE FROM openenv_quota_slots").await.unwrap();
        let mut body = echo_submission(&format!("fifty-{limit}"), "ghcr.io/test/echo-ok:v1");
        let tasks: Vec<Value> =
            (0..50).map(|i| json!({"task_id": format!("t{i:02}"), "split": "train"})).collect();
        body["tasks"] = json!(tasks);
        let r = submit(&app, &body, ALICE).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
        let mut state = app.state.clone();
        state.openenv = Arc::new(server::state::OpenEnvSettings {
            admission_queue: 20,
            cluster_secret_hash: None,
            health_wait: Duration::from_secs(30),
            sandbox_limit: limit,
            sandboxes: Arc::new(tokio::sync::Semaphore::new(limit)),
            ..app.state.openenv.as_ref().clone()
        });
        let start = Instant::now();
        // A round per pass, as the worker runs them.
        while server::openenv::admission::pass(&state).await.unwrap() == 0 {}
        let took = start.elapsed();
        let v = app.get_as(&format!("/api/openenv/submissions/fifty-{limit}"), ALICE).await.json();
        assert_eq!(v["state"], "validated", "{v:#}");
        println!("BENCH admission of 50 tasks with {limit} sandbox(es) at once: {took:.1?} to validated");
    }
    cluster.abort();
    app.finish().await;
}

/// A sandbox left running by a server that crashed mid-probe (no lease holds its submission) is
/// stopped by the next admission pass; one under a live probe is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxes_left_by_a_crashed_server_are_stopped() {
    use server::ports::jobs::JobSpec;
    let app = TestApp::new(Backend::Postgres).await;
    let image = domain::openenv::ImageRef::parse("ghcr.io/test/echo-ok:v1").unwrap();
    let facts = app.state.deps.registry.read(&image).await.unwrap().facts;
    let digest = facts.digest.clone();
    let sandbox = |submission: &str| JobSpec {
        docker_image: image.pinned(&digest),
        command: domain::openenv::sandbox_start(&facts).unwrap().command,
        arguments: Vec::new(),
        environment: Default::default(),
        secrets: Default::default(),
        flavor: "cpu-basic".into(),
        timeout_seconds: 600,
        labels: [
            ("arena-purpose".to_string(), "openenv-admission".to_string()),
            ("arena-submission".to_string(), submission.to_string()),
            ("arena-task".to_string(), "echo-1".to_string()),
        ]
        .into(),
        attempts: None,
        expose: Some(server::ports::jobs::Expose::public(8000)),
    };
    let sandboxes = app.state.deps.sandboxes.clone().expect("the sandbox namespace is set");
    let orphan = sandboxes.create(&sandbox("crashed-sub")).await.unwrap();
    let live = sandboxes.create(&sandbox("live-sub")).await.unwrap();
    // A live probe of `live-sub` holds its lease.
    app.exec(
        "INSERT INTO openenv_submissions (account_id, account, submission_id, body_hash, body, images, state, slot_state, \
         report, accepted_at, accepted_epoch, updated_at, lease_owner, lease_until) VALUES ('u-x', 'x', 'live-sub', 'h', \
         '{}', '[]', 'validating', 'held', '{\"errors\":[]}', 't', 0, 't', 'another-server', 99999999999)",
    )
    .await
    .unwrap();
    let start = Instant::now();
    for id in [&orphan.id, &live.id] {
        while sandboxes.inspect(id).await.unwrap().status.stage != "RUNNING" {
            assert!(start.elapsed() < Duration::from_secs(60));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(server::openenv::admission::sweep(&app.state).await.unwrap(), 1);
    assert_eq!(sandboxes.inspect(&orphan.id).await.unwrap().status.stage, "CANCELED");
    assert_eq!(sandboxes.inspect(&live.id).await.unwrap().status.stage, "RUNNING");
    sandboxes.cancel(&live.id).await.unwrap();
    app.finish().await;
}

/// An attacker's image records every header its server receives and redirects `/health` to
/// another address. Admission follows nothing; the sandbox ran in the sandbox organization; and
/// the one credential the image ever received writes nothing and reads none of the arena's
/// datasets, while the arena's own token does both (so the checks can fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_receives_no_credential_worth_stealing_and_no_request_follows_its_redirect() {
    use crate::harness::{ARENA_BOT, RUNS_DATASET, SANDBOX_ORG};
    let app = TestApp::new(Backend::Sqlite).await;
    let cluster = connect(&app).await;
    let datasets = app.state.deps.datasets.clone();
    datasets.ensure(RUNS_DATASET).await.unwrap();
    datasets
        .commit(RUNS_DATASET, "a run's file", &[("runs/x/score.json".into(), b"{}".to_vec())])
        .await
        .unwrap();
    let r = submit(&app, &echo_submission("adm-redirects", "ghcr.io/test/echo-redirects:v1"), ALICE).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    admitted(&app.state).await;
    let v = app.get_as("/api/openenv/submissions/adm-redirects", ALICE).await.json();
    assert_eq!(v["report"]["errors"][0]["code"], "SANDBOX_STARTUP_FAILED", "{v:#}");
    // What the image's server saw: its sandboxes' logs.
    let (namespaces, recorded): (Vec<String>, Vec<Value>) = {
        let jobs = app.hub.jobs.jobs.lock().unwrap();
        let mine: Vec<_> = jobs
            .iter()
            .filter(|j| j.view.labels.get("arena-submission").map(String::as_str) == Some("adm-redirects"))
            .collect();
        let recorded = mine
            .iter()
            .flat_map(|j| j.logs.iter())
            .filter_map(|(_, line)| line.strip_prefix("ARENA-RECORDED "))
            .map(|json| serde_json::from_str(json).unwrap())
            .collect();
        (mine.iter().map(|j| j.namespace.clone()).collect(), recorded)
    };
    assert!(!namespaces.is_empty() && namespaces.iter().all(|n| n == SANDBOX_ORG), "{namespaces:?}");
    assert!(recorded.iter().any(|r| r["path"] == "/health"), "the server saw the probe: {recorded:?}");
    assert!(
        recorded.iter().all(|r| r["path"] != "/followed"),
        "a request followed the redirect: {recorded:?}"
    );
    let header = |r: &Value, name: &str| {
        r["headers"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    assert!(recorded.iter().all(|r| header(r, "cookie").is_none()), "a cookie was sent back: {recorded:?}");
    let tokens: std::collections::BTreeSet<String> = recorded
        .iter()
        .filter_map(|r| header(r, "authorization"))
        .map(|v| v.as_str().unwrap().trim_start_matches("Bearer ").to_string())
        .collect();
    assert_eq!(tokens, [crate::harness::SANDBOX_TOKEN.to_string()].into(), "what the image received");
    // What a thief can do with what it received, next to what the arena's own token can.
    let http = reqwest::Client::new();
    let hub = &app.hub_url;
    for (token, mine) in [(crate::harness::SANDBOX_TOKEN, false), (ARENA_BOT, true)] {
        let info =
            http.get(format!("{hub}/api/datasets/{RUNS_DATASET}")).bearer_auth(token).send().await.unwrap();
        let file = http
            .get(format!("{hub}/datasets/{RUNS_DATASET}/resolve/main/runs/x/score.json"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(
            (info.status().is_success(), file.status().is_success()),
            (mine, mine),
            "reading with {token}"
        );
        for namespace in ["benchflow", SANDBOX_ORG] {
            let job = http
                .post(format!("{hub}/api/jobs/{namespace}"))
                .bearer_auth(token)
                .json(&json!({"dockerImage": "ghcr.io/test/echo-ok:v1", "command": ["true"], "flavor": "cpu-basic"}))
                .send()
                .await
                .unwrap();
            assert_eq!(
                job.status() == StatusCode::FORBIDDEN,
                !mine,
                "starting a job in {namespace} with {token}"
            );
            let commit = http
                .post(format!("{hub}/api/datasets/{namespace}/stolen/commit/main"))
                .bearer_auth(token)
                .header("content-type", "application/x-ndjson")
                .body("{\"key\":\"header\",\"value\":{\"summary\":\"x\"}}\n")
                .send()
                .await
                .unwrap();
            assert!(!commit.status().is_success() || mine, "writing in {namespace} with {token}");
        }
        let whoami = http
            .get(format!("{hub}/api/whoami-v2"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        assert_eq!(whoami["auth"]["accessToken"]["role"] == "read", !mine, "{whoami:#}");
    }
    cluster.abort();
    app.finish().await;
}

/// A sandbox whose proxy refuses the arena's reader (401) is the arena's fault: the participant's
/// slot is returned and the code says the arena failed, never that the image did not answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_that_refuses_the_arenas_reader_is_the_arenas_fault() {
    let app = TestApp::new(Backend::Sqlite).await;
    let cluster = connect(&app).await;
    app.hub.revoke(crate::harness::SANDBOX_TOKEN);
    let r = submit(&app, &echo_submission("adm-revoked", "ghcr.io/test/echo-ok:v1"), ALICE).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    admitted(&app.state).await;
    let v = app.get_as("/api/openenv/submissions/adm-revoked", ALICE).await.json();
    let got = (v["state"].as_str(), v["slot"]["state"].as_str(), v["error_origin"].as_str());
    assert_eq!(got, (Some("rejected"), Some("returned"), Some("platform")), "{v:#}");
    let error = &v["report"]["errors"][0];
    assert_eq!(error["code"], "ADMISSION_INFRASTRUCTURE_FAILURE", "{v:#}");
    assert!(error["message"].as_str().unwrap().contains("the arena's fault, not the image's"), "{v:#}");
    cluster.abort();
    app.finish().await;
}

/// The server refuses to start with a sandbox reader worth stealing, naming why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_refuses_a_sandbox_reader_worth_stealing() {
    use crate::harness::{LEAKY_READER, SANDBOX_ORG, SANDBOX_TOKEN};
    let dir = tempfile::tempdir().unwrap();
    let (_hub, hub_url) = crate::harness::start_hub(dir.path()).await;
    let cases = [
        (ALICE, Some(SANDBOX_ORG), "write token"),
        (LEAKY_READER, Some(SANDBOX_ORG), "member of benchflow, which holds the arena's datasets"),
        (SANDBOX_TOKEN, Some("benchflow"), "holds the arena's datasets or jobs"),
        (SANDBOX_TOKEN, None, "without ARENA_SANDBOX_NAMESPACE"),
        ("hf_not_a_token", Some(SANDBOX_ORG), "does not accept this token"),
    ];
    for (token, namespace, why) in cases {
        let config = server::Config {
            data_dir: dir.path().to_path_buf(),
            configs_dir: crate::harness::repo_root().join("configs"),
            hf_endpoint: hub_url.clone(),
            sandbox_token: Some(server::config::Secret(token.into())),
            sandbox_namespace: namespace.map(String::from),
            ..server::Config::default()
        };
        let e = server::build_with(&config, server::ports::Deps::real(&config)).await.err().expect("refused");
        assert!(format!("{e:#}").contains(why), "{token} in {namespace:?}: {e:#}");
    }
    // Held-out sandboxes run apart from participants' and from the arena's datasets, and the
    // participants' sandboxes hold none of them (the private overlay's dataset included).
    let apart = [
        (Some(SANDBOX_ORG), None, "the participants' sandbox namespace"),
        (Some("benchflow"), None, "held-out sandboxes run in an organization of their own"),
        (None, Some(format!("{SANDBOX_ORG}/private-overlay")), "holds the arena's datasets or jobs"),
    ];
    for (eval, private, why) in apart {
        let config = server::Config {
            data_dir: dir.path().to_path_buf(),
            configs_dir: crate::harness::repo_root().join("configs"),
            hf_endpoint: hub_url.clone(),
            sandbox_token: Some(server::config::Secret(SANDBOX_TOKEN.into())),
            sandbox_namespace: Some(SANDBOX_ORG.into()),
            eval_namespace: eval.map(String::from),
            private_repo: private.clone(),
            ..server::Config::default()
        };
        let e = server::build_with(&config, server::ports::Deps::real(&config)).await.err().expect("refused");
        assert!(format!("{e:#}").contains(why), "{eval:?} {private:?}: {e:#}");
    }
}
