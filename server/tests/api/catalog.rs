use axum::http::StatusCode;
use serde_json::Value;

use crate::harness::{copy_configs, Options, TestApp, BACKENDS};
use crate::on_both_backends;

on_both_backends!(challenges_list_the_open_challenge_with_its_details, |app| {
    let answer = app.get("/api/challenges").await;
    assert_eq!(answer.status, StatusCode::OK);
    let json = answer.json();
    let c = &json["challenges"][0];
    assert_eq!(c["id"], "openenv-9b");
    assert_eq!(c["status"], "open");
    assert!(c["runs_paused"].as_str().unwrap().contains("not measured"));
    assert_eq!(c["health"]["accepting_runs"], false);
    assert!(c["health"]["reason"].as_str().unwrap().starts_with("runs are paused"));
    assert_eq!(c["base_model"]["repo"], "Qwen/Qwen3.5-9B");
    assert_eq!(c["base_model"]["revision"], "c202236");
    assert_eq!(c["recipe"]["id"], "openenv-v1");
    assert_eq!(c["recipe"]["placeholder"], true);
    assert!(c["recipe"]["note"].as_str().unwrap().contains("placeholders"));
    assert_eq!(c["eval_suite"]["id"], "openenv-heldout");
    assert_eq!(c["eval_suite"]["private"], true);
    assert_eq!(c["eval_suite"]["task_count"], Value::Null);
    assert_eq!(c["eval_suite"]["described_domains"].as_array().unwrap().len(), 8);
    assert_eq!(c["metric"]["trials_per_run"], 3);
    assert_eq!(c["compute"]["provider"], "nebius");
    assert_eq!(c["compute"]["provider_status"], "planned");
    assert_eq!(c["compute"]["gpus"], 8);
    assert_eq!(c["compute"]["nodes"], 1);
    assert_eq!(c["compute"]["serving"]["flavor"], "h200x8");
    assert_eq!(c["per_run_allocation"]["usd"], Value::Null);
    assert_eq!(c["baseline"]["measured"], false);
    assert_eq!(c["pipeline"]["commit"].as_str().unwrap().len(), 40);
});

on_both_backends!(one_challenge_by_id, |app| {
    let answer = app.get("/api/challenges/openenv-9b").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json()["id"], "openenv-9b");
});

on_both_backends!(benchmarks_name_the_default_and_the_challenges_scoring_on_it, |app| {
    let json = app.get("/api/benchmarks").await.json();
    assert_eq!(json["default"], "openenv-heldout");
    let b = &json["benchmarks"][0];
    assert_eq!(b["sealed"], true);
    assert_eq!(b["domains"], Value::Null, "a private suite publishes no per-domain counts");
    assert_eq!(b["challenges"], serde_json::json!(["openenv-9b"]));
    let detail = app.get("/api/benchmarks/openenv-heldout").await;
    assert_eq!(detail.status, StatusCode::OK);
    let detail = detail.json();
    assert_eq!(detail["id"], "openenv-heldout");
    assert_eq!(detail["leaderboards"][0]["challenge_id"], "openenv-9b");
    assert_eq!(detail["leaderboards"][0]["rows"], serde_json::json!([]));
});

on_both_backends!(formula_lists_the_registries, |app| {
    let json = app.get("/api/formula").await.json();
    assert_eq!(json["models"][0]["id"], "qwen3.5-9b");
    assert_eq!(json["recipes"][0]["id"], "openenv-v1");
    assert_eq!(json["suites"][0]["id"], "openenv-heldout");
    assert_eq!(json["challenges"][0]["id"], "openenv-9b");
    assert_eq!(json["collections"], serde_json::json!([]));
});

on_both_backends!(tracks_are_listed_under_their_older_name, |app| {
    let json = app.get("/api/v2/challenges").await.json();
    assert_eq!(json["challenges"][0]["id"], "environments");
    assert_eq!(json["challenges"][0]["can_run"], false);
});

on_both_backends!(budget_reads_the_ledger, |app| {
    let empty = app.get("/api/arena/budget").await.json();
    assert_eq!(empty["cap_usd"], 5000.0);
    assert_eq!(empty["committed_usd"], 0.0);
    assert_eq!(empty["remaining_usd"], 5000.0);
    assert_eq!(empty["hf_recorded_usd"], Value::Null);

    app.exec(
        "INSERT INTO budget_ledger (id, challenge_id, run_id, amount_cents, state, created_at, updated_at) VALUES \
         ('r1', 'openenv-9b', 'run-1', 12345, 'settled', '2026-11-01T00:00:00Z', '2026-11-01T00:00:00Z'), \
         ('r2', 'openenv-9b', 'run-2', 20000, 'live', '2026-11-02T00:00:00Z', '2026-11-02T00:00:00Z'), \
         ('r3', 'openenv-9b', 'run-3', 99999, 'released', '2026-11-03T00:00:00Z', '2026-11-03T00:00:00Z')",
    )
    .await
    .unwrap();
    let json = app.get("/api/arena/budget").await.json();
    assert_eq!(json["committed_usd"], 323.45);
    assert_eq!(json["remaining_usd"], 4676.55);
    assert_eq!(json["live_reservations"], 1);
    assert_eq!(json["live_reservations_usd"], 200.0);
});

on_both_backends!(the_database_allows_one_live_reservation, |app| {
    app.exec(
        "INSERT INTO budget_ledger (id, challenge_id, run_id, amount_cents, state, created_at, updated_at) \
         VALUES ('a', 'openenv-9b', 'run-a', 100, 'live', 't', 't')",
    )
    .await
    .unwrap();
    let second = app
        .exec(
            "INSERT INTO budget_ledger (id, challenge_id, run_id, amount_cents, state, created_at, updated_at) \
             VALUES ('b', 'openenv-9b', 'run-b', 100, 'live', 't', 't')",
        )
        .await;
    assert!(second.is_err(), "a second live reservation must be refused by the database");
    let negative = app
        .exec(
            "INSERT INTO budget_ledger (id, challenge_id, run_id, amount_cents, state, created_at, updated_at) \
             VALUES ('c', 'openenv-9b', 'run-c', -5, 'settled', 't', 't')",
        )
        .await;
    assert!(negative.is_err());
});

on_both_backends!(version_reports_the_build_and_notices_changed_files, |app| {
    let json = app.get("/api/version").await.json();
    assert!(json["commit"].as_str().is_some_and(|c| !c.is_empty()));
    assert!(json["build_time"].as_str().unwrap().contains('T'));
    assert_eq!(json["files_changed"], false);
    assert_eq!(json["heldout_unchecked"], serde_json::json!([]), "every suite has its fingerprint here");
    std::fs::write(app.site_root.join("pkg/arena.css"), "body { color: red }").unwrap();
    assert_eq!(app.get("/api/version").await.json()["files_changed"], true);
});

/// A suite the challenge scores on without a fingerprint here is the deployment's to fix: said
/// once by /api/version, not as a warning on each collection's validation.
/// A test app on a copy of the registry.
async fn app_on(backend: crate::harness::Backend, configs: &tempfile::TempDir) -> TestApp {
    let options = Options {
        configs_dir: configs.path().to_path_buf(),
        keep: None,
        limits: crate::harness::LIMITS,
        job_secrets: crate::harness::JOB_SECRETS.to_vec(),
        ..Options::default()
    };
    TestApp::with(backend, options).await
}

#[tokio::test]
async fn a_suite_without_a_fingerprint_is_said_once_by_the_version() {
    let configs = copy_configs(|path, text| match path {
        "challenges/openenv-9b.toml" => text
            .replace(r#"suites = ["openenv-heldout"]"#, r#"suites = ["openenv-heldout", "extra-heldout"]"#),
        _ => text,
    });
    let suite = std::fs::read_to_string(configs.path().join("suites/openenv-heldout.toml")).unwrap();
    std::fs::write(
        configs.path().join("suites/extra-heldout.toml"),
        suite
            .replace(r#"id = "openenv-heldout""#, r#"id = "extra-heldout""#)
            .replace("default = true", "default = false"),
    )
    .unwrap();
    let app = app_on(crate::harness::Backend::Sqlite, &configs).await;
    let json = app.get("/api/version").await.json();
    assert_eq!(json["heldout_unchecked"], serde_json::json!(["openenv-9b/extra-heldout"]));
    // The organizers' jobs view says it too.
    let jobs = app.get_as("/api/jobs", crate::harness::EVE).await.json();
    assert_eq!(jobs["heldout_unchecked"], serde_json::json!(["openenv-9b/extra-heldout"]), "{jobs:#}");
    // And the challenge's health, where a participant reads whether runs are taken.
    let challenge = app.get("/api/challenges/openenv-9b").await.json();
    assert_eq!(
        challenge["health"]["heldout_unchecked"],
        serde_json::json!(["extra-heldout"]),
        "{challenge:#}"
    );
    let commit = app.publish("datasets", "alice/pack", &crate::harness::fixture("good"));
    let body = serde_json::json!({"challenge_id": "openenv-9b", "repo_type": "dataset", "repo_id": "alice/pack",
        "revision": commit, "entry_path": "", "title": "t", "notes": ""});
    let report =
        app.post_as("/api/environments/validate", &body.to_string(), crate::harness::ALICE).await.json();
    let codes: Vec<&str> =
        report["warnings"].as_array().unwrap().iter().filter_map(|w| w["code"].as_str()).collect();
    assert!(!codes.contains(&"W-HELDOUT-UNCHECKED"), "{codes:?}");
    app.finish().await;
}

#[tokio::test]
async fn a_public_suite_brings_its_fingerprint_beside_its_task_list() {
    let configs = copy_configs(|path, text| match path {
        "challenges/openenv-9b.toml" => {
            text.replace(r#"suites = ["openenv-heldout"]"#, r#"suites = ["openenv-heldout", "meta-bench"]"#)
        }
        _ => text,
    });
    let bench = crate::harness::repo_root().join("tests/fixtures/heldout/public-bench");
    let fingerprint = server::local::fingerprint_dir(&bench, "meta-bench", false).unwrap();
    let lists = configs.path().join("fixture/task-lists");
    std::fs::create_dir_all(&lists).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(bench.join("envs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    std::fs::write(lists.join("meta-bench.txt"), names.join("\n") + "\n").unwrap();
    std::fs::write(lists.join("meta-bench.json"), serde_json::to_string(&fingerprint).unwrap()).unwrap();
    std::fs::write(
        configs.path().join("suites/meta-bench.toml"),
        "[suite]\nid = \"meta-bench\"\nname = \"Meta bench\"\ndescription = \"A public benchmark.\"\n\n\
         [meta]\ntask_list = \"meta-bench.txt\"\nfingerprints = \"meta-bench.json\"\n",
    )
    .unwrap();
    let app = app_on(crate::harness::Backend::Sqlite, &configs).await;
    // The harness has no fingerprint of `meta-bench`: it came from beside the task list, so
    // nothing the challenge scores on is unchecked.
    let json = app.get("/api/version").await.json();
    assert_eq!(json["heldout_unchecked"], serde_json::json!([]), "{json:#}");
    let challenge = app.get("/api/challenges/openenv-9b").await.json();
    assert_eq!(challenge["health"]["heldout_unchecked"], serde_json::json!([]), "{challenge:#}");
    app.finish().await;
}

on_both_backends!(legacy_results_answer_empty, |app| {
    for route in ["/api/experiment-groups", "/api/results", "/api/verification"] {
        let json = app.get(route).await.json();
        assert_eq!(json["legacy"], false, "{route}");
        assert_eq!(json["items"], serde_json::json!([]));
        let json = app.get(&format!("{route}?legacy=true")).await.json();
        assert_eq!(json["legacy"], true);
    }
    // The legacy competitions catalogue answers, empty, and points at /AGENTS-legacy.md.
    let json = app.get("/api/arena/competitions").await.json();
    assert_eq!(json["competitions"], serde_json::json!([]));
    assert!(json["note"].as_str().unwrap().contains("/AGENTS-legacy.md"));
});

/// Health reads the live state: a connected challenge refuses while a run holds a reservation.
#[tokio::test]
async fn health_reflects_an_active_run_on_both_backends() {
    let configs = copy_configs(|path, text| {
        if path != "challenges/openenv-9b.toml" {
            return text;
        }
        let start = text.find("runs_paused = ").unwrap();
        let end = start + text[start..].find('\n').unwrap() + 1;
        format!("{}{}", &text[..start], &text[end..]).replace(
            "provider_status = \"planned\"",
            "provider_status = \"connected\"\nhourly_price_usd = 50.0",
        )
    });
    for backend in BACKENDS {
        let app = app_on(backend, &configs).await;
        let c = app.get("/api/challenges/openenv-9b").await.json();
        assert_eq!(c["health"]["accepting_runs"], true, "{backend:?}");
        assert_eq!(c["per_run_allocation"]["usd"], 200.0);
        app.exec(
            "INSERT INTO budget_ledger (id, challenge_id, run_id, amount_cents, state, created_at, updated_at) \
             VALUES ('a', 'openenv-9b', 'run-a', 20000, 'live', 't', 't')",
        )
        .await
        .unwrap();
        let c = app.get("/api/challenges/openenv-9b").await.json();
        assert_eq!(c["health"]["accepting_runs"], false);
        assert!(c["health"]["reason"].as_str().unwrap().contains("another arena run is active (run-a)"));
        // `runs` counts runs whose job was created; this reservation was written by hand.
        assert_eq!(c["health"]["runs"], 0);
        app.finish().await;
    }
}
