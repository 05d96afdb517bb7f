//! Collections through the API: validate and submit read real git repositories served by the
//! stand-in over HF's dataset protocol and GitHub's, on both database backends.

use axum::http::{Method, StatusCode};
use base64::Engine;
use serde_json::{json, Value};

use crate::harness::{copy_tree, fixture, git, TestApp, ALICE, BOB, EVE};
use crate::on_both_backends;

fn env_json(repo_type: &str, repo_id: &str, revision: &str, title: &str) -> String {
    json!({"agent_id": null, "challenge_id": "openenv-9b", "repo_type": repo_type, "repo_id": repo_id,
        "revision": revision, "entry_path": "", "title": title, "notes": "n"})
    .to_string()
}

async fn environments_rows(app: &TestApp) -> i64 {
    app.scalar("SELECT COUNT(*) FROM environments").await
}

on_both_backends!(validates_a_dataset_and_stores_nothing, |app| {
    let commit = app.publish("datasets", "alice/pack", &fixture("good"));
    let r = app
        .post_as("/api/environments/validate", &env_json("dataset", "alice/pack", "main", "t"), ALICE)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let v = r.json();
    assert_eq!(v["valid"], true, "{v:#}");
    assert_eq!(v["tasks"], 2);
    assert_eq!(v["eligible_tasks"], 2);
    assert_eq!(v["source"]["commit"], commit);
    assert_eq!(v["quality_gates"]["static"]["version"], "gates-v4");
    assert_eq!(v["quality_gates"]["static"]["summary"]["clean"], 2);
    assert!(v["fetch"]["requests"].as_u64().unwrap() >= 3);
    let checked: Vec<&str> = v["quality_gates"]["static"]["heldout"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["suite"].as_str().unwrap())
        .collect();
    assert!(checked.contains(&"openenv-heldout"), "{checked:?}");
    assert_eq!(environments_rows(app).await, 0);

    // No identity: refused before anything is read.
    let anon = app
        .request(
            Method::POST,
            "/api/environments/validate",
            Some(&env_json("dataset", "alice/pack", "main", "t")),
        )
        .await;
    assert_eq!(anon.status, StatusCode::UNAUTHORIZED);
    assert_eq!(anon.json()["code"], "AUTH_REQUIRED");
});

// The measured attack: tasks holding many copies of one 1 MiB verifier file (git stores it once).
// Every path counts, so the collection is refused from its listing, before any file is read.
on_both_backends!(copies_of_one_large_file_are_refused_before_any_read, |app| {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("good"), dir.path());
    let line = "assert 1 + 1 == 2  # padding\n";
    let blob = line.repeat((1 << 20) / line.len());
    for task in ["contacts-dedup", "expense-report"] {
        for k in 0..25 {
            std::fs::write(dir.path().join(format!("envs/{task}/verifier/check_{k:02}.py")), &blob).unwrap();
        }
    }
    app.publish("datasets", "alice/copies", dir.path());
    let reads = app.hub.dataset_file_requests();
    let r = app
        .post_as("/api/environments/validate", &env_json("dataset", "alice/copies", "main", "t"), ALICE)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let v = r.json();
    assert_eq!(v["valid"], false, "{v:#}");
    assert_eq!(v["errors"][0]["code"], "S-COLLECTION-TOO-LARGE", "{v:#}");
    assert!(v["errors"][0]["message"].as_str().unwrap().contains("at most 48 MiB, every path counted"));
    assert_eq!(v["fetch"]["files_read"], 0);
    assert_eq!(app.hub.dataset_file_requests(), reads, "no file was read");
    let submit =
        app.post_as("/api/environments", &env_json("dataset", "alice/copies", "main", "t"), ALICE).await;
    assert_eq!(submit.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", submit.text());
    assert_eq!(environments_rows(app).await, 0);
});

// Each validation compares with the sealed suite: thirty an hour per account, then 429 with
// Retry-After; a resent pinned submission costs none, and editors are not limited.
on_both_backends!(validations_are_limited_per_account, |app| {
    let commit = app.publish("datasets", "alice/pack", &fixture("good"));
    let body = env_json("dataset", "alice/pack", "main", "t");
    let pinned = app.post_as("/api/environments", &body, ALICE).await;
    assert_eq!(pinned.status, StatusCode::CREATED, "{}", pinned.text());
    for _ in 1..30 {
        assert_eq!(app.post_as("/api/environments/validate", &body, ALICE).await.status, StatusCode::OK);
    }
    let held = app.post_as("/api/environments/validate", &body, ALICE).await;
    assert_eq!(held.status, StatusCode::TOO_MANY_REQUESTS, "{}", held.text());
    assert_eq!(held.json()["code"], "RATE_LIMITED");
    assert!(held.headers.get("retry-after").is_some());
    let again = env_json("dataset", "alice/pack", &commit, "t");
    assert_eq!(
        app.post_as("/api/environments", &again, ALICE).await.status,
        StatusCode::OK,
        "a resend is free"
    );
    assert_eq!(
        app.post_as("/api/environments/validate", &body, BOB).await.status,
        StatusCode::OK,
        "bob has his own"
    );
    for _ in 0..31 {
        assert_eq!(
            app.post_as("/api/environments/validate", &body, EVE).await.status,
            StatusCode::OK,
            "an editor"
        );
    }
});

// An account stores at most 200 collections: at the cap a new one is refused before its
// repository is read.
on_both_backends!(an_account_stores_at_most_200_collections, |app| {
    for i in 0..200 {
        app.exec(&format!(
            "INSERT INTO environments (id, author, author_id, challenge_id, track, repo_type, repo_id, revision, commit_sha, \
             entry_path, title, notes, valid, tasks, eligible_tasks, gates_version, report, created_at) VALUES \
             ('env-cap-{i:03}', 'alice', 'user-alice', 'openenv-9b', 'environments', 'dataset', 'alice/p{i}', 'main', \
             '0000000000000000000000000000000000000000', '', 't', '', 1, 2, 2, 'gates-v4', '{{}}', 't')"
        ))
        .await
        .unwrap();
    }
    app.publish("datasets", "alice/pack", &fixture("good"));
    let reads = app.hub.dataset_file_requests();
    let r = app.post_as("/api/environments", &env_json("dataset", "alice/pack", "main", "t"), ALICE).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());
    assert_eq!(r.json()["code"], "ACCOUNT_LIMIT_REACHED");
    assert_eq!(app.hub.dataset_file_requests(), reads, "nothing was read");
    let bob = app.post_as("/api/environments", &env_json("dataset", "alice/pack", "main", "t"), BOB).await;
    assert_eq!(bob.status, StatusCode::CREATED, "{}", bob.text());
});

on_both_backends!(multi_thread, submit_pins_the_commit_and_repeats_find_the_first_record, |app| {
    let commit = app.publish("datasets", "alice/pack", &fixture("good"));
    let first = app
        .post_as("/api/environments", &env_json("dataset", "alice/pack", "main", "First title"), ALICE)
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text());
    let f = first.json();
    let id = f["environment_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("env-"));
    assert_eq!(f["existing"], false);
    assert_eq!(f["pinned"]["revision"], commit);
    assert_eq!(f["environment"]["commit"], commit);

    // Again, by the pinned commit and another title: the same record, the first title.
    let again = app
        .post_as("/api/environments", &env_json("dataset", "alice/pack", &commit, "Other title"), ALICE)
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text());
    let a = again.json();
    assert_eq!(a["environment_id"], id.as_str());
    assert_eq!(a["existing"], true);
    assert_eq!(a["title"], "First title");
    assert_eq!(a["validation"]["fetch"]["requests"], 0, "a pinned retry reads nothing again");
    assert_eq!(environments_rows(app).await, 1);

    // Another author submitting the same source gets a record of their own.
    let bob =
        app.post_as("/api/environments", &env_json("dataset", "alice/pack", "main", "Bob's"), BOB).await;
    assert_eq!(bob.status, StatusCode::CREATED);
    assert_ne!(bob.json()["environment_id"], id.as_str());

    let formula = app.get("/api/formula").await.json();
    assert!(formula["collections"].as_array().unwrap().iter().any(|c| c["id"] == id.as_str()), "{formula}");
    let list = app.get("/api/environments").await.json();
    assert_eq!(list["environments"].as_array().unwrap().len(), 2);
    let one = app.get(&format!("/api/environments/{id}")).await;
    assert_eq!(one.status, StatusCode::OK);
    let identities = one.json()["validation"]["quality_gates"]["static"]["task_identity"].clone();
    assert_eq!(identities.as_object().unwrap().len(), 2);
    // The stored record carries them too, in the listing and the submit's answer.
    let listed =
        list["environments"].as_array().unwrap().iter().find(|e| e["environment_id"] == id.as_str()).unwrap();
    assert_eq!(listed["quality_gates"]["static"]["task_identity"], identities);
    assert_eq!(f["environment"]["quality_gates"]["static"]["task_identity"], identities);
    assert!(identities.as_object().unwrap().values().all(|h| h.as_str().unwrap().starts_with("sha256:")));
    let page = app.get(&format!("/api/app/submissions/{id}")).await.json();
    let pt = &page["posttrain"];
    assert!(pt["commands"][0].as_str().unwrap().contains(&commit), "{pt:#}");
    assert_eq!(pt["no_oracle"], 0);
    assert_eq!(pt["root"], false);
    assert!(pt["costs"]["note"].as_str().unwrap().contains("Not estimated"));
    // The pages are rendered on the server too: the list, and a page whose link previews as the collection.
    let arena = app.get("/arena").await.text();
    assert!(arena.contains("First title") && arena.contains(&id), "the collection is listed on /arena");
    let html = app.get(&format!("/arena/submissions/{id}")).await.text();
    assert!(html.contains(r#"property="og:title" content="First title""#), "{html}");
    assert!(html.contains("posttrain env add"));
    let missing = app.get("/api/app/submissions/env-0000000000000000").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json()["code"], "ENVIRONMENT_NOT_FOUND");
});

on_both_backends!(concurrent_submits_make_one_record, |app| {
    app.publish("datasets", "alice/pack", &fixture("good"));
    let body = env_json("dataset", "alice/pack", "main", "t");
    let answers =
        futures_util::future::join_all((0..6).map(|_| app.post_as("/api/environments", &body, ALICE))).await;
    let created = answers.iter().filter(|a| a.status == StatusCode::CREATED).count();
    assert!(
        answers.iter().all(|a| a.status.is_success()),
        "{:?}",
        answers.iter().map(|a| a.status).collect::<Vec<_>>()
    );
    assert_eq!(created, 1);
    assert_eq!(environments_rows(app).await, 1);
});

on_both_backends!(an_invalid_collection_is_not_registered, |app| {
    app.publish("datasets", "alice/copy", &fixture("heldout-near-copy"));
    let r = app.post_as("/api/environments", &env_json("dataset", "alice/copy", "main", "t"), ALICE).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
    let v = r.json();
    assert_eq!(v["code"], "VALIDATION_FAILED");
    assert_eq!(v["validation"]["valid"], false);
    let finding = &v["validation"]["quality_gates"]["static"]["findings"][0];
    assert_eq!(finding["code"], "D-PROMPT-COPY");
    // The sealed suite is no oracle: which task, and how close, are not said.
    let message = finding["message"].as_str().unwrap();
    assert!(!message.chars().any(|c| c.is_ascii_digit()), "{message}");
    assert!(message.contains("`openenv-heldout`"), "{message}");
    assert_eq!(environments_rows(app).await, 0);
});

#[tokio::test]
async fn sources_answer_distinct_errors() {
    let app = TestApp::new(crate::harness::Backend::Sqlite).await;
    app.publish("datasets", "alice/pack", &fixture("good"));
    app.publish("datasets", "alice/secret", &fixture("good"));
    git(&app.repos.join("datasets/alice/secret"), &["config", "standin.visibility", "private"]);
    app.publish("datasets", "alice/gated", &fixture("good"));
    git(&app.repos.join("datasets/alice/gated"), &["config", "standin.visibility", "gated"]);
    for (repo, rev, status, code) in [
        ("alice/none", "main", 404, "REPO_NOT_FOUND"),
        ("alice/pack", "no-such-branch", 404, "REVISION_NOT_FOUND"),
        ("alice/secret", "main", 403, "REPO_PRIVATE"),
        ("alice/gated", "main", 403, "REPO_GATED"),
    ] {
        let r = app.post_as("/api/environments/validate", &env_json("dataset", repo, rev, "t"), ALICE).await;
        assert_eq!(
            (r.status.as_u16(), r.json()["code"].as_str().unwrap()),
            (status, code),
            "{repo}@{rev}: {}",
            r.text()
        );
    }
    for (body, code) in [
        (
            json!({"challenge_id": "openenv-9b", "repo_type": "url", "repo_id": "https://evil.example/x"}),
            "INVALID_ENVIRONMENT",
        ),
        (
            json!({"challenge_id": "openenv-9b", "repo_type": "dataset", "repo_id": "a/b", "entry_path": "../x"}),
            "INVALID_ENVIRONMENT",
        ),
        (json!({"challenge_id": "nope", "repo_type": "dataset", "repo_id": "a/b"}), "CHALLENGE_NOT_FOUND"),
        (
            json!({"challenge_id": "openenv-9b", "repo_type": "dataset", "repo_id": "a/b", "agent_id": "ghost-agent"}),
            "AGENT_NOT_FOUND",
        ),
        (json!({"challenge_id": 7}), "INVALID_JSON"),
    ] {
        let r = app.post_as("/api/environments/validate", &body.to_string(), ALICE).await;
        assert_eq!(r.json()["code"], code, "{body}: {}", r.text());
    }
    // The host failing is a 502 with a code, never a crash or a partial answer.
    app.hub.set_faults(standin::Faults { status: Some(500), count: Some(50), ..Default::default() });
    let r = app
        .post_as("/api/environments/validate", &env_json("dataset", "alice/pack", "main", "t"), ALICE)
        .await;
    assert_eq!(
        (r.status.as_u16(), r.json()["code"].as_str().unwrap()),
        (502, "SOURCE_UNAVAILABLE"),
        "{}",
        r.text()
    );
    app.hub.set_faults(standin::Faults::default());
    app.finish().await;
}

#[tokio::test]
async fn github_repositories_and_the_shared_hourly_limit() {
    let app = TestApp::new(crate::harness::Backend::Sqlite).await;
    let commit = app.publish("github", "bob/tasks", &fixture("good-harbor"));
    let before = app.hub.github_rate_limit();
    let r =
        app.post_as("/api/environments/validate", &env_json("github", "bob/tasks", "main", "t"), ALICE).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let v = r.json();
    assert_eq!(v["valid"], true, "{v:#}");
    assert_eq!(v["source"]["commit"], commit);
    assert_eq!(v["task_list"][0]["format"], "harbor");
    // Two API calls per validation; files come from the raw host.
    assert_eq!(app.hub.github_rate_limit().used - before.used, 2);

    app.publish("github", "bob/links", &fixture("symlink"));
    let r =
        app.post_as("/api/environments/validate", &env_json("github", "bob/links", "main", "t"), ALICE).await;
    let codes: Vec<String> = r.json()["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(codes, ["S-SYMLINK"]);

    app.hub.set_github_rate_limit(standin::RateLimitUpdate {
        rate_limit: Some(60),
        remaining: Some(0),
        reset_in_s: Some(1800),
    });
    let r =
        app.post_as("/api/environments/validate", &env_json("github", "bob/tasks", "main", "t"), ALICE).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
    let e = r.json();
    assert_eq!(e["code"], "GITHUB_RATE_LIMITED");
    assert!(e["message"].as_str().unwrap().contains("60 requests"), "{e}");
    let wait: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1700..=1800).contains(&wait), "{wait}");
    // While it is used up the arena does not call GitHub again.
    let used = app.hub.github_rate_limit().used;
    let again =
        app.post_as("/api/environments/validate", &env_json("github", "bob/tasks", "main", "t"), ALICE).await;
    assert_eq!(again.json()["code"], "GITHUB_RATE_LIMITED");
    assert_eq!(app.hub.github_rate_limit().used, used);
    app.finish().await;
}

fn upload(case: &str) -> String {
    let (listing, contents) = server::local::read_dir(&fixture(case)).unwrap();
    let files: Vec<Value> = listing
        .iter()
        .map(|e| {
            json!({"path": e.path, "symlink": e.symlink,
                "content_b64": base64::engine::general_purpose::STANDARD.encode(contents[&e.path].bytes())})
        })
        .collect();
    json!({ "files": files }).to_string()
}

/// Uploads take their turn before their bodies are read: with both turns taken, sixteen wait and
/// the next is turned away at once (its body, not JSON, is never read), then the sixteen finish.
#[tokio::test]
async fn stateless_checks_wait_for_a_turn_before_their_bodies_are_read() {
    let app = TestApp::new(crate::harness::Backend::Sqlite).await;
    let checking = &app.state.sources.checking;
    checking.acquire_many(2).await.unwrap().forget();
    let body = upload("good");
    let waiting = (0..server::sources::fetch::CHECK_QUEUE)
        .map(|_| app.request(Method::POST, "/api/check", Some(&body)))
        .collect::<Vec<_>>();
    let refused_then_release = async {
        while app.state.sources.checks_waiting() < server::sources::fetch::CHECK_QUEUE {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let answer = app.request(Method::POST, "/api/check", Some("not json at all")).await;
        checking.add_permits(2);
        answer
    };
    let (answers, turned_away) = tokio::join!(futures_util::future::join_all(waiting), refused_then_release);
    assert_eq!(turned_away.status, StatusCode::SERVICE_UNAVAILABLE, "{}", turned_away.text());
    assert_eq!(turned_away.json()["code"], "CAPACITY_BUSY");
    assert_eq!(turned_away.json()["retry_after_s"], 5);
    assert!(answers.iter().all(|a| a.status == StatusCode::OK), "every waiting upload was checked");
    app.finish().await;
}

#[tokio::test]
async fn the_stateless_check_needs_no_token_and_skips_sealed_suites() {
    let app = TestApp::new(crate::harness::Backend::Sqlite).await;
    let r = app.request(Method::POST, "/api/check", Some(&upload("dockerfile-copies-oracle"))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let codes: Vec<String> = r.json()["quality_gates"]["static"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect();
    assert!(codes.contains(&"L-IMAGE-COPIES-SOLUTION".to_string()), "{codes:?}");
    // The private suite is compared only at validation.
    let near = app.request(Method::POST, "/api/check", Some(&upload("heldout-near-copy"))).await.json();
    assert_eq!(near["valid"], true, "{near:#}");
    let suites: Vec<&str> = near["quality_gates"]["static"]["heldout"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["suite"].as_str().unwrap())
        .collect();
    assert_eq!(suites, ["public-bench"]);
    let bad = app
        .request(
            Method::POST,
            "/api/check",
            Some(r#"{"files":[{"path":"envs/a/task.md","content_b64":"%%%"}]}"#),
        )
        .await;
    assert_eq!((bad.status.as_u16(), bad.json()["code"].as_str().unwrap()), (422, "INVALID_CHECK"));
    // Every string the schema's pattern admits decodes, unused trailing bits too (`AB==` holds one
    // byte and four bits Python's b64decode ignores, as the arena does).
    let mut odd: Value = serde_json::from_str(&upload("good")).unwrap();
    odd["files"].as_array_mut().unwrap().push(json!({"path": "envs/extra-data.bin", "content_b64": "AB=="}));
    let r = app.request(Method::POST, "/api/check", Some(&odd.to_string())).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    // Larger than the other routes' 64 KB, within its own bound.
    let mut big: Value = serde_json::from_str(&upload("good")).unwrap();
    let data = base64::engine::general_purpose::STANDARD.encode(vec![b'x'; 300 * 1024]);
    big["files"].as_array_mut().unwrap().push(json!({"path": "envs/extra-data.bin", "content_b64": data}));
    let r = app.request(Method::POST, "/api/check", Some(&big.to_string())).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let catalogue = app.get("/api/gates").await.json();
    assert!(catalogue["gates"].as_array().unwrap().len() >= 20);
    app.finish().await;
}

/// `entry_path` selects the directory holding `submission.yaml` and `envs/`; files are read from
/// there, not from the repository root (which here holds a different, broken collection).
#[tokio::test]
async fn entry_path_selects_the_collection_inside_the_repository() {
    let app = TestApp::new(crate::harness::Backend::Sqlite).await;
    let tree = tempfile::tempdir().unwrap();
    copy_tree(&fixture("no-task-md"), tree.path());
    let inner = tree.path().join("submissions/team-x");
    std::fs::create_dir_all(&inner).unwrap();
    copy_tree(&fixture("good"), &inner);
    for kind in ["datasets", "github"] {
        app.publish(kind, "alice/mono", tree.path());
        let repo_type = if kind == "datasets" { "dataset" } else { "github" };
        let body = json!({"challenge_id": "openenv-9b", "repo_type": repo_type, "repo_id": "alice/mono",
            "revision": "main", "entry_path": "submissions/team-x/"})
        .to_string();
        let r = app.post_as("/api/environments/validate", &body, ALICE).await;
        assert_eq!(r.status, StatusCode::OK, "{kind}: {}", r.text());
        let v = r.json();
        assert_eq!((v["valid"].as_bool(), v["tasks"].as_u64()), (Some(true), Some(2)), "{kind}: {v:#}");
        assert_eq!(v["source"]["entry_path"], "submissions/team-x");
        assert!(v["source"]["url"].as_str().unwrap().ends_with("/submissions/team-x"));
    }
    let missing = json!({"challenge_id": "openenv-9b", "repo_type": "dataset", "repo_id": "alice/mono",
        "revision": "main", "entry_path": "no/such/dir"})
    .to_string();
    let r = app.post_as("/api/environments/validate", &missing, ALICE).await;
    assert_eq!(
        (r.status.as_u16(), r.json()["code"].as_str().unwrap()),
        (422, "INVALID_ENVIRONMENT"),
        "{}",
        r.text()
    );
    app.finish().await;
}

/// Every refusal of the collection routes, each with its stable code, and nothing stored.
#[tokio::test]
async fn collection_routes_refuse_with_stable_codes() {
    let app = TestApp::new(crate::harness::Backend::Sqlite).await;
    app.publish("datasets", "alice/pack", &fixture("good"));
    let body = env_json("dataset", "alice/pack", "main", "t");

    let anon = app.request(Method::POST, "/api/environments", Some(&body)).await;
    assert_eq!((anon.status.as_u16(), anon.json()["code"].as_str().unwrap()), (401, "AUTH_REQUIRED"));
    let forged = app.post_as("/api/environments", &body, "hf_not_a_real_token_0123456789").await;
    assert_eq!((forged.status.as_u16(), forged.json()["code"].as_str().unwrap()), (401, "INVALID_TOKEN"));

    // Someone else's agent cannot sign your collection.
    let reg = json!({"agent_id": "bob-builder", "description": "The agent of bob"}).to_string();
    assert_eq!(app.post_as("/api/agents", &reg, BOB).await.status, StatusCode::CREATED);
    let as_bobs = json!({"agent_id": "bob-builder", "challenge_id": "openenv-9b", "repo_type": "dataset",
        "repo_id": "alice/pack", "revision": "main"})
    .to_string();
    for route in ["/api/environments/validate", "/api/environments"] {
        let r = app.post_as(route, &as_bobs, ALICE).await;
        assert_eq!(
            (r.status.as_u16(), r.json()["code"].as_str().unwrap()),
            (403, "AGENT_NOT_OWNED"),
            "{route}"
        );
    }
    let not_json = app
        .call(Method::POST, "/api/environments", Some("{"), &[("authorization", &format!("Bearer {ALICE}"))])
        .await;
    assert_eq!(not_json.json()["code"], "INVALID_JSON");
    assert_eq!(environments_rows(&app).await, 0, "no refusal stores anything");

    let bad_limit = app.get("/api/environments?limit=0").await;
    assert_eq!(
        (bad_limit.status.as_u16(), bad_limit.json()["code"].as_str().unwrap()),
        (400, "INVALID_QUERY")
    );
    let unknown = app.get("/api/environments/env-0000000000000000").await;
    assert_eq!(
        (unknown.status.as_u16(), unknown.json()["code"].as_str().unwrap()),
        (404, "ENVIRONMENT_NOT_FOUND")
    );
    let check_text = app
        .send(
            axum::http::Request::post("/api/check")
                .header("content-type", "text/plain")
                .body(axum::body::Body::from("files"))
                .unwrap(),
        )
        .await;
    assert_eq!(check_text.json()["code"], "UNSUPPORTED_MEDIA_TYPE");
    app.finish().await;
}

/// A challenge that is not open takes no collections.
#[tokio::test]
async fn a_planned_challenge_takes_no_collections() {
    let configs = crate::harness::copy_configs(|path, text| {
        if path == "challenges/openenv-9b.toml" {
            text.replacen("status = \"open\"", "status = \"planned\"", 1)
        } else {
            text
        }
    });
    let app = TestApp::with(
        crate::harness::Backend::Sqlite,
        crate::harness::Options {
            configs_dir: configs.path().to_path_buf(),
            keep: None,
            limits: crate::harness::LIMITS,
            job_secrets: crate::harness::JOB_SECRETS.to_vec(),
            ..Default::default()
        },
    )
    .await;
    app.publish("datasets", "alice/pack", &fixture("good"));
    let r = app
        .post_as("/api/environments/validate", &env_json("dataset", "alice/pack", "main", "t"), ALICE)
        .await;
    assert_eq!(
        (r.status.as_u16(), r.json()["code"].as_str().unwrap()),
        (422, "INVALID_ENVIRONMENT"),
        "{}",
        r.text()
    );
    assert!(r.json()["message"].as_str().unwrap().contains("planned"));
    app.finish().await;
}

// The glossary: `validate` and `submit` take a track id in `challenge_id` as well as an open
// challenge; a record submitted with a challenge is stored under the track with the challenge kept
// as `target_challenge_id`; the listing filters by either.
on_both_backends!(a_collection_is_submitted_to_the_track_or_a_challenge, |app| {
    app.publish("datasets", "alice/pack", &fixture("good"));
    app.publish("datasets", "bob/pack", &fixture("good"));
    let to = |challenge: &str, repo: &str| {
        json!({"agent_id": null, "challenge_id": challenge, "repo_type": "dataset", "repo_id": repo,
            "revision": "main", "entry_path": "", "title": repo, "notes": ""})
        .to_string()
    };
    let checked = app.post_as("/api/environments/validate", &to("environments", "alice/pack"), ALICE).await;
    assert_eq!(
        (checked.status, checked.json()["valid"].clone()),
        (StatusCode::OK, json!(true)),
        "{}",
        checked.text()
    );
    let track = app.post_as("/api/environments", &to("environments", "alice/pack"), ALICE).await;
    assert_eq!(track.status, StatusCode::CREATED, "{}", track.text());
    let t = track.json()["environment"].clone();
    assert_eq!(
        (t["track"].as_str(), t["challenge_id"].as_str(), t["target_challenge_id"].clone()),
        (Some("environments"), Some("environments"), Value::Null)
    );
    let challenge = app.post_as("/api/environments", &to("openenv-9b", "bob/pack"), BOB).await;
    assert_eq!(challenge.status, StatusCode::CREATED, "{}", challenge.text());
    let c = challenge.json()["environment"].clone();
    assert_eq!(
        (c["track"].as_str(), c["target_challenge_id"].as_str()),
        (Some("environments"), Some("openenv-9b"))
    );
    let ids = |v: Value| -> Vec<String> {
        v["environments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["repo_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(app.get("/api/environments?challenge=environments").await.json()).len(), 2);
    assert_eq!(ids(app.get("/api/environments?challenge=openenv-9b").await.json()), ["bob/pack"]);
    let unknown = app.post_as("/api/environments/validate", &to("no-such", "alice/pack"), ALICE).await;
    assert_eq!(unknown.json()["code"], "CHALLENGE_NOT_FOUND");
});
