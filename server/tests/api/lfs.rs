//! Binary and large files travel as the Hub stores them: the writer asks `preupload`, uploads to
//! LFS (basic and multipart), commits `lfsFile` operations, and reads them back through the
//! storage redirect; the stand-in refuses what the Hub refuses.

use crate::harness::{Backend, TestApp, ARENA_BOT};

const REPO: &str = "benchflow/lfs-check";

/// Bytes that are not text, of any length (a fixed pattern: reproducible).
fn binary(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_and_large_files_go_through_lfs_and_read_back_whole() {
    let app = TestApp::new(Backend::Sqlite).await;
    let datasets = app.state.deps.datasets.clone();
    datasets.ensure(REPO).await.unwrap();
    let mut fooled = b"a text header the Hub's 512-byte sample reads as text. ".repeat(12);
    fooled.extend(binary(4096, 7));
    let mut pdf = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec();
    pdf.extend(binary(2 << 20, 3));
    let files: Vec<(String, Vec<u8>)> = vec![
        ("tasks/a/data.csv".into(), b"item,total\nlunch,12.50\n".to_vec()),
        ("tasks/a/chart.png".into(), [b"\x89PNG\r\n\x1a\n".to_vec(), binary(3000, 1)].concat()),
        ("tasks/a/report.pdf".into(), pdf),
        ("tasks/a/notes.txt".into(), fooled),
        ("tasks/a/recording.dat".into(), binary(12 << 20, 9)),
    ];
    let commit = datasets.commit(REPO, "binary files", &files).await.unwrap();
    // Each is in the repository as the Hub keeps it: text inline, the others in LFS.
    let tree = app.hub_tree(REPO, &format!("{commit}/tasks/a")).await;
    for (path, bytes) in &files {
        let item =
            tree.iter().find(|i| i["path"] == path.as_str()).unwrap_or_else(|| panic!("{path}: {tree:?}"));
        assert_eq!(item["size"], bytes.len(), "{path}");
        if path.ends_with(".csv") {
            assert!(item.get("lfs").is_none(), "{path}: {item}");
        } else {
            assert_eq!(item["lfs"]["oid"], domain::digest::sha256_hex(bytes), "{path}: {item}");
        }
        let read = datasets.read(REPO, &commit, path, 64 << 20).await.unwrap();
        assert!(read == *bytes, "{path} read back whole");
    }
    // Sent again, nothing is uploaded twice (the objects are stored) and the commit still holds.
    datasets.commit(REPO, "the same files again", &files).await.unwrap();
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_carrying_a_binary_or_large_file_inline_is_refused_as_the_hub_refuses_it() {
    let app = TestApp::new(Backend::Sqlite).await;
    app.state.deps.datasets.ensure(REPO).await.unwrap();
    let b64 = |b: &[u8]| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(b)
    };
    let commit = |path: &str, bytes: &[u8]| {
        let body = format!(
            "{{\"key\":\"header\",\"value\":{{\"summary\":\"inline\"}}}}\n{{\"key\":\"file\",\"value\":{{\"path\":\"{path}\",\"content\":\"{}\",\"encoding\":\"base64\"}}}}\n",
            b64(bytes)
        );
        reqwest::Client::new()
            .post(format!("{}/api/datasets/{REPO}/commit/main", app.hub_url))
            .bearer_auth(ARENA_BOT)
            .header("content-type", "application/x-ndjson")
            .body(body)
            .send()
    };
    let refused = commit("chart.png", &binary(2000, 1)).await.unwrap();
    assert_eq!(refused.status(), 400);
    let message = refused.text().await.unwrap();
    assert!(message.contains("Your push was rejected because it contains binary files"), "{message}");
    assert!(message.contains("chart.png"), "{message}");
    let large = commit("big.txt", &vec![b'a'; 11 << 20]).await.unwrap();
    assert_eq!(large.status(), 400);
    assert!(large.text().await.unwrap().contains("files larger than 10 MiB"));
    assert!(commit("small.txt", b"fine").await.unwrap().status().is_success());
    app.finish().await;
}

/// The peak resident memory of this process so far (`VmHWM`), in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// What a run's mirror costs for 200 tasks with 40 MiB of binary files (205 KiB each): the
/// snapshot of the collection at its commit, then the commit into the runs dataset through LFS.
/// `dev/bench-mirror` runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: dev/bench-mirror runs it"]
async fn measure_mirror() {
    let app = TestApp::new(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let template = crate::harness::fixture("good").join("envs/expense-report");
    for i in 0..200 {
        let task = dir.path().join(format!("envs/task-{i:03}"));
        std::fs::create_dir_all(&task).unwrap();
        crate::harness::copy_tree(&template, &task);
        std::fs::create_dir_all(task.join("environment/assets")).unwrap();
        std::fs::write(task.join("environment/assets/recording.wav"), binary((40 << 20) / 200, i as u8))
            .unwrap();
    }
    std::fs::write(dir.path().join("submission.yaml"), "team_name: bench\ntrack: environments\n").unwrap();
    let commit = app.publish("datasets", "bench/office-media", dir.path());
    let source = domain::collection::request::Source {
        repo_type: domain::collection::request::RepoType::Dataset,
        owner: "bench".into(),
        name: "office-media".into(),
        revision: commit.clone(),
        entry_path: String::new(),
    };
    let before = peak_mib();
    let started = std::time::Instant::now();
    let (listing, contents) = app.state.sources.snapshot(&source, &commit).await.unwrap();
    let read = started.elapsed();
    let files: Vec<(String, Vec<u8>)> = contents
        .iter()
        .map(|(path, blob)| (format!("collections/run-bench/{path}"), blob.bytes().to_vec()))
        .collect();
    let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
    app.state.deps.datasets.ensure(crate::harness::RUNS_DATASET).await.unwrap();
    app.state.deps.datasets.commit(crate::harness::RUNS_DATASET, "bench mirror", &files).await.unwrap();
    let took = started.elapsed();
    println!(
        "BENCH mirror: {} files ({:.1} MiB) of 200 tasks read in {:.0} ms and committed through LFS in {:.0} ms more ({:.0} ms in all); peak RSS {:.0} MiB (from {:.0} MiB before)",
        listing.len(),
        bytes as f64 / (1 << 20) as f64,
        read.as_secs_f64() * 1000.0,
        (took - read).as_secs_f64() * 1000.0,
        took.as_secs_f64() * 1000.0,
        peak_mib(),
        before,
    );
    app.finish().await;
}
