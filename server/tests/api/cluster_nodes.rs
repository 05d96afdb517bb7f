//! The OpenEnv track on several cluster nodes (issue 70): runs assigned across nodes in acceptance
//! order, the queue every participant sees, the organizers' capacity view, a node lost, and two
//! replicas with an agent each that never give a run or a GPU twice.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::controls::Cluster;
use crate::harness::{Backend, Options, TestApp, ALICE, BOB, CLUSTER_SECRET, EVE, NEW_ALICE};
use crate::openenv_runs::{cluster, echo_submission, run_of, trainer, wait_connected};

/// Four accounts, one submission each, admitted at once (as the admission pass would: its
/// sandboxes run on real time, tested elsewhere).
async fn four_admitted(app: &TestApp) -> [(&'static str, &'static str); 4] {
    let four = [("sub-1", ALICE), ("sub-2", BOB), ("sub-3", EVE), ("sub-4", NEW_ALICE)];
    for (id, token) in four {
        let r = app.post_as("/api/openenv/submissions", &echo_submission(id).to_string(), token).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    }
    app.exec("UPDATE openenv_submissions SET state = 'validated', slot_state = 'used'").await.unwrap();
    four
}

async fn submission(app: &TestApp, id: &str, token: &str) -> Value {
    app.get_as(&format!("/api/openenv/submissions/{id}"), token).await.json()
}

async fn ended(app: &TestApp, run: &str) -> Value {
    let start = Instant::now();
    loop {
        let v = app.get_as(&format!("/api/openenv/runs/{run}"), EVE).await.json();
        if matches!(v["state"].as_str(), Some("completed" | "failed" | "cancelled")) {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(300), "{v:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// The issue's own case: the stand-in as two nodes of one GPU each, four submissions of four
// accounts: two runs at once on two nodes, the others at positions 1 and 2 with an estimated
// start, every run ends, and the capacity view lists both nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_train_two_at_once_and_the_queue_shows_the_rest() {
    let app = TestApp::new(Backend::Sqlite).await;
    let slow = standin::trainer::Trainer { stage: Duration::from_millis(300), ..trainer(&app) };
    let nodes: Vec<_> = ["node-a", "node-b"]
        .into_iter()
        .map(|id| {
            let node = standin::cluster::Cluster { node_id: Some(id.into()), ..cluster(Some(slow.clone())) };
            standin::cluster::connect(&app.url, CLUSTER_SECRET, node)
        })
        .collect();
    wait_connected(&app).await;
    let four = four_admitted(&app).await;
    let first = run_of(&app, "sub-1", ALICE).await;
    let second = run_of(&app, "sub-2", BOB).await;
    // Both GPUs are taken: the later two wait, in acceptance order, each with an estimate.
    for (place, (id, token)) in [(1, four[2]), (2, four[3])] {
        let v = submission(&app, id, token).await;
        if v["run"]["run_id"].is_string() {
            panic!("a third run started while both GPUs were busy: {v:#}");
        }
        assert_eq!(
            (v["queue"]["position"].as_u64(), v["queue"]["ahead"].as_u64()),
            (Some(place), Some(place - 1)),
            "{v:#}"
        );
        assert!(v["queue"]["estimated_start_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{v:#}");
    }
    let started = submission(&app, "sub-1", ALICE).await;
    assert!(started["queue"].is_null(), "a submission whose run exists waits no more: {started:#}");
    let status = app.get("/api/openenv").await.json();
    assert_eq!(status["cluster"]["nodes_connected"], 2, "{status:#}");
    assert_eq!(
        (status["cluster"]["gpus_free"].clone(), status["cluster"]["runs_waiting"].clone()),
        (json!(0), json!(2))
    );
    // Editors see each run's node; its submitter does not.
    let node_of = |v: Value| v["node_id"].as_str().map(String::from);
    let a = node_of(app.get_as(&format!("/api/openenv/runs/{first}"), EVE).await.json());
    let b = node_of(app.get_as(&format!("/api/openenv/runs/{second}"), EVE).await.json());
    let both: BTreeSet<_> = [a.clone(), b.clone()].into_iter().flatten().collect();
    assert_eq!(both, BTreeSet::from(["node-a".to_string(), "node-b".to_string()]), "two runs on two nodes");
    assert!(app.get_as(&format!("/api/openenv/runs/{first}"), ALICE).await.json().get("node_id").is_none());
    let capacity = app.get_as("/api/openenv/capacity", EVE).await;
    assert_eq!(capacity.status, StatusCode::OK, "{}", capacity.text());
    let c = capacity.json();
    let ids: Vec<&str> =
        c["nodes"].as_array().unwrap().iter().map(|n| n["node_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["node-a", "node-b"], "{c:#}");
    assert_eq!(c["queue_length"], 2);
    assert!(c["projected_empty_s"].as_i64().unwrap() > 0, "{c:#}");
    // The organizers' page shows the same: the cluster's section, each node, the queue.
    let (cookie, _) = crate::session::sign_in(&app, "eve").await;
    let page = app.call(axum::http::Method::GET, "/arena/jobs", None, &[("cookie", &cookie)]).await.text();
    assert!(page.contains("OpenEnv cluster") && page.contains("<code>node-a</code>"), "{page}");
    assert!(page.contains("<code>node-b</code>") && page.contains("2 waiting"), "{page}");
    let denied = app.get_as("/api/openenv/capacity", ALICE).await;
    assert_eq!((denied.status, denied.json()["code"].clone()), (StatusCode::FORBIDDEN, json!("FORBIDDEN")));
    // Every run ends; all four ran.
    for (id, token) in four {
        let run = run_of(&app, id, token).await;
        let v = ended(&app, &run).await;
        assert_eq!(v["state"], "completed", "{v:#}");
    }
    let c = app.get_as("/api/openenv/capacity", EVE).await.json();
    assert_eq!((c["queue_length"].clone(), c["runs_started_24h"].clone()), (json!(0), json!(4)), "{c:#}");
    for n in nodes {
        n.abort();
    }
    app.finish().await;
}

// A node silent past its bound: the run it never started goes back to the head of the queue and
// starts on another node; the run it was training fails `RUN_NODE_LOST`; when it comes back, it
// is told to stop both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_node_gives_back_what_never_started_and_fails_what_was_training() {
    let clock =
        Arc::new(server::ports::clock::FixedClock::new(time::macros::datetime!(2026-12-08 12:00 UTC)));
    let app =
        TestApp::with(Backend::Sqlite, Options { clock: Some(clock.clone()), ..Options::default() }).await;
    let hello = |node: &str, gpus: u32, runs: Value| json!({"kind": "hello", "node_id": node, "gpus": gpus, "gpus_free": gpus, "sandboxes_free": gpus * 5, "runs": runs});
    let mut lost = Cluster::connect_as(&app, hello("lost-a", 2, json!([]))).await;
    let mut kept = Cluster::connect_as(&app, hello("kept-b", 0, json!([]))).await;
    for (id, token) in [("trained", ALICE), ("waiting", BOB)] {
        let r = app.post_as("/api/openenv/submissions", &echo_submission(id).to_string(), token).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    }
    app.exec("UPDATE openenv_submissions SET state = 'validated', slot_state = 'used'").await.unwrap();
    lost.send(
        json!({"kind": "heartbeat", "node_id": "lost-a", "gpus": 2, "gpus_free": 2, "sandboxes_free": 10}),
    )
    .await;
    let one = lost.next_where(|m| m["kind"] == "assign").await["run_id"].as_str().unwrap().to_string();
    let two = lost.next_where(|m| m["kind"] == "assign").await["run_id"].as_str().unwrap().to_string();
    let trained = run_of(&app, "trained", ALICE).await;
    assert_eq!(
        BTreeSet::from([one.clone(), two.clone()]),
        BTreeSet::from([trained.clone(), run_of(&app, "waiting", BOB).await])
    );
    let never = if one == trained { two } else { one };
    for run in [&trained, &never] {
        lost.send(json!({"kind": "accepted", "run_id": run})).await;
        lost.next_where(|m| m["of"] == "accepted").await;
    }
    lost.event(
        &trained,
        json!({"seq": 1, "state": "loading", "policy_version": 0, "at": "2026-12-08T12:00:01Z"}),
    )
    .await;

    // Ten minutes of silence from lost-a; kept-b keeps beating.
    clock.advance(time::Duration::seconds(599));
    kept.send(
        json!({"kind": "heartbeat", "node_id": "kept-b", "gpus": 0, "gpus_free": 0, "sandboxes_free": 0}),
    )
    .await;
    kept.next_where(|m| m["of"] == "heartbeat").await;
    assert_eq!(server::openenv::runs::service::sweep(&app.state).await.unwrap(), 0, "not yet");
    clock.advance(time::Duration::seconds(2));
    kept.send(
        json!({"kind": "heartbeat", "node_id": "kept-b", "gpus": 0, "gpus_free": 0, "sandboxes_free": 0}),
    )
    .await;
    kept.next_where(|m| m["of"] == "heartbeat").await;
    assert_eq!(server::openenv::runs::service::sweep(&app.state).await.unwrap(), 2, "both runs moved");
    let v = app.get_as(&format!("/api/openenv/runs/{trained}"), ALICE).await.json();
    assert_eq!(
        (v["state"].as_str(), v["error"]["code"].as_str()),
        (Some("failed"), Some("RUN_NODE_LOST")),
        "{v:#}"
    );
    assert!(v["error"]["message"].as_str().unwrap().contains("not your environment"), "{v:#}");
    let back = submission(&app, "waiting", BOB).await;
    assert!(back["run"]["run_id"].is_null(), "{back:#}");
    assert_eq!(back["queue"]["position"], 1, "at the head of the queue again: {back:#}");
    assert_eq!(app.get_as(&format!("/api/openenv/runs/{never}"), BOB).await.status, StatusCode::NOT_FOUND);
    let c = app.get_as("/api/openenv/capacity", EVE).await.json();
    let node = c["nodes"].as_array().unwrap().iter().find(|n| n["node_id"] == "lost-a").unwrap().clone();
    assert_eq!((node["connected"].clone(), node["lost_at"].is_string()), (json!(false), true), "{c:#}");
    // Another node takes it.
    kept.send(
        json!({"kind": "heartbeat", "node_id": "kept-b", "gpus": 1, "gpus_free": 1, "sandboxes_free": 5}),
    )
    .await;
    let again = kept.next_where(|m| m["kind"] == "assign").await["run_id"].as_str().unwrap().to_string();
    assert_ne!(again, never);
    assert_eq!(run_of(&app, "waiting", BOB).await, again);
    // lost-a comes back holding both: it is told to stop them.
    lost.send(hello("lost-a", 2, json!([trained, never]))).await;
    let mut stopped = BTreeSet::new();
    while stopped.len() < 2 {
        let m = lost.next_where(|m| m["kind"] == "stop").await;
        stopped.insert(m["run_id"].as_str().unwrap().to_string());
    }
    assert_eq!(stopped, BTreeSet::from([trained, never]));
    app.finish().await;
}

// Two replicas on one PostgreSQL database, an agent connected to each, six submissions: every
// submission gets one run, no run goes to both nodes, and no node holds more runs than GPUs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_with_an_agent_each_never_give_a_run_or_a_gpu_twice() {
    let app = TestApp::new(Backend::Postgres).await;
    let replica = app.replica().await;
    let hello = |node: &str| json!({"kind": "hello", "node_id": node, "gpus": 1, "gpus_free": 1, "sandboxes_free": 5, "runs": []});
    let mut one = Cluster::connect_as(&app, hello("node-1")).await;
    let mut two = Cluster::connect_as(&replica, hello("node-2")).await;
    let accounts = [ALICE, BOB, EVE, NEW_ALICE];
    for i in 0..6 {
        let body = echo_submission(&format!("many-{i}")).to_string();
        let r = app.post_as("/api/openenv/submissions", &body, accounts[i % 4]).await;
        assert!(matches!(r.status, StatusCode::ACCEPTED | StatusCode::TOO_MANY_REQUESTS), "{}", r.text());
    }
    app.exec("UPDATE openenv_submissions SET state = 'validated', slot_state = 'used'").await.unwrap();
    let waiting = app.scalar("SELECT COUNT(*) FROM openenv_submissions").await as usize;
    // Each node, when it has a free GPU, takes what it is given, and ends it at once.
    async fn serve(c: &mut Cluster, node: &str, rounds: usize) -> Vec<String> {
        let mut got = Vec::new();
        for _ in 0..rounds {
            c.send(
                json!({"kind": "heartbeat", "node_id": node, "gpus": 1, "gpus_free": 1, "sandboxes_free": 5}),
            )
            .await;
            let ack_or_assign = c.next_where(|m| m["of"] == "heartbeat").await;
            assert!(ack_or_assign["error"].is_null(), "{ack_or_assign}");
            // An assignment follows its ack in the same answer, if any: what came within 300 ms.
            let mut this_round = 0;
            while let Ok(m) =
                tokio::time::timeout(Duration::from_millis(300), c.next_where(|m| m["kind"] == "assign"))
                    .await
            {
                let run = m["run_id"].as_str().unwrap().to_string();
                this_round += 1;
                assert!(this_round <= 1, "{node} was given more runs than its one GPU");
                c.send(json!({"kind": "accepted", "run_id": run})).await;
                c.event(
                    &run,
                    json!({"seq": 1, "state": "loading", "policy_version": 0, "at": "2026-12-08T12:00:01Z"}),
                )
                .await;
                c.event(
                    &run,
                    json!({"seq": 2, "state": "failed", "policy_version": 0, "at": "2026-12-08T12:00:02Z",
                    "message": "RUN_TRAINER_FAILED: the test ends it"}),
                )
                .await;
                got.push(run);
            }
        }
        got
    }
    let (a, b) = tokio::join!(serve(&mut one, "node-1", 8), serve(&mut two, "node-2", 8));
    let (a, b): (BTreeSet<String>, BTreeSet<String>) = (a.into_iter().collect(), b.into_iter().collect());
    assert!(a.is_disjoint(&b), "a run given to both nodes: {a:?} {b:?}");
    assert_eq!(a.len() + b.len(), waiting, "every submission ran once: {a:?} {b:?}");
    assert_eq!(app.scalar("SELECT COUNT(DISTINCT run_id) FROM openenv_runs").await as usize, waiting);
    let nodes: Vec<(String, i64)> =
        sqlx::query_as("SELECT node_id, COUNT(*) FROM openenv_runs GROUP BY node_id ORDER BY node_id")
            .fetch_all(&app.state.db.pool)
            .await
            .unwrap();
    assert_eq!(nodes.iter().map(|(_, n)| n).sum::<i64>() as usize, waiting, "{nodes:?}");
    replica.finish().await;
    app.finish().await;
}

/// One simulated node of the bench: `gpus` GPUs, each run held `run_ms` then ended.
struct BenchNode {
    got: Vec<(String, Instant)>,
    busy_gpu_s: f64,
}

#[allow(clippy::too_many_arguments)]
async fn bench_node(
    beat_ms: u64,
    url: String,
    node: String,
    gpus: usize,
    run_ms: u64,
    total: usize,
    assigned: Arc<std::sync::atomic::AtomicUsize>,
) -> BenchNode {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::Message;
    let mut request = format!("ws://{}/api/relay/cluster", url.trim_start_matches("http://"))
        .into_client_request()
        .unwrap();
    request.headers_mut().insert("authorization", format!("Bearer {CLUSTER_SECRET}").parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let (mut tx, mut rx) = ws.split();
    let text = |v: Value| Message::Text(v.to_string().into());
    let mut running: Vec<(String, Instant)> = Vec::new();
    let mut out = BenchNode { got: Vec::new(), busy_gpu_s: 0.0 };
    let beat = |kind: &str, free: usize| {
        let mut m = json!({"kind": kind, "node_id": node, "gpus": gpus, "gpus_free": free, "sandboxes_free": free * 5});
        if kind == "hello" {
            m["runs"] = json!([]);
        }
        m
    };
    tx.send(text(beat("hello", gpus))).await.unwrap();
    loop {
        // Runs past their time end: two events, as a trainer that failed at once would send.
        let now = Instant::now();
        for (run, since) in running.iter().filter(|(_, since)| now >= *since + Duration::from_millis(run_ms))
        {
            out.busy_gpu_s += since.elapsed().as_secs_f64();
            for (seq, state) in [(1, "loading"), (2, "failed")] {
                let e = json!({"seq": seq, "state": state, "policy_version": 0, "at": "2026-12-08T12:00:00Z",
                    "message": "RUN_TRAINER_FAILED: the bench's run ends"});
                tx.send(text(json!({"kind": "event", "run_id": run, "event": e}))).await.unwrap();
            }
        }
        running.retain(|(_, since)| now < *since + Duration::from_millis(run_ms));
        if assigned.load(std::sync::atomic::Ordering::SeqCst) >= total && running.is_empty() {
            break;
        }
        tx.send(text(beat("heartbeat", gpus - running.len()))).await.unwrap();
        // Between heartbeats it reads what the arena sends (and ends runs due, at the next beat).
        let until = Instant::now() + Duration::from_millis(beat_ms);
        while let Ok(Some(Ok(Message::Text(t)))) = tokio::time::timeout_at(until.into(), rx.next()).await {
            let m: Value = serde_json::from_str(&t).unwrap();
            if m["kind"] == "assign" {
                let run = m["run_id"].as_str().unwrap().to_string();
                let again = running.iter().any(|(r, _)| *r == run) || out.got.iter().any(|(r, _)| *r == run);
                if again {
                    // A resend: accepted again, as an agent answers for a run it holds.
                    tx.send(text(json!({"kind": "accepted", "run_id": run}))).await.unwrap();
                    continue;
                }
                tx.send(text(json!({"kind": "accepted", "run_id": run}))).await.unwrap();
                assigned.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                running.push((run.clone(), Instant::now()));
                out.got.push((run, Instant::now()));
            }
        }
    }
    out
}

/// The scale of issue 70, measured (no time asserted): 4 nodes of 8 GPUs, 200 admitted
/// submissions, runs of `BENCH_RUN_MS` (default 1,000 ms); with one replica on SQLite and on
/// PostgreSQL, and two replicas on PostgreSQL with the nodes split between them. Prints the share
/// of GPU-seconds busy while the queue was not empty, the assignments a second, the runs given
/// twice and the order kept. `dev/bench-cluster` runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: dev/bench-cluster"]
async fn measure_cluster_scale() {
    let run_ms: u64 = std::env::var("BENCH_RUN_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    // How often each node heartbeats (a real agent: every 5 s).
    let beat_ms: u64 = std::env::var("BENCH_BEAT_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let total: usize = std::env::var("BENCH_SUBMISSIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let (nodes, gpus) = (4usize, 8usize);
    let backends = [(Backend::Sqlite, 1), (Backend::Postgres, 1), (Backend::Postgres, 2)];
    let only_sqlite = std::env::var("BENCH_SQLITE_ONLY").is_ok();
    for (backend, replicas) in backends.into_iter().take(if only_sqlite { 1 } else { 3 }) {
        let app = TestApp::new(backend).await;
        let replica = if replicas == 2 { Some(app.replica().await) } else { None };
        let mut first = Cluster::connect(&app).await;
        let r = app.post_as("/api/openenv/submissions", &echo_submission("bench-0").to_string(), ALICE).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
        for i in 1..total {
            app.exec(&format!(
                "INSERT INTO openenv_submissions (account_id, account, submission_id, body_hash, body, images, state, \
                 slot_state, report, probes, accepted_at, accepted_epoch, updated_at) SELECT 'bench-account-{i}', \
                 'bench{i}', 'bench-{i}', body_hash, body, images, state, slot_state, report, probes, accepted_at, \
                 accepted_epoch, updated_at FROM openenv_submissions WHERE submission_id = 'bench-0'"
            ))
            .await
            .unwrap();
        }
        app.exec("UPDATE openenv_submissions SET state = 'validated', slot_state = 'used'").await.unwrap();
        first.send(json!({"kind": "heartbeat", "gpus_free": 0, "sandboxes_free": 0})).await;
        let assigned = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let started = Instant::now();
        let tasks: Vec<_> = (0..nodes)
            .map(|i| {
                let url = match (&replica, i % 2) {
                    (Some(r), 1) => r.url.clone(),
                    _ => app.url.clone(),
                };
                tokio::spawn(bench_node(
                    beat_ms,
                    url,
                    format!("bench-node-{i}"),
                    gpus,
                    run_ms,
                    total,
                    assigned.clone(),
                ))
            })
            .collect();
        let watch = assigned.clone();
        let db = app.state.db.clone();
        let progress = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                let runs: Vec<(Option<String>, String, i64, i64)> = sqlx::query_as(
                    "SELECT node_id, state, delivered, COUNT(*) FROM openenv_runs GROUP BY node_id, state, delivered",
                )
                .fetch_all(&db.pool)
                .await
                .unwrap_or_default();
                let nodes: Vec<(String, i64, i64, i64)> =
                    sqlx::query_as("SELECT node_id, connected, gpus_free, sandboxes_free FROM openenv_nodes")
                        .fetch_all(&db.pool)
                        .await
                        .unwrap_or_default();
                eprintln!(
                    "bench: {} of {total} assigned; runs {runs:?}; nodes {nodes:?}",
                    watch.load(std::sync::atomic::Ordering::SeqCst)
                );
            }
        });
        let mut got = Vec::new();
        let mut busy = 0.0;
        for t in tasks {
            let n = t.await.unwrap();
            busy += n.busy_gpu_s;
            got.extend(n.got);
        }
        progress.abort();
        got.sort_by_key(|(_, at)| *at);
        let last_assign = got.last().map(|(_, at)| at.duration_since(started)).unwrap_or_default();
        let first_full =
            got.get(nodes * gpus - 1).map(|(_, at)| at.duration_since(started)).unwrap_or_default();
        let distinct: BTreeSet<&String> = got.iter().map(|(r, _)| r).collect();
        // Busy while the queue was not empty: until the last assignment, every GPU could have been.
        let window = last_assign.as_secs_f64();
        let busy_in_window: f64 = got
            .iter()
            .map(|(_, at)| {
                let from = at.duration_since(started).as_secs_f64();
                (window.min(from + run_ms as f64 / 1e3) - from).max(0.0)
            })
            .sum();
        let order: Vec<(String, i64)> = sqlx::query_as(
            "SELECT r.run_id, s.seq FROM openenv_runs r JOIN openenv_submissions s ON s.run_id = r.run_id",
        )
        .fetch_all(&app.state.db.pool)
        .await
        .unwrap();
        let seq_of: std::collections::BTreeMap<&str, i64> =
            order.iter().map(|(r, s)| (r.as_str(), *s)).collect();
        let seqs: Vec<i64> = got.iter().filter_map(|(r, _)| seq_of.get(r.as_str()).copied()).collect();
        let inversions = seqs.windows(2).filter(|w| w[0] > w[1]).count();
        println!(
            "BENCH cluster {backend:?} x{replicas}: {nodes} nodes x {gpus} GPUs beating every {beat_ms} ms, {total} submissions, runs of {run_ms} ms: \
             {} assigned ({} distinct, {} submissions with a run), every GPU busy {:.2} s after the start; \
             {:.1} assignments/s over {:.2} s; GPU-seconds busy while the queue waited: {:.1} % ({busy_in_window:.1} of {:.1}); \
             neighbours out of acceptance order in arrival: {inversions} of {}; busy in all {busy:.1} GPU-s",
            got.len(),
            distinct.len(),
            order.len(),
            first_full.as_secs_f64(),
            got.len() as f64 / window.max(1e-9),
            window,
            100.0 * busy_in_window / (window * (nodes * gpus) as f64).max(1e-9),
            window * (nodes * gpus) as f64,
            seqs.len().saturating_sub(1),
        );
        if let Some(r) = replica {
            r.finish().await;
        }
        app.finish().await;
    }
}
