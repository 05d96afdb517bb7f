//! Webhooks: registered, refused (at registration and again when each delivery connects, for a
//! name that resolves to loopback only after registration), delivered signed for a collection run
//! that scored and an OpenEnv run that completed, retried after a receiver's 500, and told to the
//! chat formats in their own bodies. Both backends where the database is involved.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use serde_json::{json, Value};
use standin::jobs::JobFaults;

use crate::controls::Cluster;
use crate::harness::{Backend, Options, TestApp, ALICE, BOB, EVE};
use crate::openenv::admitted;

/// Names as the test says they resolve, changeable while the server runs.
#[derive(Default)]
struct Names(Mutex<BTreeMap<String, Vec<IpAddr>>>);

impl Names {
    fn set(&self, host: &str, ips: &[&str]) {
        self.0.lock().unwrap().insert(host.into(), ips.iter().map(|i| i.parse().unwrap()).collect());
    }
}

#[async_trait::async_trait]
impl server::ports::names::NameLookup for Names {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        if host == "localhost" {
            return Ok(vec!["127.0.0.1".parse().unwrap()]);
        }
        self.0.lock().unwrap().get(host).cloned().ok_or_else(|| std::io::Error::other("no such name"))
    }
}

/// What a receiver got: the path, the headers, the body, when.
type Got = (String, HeaderMap, String, Instant);

/// A receiver on loopback: what it was sent, and what it answers (500 for the first `fail` ones
/// at each path).
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Got>>>,
    fail: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl Receiver {
    async fn start(&self) -> String {
        let me = self.clone();
        let app = axum::Router::new().route(
            "/{*path}",
            axum::routing::post(move |uri: axum::http::Uri, headers: HeaderMap, body: String| {
                let me = me.clone();
                async move {
                    me.got.lock().unwrap().push((uri.path().to_string(), headers, body, Instant::now()));
                    let mut fail = me.fail.lock().unwrap();
                    if let Some(n @ 1..) = fail.get_mut(uri.path()) {
                        *n -= 1;
                        return StatusCode::INTERNAL_SERVER_ERROR;
                    }
                    StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        tokio::spawn(async move { axum::serve(listener, app).await });
        at
    }

    fn at(&self, path: &str) -> Vec<(HeaderMap, Value)> {
        let got = self.got.lock().unwrap();
        got.iter()
            .filter(|(p, ..)| p == path)
            .map(|(_, h, b, _)| (h.clone(), serde_json::from_str(b).unwrap()))
            .collect()
    }
}

async fn register(app: &TestApp, token: &str, body: Value) -> crate::harness::Answer {
    app.post_as("/api/webhooks", &body.to_string(), token).await
}

fn code(a: &crate::harness::Answer) -> (u16, String) {
    (a.status.as_u16(), a.json()["code"].as_str().unwrap_or("").to_string())
}

/// Waits for `n` requests at `path`.
async fn received(r: &Receiver, path: &str, n: usize) -> Vec<(HeaderMap, Value)> {
    let start = Instant::now();
    loop {
        let got = r.at(path);
        if got.len() >= n {
            return got;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "{} of {n} deliveries at {path}", got.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// Every address the arena must not be made to call is refused at registration; the limit and
// unknown events are refused too; nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_to_an_address_the_arena_must_not_call_is_refused() {
    for backend in crate::harness::BACKENDS {
        let names = Arc::new(Names::default());
        for (host, ip) in [
            ("loop.example", "127.0.0.1"),
            ("lan.example", "10.0.0.7"),
            ("meta.example", "169.254.169.254"),
            ("ula.example", "fd00:ec2::254"),
            ("v6.example", "::1"),
            ("public.example", "93.184.216.34"),
        ] {
            names.set(host, &[ip]);
        }
        names.set("mixed.example", &["93.184.216.34", "192.168.1.1"]);
        let app = TestApp::with(backend, Options { names: Some(names.clone()), ..Options::default() }).await;
        let refused = [
            "http://public.example/hook",
            "https://loop.example/hook",
            "https://lan.example/hook",
            "https://meta.example/latest/meta-data",
            "https://ula.example/",
            "https://v6.example/",
            "https://mixed.example/",
            "https://127.0.0.1/hook",
            "https://[::1]/hook",
            "https://169.254.169.254/",
            "https://user:pass@public.example/",
            "ftp://public.example/",
            "https://nowhere.example/",
            "not a url",
        ];
        for url in refused {
            let r = register(&app, ALICE, json!({"url": url})).await;
            assert_eq!(code(&r), (422, "WEBHOOK_URL_REFUSED".into()), "{url}: {}", r.text());
        }
        let r = register(&app, ALICE, json!({"url": "https://public.example/h", "events": ["run.started"]}))
            .await;
        assert_eq!(code(&r), (422, "INVALID_WEBHOOK".into()));
        let r = register(&app, ALICE, json!({"url": "https://public.example/h", "format": "teams"})).await;
        assert_eq!(code(&r), (422, "INVALID_WEBHOOK".into()));
        assert_eq!(app.scalar("SELECT COUNT(*) FROM webhooks").await, 0);
        assert_eq!(
            app.request(axum::http::Method::POST, "/api/webhooks", Some("{}")).await.status,
            StatusCode::UNAUTHORIZED
        );
        // A few an account, no more.
        for i in 0..domain::webhooks::MAX_PER_ACCOUNT {
            let r = register(&app, ALICE, json!({"url": format!("https://public.example/{i}")})).await;
            assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
            assert!(r.json()["secret"].as_str().unwrap().starts_with("whsec_"));
        }
        let r = register(&app, ALICE, json!({"url": "https://public.example/one-more"})).await;
        assert_eq!(code(&r), (409, "WEBHOOK_LIMIT".into()));
        // Each account sees its own, never a secret again.
        let listed = app.get_as("/api/webhooks", ALICE).await.json();
        assert_eq!(listed["webhooks"].as_array().unwrap().len(), domain::webhooks::MAX_PER_ACCOUNT);
        assert!(!listed.to_string().contains("whsec_"), "{listed}");
        assert_eq!(app.get_as("/api/webhooks", BOB).await.json()["webhooks"], json!([]));
        let id = listed["webhooks"][0]["webhook_id"].as_str().unwrap();
        assert_eq!(
            code(
                &app.call(
                    axum::http::Method::DELETE,
                    &format!("/api/webhooks/{id}"),
                    None,
                    &[("authorization", &format!("Bearer {BOB}"))]
                )
                .await
            ),
            (404, "WEBHOOK_NOT_FOUND".into())
        );
        assert_eq!(
            app.call(
                axum::http::Method::DELETE,
                &format!("/api/webhooks/{id}"),
                None,
                &[("authorization", &format!("Bearer {ALICE}"))]
            )
            .await
            .status,
            StatusCode::NO_CONTENT
        );
        app.finish().await;
    }
}

// A name that was public at registration and resolves to loopback later is refused when the
// delivery connects: the receiver on loopback gets nothing, and the attempt says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_turns_to_loopback_after_registration_is_refused_when_it_connects() {
    let names = Arc::new(Names::default());
    names.set("turns.example", &["93.184.216.34"]);
    let app =
        TestApp::with(Backend::Sqlite, Options { names: Some(names.clone()), ..Options::default() }).await;
    let receiver = Receiver::default();
    let at = receiver.start().await;
    let port = at.rsplit(':').next().unwrap();
    let r = register(&app, ALICE, json!({"url": format!("https://turns.example:{port}/hook")})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let id = r.json()["webhook_id"].as_str().unwrap().to_string();
    names.set("turns.example", &["127.0.0.1"]);
    // An ending of alice's to deliver: her OpenEnv submission decided.
    let cluster = crate::held_out::connect(&app).await;
    let body = crate::openenv::echo_submission("turns", "ghcr.io/test/echo-ok:v1");
    assert_eq!(
        app.post_as("/api/openenv/submissions", &body.to_string(), ALICE).await.status,
        StatusCode::ACCEPTED
    );
    admitted(&app.state).await;
    server::webhooks::service::pass(&app.state).await.unwrap();
    let d = app.get_as(&format!("/api/webhooks/{id}/deliveries"), ALICE).await.json();
    let attempt = &d["deliveries"][0]["attempts"][0];
    assert!(attempt["status"].is_null() && attempt["error"].as_str().unwrap().contains("refused"), "{d:#}");
    assert!(attempt["error"].as_str().unwrap().contains("loopback"), "{d:#}");
    assert_eq!(d["deliveries"][0]["state"], "pending", "tried again later: {d:#}");
    assert!(receiver.got.lock().unwrap().is_empty(), "nothing reached loopback");
    cluster.abort();
    app.finish().await;
}

fn verify(secret: &str, headers: &HeaderMap, body: &Value) {
    let sig = headers["x-arena-signature"].to_str().unwrap();
    let t: i64 = sig.split(',').next().unwrap().strip_prefix("t=").unwrap().parse().unwrap();
    let sent = serde_json::to_string(body).unwrap();
    assert_eq!(sig, server::webhooks::service::signature(secret, t, sent.as_bytes()), "{sig}");
}

/// A webhook's deliveries once the newest is no longer pending (at most 30 s).
async fn settled(app: &TestApp, webhook_id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let deliveries = app.get_as(&format!("/api/webhooks/{webhook_id}/deliveries"), ALICE).await.json();
        if deliveries["deliveries"][0]["state"] != "pending" || Instant::now() > deadline {
            return deliveries;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// The whole flow, on a local trial's receiver (loopback allowed): a collection run to `scored`
// and an OpenEnv run to `completed`, each delivered signed in JSON and as Slack's body; a receiver
// that answers 500 gets the delivery again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endings_are_delivered_signed_and_again_after_a_500() {
    for backend in crate::harness::BACKENDS {
        let options = Options { webhooks_allow_loopback: true, ..Options::local() };
        let app = TestApp::with(backend, options).await;
        app.hub.jobs.stage_ms.store(60, std::sync::atomic::Ordering::Relaxed);
        let receiver = Receiver::default();
        receiver.fail.lock().unwrap().insert("/json".into(), 1);
        let at = receiver.start().await;
        let json_hook =
            register(&app, ALICE, json!({"url": format!("{at}/json"), "events": ["run.ended"]})).await.json();
        let _slack =
            register(&app, ALICE, json!({"url": format!("{at}/slack"), "format": "slack"})).await.json();
        let secret = json_hook["secret"].as_str().unwrap().to_string();
        let workers = crate::follow::workers(&app);
        // A collection run to scored.
        let run = crate::follow::launched(&app, JobFaults::default()).await;
        let (d, _) = crate::follow::ended(&app, &run).await;
        assert_eq!(d["state"], "scored", "{d:#}");
        // The first try got a 500: the delivery comes again.
        let got = received(&receiver, "/json", 2).await;
        let (headers, body) = &got[1];
        assert_eq!(headers["x-arena-event"], "run.ended");
        assert_eq!(got[0].0["x-arena-delivery"], headers["x-arena-delivery"], "the same delivery, again");
        verify(&secret, headers, body);
        assert_eq!(
            (body["run"]["track"].as_str(), body["run"]["state"].as_str()),
            (Some("collection"), Some("scored")),
            "{body:#}"
        );
        assert_eq!(body["run"]["run_id"], run);
        assert!(body["run"]["links"]["page"].as_str().unwrap().ends_with(&format!("/arena/runs/{run}")));
        let slack_got = received(&receiver, "/slack", 1).await;
        let text = slack_got[0].1["text"].as_str().unwrap();
        assert!(text.starts_with("Open Env Arena: run ") && text.contains("scored"), "{text}");
        // The receiver has the second try; the arena records its answer just after.
        let deliveries = settled(&app, json_hook["webhook_id"].as_str().unwrap()).await;
        let attempts: Vec<Value> = deliveries["deliveries"][0]["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["status"].clone())
            .collect();
        assert_eq!(attempts, [json!(500), json!(200)], "{deliveries:#}");
        assert_eq!(deliveries["deliveries"][0]["state"], "delivered");
        // An OpenEnv run to completed, driven by a cluster the test speaks for.
        let mut cluster = Cluster::connect(&app).await;
        let body = crate::openenv::echo_submission("hooked", "ghcr.io/test/echo-ok:v1");
        assert_eq!(
            app.post_as("/api/openenv/submissions", &body.to_string(), ALICE).await.status,
            StatusCode::ACCEPTED
        );
        // The admission's verdict reaches the slack hook (it takes every event).
        let decided = received(&receiver, "/slack", 2).await;
        assert!(
            decided.iter().any(|(_, b)| b["text"].as_str().unwrap().contains("hooked validated")),
            "{decided:?}"
        );
        cluster.send(json!({"kind": "heartbeat", "gpus_free": 1, "sandboxes_free": 5})).await;
        let oe = cluster.next_where(|m| m["kind"] == "assign").await["run_id"].as_str().unwrap().to_string();
        cluster.send(json!({"kind": "accepted", "run_id": oe})).await;
        let t = "2026-12-01T12:00:01Z";
        for (seq, e) in [
            json!({"state": "loading"}),
            json!({"state": "rolling", "task_id": "echo-1"}),
            json!({"state": "updating", "task_id": "echo-1", "rewards": [0.0, 1.0, 1.0, 0.5], "policy_version": 1}),
            json!({"state": "cleanup", "policy_version": 1}),
            json!({"state": "completed", "policy_version": 1}),
        ].into_iter().enumerate() {
            let mut e = e;
            e["seq"] = json!(seq + 1);
            e["at"] = json!(t);
            if e.get("policy_version").is_none() {
                e["policy_version"] = json!(0);
            }
            cluster.event(&oe, e).await;
        }
        let got = received(&receiver, "/json", 3).await;
        let (headers, body) =
            got.iter().find(|(_, b)| b["run"]["run_id"] == oe).expect("the OpenEnv run's delivery");
        verify(&secret, headers, body);
        assert_eq!(
            (body["run"]["track"].as_str(), body["run"]["state"].as_str()),
            (Some("openenv"), Some("completed")),
            "{body:#}"
        );
        assert_eq!(body["run"]["policy_version"], 1);
        // Delivered once each: the endings table keeps one row per run whatever was written twice.
        assert_eq!(app.scalar("SELECT COUNT(*) FROM endings WHERE kind = 'run.ended'").await, 2);
        workers.stop().await;
        app.finish().await;
    }
}

/// A measurement, not a test (`dev/bench-webhooks` runs it): the time from an OpenEnv run's
/// terminal event being acknowledged to its `run.ended` delivery reaching a receiver, over 20
/// runs, with the workers on the deployment's 5 s tick (the webhooks pass wakes on the ending).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: dev/bench-webhooks runs it"]
async fn measure_webhook_delivery() {
    let options = Options { webhooks_allow_loopback: true, ..Options::local() };
    let app = TestApp::with(Backend::Sqlite, options).await;
    let receiver = Receiver::default();
    let at = receiver.start().await;
    register(&app, EVE, json!({"url": format!("{at}/hook"), "events": ["run.ended"]})).await.json();
    let workers = server::workers::Workers::start(app.state.clone(), Duration::from_secs(5));
    let mut cluster = Cluster::connect(&app).await;
    let mut latencies = Vec::new();
    for i in 0..20 {
        let body = crate::openenv::echo_submission(&format!("timed-{i}"), "ghcr.io/test/echo-ok:v1");
        assert_eq!(
            app.post_as("/api/openenv/submissions", &body.to_string(), EVE).await.status,
            StatusCode::ACCEPTED
        );
        server::openenv::admission::pass(&app.state).await.unwrap();
        cluster.send(json!({"kind": "heartbeat", "gpus_free": 1, "sandboxes_free": 5})).await;
        let run = cluster.next_where(|m| m["kind"] == "assign").await["run_id"].as_str().unwrap().to_string();
        cluster.send(json!({"kind": "accepted", "run_id": run})).await;
        let t = "2026-12-01T12:00:01Z";
        cluster.event(&run, json!({"seq": 1, "state": "loading", "policy_version": 0, "at": t})).await;
        cluster.event(&run, json!({"seq": 2, "state": "rolling", "policy_version": 0, "at": t})).await;
        let step = json!({"seq": 3, "state": "updating", "policy_version": 1, "at": t, "rewards": [0.0, 1.0, 1.0, 0.5]});
        cluster.event(&run, step).await;
        cluster.event(&run, json!({"seq": 4, "state": "cleanup", "policy_version": 1, "at": t})).await;
        let ended = Instant::now();
        cluster.event(&run, json!({"seq": 5, "state": "completed", "policy_version": 1, "at": t})).await;
        let arrived = loop {
            let found =
                receiver.got.lock().unwrap().iter().find(|(_, _, b, _)| b.contains(&run)).map(|g| g.3);
            if let Some(at) = found {
                break at;
            }
            assert!(ended.elapsed() < Duration::from_secs(60), "no delivery for {run}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        latencies.push(arrived.duration_since(ended).as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    let median = (latencies[9] + latencies[10]) / 2.0;
    println!(
        "BENCH webhook delivery after a run's end (20 OpenEnv runs, SQLite, 5 s tick): median {median:.1} ms, max {:.1} ms",
        latencies[19]
    );
    workers.stop().await;
    app.finish().await;
}
