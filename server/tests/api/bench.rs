//! Measurements, not tests: ignored by default, run by `dev/bench-follow` (which prints what they
//! print). Nothing here asserts a time.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Backend, Options, TestApp, ARENA_BOT};

async fn seed_finished(app: &TestApp, n: usize) {
    app.exec(
        "INSERT INTO environments (id, author, author_id, challenge_id, track, repo_type, repo_id, revision, commit_sha, \
         entry_path, title, notes, valid, tasks, eligible_tasks, gates_version, report, created_at) VALUES \
         ('env-bench', 'alice', 'user-alice', 'local-demo', 'environments', 'dataset', 'alice/pack', 'main', \
         '0000000000000000000000000000000000000000', '', 'bench', '', 1, 2, 2, 'gates-v4', '{}', 't')",
    )
    .await
    .unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
        let values: Vec<String> = chunk
            .iter()
            .map(|i| {
                format!(
                    "('run-done-{i:05}', 'local-demo', 'env-bench', 'alice', 'user-alice', 'req-done-{i:05}', 'b', 'scored', \
                     'collect', 'launched', 'job-done-{i}', 'COMPLETED', 'h200x2', 900, 250, 2, 0, 'x', 't', {i}, 't')"
                )
            })
            .collect();
        app.exec(&format!(
            "INSERT INTO runs (id, challenge_id, environment_id, author, author_id, request_key, request_body, state, stage, \
             launch, job_id, job_status, flavor, timeout_s, reserved_cents, eligible_tasks, excluded_task_count, secret_hash, \
             created_at, created_epoch, updated_at) VALUES {}",
            values.join(", ")
        ))
        .await
        .unwrap();
    }
}

/// Twenty running jobs on the stand-in, each with a run that follows it.
async fn seed_active(app: &TestApp, n: usize) {
    let client = reqwest::Client::new();
    for i in 0..n {
        let run = format!("run-live-{i:03}");
        let job: serde_json::Value = client
            .post(format!("{}/api/jobs/benchflow", app.hub_url))
            .bearer_auth(ARENA_BOT)
            .json(&json!({"dockerImage": "x", "command": ["posttrainarena-train", "run"], "flavor": "h200x2", "labels": {"arena-run": run}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        app.exec(&format!(
            "INSERT INTO runs (id, challenge_id, environment_id, author, author_id, request_key, request_body, state, \
             launch, job_id, flavor, timeout_s, reserved_cents, eligible_tasks, excluded_task_count, secret_hash, \
             created_at, created_epoch, updated_at) VALUES ('{run}', 'local-demo', 'env-bench', 'alice', 'user-alice', \
             'req-live-{i}', 'b', 'queued', 'launched', '{}', 'h200x2', 900, 250, 2, 0, 'x', 't', 0, 't')",
            job["id"].as_str().unwrap()
        ))
        .await
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: dev/bench-follow runs it"]
async fn bench_reconciler_pass_with_1000_finished_and_20_active_runs() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = TestApp::with(backend, Options::local()).await;
        // Jobs that stay in their first stages for the whole measurement.
        app.hub.jobs.stage_ms.store(600_000, std::sync::atomic::Ordering::Relaxed);
        seed_finished(&app, 1000).await;
        seed_active(&app, 20).await;
        let mut times = Vec::new();
        for _ in 0..6 {
            let start = Instant::now();
            server::service::reconcile::pass(&app.state).await.unwrap();
            times.push(start.elapsed());
        }
        times.sort();
        println!(
            "BENCH {backend:?} reconciler pass, 1000 finished + 20 active runs: median {:?}, slowest {:?} (6 passes; \
             each active run: HF inspect + a {} ms log read, 8 at once)",
            times[3],
            times[5],
            app.state.reconcile.log_read.as_millis()
        );
        app.finish().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: dev/bench-follow runs it"]
async fn bench_relay_messages_per_second_with_20_relays() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = TestApp::with(backend, Options::local()).await;
        app.hub.jobs.stage_ms.store(600_000, std::sync::atomic::Ordering::Relaxed);
        seed_finished(&app, 0).await;
        seed_active(&app, 20).await;
        for i in 0..20 {
            app.exec(&format!(
                "UPDATE runs SET secret_hash = '{}' WHERE id = 'run-live-{i:03}'",
                sha256_hex(&format!("secret-{i}"))
            ))
            .await
            .unwrap();
        }
        const EACH: usize = 200;
        let relays: Vec<standin::relay::Relay> = (0..20)
            .map(|i| {
                standin::relay::Relay::start(
                    standin::relay::Target {
                        url: app.state.public_url.clone(),
                        run_id: format!("run-live-{i:03}"),
                        secret: format!("secret-{i}"),
                    },
                    Duration::from_secs(3600),
                )
            })
            .collect();
        let start = Instant::now();
        for r in &relays {
            for k in 0..EACH {
                let step = ["baseline_eval", "grpo_gate_eval", "posttrain_eval"][k % 3];
                r.send(json!({"kind": "eval", "step": step, "passed": k, "total": EACH}));
            }
        }
        let want = (20 * EACH) as i64;
        let mut stored = 0;
        while stored < want && start.elapsed() < Duration::from_secs(120) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            stored = app.scalar("SELECT COUNT(*) FROM run_events WHERE source = 'relay'").await;
        }
        let took = start.elapsed();
        futures_util::future::join_all(relays.iter().map(|r| r.close())).await;
        println!(
            "BENCH {backend:?} relay: {stored} messages from 20 relays stored and acknowledged in {took:?}: {:.0} per second",
            stored as f64 / took.as_secs_f64()
        );
        app.finish().await;
    }
}

fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}
