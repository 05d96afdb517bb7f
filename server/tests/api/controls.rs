//! The organizers' day-to-day controls, on both backends, with every refusal: pausing and resuming
//! OpenEnv intake (reads and accepted submissions go on; two replicas agree), the quota's limit,
//! window and exemptions, releasing a stalled cleanup, and hiding a board message.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::harness::{copy_configs, Answer, Backend, Options, TestApp, ALICE, BOB, CLUSTER_SECRET, EVE};
use crate::on_both_backends;

fn submission(id: &str) -> Value {
    json!({
        "submission_id": id,
        "name": "Echo (controls test)",
        "image": "ghcr.io/test/echo-ok:v1",
        "schema": {
            "action": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"], "additionalProperties": false},
            "observation": {"type": "object"}
        },
        "tasks": [{"task_id": "echo-1", "split": "train"}],
        "example_actions": [{"message": "hello"}, {"message": "done"}],
        "finish_action": {"message": "done"}
    })
}

fn code(a: &Answer) -> (u16, String) {
    (a.status.as_u16(), a.json()["code"].as_str().unwrap_or("").to_string())
}

async fn submit(app: &TestApp, id: &str, token: &str) -> Answer {
    app.post_as("/api/openenv/submissions", &submission(id).to_string(), token).await
}

/// The simulated cluster, connected and idle (it trains nothing).
async fn connect(app: &TestApp) -> tokio::task::JoinHandle<()> {
    let cluster = standin::cluster::Cluster {
        node_id: None,
        gpus_free: 0,
        sandboxes_free: 0,
        heartbeat: Duration::from_millis(100),
        trainer: None,
    };
    let handle = standin::cluster::connect(&app.state.public_url, CLUSTER_SECRET, cluster);
    let start = Instant::now();
    while app.get("/api/openenv").await.json()["connected"] != true {
        assert!(start.elapsed() < Duration::from_secs(60), "the cluster never connected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    handle
}

on_both_backends!(multi_thread, intake_pauses_new_submissions_while_everything_else_goes_on, |app| {
    let cluster = connect(app).await;
    let status = app.get("/api/openenv").await.json();
    assert_eq!(status["intake"], json!({"open": true, "reason": null, "since": null}));
    // Accepted before the pause: it stays readable and its resend still answers.
    assert_eq!(submit(app, "before-pause", BOB).await.status, StatusCode::ACCEPTED);

    let change = |body: Value, token: &'static str| {
        let body = body.to_string();
        async move { app.post_as("/api/openenv/intake", &body, token).await }
    };
    // Refusals: not an editor, no reason, an empty or overlong one, a reason to resume, junk.
    assert_eq!(code(&change(json!({"open": false, "reason": "x"}), ALICE).await), (403, "FORBIDDEN".into()));
    let anonymous =
        app.request(axum::http::Method::POST, "/api/openenv/intake", Some("{\"open\": false}")).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(code(&change(json!({"open": false}), EVE).await), (422, "INVALID_REASON".into()));
    assert_eq!(
        code(&change(json!({"open": false, "reason": " "}), EVE).await),
        (422, "INVALID_REASON".into())
    );
    let long = "x".repeat(501);
    assert_eq!(
        code(&change(json!({"open": false, "reason": long}), EVE).await),
        (422, "INVALID_REASON".into())
    );
    assert_eq!(
        code(&change(json!({"open": true, "reason": "x"}), EVE).await),
        (422, "INVALID_REASON".into())
    );
    assert!(change(json!({"open": "no"}), EVE).await.status.is_client_error());
    assert!(change(json!({"open": false, "reason": "x", "extra": 1}), EVE).await.status.is_client_error());
    assert_eq!(app.get("/api/openenv").await.json()["intake"]["open"], true, "nothing changed");

    let paused = change(json!({"open": false, "reason": "the cluster is being upgraded"}), EVE).await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.text());
    let paused = paused.json();
    assert_eq!(
        (paused["open"].clone(), paused["reason"].clone()),
        (json!(false), json!("the cluster is being upgraded"))
    );
    let since = paused["since"].as_str().unwrap().to_string();
    // Sent again: the same pause, its `since` kept.
    let again = change(json!({"open": false, "reason": "the cluster is being upgraded"}), EVE).await.json();
    assert_eq!(again["since"], since);
    assert_eq!(app.get("/api/openenv").await.json()["intake"], again);

    // A new submission is refused with the reason, nothing stored, no registry read.
    let reads = app.hub.registry_requests();
    let refused = submit(app, "during-pause", ALICE).await;
    assert_eq!(code(&refused), (503, "CAPACITY_BUSY".into()));
    assert!(
        refused.json()["message"].as_str().unwrap().contains("the cluster is being upgraded"),
        "{}",
        refused.text()
    );
    assert_eq!(refused.json()["retry_after_s"], 600);
    assert!(refused.headers.get("retry-after").is_some());
    assert_eq!(app.hub.registry_requests(), reads);
    assert_eq!(
        app.scalar("SELECT COUNT(*) FROM openenv_submissions WHERE submission_id = 'during-pause'").await,
        0
    );
    // Reads answer; the resend of an accepted submission is answered from its record.
    assert_eq!(app.get_as("/api/openenv/submissions/before-pause", BOB).await.status, StatusCode::OK);
    assert_eq!(app.get_as("/api/openenv/submissions", BOB).await.status, StatusCode::OK);
    assert_eq!(app.get("/api/openenv/leaderboard").await.status, StatusCode::OK);
    let resend = submit(app, "before-pause", BOB).await;
    assert_eq!((resend.status, resend.json()["existing"].clone()), (StatusCode::ACCEPTED, json!(true)));

    // A second server on the same database: the same pause; resumed there, open here too.
    let replica = app.replica().await;
    assert_eq!(replica.get("/api/openenv").await.json()["intake"], again);
    assert_eq!(code(&submit(&replica, "during-pause", ALICE).await), (503, "CAPACITY_BUSY".into()));
    let resumed = replica.post_as("/api/openenv/intake", "{\"open\": true}", EVE).await;
    assert_eq!(resumed.json()["open"], true, "{}", resumed.text());
    assert!(resumed.json()["since"].is_string());
    assert_eq!(resumed.json()["reason"], Value::Null);
    assert_eq!(app.get("/api/openenv").await.json()["intake"]["open"], true);
    let resumed_again = app.post_as("/api/openenv/intake", "{\"open\": true}", EVE).await.json();
    assert_eq!(resumed_again, resumed.json(), "resuming what is open changes nothing");
    assert_eq!(submit(app, "after-pause", ALICE).await.status, StatusCode::ACCEPTED);
    cluster.abort();
});

/// The registry's quota: two per hour, `bob` exempt (by his HF account id), editors exempt.
fn quota_options() -> Options {
    let dir = copy_configs(|path, text| {
        if path == "arena.toml" {
            text.replace("limit = 1\n", "limit = 2\n")
                .replace("window_s = 86400", "window_s = 3600")
                .replace("exempt = []", "exempt = [\"user-bob\"]")
        } else {
            text
        }
    });
    Options { configs_dir: dir.path().to_path_buf(), keep: Some(Arc::new(dir)), ..Options::default() }
}

async fn quota_on(backend: Backend) {
    let app = TestApp::with(backend, quota_options()).await;
    let cluster = connect(&app).await;
    for id in ["q-1", "q-2"] {
        assert_eq!(submit(&app, id, ALICE).await.status, StatusCode::ACCEPTED);
    }
    let third = submit(&app, "q-3", ALICE).await;
    assert_eq!(code(&third), (429, "SUBMISSION_QUOTA_EXCEEDED".into()));
    let wait = third.json()["retry_after_s"].as_u64().unwrap();
    assert!(wait > 3500 && wait <= 3600, "{wait}");
    assert!(
        third.json()["message"].as_str().unwrap().contains("2 accepted submissions per 1 hour"),
        "{}",
        third.text()
    );
    // Exempt: the listed user and an editor.
    for id in ["b-1", "b-2", "b-3"] {
        assert_eq!(submit(&app, id, BOB).await.status, StatusCode::ACCEPTED, "bob is exempt");
        assert_eq!(
            submit(&app, &format!("e-{id}"), EVE).await.status,
            StatusCode::ACCEPTED,
            "editors are exempt"
        );
    }
    assert_eq!(app.scalar("SELECT COUNT(*) FROM openenv_quota_slots").await, 2, "the exempt take no slot");

    // Six at once from a fresh account with two slots: two accepted, whatever the interleaving.
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (router, body) = (app.router.clone(), submission(&format!("race-{i}")));
        tasks.push(tokio::spawn(async move {
            use tower::ServiceExt;
            let req = axum::http::Request::post("/api/openenv/submissions")
                .header("authorization", format!("Bearer {}", crate::harness::NEW_ALICE))
                .header("content-type", "application/json")
                .body(axum::body::Body::from(body.to_string()))
                .unwrap();
            router.oneshot(req).await.unwrap().status().as_u16()
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    statuses.sort();
    assert_eq!(statuses, [202, 202, 429, 429, 429, 429]);
    cluster.abort();
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quota_has_a_limit_a_window_and_exemptions_sqlite() {
    quota_on(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quota_has_a_limit_a_window_and_exemptions_postgres() {
    quota_on(Backend::Postgres).await;
}

/// A cluster the test speaks for, over the relay.
pub struct Cluster {
    ws: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
}

impl Cluster {
    pub async fn connect(app: &TestApp) -> Cluster {
        Cluster::connect_as(app, json!({"kind": "hello", "gpus_free": 0, "sandboxes_free": 0, "runs": []}))
            .await
    }

    /// Connects and says `hello` (a node of its own, its GPUs); answers once the arena took it.
    pub async fn connect_as(app: &TestApp, hello: Value) -> Cluster {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let url = format!("ws://{}/api/relay/cluster", app.url.trim_start_matches("http://"));
        let mut request = url.into_client_request().unwrap();
        request.headers_mut().insert("authorization", format!("Bearer {CLUSTER_SECRET}").parse().unwrap());
        let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        let mut c = Cluster { ws };
        c.send(hello).await;
        c.next_where(|m| m["of"] == "hello").await;
        c
    }

    pub async fn send(&mut self, m: Value) {
        self.ws.send(Message::Text(m.to_string().into())).await.unwrap();
    }

    /// The next message `pred` accepts, within 10 s.
    pub async fn next_where(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(30), self.ws.next()).await;
            let Ok(Some(Ok(Message::Text(t)))) = next else {
                panic!("no awaited message from the arena: {next:?}")
            };
            let m: Value = serde_json::from_str(&t).unwrap();
            if pred(&m) {
                return m;
            }
        }
    }

    pub async fn event(&mut self, run: &str, event: Value) {
        self.send(json!({"kind": "event", "run_id": run, "event": event})).await;
        let ack = self.next_where(|m| m["of"] == "event").await;
        assert!(ack["error"].is_null(), "{ack}");
    }
}

async fn release_on(backend: Backend) {
    let clock =
        Arc::new(server::ports::clock::FixedClock::new(time::macros::datetime!(2026-12-01 12:00 UTC)));
    let app = TestApp::with(backend, Options { clock: Some(clock.clone()), ..Options::default() }).await;
    let mut cluster = Cluster::connect(&app).await;
    assert_eq!(submit(&app, "stall", ALICE).await.status, StatusCode::ACCEPTED);
    server::openenv::admission::pass(&app.state).await.unwrap();
    cluster.send(json!({"kind": "heartbeat", "gpus_free": 1, "sandboxes_free": 5})).await;
    let run = cluster.next_where(|m| m["kind"] == "assign").await["run_id"].as_str().unwrap().to_string();
    cluster.send(json!({"kind": "accepted", "run_id": run})).await;
    let at = "2026-12-01T12:00:01Z";
    cluster.event(&run, json!({"seq": 1, "state": "loading", "policy_version": 0, "at": at})).await;
    cluster.event(&run, json!({"seq": 2, "state": "rolling", "policy_version": 0, "at": at})).await;
    cluster
        .event(&run, json!({"seq": 3, "state": "updating", "policy_version": 1, "at": at, "rewards": [0.0, 1.0, 1.0, 0.0]}))
        .await;
    cluster.event(&run, json!({"seq": 4, "state": "cleanup", "policy_version": 1, "at": at})).await;
    // A sandbox of the run that will not stop by itself.
    let sandboxes = app.state.deps.sandboxes.clone().expect("the sandbox namespace is set");
    let image = domain::openenv::ImageRef::parse("ghcr.io/test/echo-ok:v1").unwrap();
    let facts = app.state.deps.registry.read(&image).await.unwrap().facts;
    let stuck = sandboxes
        .create(&server::ports::jobs::JobSpec {
            docker_image: image.pinned(&facts.digest),
            command: domain::openenv::sandbox_start(&facts).unwrap().command,
            arguments: Vec::new(),
            environment: Default::default(),
            secrets: Default::default(),
            flavor: "cpu-basic".into(),
            timeout_seconds: 600,
            labels: [
                ("arena-run".to_string(), run.clone()),
                ("arena-purpose".to_string(), "openenv-train".to_string()),
            ]
            .into(),
            attempts: None,
            expose: Some(server::ports::jobs::Expose::private(8000)),
        })
        .await
        .unwrap();

    let release = |token: &'static str, run: String, reason: &'static str| {
        let app = &app;
        async move {
            let body = json!({"reason": reason}).to_string();
            app.post_as(&format!("/api/openenv/runs/{run}/release"), &body, token).await
        }
    };
    let early = release(EVE, run.clone(), "stuck").await;
    assert_eq!(code(&early), (409, "RUN_NOT_RELEASABLE".into()));
    assert_eq!(early.json()["retry_after_s"], 900);
    assert_eq!(code(&release(ALICE, run.clone(), "mine").await), (403, "FORBIDDEN".into()));
    assert_eq!(code(&release(BOB, run.clone(), "not mine").await), (404, "RUN_NOT_FOUND".into()));
    assert_eq!(code(&release(EVE, "oe-00000000".into(), "no such run").await), (404, "RUN_NOT_FOUND".into()));
    assert_eq!(code(&release(EVE, run.clone(), " ").await), (422, "INVALID_REASON".into()));
    let v = app.get_as(&format!("/api/openenv/runs/{run}"), ALICE).await.json();
    assert_eq!(
        (v["state"].clone(), v["cleanup"]["stalled"].clone()),
        (json!("cleanup"), json!(false)),
        "{v:#}"
    );

    // 15 minutes on: the sweep counts what is left, and the run shows its cleanup stalled.
    clock.advance(time::Duration::seconds(901));
    cluster.send(json!({"kind": "heartbeat", "gpus_free": 0, "sandboxes_free": 0})).await;
    cluster.next_where(|m| m["of"] == "heartbeat").await;
    let stage = sandboxes.inspect(&stuck.id).await.unwrap().status.stage;
    let job = sandboxes.inspect(&stuck.id).await.unwrap();
    assert!(stage.is_live(), "{stage}: {:?}", job.status);
    server::openenv::runs::cleanup::sweep(&app.state).await.unwrap();
    let v = app.get_as(&format!("/api/openenv/runs/{run}"), ALICE).await.json();
    assert_eq!(v["cleanup"]["stalled"], true, "{v:#}");
    assert_eq!(v["cleanup"]["sandboxes_left"], 1, "{v:#}");

    // The editor releases it with the jobs page's button: a plain form, the session's CSRF token
    // in it (without it, the page is sent back saying so and nothing changes).
    let (cookie, csrf) = crate::session::sign_in(&app, "eve").await;
    let page = app.call(Method::GET, "/arena/jobs", None, &[("cookie", &cookie)]).await.text();
    assert!(
        page.contains(r#"action="/arena/jobs/release""#) && page.contains(&run),
        "the button is on the page"
    );
    let form = |csrf: &str| {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("csrf", csrf)
            .append_pair("id", &run)
            .append_pair("reason", "HF's cancel hangs")
            .finish()
    };
    let forged =
        app.call(Method::POST, "/arena/jobs/release", Some(&form("nope")), &[("cookie", &cookie)]).await;
    let back = forged.headers["location"].to_str().unwrap().to_string();
    assert!(back.starts_with("/arena/jobs?release_error=CSRF_INVALID"), "{back}");
    let released =
        app.call(Method::POST, "/arena/jobs/release", Some(&form(&csrf)), &[("cookie", &cookie)]).await;
    assert_eq!(released.headers["location"], "/arena/jobs?release=done#openenv-runs");
    let v = app.get_as(&format!("/api/openenv/runs/{run}"), ALICE).await.json();
    assert_eq!(v["state"], "completed", "it had trained: it ends as its trainer would have");
    assert_eq!(v["cleanup"]["released"]["by"], "eve");
    assert_eq!(v["cleanup"]["released"]["sandboxes_canceled"], 1);
    assert_eq!(sandboxes.inspect(&stuck.id).await.unwrap().status.stage, "CANCELED");
    let events = app.get_as(&format!("/api/openenv/runs/{run}/events"), ALICE).await.json();
    let last = events["events"].as_array().unwrap().last().unwrap().clone();
    assert!(last["message"].as_str().unwrap().contains("released by eve (HF's cancel hangs)"), "{last}");
    // Sent again: the same answer, no second event.
    let again = release(EVE, run.clone(), "again").await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json()["cleanup"]["released"], v["cleanup"]["released"]);
    let count = app.get_as(&format!("/api/openenv/runs/{run}/events"), ALICE).await.json()["events"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(count, events["events"].as_array().unwrap().len());
    // The cluster is told to stop the run.
    cluster.send(json!({"kind": "heartbeat", "gpus_free": 0, "sandboxes_free": 0})).await;
    let stop = cluster.next_where(|m| m["kind"] == "stop").await;
    assert_eq!(stop["run_id"], json!(run));
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_cleanup_is_shown_and_an_editor_releases_it_sqlite() {
    release_on(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_cleanup_is_shown_and_an_editor_releases_it_postgres() {
    release_on(Backend::Postgres).await;
}

fn post(request_id: &str, body: &str, refs: &[&str]) -> String {
    json!({"request_id": request_id, "agent_id": null, "body": body, "refs": refs, "broadcast": false})
        .to_string()
}

on_both_backends!(multi_thread, an_editor_hides_a_board_message_kept_for_audit, |app| {
    let spam =
        app.post_as("/api/board/messages", &post("spam-0001", "Buy cheap tokens!", &[]), ALICE).await.json();
    let spam_id = spam["message"]["id"].as_str().unwrap().to_string();
    let reply = app
        .post_as("/api/board/messages", &post("reply-0001", "Is this real?", &[&spam_id]), BOB)
        .await
        .json();
    let reply_id = reply["message"]["id"].as_str().unwrap().to_string();
    let hide = |id: String, token: &'static str, reason: &'static str| {
        let body = json!({"reason": reason}).to_string();
        async move { app.post_as(&format!("/api/board/messages/{id}/hide"), &body, token).await }
    };
    assert_eq!(code(&hide(spam_id.clone(), ALICE, "mine").await), (403, "FORBIDDEN".into()));
    assert_eq!(code(&hide("no-such.md".into(), EVE, "spam").await), (404, "NOT_FOUND".into()));
    assert_eq!(code(&hide(spam_id.clone(), EVE, "").await), (422, "INVALID_REASON".into()));
    let listed = app.get("/api/board/messages").await.json();
    assert_eq!(listed["messages"].as_array().unwrap().len(), 2, "nothing hidden yet");

    let hidden = hide(spam_id.clone(), EVE, "spam").await;
    assert_eq!(hidden.status, StatusCode::OK, "{}", hidden.text());
    let hidden = hidden.json();
    assert_eq!((hidden["reason"].clone(), hidden["hidden_by"].clone()), (json!("spam"), json!("eve")));
    // Hidden again: the first hiding stands.
    assert_eq!(hide(spam_id.clone(), EVE, "another reason").await.json(), hidden);

    // Out of every listing and the front page; the reply says what it answered was hidden.
    let listed = app.get("/api/board/messages").await.json();
    let messages = listed["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(
        (messages[0]["id"].clone(), messages[0]["hidden_refs"].clone()),
        (json!(reply_id), json!([spam_id]))
    );
    assert_eq!(app.get("/api/board/messages?author=alice").await.json()["messages"], json!([]));
    assert_eq!(app.get("/api/board/messages?q=cheap").await.json()["messages"], json!([]));
    assert!(!app.get("/").await.text().contains("Buy cheap tokens"));
    // Kept for audit, shown to editors with the reason.
    let audit = app.get_as("/api/board/hidden", EVE).await.json();
    assert_eq!(audit["messages"][0]["message"]["body"], "Buy cheap tokens!");
    assert_eq!(audit["messages"][0]["reason"], "spam");
    assert_eq!(code(&app.get_as("/api/board/hidden", ALICE).await), (403, "FORBIDDEN".into()));
    assert_eq!(app.get("/api/board/hidden").await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(app.scalar("SELECT COUNT(*) FROM messages").await, 2, "nothing deleted");
});
