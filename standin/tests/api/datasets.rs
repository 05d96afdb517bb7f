use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{git, header, Fixture, BINARY, MANY};

fn paths(items: &Value) -> Vec<String> {
    items.as_array().unwrap().iter().map(|i| i["path"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn revisions_resolve_to_commits() {
    let f = Fixture::start().await;
    let main = f.rev("main");
    let branch = f.rev("feature/x");
    let info = f.json("/api/datasets/acme/tasks/revision/main").await;
    assert_eq!(info["id"], "acme/tasks");
    assert_eq!(info["sha"], main);
    assert_eq!((info["private"].clone(), info["gated"].clone()), (json!(false), json!(false)));
    assert_eq!(info["lastModified"], "2026-01-02T03:04:05.000Z");
    let siblings: Vec<&str> =
        info["siblings"].as_array().unwrap().iter().map(|s| s["rfilename"].as_str().unwrap()).collect();
    assert!(siblings.contains(&"data/sub/b.bin") && siblings.contains(&"link"));
    assert!(!siblings.contains(&"data"), "directories are not siblings");
    assert_eq!(siblings.len(), 5 + MANY);

    assert_eq!(f.json("/api/datasets/acme/tasks").await["sha"], main);
    assert_eq!(f.json("/api/datasets/acme/tasks/revision/v1").await["sha"], main);
    assert_eq!(f.json(&format!("/api/datasets/acme/tasks/revision/{main}")).await["sha"], main);
    assert_eq!(f.json("/api/datasets/acme/tasks/revision/feature%2Fx").await["sha"], branch);
    assert_eq!(f.json("/api/datasets/acme/tasks/revision/feature/x").await["sha"], branch);
    assert_eq!(
        f.json("/api/datasets/acme/bare/revision/feature%2Fx").await["sha"],
        branch,
        "bare repositories"
    );

    let with_blobs = f.json("/api/datasets/acme/tasks/revision/main?blobs=true").await;
    let readme =
        with_blobs["siblings"].as_array().unwrap().iter().find(|s| s["rfilename"] == "README.md").unwrap();
    assert_eq!(readme["blobId"], f.rev("main:README.md"));
    assert_eq!(readme["size"], 8);
}

#[tokio::test]
async fn trees_list_one_level_or_recursively() {
    let f = Fixture::start().await;
    let top = f.json("/api/datasets/acme/tasks/tree/main").await;
    assert_eq!(paths(&top), ["README.md", "data", "link", "many", "run.sh"]);
    let data = top.as_array().unwrap().iter().find(|i| i["path"] == "data").unwrap();
    assert_eq!(data, &json!({"type": "directory", "oid": f.rev("main:data"), "size": 0, "path": "data"}));
    let readme = top.as_array().unwrap().iter().find(|i| i["path"] == "README.md").unwrap();
    assert_eq!(
        readme,
        &json!({"type": "file", "oid": f.rev("main:README.md"), "size": 8, "path": "README.md"})
    );

    for q in ["recursive=true", "recursive=True", "recursive=1"] {
        let all = f.json(&format!("/api/datasets/acme/tasks/tree/main?{q}&expand=false")).await;
        assert_eq!(all.as_array().unwrap().len(), 5 + MANY + 3, "{q}: files and the three directories");
    }
    let sub = f.json("/api/datasets/acme/tasks/tree/main/data?recursive=true").await;
    assert_eq!(paths(&sub), ["data/a.txt", "data/sub", "data/sub/b.bin"]);
    let b = &sub.as_array().unwrap()[2];
    assert_eq!(
        (b["oid"].as_str().unwrap(), b["size"].as_u64()),
        (f.rev("main:data/sub/b.bin").as_str(), Some(BINARY.len() as u64))
    );
    assert_eq!(paths(&f.json("/api/datasets/acme/tasks/tree/main/data").await), ["data/a.txt", "data/sub"]);
    assert_eq!(paths(&f.json("/api/datasets/acme/tasks/tree/v1/data%2Fsub").await), ["data/sub/b.bin"]);
    assert!(
        paths(&f.json("/api/datasets/acme/tasks/tree/feature%2Fx").await).contains(&"new.txt".to_string())
    );

    for missing in ["nope", "README.md", "data/nope"] {
        let resp = f.get(&format!("/api/datasets/acme/tasks/tree/main/{missing}")).await;
        assert_eq!(resp.status(), 404, "{missing}");
        assert_eq!(header(&resp, "x-error-code"), "EntryNotFound");
    }
}

#[tokio::test]
async fn tree_listings_are_paged_with_link_headers() {
    let f = Fixture::start().await;
    let whole = f.json("/api/datasets/acme/tasks/tree/main?recursive=true").await;
    let mut next = Some(format!("{}/api/datasets/acme/tasks/tree/main?recursive=true&limit=4", f.url));
    let (mut seen, mut pages) = (Vec::new(), 0);
    while let Some(url) = next.take() {
        let resp = f.client.get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        next = resp.headers().get("link").map(|l| {
            let l = l.to_str().unwrap();
            assert!(l.starts_with(&format!("<{}/api/datasets/acme/tasks/tree/main?", f.url)), "{l}");
            assert!(
                l.ends_with(">; rel=\"next\"") && l.contains("limit=4") && l.contains("recursive=true"),
                "{l}"
            );
            l[1..l.find('>').unwrap()].to_string()
        });
        let page: Value = resp.json().await.unwrap();
        assert!(page.as_array().unwrap().len() <= 4);
        seen.extend(page.as_array().unwrap().iter().cloned());
        pages += 1;
    }
    assert_eq!(Value::Array(seen), whole);
    assert_eq!(pages, whole.as_array().unwrap().len().div_ceil(4));
    assert_eq!(f.get("/api/datasets/acme/tasks/tree/main?cursor=zz").await.status(), 400);

    // The configured page size applies when the request names none.
    let small = Fixture::start_with(|hub| hub.with_tree_page_size(10)).await;
    let first = small.get("/api/datasets/acme/tasks/tree/main/many").await;
    assert!(header(&first, "link").contains("cursor=10"));
    assert_eq!(first.json::<Value>().await.unwrap().as_array().unwrap().len(), 10);
    let last = small.get("/api/datasets/acme/tasks/tree/main/many?cursor=20").await;
    assert!(!last.headers().contains_key("link"));
    assert_eq!(last.json::<Value>().await.unwrap().as_array().unwrap().len(), MANY - 20);
}

#[tokio::test]
async fn files_resolve_with_commit_and_etag() {
    let f = Fixture::start().await;
    let main = f.rev("main");
    let blob = f.rev("main:data/sub/b.bin");
    for rev in ["main", "v1", main.as_str()] {
        let resp = f.get(&format!("/datasets/acme/tasks/resolve/{rev}/data/sub/b.bin")).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(header(&resp, "x-repo-commit"), main);
        assert_eq!(header(&resp, "etag"), format!("\"{blob}\""));
        assert_eq!(header(&resp, "content-type"), "application/octet-stream");
        assert_eq!(header(&resp, "content-length"), BINARY.len().to_string());
        assert_eq!(resp.bytes().await.unwrap(), BINARY);
    }
    let head =
        f.client.head(format!("{}/datasets/acme/tasks/resolve/main/run.sh", f.url)).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(header(&head, "content-length"), "18");
    assert_eq!(header(&head, "etag"), format!("\"{}\"", f.rev("main:run.sh")));
    assert_eq!(header(&head, "x-repo-commit"), main);
    let branch = f.get("/datasets/acme/tasks/resolve/feature%2Fx/new.txt").await;
    assert_eq!(header(&branch, "x-repo-commit"), f.rev("feature/x"));
    assert_eq!(branch.text().await.unwrap(), "only on the branch\n");
    let link = f.get("/datasets/acme/tasks/resolve/main/link").await;
    assert_eq!(link.text().await.unwrap(), "README.md", "a symlink is served as its target path");
    let bare = f.get("/datasets/acme/bare/resolve/main/data/a.txt").await;
    assert_eq!(bare.text().await.unwrap(), "alpha\n");

    for missing in ["nope.txt", "data", "new.txt"] {
        let resp = f.get(&format!("/datasets/acme/tasks/resolve/main/{missing}")).await;
        assert_eq!(resp.status(), 404, "{missing}");
        assert_eq!(header(&resp, "x-error-code"), "EntryNotFound");
    }
}

async fn assert_error(f: &Fixture, path: &str, status: u16, code: &str) -> Value {
    let resp = f.get(path).await;
    assert_eq!(resp.status(), status, "{path}");
    assert_eq!(header(&resp, "x-error-code"), code, "{path}");
    let body: Value = resp.json().await.unwrap();
    assert!(body["error"].is_string(), "{path}: {body}");
    body
}

#[tokio::test]
async fn errors_are_hf_shaped() {
    let f = Fixture::start().await;
    for path in [
        "/api/datasets/acme/missing",
        "/api/datasets/nobody/tasks/revision/main",
        "/api/datasets/acme/plain/revision/main",
        "/datasets/acme/missing/resolve/main/README.md",
        "/api/datasets/..%2Facme/tasks",
        "/api/datasets/acme/..%2Ftasks/revision/main",
        "/api/datasets/acme/.git/revision/main",
    ] {
        assert_error(&f, path, 404, "RepoNotFound").await;
    }
    for rev in [
        "nope",
        "-h",
        "--output=x",
        "main~1",
        "main%5E",
        "%3A%2FFirst",
        "HEAD%40%7B0%7D",
        "0000000000000000000000000000000000000000",
    ] {
        assert_error(&f, &format!("/api/datasets/acme/tasks/revision/{rev}"), 404, "RevisionNotFound").await;
        assert_error(&f, &format!("/datasets/acme/tasks/resolve/{rev}/README.md"), 404, "RevisionNotFound")
            .await;
    }
    let private = assert_error(&f, "/api/datasets/acme/secret/revision/main", 401, "RepoNotFound").await;
    assert_eq!(private["error"], "Repository not found or private");
    assert_error(&f, "/datasets/acme/secret/resolve/main/README.md", 401, "RepoNotFound").await;
    assert_error(&f, "/api/datasets/acme/gated/tree/main", 403, "GatedRepo").await;
    assert_error(&f, "/datasets/acme/gated/resolve/main/README.md", 403, "GatedRepo").await;

    for path in [
        "..%2F..%2Fconfig",
        "data%2F..%2F..%2Fsecret%2FREADME.md",
        "%2Fetc%2Fpasswd",
        "data//a.txt",
        "data%2F.%2Fa.txt",
    ] {
        let resp = f.get(&format!("/datasets/acme/tasks/resolve/main/{path}")).await;
        assert_eq!(resp.status(), 400, "{path}");
        let resp = f.get(&format!("/api/datasets/acme/tasks/tree/main/{path}")).await;
        assert_eq!(resp.status(), 400, "{path}");
    }
}

#[tokio::test]
async fn visibility_follows_git_config_changes() {
    let f = Fixture::start().await;
    assert_eq!(f.get("/api/datasets/acme/tasks").await.status(), 200);
    git(&f.tasks(), &["config", "standin.visibility", "private"]);
    assert_eq!(f.get("/api/datasets/acme/tasks").await.status(), 401);
    git(&f.tasks(), &["config", "--unset", "standin.visibility"]);
    assert_eq!(f.get("/api/datasets/acme/tasks").await.status(), 200);
}

#[tokio::test]
async fn faults_and_stats_cover_dataset_routes() {
    let f = Fixture::start().await;
    f.put_json("/_standin/faults", json!({"status": 503, "retry_after_s": 2, "count": 1})).await;
    let failing = f.get("/datasets/acme/tasks/resolve/main/README.md").await;
    assert_eq!(failing.status(), 503);
    assert_eq!(header(&failing, "retry-after"), "2");
    assert_eq!(f.get("/datasets/acme/tasks/resolve/main/README.md").await.status(), 200);

    f.put_json("/_standin/faults", json!({"slow_ms": 150})).await;
    let started = Instant::now();
    assert_eq!(f.get("/api/datasets/acme/tasks/tree/main").await.status(), 200);
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(f.get("/api/datasets/acme/tasks").await.status(), 200);
    assert!(started.elapsed() >= Duration::from_millis(300), "slow_ms without count stays on");
    f.client.delete(format!("{}/_standin/faults", f.url)).send().await.unwrap();

    f.put_json("/_standin/faults", json!({"drop_connection": true, "count": 1})).await;
    let dropped = match f.client.get(format!("{}/api/datasets/acme/tasks", f.url)).send().await {
        Err(_) => true,
        Ok(resp) => resp.bytes().await.is_err(),
    };
    assert!(dropped, "the connection is dropped");
    f.get("/raw/octo/repo/main/README.md").await;
    f.get("/repos/octo/repo/commits/main").await;

    let stats = f.json("/_standin/stats").await;
    assert_eq!(stats["dataset_file_requests"], 2);
    assert_eq!(stats["dataset_api_requests"], 3);
    assert_eq!(stats["github_raw_requests"], 1);
    assert_eq!(stats["github_api_requests"], 1);
    assert_eq!(stats["whoami_calls"], 0);
    f.client.delete(format!("{}/_standin/stats", f.url)).send().await.unwrap();
    assert_eq!(f.json("/_standin/stats").await["dataset_api_requests"], 0);
}
