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

/// `n` running jobs on the stand-in (processes that wait), each with a run that follows it.
async fn seed_active(app: &TestApp, n: usize) -> Vec<String> {
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    for i in 0..n {
        let run = format!("run-live-{i:03}");
        let job: serde_json::Value = client
            .post(format!("{}/api/jobs/benchflow", app.hub_url))
            .bearer_auth(ARENA_BOT)
            .json(&json!({"dockerImage": "ghcr.io/astral-sh/uv:python3.12-bookworm",
                "command": ["python3", "-c", "import time; time.sleep(3600)"], "flavor": "h200x2",
                "labels": {"arena-run": run}}))
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
        ids.push(job["id"].as_str().unwrap().to_string());
    }
    ids
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
            server::runs::reconcile::pass(&app.state).await.unwrap();
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
                domain::digest::sha256_hex(format!("secret-{i}"))
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

/// This process's CPU time so far (user + system; the stand-in runs in it too).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// The reconciler following 8 running jobs whose logs hold 100 MiB each (after a step line is
/// appended to each between passes): today's pass, which reads each log's newest 300 lines,
/// against the read it replaced (each log from its start, at most 4 MiB), replayed through the same
/// adapter. Wall time includes the pass's wait on each running job's stream (`log_read`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: dev/bench-follow runs it"]
async fn bench_reconciler_following_8_jobs_with_100_mib_logs() {
    let app = TestApp::with(Backend::Sqlite, Options::local()).await;
    seed_finished(&app, 0).await;
    let jobs = seed_active(&app, 8).await;
    let running = || {
        let all = app.hub.jobs.jobs.lock().unwrap();
        all.iter().filter(|j| jobs.contains(&j.view.id) && j.stage() == "RUNNING").count()
    };
    let start = Instant::now();
    while running() < jobs.len() {
        assert!(start.elapsed() < Duration::from_secs(60), "the jobs never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let filler = format!("[trl] {}", "x".repeat(200));
    let per_job = (100usize << 20) / (filler.len() + 1) + 1;
    {
        let mut all = app.hub.jobs.jobs.lock().unwrap();
        for j in all.iter_mut().filter(|j| jobs.contains(&j.view.id)) {
            j.logs.reserve(per_job);
            for _ in 0..per_job {
                j.logs.push(("2026-12-01T10:00:00.000Z".into(), filler.clone()));
            }
        }
    }
    let append = |k: usize| {
        let mut all = app.hub.jobs.jobs.lock().unwrap();
        for j in all.iter_mut().filter(|j| jobs.contains(&j.view.id)) {
            let line = format!("[posttrainarena] grpo_rollout_{k:06}_000000: bench eval run --include t");
            j.logs.push((format!("2026-12-01T10:00:{k:02}.000Z"), line));
        }
    };
    server::runs::reconcile::pass(&app.state).await.unwrap();
    const PASSES: usize = 5;
    let (mut walls, mut cpus, mut seen) = (Vec::new(), Vec::new(), 0);
    for k in 1..=PASSES {
        append(k);
        let (t, c) = (Instant::now(), cpu_time());
        server::runs::reconcile::pass(&app.state).await.unwrap();
        walls.push(t.elapsed());
        cpus.push(cpu_time() - c);
        seen += app.scalar("SELECT COUNT(*) FROM runs WHERE log_stage = 'training'").await;
        app.exec("UPDATE runs SET log_stage = NULL").await.unwrap();
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    println!(
        "BENCH reconciler pass following 8 jobs with 100 MiB logs, newest 300 lines each: median wall {:?}, \
         median CPU {:?} (arena + stand-in), new step line seen in {seen} of {} job-passes",
        median(&mut walls),
        median(&mut cpus),
        PASSES * jobs.len()
    );
    let (mut walls, mut cpus, mut bytes, mut seen) = (Vec::new(), Vec::new(), 0usize, 0usize);
    for k in PASSES + 1..=2 * PASSES {
        append(k);
        let (t, c) = (Instant::now(), cpu_time());
        let reads = futures_util::future::join_all(
            jobs.iter().map(|id| app.state.deps.jobs.logs(id, None, app.state.reconcile.log_read, 4 << 20)),
        )
        .await;
        walls.push(t.elapsed());
        cpus.push(cpu_time() - c);
        for lines in reads {
            let lines = lines.unwrap();
            bytes += lines.iter().map(|l| l.line.len()).sum::<usize>();
            seen += lines.iter().filter(|l| l.line.starts_with("[posttrainarena] grpo_rollout_")).count();
        }
    }
    println!(
        "BENCH the replaced read, each of the 8 logs from its start to 4 MiB: median wall {:?}, median CPU {:?}, \
         {} KiB read per pass, new step line seen in {seen} of {} job-passes",
        median(&mut walls),
        median(&mut cpus),
        (bytes / PASSES) >> 10,
        PASSES * jobs.len()
    );
    app.finish().await;
}

/// From the moment HF records a job's container dead (killed before it published anything) to
/// the run's `failed`, with the background work on its default tick (5 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: dev/bench-follow runs it"]
async fn bench_time_from_a_killed_container_to_failed() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let mut gaps = Vec::new();
        for _ in 0..3 {
            let app = TestApp::with(backend, Options::local()).await;
            app.hub.jobs.stage_ms.store(60, std::sync::atomic::Ordering::Relaxed);
            let w = server::workers::Workers::start(app.state.clone(), Duration::from_secs(5));
            let faults = standin::jobs::JobFaults { die_at: Some("publish".into()), ..Default::default() };
            let run = crate::follow::launched(&app, faults).await;
            let start = Instant::now();
            let gap = loop {
                assert!(start.elapsed() < Duration::from_secs(120), "the run never failed");
                let finished = {
                    let all = app.hub.jobs.jobs.lock().unwrap();
                    all.iter().find(|j| j.view.labels.get("arena-run") == Some(&run)).and_then(|j| j.finished)
                };
                if let Some(finished) = finished {
                    if crate::follow::detail(&app, &run).await["state"] == "failed" {
                        break finished.elapsed();
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            w.stop().await;
            gaps.push(gap);
            app.finish().await;
        }
        println!("BENCH {backend:?} a killed container to its run failed, tick 5 s: {gaps:?}");
    }
}
