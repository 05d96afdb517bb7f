//! Backups of the SQLite database to a private dataset on the stand-in: a snapshot goes up only
//! when the database changed, without its sessions, older ones are pruned in the same commit, and
//! a restore takes the newest the arena signed whose gzip, integrity and schema check out. The
//! attacks: a forged snapshot, a future-dated one, a gzip bomb, a dataset that fails or is public.
//! The kill-and-wipe of a whole server is `tests/cli/test_backup.py`; the cost is
//! `dev/bench-backup`.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::json;
use server::backup::{self, Backups, Restore, Restored};
use server::config::Secret;
use server::ports::datasets::DatasetWriter;
use server::signing::SigningKey;

use crate::harness::{Backend, TestApp, ALICE, ARENA_BOT, BOB};

const REPO: &str = "benchflow/arena-backups";
const KEY: &str = "test-backup-key-0123456789abcdef0123456789";

fn key() -> SigningKey {
    SigningKey::new(&Secret(KEY.into())).unwrap()
}

async fn post(app: &TestApp, token: &str, request_id: &str) {
    let body = json!({"request_id": request_id, "agent_id": null, "body": format!("message {request_id}"), "refs": [], "broadcast": false});
    let r = app.post_as("/api/board/messages", &body.to_string(), token).await;
    assert!(r.status.is_success(), "{}", r.text());
}

fn backups(app: &TestApp, keep: usize) -> Backups {
    Backups::new(REPO.into(), 60, keep, key(), app.data_dir().join("arena.sqlite"), None)
}

async fn listed(app: &TestApp) -> Vec<String> {
    let mut paths = app.state.deps.datasets.list(REPO, "backups", 100).await.unwrap();
    paths.sort();
    paths
}

fn restore<'a>(datasets: &'a dyn DatasetWriter, key: &'a SigningKey, max: u64) -> Restore<'a> {
    Restore {
        datasets,
        repo: REPO,
        key,
        now_epoch: time::OffsetDateTime::now_utc().unix_timestamp(),
        max_database_bytes: max,
        named: None,
    }
}

/// A snapshot signed with `key` (the arena's, or an attacker's guess).
fn signed(key: &SigningKey, taken: &str, schema: i64, bytes: &[u8]) -> domain::backup::Snapshot {
    let signature = backup::sign(key, &domain::backup::signed_name(taken, schema), bytes);
    domain::backup::Snapshot { taken: taken.into(), schema, signature }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// The stamp of a time `secs` from now.
fn stamp_in(secs: i64) -> String {
    let t = time::OffsetDateTime::now_utc() + time::Duration::seconds(secs);
    domain::backup::stamp(&t.format(&time::format_description::well_known::Rfc3339).unwrap()).unwrap()
}

fn skipped_of(restored: &Restored) -> &[String] {
    match restored {
        Restored::From { skipped, .. } => skipped,
        Restored::Empty => &[],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_go_up_when_the_database_changed_and_a_restore_takes_the_newest_verified_one() {
    let app = TestApp::new(Backend::Sqlite).await;
    let b = backups(&app, 2);
    post(&app, ALICE, "alice-backup-1").await;
    let first = backup::turn::once(&app.state, &b).await.unwrap().expect("a first snapshot");
    assert_eq!(first.schema, backup::known_schema());
    assert_eq!(backup::turn::once(&app.state, &b).await.unwrap(), None, "nothing changed");
    let view = b.view();
    assert_eq!(view.snapshot.as_deref(), Some(first.path().as_str()));
    assert!(view.last_ok_at.is_some() && view.last_error.is_none() && view.revision.is_some());
    let mut taken = vec![first];
    for i in 2..=3 {
        // One snapshot a second at most is named apart.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        post(&app, ALICE, &format!("alice-backup-{i}")).await;
        taken.push(backup::turn::once(&app.state, &b).await.unwrap().expect("a changed database"));
    }
    // Two kept: the oldest was deleted in the commit that added the newest.
    assert_eq!(listed(&app).await, [taken[1].path(), taken[2].path()]);

    // A restore takes the newest: its file holds every message.
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("arena.sqlite");
    let datasets = app.state.deps.datasets.clone();
    let k = key();
    let restored = backup::restore(&restore(datasets.as_ref(), &k, 1 << 30), &target).await.unwrap();
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

    // What someone who can write the dataset but lacks the key can do: a genuine snapshot's bytes
    // altered under a name signed with another key, as the newest; a genuine one re-stamped in the
    // future; an unsigned one from a newer schema. All passed over, each named.
    let genuine = datasets.read(REPO, "main", &taken[2].path(), 1 << 30).await.unwrap();
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(genuine.as_slice()).read_to_end(&mut raw).unwrap();
    let altered = gzip(&[&raw[..raw.len() - 16], &[0u8; 16]].concat());
    let forger = SigningKey::new(&Secret("an-attackers-guess-of-the-key-000000".into())).unwrap();
    let forged = signed(&forger, &stamp_in(60), backup::known_schema(), &altered);
    let restamped = domain::backup::Snapshot {
        taken: "29991231T235959Z".into(),
        ..signed(&k, "29991231T235959Z", backup::known_schema(), &genuine)
    };
    let newer = signed(&forger, &stamp_in(30), backup::known_schema() + 1, &genuine);
    datasets
        .commit(
            REPO,
            "not the arena's",
            &[(forged.path(), altered), (restamped.path(), genuine.clone()), (newer.path(), genuine.clone())],
        )
        .await
        .unwrap();
    let restored = backup::restore(&restore(datasets.as_ref(), &k, 1 << 30), &target).await.unwrap();
    assert!(matches!(&restored, Restored::From { path, .. } if *path == taken[2].path()), "{restored:?}");
    let skipped = skipped_of(&restored).join("\n");
    assert!(skipped.contains(&format!("{}: its signature is not the arena's", forged.path())), "{skipped}");
    assert!(skipped.contains(&format!("{}: its signature is not the arena's", newer.path())), "{skipped}");
    assert!(
        skipped.contains(&format!("{}: stamped 29991231T235959Z, later than the clock", restamped.path()))
    );
    // The next upload prunes what is stamped in the future: it can never be the arena's.
    post(&app, ALICE, "alice-backup-4").await;
    let fourth = backup::turn::once(&app.state, &b).await.unwrap().unwrap();
    assert!(!listed(&app).await.contains(&restamped.path()), "a future-dated file is pruned");
    assert!(listed(&app).await.contains(&fourth.path()));

    // A verified snapshot from a newer schema stops the restore, naming it.
    let newest = signed(&k, &stamp_in(90), backup::known_schema() + 1, &genuine);
    datasets.commit(REPO, "from a newer build", &[(newest.path(), genuine)]).await.unwrap();
    let e = backup::restore(&restore(datasets.as_ref(), &k, 1 << 30), &target).await.unwrap_err().to_string();
    assert!(e.contains("newer than this build's"), "{e}");
    app.finish().await;
}

/// Whoever can write the backup dataset cannot roll the database back by deleting (or altering)
/// the newest snapshots: the history still names the newest one the arena signed, and a restore
/// that would go back past it stops. An editor may restore an older one on purpose, by name,
/// from `main` or from the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_by_deletion_stops_the_restore() {
    let app = TestApp::new(Backend::Sqlite).await;
    let b = backups(&app, 5);
    post(&app, ALICE, "rollback-1").await;
    let first = backup::turn::once(&app.state, &b).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    post(&app, ALICE, "rollback-2").await;
    let second = backup::turn::once(&app.state, &b).await.unwrap().unwrap();
    let datasets = app.state.deps.datasets.clone();
    let k = key();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("arena.sqlite");
    // A forged title naming a newer snapshot, with no bytes the arena signed, changes nothing.
    let fake = signed(
        &SigningKey::new(&Secret("an-attackers-guess-of-the-key-000000".into())).unwrap(),
        &stamp_in(20),
        backup::known_schema(),
        b"x",
    );
    let readme = [("README.md".to_string(), b"not a backup".to_vec())];
    datasets.commit(REPO, &format!("Back up the arena's database: {}", fake.path()), &readme).await.unwrap();
    // The newest deleted: the restore would take the one before it.
    datasets.commit_changes(REPO, "tidy up", &[], &[second.path()]).await.unwrap();
    assert_eq!(listed(&app).await, [first.path()]);
    let e = backup::restore(&restore(datasets.as_ref(), &k, 1 << 30), &target).await.unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("no longer offers its newest snapshot") && e.contains(&second.path()), "{e}");
    assert!(!target.exists(), "nothing was put in place");
    // Every snapshot deleted: the same.
    datasets.commit_changes(REPO, "empty it", &[], &[first.path()]).await.unwrap();
    let e = format!(
        "{:#}",
        backup::restore(&restore(datasets.as_ref(), &k, 1 << 30), &target).await.unwrap_err()
    );
    assert!(e.contains(&second.path()), "{e}");
    // An editor names one: restored from the history, whatever is newer.
    for named in [&first, &second] {
        let path = named.path();
        let r = Restore { named: Some(&path), ..restore(datasets.as_ref(), &k, 1 << 30) };
        let restored = backup::restore(&r, &target).await.unwrap();
        assert!(matches!(&restored, Restored::From { path: p, .. } if *p == path), "{restored:?}");
        std::fs::remove_file(&target).unwrap();
    }
    app.finish().await;
}

/// A gzip bomb signed with the arena's key (a stolen key, or a bug) is refused within the bound
/// without filling the disk; the snapshot before it is restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_bomb_is_refused_within_its_bound() {
    let app = TestApp::new(Backend::Sqlite).await;
    let b = backups(&app, 5);
    post(&app, ALICE, "alice-bomb-1").await;
    let good = backup::turn::once(&app.state, &b).await.unwrap().unwrap();
    let k = key();
    // 256 MiB of zeros after a SQLite header: about 256 KB compressed.
    let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    bomb.write_all(b"SQLite format 3\0").unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..256 {
        bomb.write_all(&zeros).unwrap();
    }
    let bomb = bomb.finish().unwrap();
    let snap = signed(&k, &stamp_in(30), backup::known_schema(), &bomb);
    app.state.deps.datasets.commit(REPO, "a bomb", &[(snap.path(), bomb)]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("arena.sqlite");
    let started = Instant::now();
    let restored =
        backup::restore(&restore(app.state.deps.datasets.as_ref(), &k, 16 << 20), &target).await.unwrap();
    assert!(matches!(&restored, Restored::From { path, .. } if *path == good.path()), "{restored:?}");
    let skipped = skipped_of(&restored).join("\n");
    assert!(skipped.contains("decompresses past the database's bound of 16777216 bytes"), "{skipped}");
    assert!(!dir.path().join("arena.sqlite.restoring").exists(), "the bomb's staged file is gone");
    println!("the bomb was refused in {:?}", started.elapsed());
    app.finish().await;
}

/// A dataset that cannot be read stops the start: a 503 or a timeout on the newest snapshot never
/// falls back to an older one, and neither a missing nor a public dataset starts on empty data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_that_cannot_read_the_dataset_stops_rather_than_start_on_older_data() {
    let app = TestApp::new(Backend::Sqlite).await;
    let b = backups(&app, 5);
    post(&app, ALICE, "alice-stop-1").await;
    backup::turn::once(&app.state, &b).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    post(&app, ALICE, "alice-stop-2").await;
    backup::turn::once(&app.state, &b).await.unwrap().unwrap();
    let k = key();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("arena.sqlite");
    // HF answers 503 to the first read of a snapshot (the newest), then would answer again.
    app.hub.set_faults(standin::Faults {
        status: Some(503),
        count: Some(1),
        path_contains: Some("/resolve/".into()),
        ..Default::default()
    });
    let e =
        backup::restore(&restore(app.state.deps.datasets.as_ref(), &k, 1 << 30), &target).await.unwrap_err();
    assert!(e.to_string().contains("could not be read") && e.to_string().contains("not starting"), "{e}");
    assert!(!target.exists(), "nothing older was restored");
    // The same with a read that takes longer than the client waits.
    let slow = server::ports::datasets::HfDatasetWriter::with_timeout(
        &app.hub_url,
        Some(Secret(ARENA_BOT.into())),
        Duration::from_secs(2),
    );
    app.hub.set_faults(standin::Faults {
        slow_ms: 5_000,
        count: Some(1),
        path_contains: Some("/resolve/".into()),
        ..Default::default()
    });
    let e = backup::restore(&restore(&slow, &k, 1 << 30), &target).await.unwrap_err();
    assert!(e.to_string().contains("could not be read"), "{e}");
    assert!(!target.exists(), "nothing older was restored");
    app.hub.set_faults(standin::Faults::default());
    // A repository that is not there (or that the token cannot read) stops the start too.
    let missing = Restore {
        repo: "benchflow/no-backups-here",
        ..restore(app.state.deps.datasets.as_ref(), &k, 1 << 30)
    };
    let e = backup::restore(&missing, &target).await.unwrap_err().to_string();
    assert!(e.contains("is not there") && e.contains("unset ARENA_BACKUP_REPO"), "{e}");
    // A public one is refused: every snapshot would be published.
    let public = "benchflow/public-backups";
    let client = reqwest::Client::new();
    let made = client
        .post(format!("{}/api/repos/create", app.hub_url))
        .bearer_auth(ARENA_BOT)
        .json(&json!({"name": "public-backups", "organization": "benchflow", "type": "dataset", "private": false}))
        .send()
        .await
        .unwrap();
    assert!(made.status().is_success(), "{}", made.text().await.unwrap());
    let e = backup::restore(
        &Restore { repo: public, ..restore(app.state.deps.datasets.as_ref(), &k, 1 << 30) },
        &target,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("is public"), "{e}");
    // With HF answering again, the newest is restored.
    let restored =
        backup::restore(&restore(app.state.deps.datasets.as_ref(), &k, 1 << 30), &target).await.unwrap();
    assert!(matches!(restored, Restored::From { .. }), "{restored:?}");
    app.finish().await;
}

/// A snapshot read table by table holds no session and no sign-in hand-off, though the live
/// database holds both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_holds_no_sessions() {
    let app = TestApp::new(Backend::Sqlite).await;
    let (cookie, _) = crate::session::sign_in(&app, "alice").await;
    let session_id = cookie.split_once('=').unwrap().1.to_string();
    app.exec("INSERT INTO auth_handoffs (code_hash, user_json, expires_epoch) VALUES ('handoff-hash-secret', '{\"name\":\"alice\"}', 4102444800)")
        .await
        .unwrap();
    assert!(app.scalar("SELECT COUNT(*) FROM tower_sessions").await > 0);
    let (bytes, _) = backup::snapshot(&app.state.db, &app.data_dir().join("arena.sqlite")).await.unwrap();
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes.as_slice()).read_to_end(&mut raw).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("snapshot.sqlite");
    std::fs::write(&copy, &raw).unwrap();
    // Not a byte of either anywhere in the file, freed pages included.
    let text = String::from_utf8_lossy(&raw);
    assert!(!text.contains(&session_id) && !text.contains("handoff-hash-secret"));
    let db = server::db::Db::connect(&format!("sqlite://{}", copy.display())).await.unwrap();
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert!(tables.iter().any(|t| t == "messages") && tables.iter().any(|t| t == "runs"), "{tables:?}");
    let mut kept = 0;
    for table in &tables {
        let rows: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM \"{table}\""))
            .fetch_one(&db.pool)
            .await
            .unwrap();
        if backup::SECRET_TABLES.contains(&table.as_str()) {
            assert_eq!(rows, 0, "{table} holds rows in the snapshot");
        } else {
            kept += rows;
        }
    }
    assert!(kept > 0, "the rest of the database is there");
    db.pool.close().await;
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
    let snap = backup::turn::once(&app.state, &b).await.unwrap().unwrap();
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

/// A snapshot over 10 MB goes through LFS in parts (the Hub refuses such a file inline) and is
/// restored whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_over_ten_megabytes_goes_through_lfs_and_comes_back() {
    let app = TestApp::new(Backend::Sqlite).await;
    let b = backups(&app, 3);
    post(&app, ALICE, "alice-large-1").await;
    // 12 MB that gzip cannot shrink, beside the arena's own rows.
    app.exec("CREATE TABLE filler (b BLOB)").await.unwrap();
    app.exec(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12) \
         INSERT INTO filler SELECT randomblob(1000000) FROM n",
    )
    .await
    .unwrap();
    let snap = backup::turn::once(&app.state, &b).await.unwrap().expect("a snapshot");
    let stored = app.state.deps.datasets.read(REPO, "main", &snap.path(), 1 << 30).await.unwrap();
    assert!(stored.len() > 10_000_000, "{} bytes", stored.len());
    let tree = app.hub_tree(REPO, "main/backups").await;
    assert!(
        tree.iter().any(|i| i["path"] == snap.path().as_str() && i["lfs"]["size"] == stored.len()),
        "{tree:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("arena.sqlite");
    let k = key();
    let restored =
        backup::restore(&restore(app.state.deps.datasets.as_ref(), &k, 1 << 30), &target).await.unwrap();
    assert!(matches!(&restored, Restored::From { path, .. } if *path == snap.path()), "{restored:?}");
    let db = server::db::Db::connect(&format!("sqlite://{}", target.display())).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM filler WHERE length(b) = 1000000")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(n, 12);
    db.pool.close().await;
    app.finish().await;
}
