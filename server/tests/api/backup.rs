//! Backups of the SQLite database to a private dataset on the stand-in: a snapshot goes up only
//! when the database changed, older ones are pruned in the same commit, and a restore takes the
//! newest whose hash, gzip, integrity and schema check out. The kill-and-wipe of a whole server is
//! `tests/cli/test_backup.py`; the cost is `dev/bench-backup`.

use std::time::{Duration, Instant};

use serde_json::json;
use server::backup::{self, Backups, Restored};

use crate::harness::{Backend, TestApp, ALICE, BOB};

const REPO: &str = "benchflow/arena-backups";

async fn post(app: &TestApp, token: &str, request_id: &str) {
    let body = json!({"request_id": request_id, "agent_id": null, "body": format!("message {request_id}"), "refs": [], "broadcast": false});
    let r = app.post_as("/api/board/messages", &body.to_string(), token).await;
    assert!(r.status.is_success(), "{}", r.text());
}

fn backups(app: &TestApp, keep: usize) -> Backups {
    Backups::new(REPO.into(), 60, keep, app.data_dir().join("arena.sqlite"), None)
}

async fn listed(app: &TestApp) -> Vec<String> {
    let mut paths = app.state.deps.datasets.list(REPO, "backups", 100).await.unwrap();
    paths.sort();
    paths
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_go_up_when_the_database_changed_and_a_restore_takes_the_newest_good_one() {
    let app = TestApp::new(Backend::Sqlite).await;
    let b = backups(&app, 2);
    post(&app, ALICE, "alice-backup-1").await;
    let first = backup::once(&app.state, &b).await.unwrap().expect("a first snapshot");
    assert_eq!(first.schema, backup::known_schema());
    assert_eq!(backup::once(&app.state, &b).await.unwrap(), None, "nothing changed");
    let view = b.view();
    assert_eq!(view.snapshot.as_deref(), Some(first.path().as_str()));
    assert!(view.last_ok_at.is_some() && view.last_error.is_none() && view.revision.is_some());
    let mut taken = vec![first];
    for i in 2..=3 {
        // One snapshot a second at most is named apart.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        post(&app, ALICE, &format!("alice-backup-{i}")).await;
        taken.push(backup::once(&app.state, &b).await.unwrap().expect("a changed database"));
    }
    // Two kept: the oldest was deleted in the commit that added the newest.
    assert_eq!(listed(&app).await, [taken[1].path(), taken[2].path()]);

    // A restore takes the newest: its file holds every message.
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("arena.sqlite");
    let datasets = app.state.deps.datasets.clone();
    let restored = backup::restore(datasets.as_ref(), REPO, &target).await.unwrap();
    assert!(
        matches!(&restored, Restored::From { path, skipped, .. } if *path == taken[2].path() && skipped.is_empty()),
        "{restored:?}"
    );
    let db = server::db::Db::connect(&format!("sqlite://{}", target.display())).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE request_id LIKE 'alice-backup-%'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(n, 3);
    db.pool.close().await;

    // A newer snapshot whose bytes are not its name's: skipped, the one before restored.
    let bogus = domain::backup::Snapshot {
        taken: "29991231T235959Z".into(),
        schema: backup::known_schema(),
        sha256: "0".repeat(64),
    };
    datasets.commit(REPO, "a corrupt snapshot", &[(bogus.path(), b"junk".to_vec())]).await.unwrap();
    let restored = backup::restore(datasets.as_ref(), REPO, &target).await.unwrap();
    match restored {
        Restored::From { path, skipped, .. } => {
            assert_eq!(path, taken[2].path());
            assert_eq!(skipped.len(), 1);
            assert!(skipped[0].contains("its SHA-256 is not the one its name records"), "{skipped:?}");
        }
        other => panic!("{other:?}"),
    }
    // One from a newer schema stops the restore, naming it.
    let newer = domain::backup::Snapshot {
        taken: "29991231T235959Z".into(),
        schema: backup::known_schema() + 1,
        sha256: "1".repeat(64),
    };
    datasets.commit(REPO, "from a newer build", &[(newer.path(), b"x".to_vec())]).await.unwrap();
    let e = backup::restore(datasets.as_ref(), REPO, &target).await.unwrap_err().to_string();
    assert!(e.contains("newer than this build's"), "{e}");
    // An empty dataset (or none at all) is a fresh start.
    let none = backup::restore(datasets.as_ref(), "benchflow/no-backups-here", &target).await.unwrap();
    assert_eq!(none, Restored::Empty);
    app.finish().await;
}

/// The cost of a snapshot of a busy arena, and what it does to readers: `dev/bench-backup`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: dev/bench-backup runs it"]
async fn measure_backup() {
    let app = TestApp::new(Backend::Sqlite).await;
    post(&app, ALICE, "bench-seed").await;
    post(&app, BOB, "bench-seed-2").await;
    // 10,000 board messages, copied from a real one by SQL.
    app.exec(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000) \
         INSERT INTO messages (id, author, author_id, agent_id, request_id, body, refs, created_at, created_epoch) \
         SELECT 'bench-' || i, author, author_id, agent_id, 'bench-' || i, \
                body || ' ' || hex(randomblob(60)), refs, created_at, created_epoch + i FROM n, \
                (SELECT * FROM messages WHERE request_id = 'bench-seed')",
    )
    .await
    .unwrap();
    // 1,000 runs (baselines: no collection to make first), each settled in the ledger, with 30
    // events of the lengths the reconciler writes.
    app.exec(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) \
         INSERT INTO runs (id, challenge_id, purpose, environment_id, author, author_id, request_key, request_body, \
           state, launch, flavor, timeout_s, reserved_cents, eligible_tasks, excluded_task_count, secret_hash, \
           created_at, created_epoch, updated_at, job_id, job_status, bundle_commit, results_commit) \
         SELECT 'run-bench-' || i, 'local-demo', 'baseline', NULL, 'alice', 'u-bench', 'bench-' || i, \
           '{\"request_id\":\"bench-' || i || '\"}', 'scored', 'launched', 'h200', 14400, 250, 0, 0, \
           lower(hex(randomblob(32))), '2026-12-01T00:00:00Z', 1796100000 + i, '2026-12-01T04:00:00Z', \
           lower(hex(randomblob(12))), 'COMPLETED', lower(hex(randomblob(20))), lower(hex(randomblob(20))) FROM n",
    )
    .await
    .unwrap();
    app.exec(
        "INSERT INTO budget_ledger (id, challenge_id, run_id, amount_cents, state, created_at, updated_at) \
         SELECT id, challenge_id, id, 187, 'settled', created_at, updated_at FROM runs WHERE id LIKE 'run-bench-%'",
    )
    .await
    .unwrap();
    app.exec(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30000) \
         INSERT INTO run_events (run_id, at, epoch, source, kind, detail, stage) \
         SELECT 'run-bench-' || (1 + i % 1000), '2026-12-01T01:00:00Z', 1796100000 + i, 'logs', 'step', \
           'grpo_rollout_' || printf('%06d', i) || ' done: 3 of 8 rollouts passed, reward mean 0.375 (' || \
           lower(hex(randomblob(24))) || ')', 'training' FROM n",
    )
    .await
    .unwrap();
    let b = backups(&app, 24);
    let start = Instant::now();
    let snap = backup::once(&app.state, &b).await.unwrap().unwrap();
    let took = start.elapsed();
    let bytes = std::fs::metadata(app.data_dir().join("arena.sqlite")).unwrap().len();
    let gz = app.state.deps.datasets.read(REPO, "main", &snap.path(), 1 << 30).await.unwrap().len();
    println!(
        "BENCH backup: a {:.1} MiB database (10,000 board messages, 1,000 runs with 30,000 events and their ledger) snapshotted, gzipped to {:.1} MiB and uploaded in {:.0} ms",
        bytes as f64 / (1 << 20) as f64,
        gz as f64 / (1 << 20) as f64,
        took.as_secs_f64() * 1000.0,
    );
    let p99 = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[(v.len() * 99 / 100).min(v.len() - 1)]
    };
    let reads = |n: usize| {
        let app = &app;
        async move {
            let mut out = Vec::new();
            for _ in 0..n {
                let t = Instant::now();
                assert!(app.get("/api/board/messages?q=bench").await.status.is_success());
                out.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            out
        }
    };
    let quiet = p99(reads(300).await);
    // The same reads while snapshots are taken back to back (each after a write, so each is real).
    let busy = {
        let state = app.state.clone();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let db_path = app.data_dir().join("arena.sqlite");
        let counter = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let taken = counter.clone();
        let snapshots = tokio::spawn(async move {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                backup::snapshot(&state.db, &db_path).await.unwrap();
                taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            taken.load(std::sync::atomic::Ordering::Relaxed)
        });
        let state_snapshots =
            |c: &std::sync::Arc<std::sync::atomic::AtomicUsize>| c.load(std::sync::atomic::Ordering::Relaxed);
        // Reads go on until five snapshots were taken beside them.
        let mut during = Vec::new();
        while !snapshots.is_finished() && during.len() < 20_000 {
            during.extend(reads(50).await);
            if during.len() >= 300 && state_snapshots(&counter) >= 5 {
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let n = snapshots.await.unwrap();
        println!("BENCH backup: {n} snapshots taken while {} reads ran", during.len());
        p99(during)
    };
    println!("BENCH backup: p99 of GET /api/board/messages?q=bench {quiet:.1} ms without a snapshot, {busy:.1} ms during snapshots ({:.2}x)", busy / quiet);
    app.finish().await;
}
