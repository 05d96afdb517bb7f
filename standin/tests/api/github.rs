use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::harness::{header, Fixture, BINARY, MANY};

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[tokio::test]
async fn commits_resolve_refs() {
    let f = Fixture::start().await;
    let main = f.rev("main");
    let resp = f.get("/repos/octo/repo/commits/main").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-ratelimit-limit"), "60");
    assert_eq!(header(&resp, "x-ratelimit-remaining"), "59");
    assert_eq!(header(&resp, "x-ratelimit-used"), "1");
    assert_eq!(header(&resp, "x-ratelimit-resource"), "core");
    let reset: u64 = header(&resp, "x-ratelimit-reset").parse().unwrap();
    assert!(reset > now_s() && reset <= now_s() + 3600);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["sha"], main);
    assert_eq!(body["commit"]["message"], "First tasks\n\nWith a body.");
    assert_eq!(body["commit"]["tree"]["sha"], f.rev("main^{tree}"));
    assert_eq!(body["commit"]["author"]["date"], "2026-01-02T03:04:05Z");
    assert_eq!(f.json("/repos/octo/repo/commits/v1").await["sha"], main);
    assert_eq!(f.json(&format!("/repos/octo/repo/commits/{}", &main[..12])).await["sha"], main);
    let branch = f.json("/repos/octo/repo/commits/origin/feature/x").await;
    assert_eq!(branch["sha"], f.rev("feature/x"));
    assert_eq!(branch["parents"], json!([{"sha": main}]));

    let unknown = f.get("/repos/octo/repo/commits/nope").await;
    assert_eq!(unknown.status(), 422);
    assert!(unknown.headers().contains_key("x-ratelimit-remaining"));
    assert_eq!(unknown.json::<Value>().await.unwrap()["message"], "No commit found for SHA: nope");
    for path in [
        "/repos/octo/missing/commits/main",
        "/repos/octo/hidden/commits/main",
        "/repos/..%2Focto/repo/commits/main",
    ] {
        let resp = f.get(path).await;
        assert_eq!(resp.status(), 404, "{path}");
        assert_eq!(resp.json::<Value>().await.unwrap()["message"], "Not Found");
    }
}

#[tokio::test]
async fn trees_list_modes_and_sizes() {
    let f = Fixture::start().await;
    let tree_id = f.rev("main^{tree}");
    let body = f.json(&format!("/repos/octo/repo/git/trees/{tree_id}?recursive=1")).await;
    assert_eq!((body["sha"].as_str(), &body["truncated"]), (Some(tree_id.as_str()), &json!(false)));
    assert!(body["url"].as_str().unwrap().ends_with(&format!("/repos/octo/repo/git/trees/{tree_id}")));
    let items = body["tree"].as_array().unwrap();
    assert_eq!(items.len(), 5 + MANY + 3);
    let item = |p: &str| items.iter().find(|i| i["path"] == p).unwrap().clone();
    assert_eq!(
        item("link"),
        json!({"path": "link", "mode": "120000", "type": "blob", "sha": f.rev("main:link"), "size": 9})
    );
    assert_eq!(item("run.sh")["mode"], "100755");
    assert_eq!(item("README.md")["mode"], "100644");
    assert_eq!(item("data/sub/b.bin")["size"], BINARY.len());
    assert_eq!(
        item("data/sub"),
        json!({"path": "data/sub", "mode": "040000", "type": "tree", "sha": f.rev("main:data/sub")})
    );

    let commit = f.json(&format!("/repos/octo/repo/git/trees/{}?recursive=1", f.rev("main"))).await;
    assert_eq!(commit["sha"], tree_id, "a commit id names its root tree");
    let top = f.json("/repos/octo/repo/git/trees/main").await;
    assert_eq!(top["tree"].as_array().unwrap().len(), 5, "without recursive, one level");
    let missing = f.get("/repos/octo/repo/git/trees/0000000000000000000000000000000000000000").await;
    assert_eq!(missing.status(), 404);
    assert_eq!(f.get("/repos/octo/hidden/git/trees/main").await.status(), 404);
}

#[tokio::test]
async fn raw_files_are_served_without_a_rate_limit() {
    let f = Fixture::start().await;
    f.put_json("/_standin/github", json!({"remaining": 0})).await;
    let main = f.rev("main");
    let resp = f.get(&format!("/raw/octo/repo/{main}/data/sub/b.bin")).await;
    assert_eq!(resp.status(), 200);
    assert!(!resp.headers().contains_key("x-ratelimit-remaining"));
    assert_eq!(resp.bytes().await.unwrap(), BINARY);
    assert_eq!(f.get("/raw/octo/repo/main/README.md").await.text().await.unwrap(), "# tasks\n");
    for path in [
        "/raw/octo/repo/main/nope",
        "/raw/octo/repo/main/data",
        "/raw/octo/repo/nope/README.md",
        "/raw/octo/hidden/main/README.md",
        "/raw/octo/repo/main/..%2F..%2Fdatasets%2Facme%2Ftasks%2FREADME.md",
    ] {
        let resp = f.get(path).await;
        assert_eq!(resp.status(), 404, "{path}");
        assert_eq!(resp.text().await.unwrap(), "404: Not Found");
    }
}

#[tokio::test]
async fn the_api_rate_limit_is_shared_and_resets() {
    let f = Fixture::start().await;
    let state = f.put_json("/_standin/github", json!({"rate_limit": 3})).await;
    assert_eq!((state["rate_limit"].as_u64(), state["remaining"].as_u64()), (Some(3), Some(3)));
    for (i, path) in [
        "/repos/octo/repo/commits/main",
        "/repos/octo/repo/git/trees/main",
        "/repos/octo/missing/commits/main",
    ]
    .iter()
    .enumerate()
    {
        let resp = f.get(path).await;
        assert_eq!(header(&resp, "x-ratelimit-remaining"), (2 - i).to_string(), "{path}");
    }
    let limited = f.get("/repos/octo/repo/commits/main").await;
    assert_eq!(limited.status(), 403);
    assert_eq!(header(&limited, "x-ratelimit-remaining"), "0");
    assert_eq!(header(&limited, "x-ratelimit-used"), "3");
    let reset: u64 = header(&limited, "x-ratelimit-reset").parse().unwrap();
    assert!(reset >= now_s() + 3590);
    let body: Value = limited.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().starts_with("API rate limit exceeded for 127.0.0.1."),
        "{body}"
    );
    assert!(body["documentation_url"].is_string());
    assert_eq!(f.json("/_standin/github").await["remaining"], 0);

    // A window that ends in three seconds (whole seconds, as GitHub's: one would end at the next
    // second's turn, which a slow request can cross): spent now, open again after the reset.
    f.put_json("/_standin/github", json!({"remaining": 0, "reset_in_s": 3})).await;
    assert_eq!(f.get("/repos/octo/repo/commits/main").await.status(), 403);
    tokio::time::sleep(std::time::Duration::from_millis(4100)).await;
    let fresh = f.get("/repos/octo/repo/commits/main").await;
    assert_eq!(fresh.status(), 200);
    assert_eq!(header(&fresh, "x-ratelimit-remaining"), "2");

    let restored: Value =
        f.client.delete(format!("{}/_standin/github", f.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!((restored["rate_limit"].as_u64(), restored["remaining"].as_u64()), (Some(60), Some(60)));
}

#[tokio::test]
async fn the_configured_limit_applies_from_the_start() {
    let f = Fixture::start_with(|hub| hub.with_github_rate_limit(1)).await;
    assert_eq!(f.get("/repos/octo/repo/commits/main").await.status(), 200);
    assert_eq!(f.get("/repos/octo/repo/commits/main").await.status(), 403);
    let state = f.hub.github_rate_limit();
    assert_eq!((state.rate_limit, state.remaining, state.used), (1, 0, 1));
    f.put_json("/_standin/faults", json!({"status": 502, "count": 1})).await;
    assert_eq!(
        f.get("/repos/octo/repo/commits/main").await.status(),
        502,
        "faults come before the rate limit"
    );
}
