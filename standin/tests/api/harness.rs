//! A stand-in on a free loopback port serving a temporary tree of git repositories:
//!
//! - `datasets/acme/tasks`: a work tree with `main` (tagged `v1`) and `feature/x` one commit ahead;
//!   files include a binary, an executable, a symlink and `many/` with 25 files for paging.
//! - `datasets/acme/bare`: a bare clone of it; `datasets/acme/secret` (private), `datasets/acme/gated`
//!   (gated), `datasets/acme/plain` (a directory that is not a repository).
//! - `github/octo/repo` (a clone) and `github/octo/hidden` (private).

use std::path::{Path, PathBuf};
use std::process::Command;

use standin::{Faults, Hub, OAuthApp, SharedHub};

pub const BINARY: &[u8] = b"\x00\x01\xffbinary\x00bytes\n";
pub const MANY: usize = 25;

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@localhost", "-c", "init.defaultBranch=main"])
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_DATE", "2026-01-02T03:04:05Z")
        .env("GIT_COMMITTER_DATE", "2026-01-02T03:04:05Z")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn write(root: &Path, path: &str, bytes: &[u8]) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

fn make_repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    write(dir, "README.md", b"# tasks\n");
    write(dir, "data/a.txt", b"alpha\n");
    write(dir, "data/sub/b.bin", BINARY);
    write(dir, "run.sh", b"#!/bin/sh\necho hi\n");
    for i in 0..MANY {
        write(dir, &format!("many/f{i:02}.txt"), format!("file {i}\n").as_bytes());
    }
    std::os::unix::fs::symlink("README.md", dir.join("link")).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["update-index", "--chmod=+x", "run.sh"]);
    git(dir, &["commit", "-q", "-m", "First tasks\n\nWith a body."]);
    git(dir, &["tag", "v1"]);
    git(dir, &["checkout", "-q", "-b", "feature/x"]);
    write(dir, "new.txt", b"only on the branch\n");
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "Add new.txt"]);
    git(dir, &["checkout", "-q", "main"]);
}

pub struct Fixture {
    pub url: String,
    pub hub: SharedHub,
    pub client: reqwest::Client,
    pub root: PathBuf,
    _dir: tempfile::TempDir,
}

impl Fixture {
    pub async fn start() -> Fixture {
        Fixture::start_with(|hub| hub).await
    }

    /// Starts a stand-in with extra settings (`Hub::with_*`) on the hub.
    pub async fn start_with(configure: impl FnOnce(SharedHub) -> SharedHub) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let tasks = root.join("datasets/acme/tasks");
        make_repo(&tasks);
        let datasets = root.join("datasets/acme");
        git(&datasets, &["clone", "-q", "--bare", "tasks", "bare"]);
        for (name, visibility) in [("secret", "private"), ("gated", "gated")] {
            git(&datasets, &["clone", "-q", "tasks", name]);
            git(&datasets.join(name), &["config", "standin.visibility", visibility]);
        }
        std::fs::create_dir_all(datasets.join("plain")).unwrap();
        let github = root.join("github/octo");
        std::fs::create_dir_all(&github).unwrap();
        git(&github, &["clone", "-q", tasks.to_str().unwrap(), "repo"]);
        git(&github, &["clone", "-q", tasks.to_str().unwrap(), "hidden"]);
        git(&github.join("hidden"), &["config", "standin.visibility", "private"]);

        let hub = Hub::new(
            vec![],
            OAuthApp { client_id: "test".into(), client_secret: "test-secret".into() },
            Faults::default(),
        )
        .with_repos(root.clone());
        let hub = configure(hub);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(standin::serve(listener, hub.clone()));
        Fixture { url, hub, client: reqwest::Client::new(), root, _dir: dir }
    }

    pub fn tasks(&self) -> PathBuf {
        self.root.join("datasets/acme/tasks")
    }

    /// `git rev-parse` in the dataset work tree.
    pub fn rev(&self, spec: &str) -> String {
        git(&self.tasks(), &["rev-parse", spec])
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(format!("{}{path}", self.url)).send().await.unwrap()
    }

    pub async fn json(&self, path: &str) -> serde_json::Value {
        let resp = self.get(path).await;
        assert_eq!(resp.status(), 200, "{path}");
        resp.json().await.unwrap()
    }

    pub async fn put_json(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        let resp = self.client.put(format!("{}{path}", self.url)).json(&body).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        resp.json().await.unwrap()
    }
}

pub fn header<'a>(resp: &'a reqwest::Response, name: &str) -> &'a str {
    resp.headers().get(name).map(|v| v.to_str().unwrap()).unwrap_or_else(|| panic!("no {name} header"))
}
