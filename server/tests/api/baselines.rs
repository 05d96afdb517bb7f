//! The base model's baseline through the API: an editor launches a measurement job (purpose
//! `baseline`, charged to the cap, listed in `/api/jobs`), it runs to its end on the stand-in,
//! collect checks its evidence, and the challenge then shows it. Both backends.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{json, Value};
use server::workers::Workers;

use crate::harness::{TestApp, ALICE, EVE, RUNS_DATASET};
use crate::on_both_backends;

const CHALLENGE: &str = "local-demo";

fn code(a: &crate::harness::Answer) -> (u16, String) {
    (a.status.as_u16(), a.json()["code"].as_str().unwrap_or("").to_string())
}

async fn launch(app: &TestApp, request_id: &str, token: &str) -> crate::harness::Answer {
    let body = json!({ "request_id": request_id }).to_string();
    app.post_as(&format!("/api/challenges/{CHALLENGE}/baseline"), &body, token).await
}

/// Follows the run until it ends; answers its detail.
async fn ended(app: &TestApp, run: &str) -> Value {
    let w = Workers::start(app.state.clone(), Duration::from_millis(100));
    let start = Instant::now();
    let d = loop {
        let d = app.get(&format!("/api/challenges/{CHALLENGE}/runs/{run}")).await.json();
        if ["scored", "failed", "canceled"].contains(&d["state"].as_str().unwrap()) {
            break d;
        }
        assert!(start.elapsed() < Duration::from_secs(240), "{d:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    w.stop().await;
    d
}

async fn collect(app: &TestApp, run: &str, token: &str) -> crate::harness::Answer {
    app.post_as(&format!("/api/challenges/{CHALLENGE}/baseline/{run}/collect"), "", token).await
}

on_both_backends!(local, an_editor_measures_the_base_model_and_the_challenge_shows_it, |app| {
    app.hub.jobs.stage_ms.store(40, std::sync::atomic::Ordering::Relaxed);
    let before = app.get(&format!("/api/challenges/{CHALLENGE}/baseline")).await.json();
    assert_eq!(before["measurements"], json!([]));

    // Editors only; nothing is stored for a refusal.
    assert_eq!(code(&launch(app, "baseline-req-1", ALICE).await), (403, "FORBIDDEN".into()));
    let anonymous = app
        .request(axum::http::Method::POST, &format!("/api/challenges/{CHALLENGE}/baseline"), Some("{}"))
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(code(&launch(app, "x", EVE).await), (422, "INVALID_RUN_REQUEST".into()));
    assert_eq!(app.scalar("SELECT COUNT(*) FROM runs").await, 0);

    let r = launch(app, "baseline-req-1", EVE).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let run = r.json()["run"]["run_id"].as_str().unwrap().to_string();
    assert_eq!(r.json()["run"]["purpose"], "baseline");
    assert_eq!(r.json()["run"]["environment_id"], Value::Null);
    let again = launch(app, "baseline-req-1", EVE).await;
    assert_eq!((again.status, again.json()["run"]["run_id"].clone()), (StatusCode::OK, json!(run)));
    // One job at a time across the arena: a second measurement waits.
    assert_eq!(code(&launch(app, "baseline-req-2", EVE).await), (409, "ANOTHER_RUN_ACTIVE".into()));
    assert_eq!(code(&collect(app, &run, EVE).await), (409, "RUN_NOT_SCORED".into()), "not yet measured");
    assert_eq!(code(&app.get("/api/challenges/no-such/baseline").await), (404, "CHALLENGE_NOT_FOUND".into()));

    let d = ended(app, &run).await;
    assert_eq!(d["state"], "scored", "{d:#}");
    let stages: Vec<&str> =
        d["stages"].as_array().unwrap().iter().map(|s| s["stage"].as_str().unwrap()).collect();
    assert_eq!(stages, ["setup", "snapshot", "baseline", "collect"]);
    let report = d["report_url"].as_str().unwrap_or_default();
    assert!(report.ends_with(&format!("runs/{run}/reports/baseline.json")), "{d:#}");

    // Collect: editors only, the collection's result route refuses it, then the measurement.
    assert_eq!(code(&collect(app, &run, ALICE).await), (403, "FORBIDDEN".into()));
    let wrong = app.post_as(&format!("/api/challenges/{CHALLENGE}/runs/{run}/result"), "", EVE).await;
    assert_eq!(code(&wrong), (409, "WRONG_RUN_PURPOSE".into()));
    let m = collect(app, &run, EVE).await;
    assert_eq!(m.status, StatusCode::CREATED, "{}", m.text());
    let m = m.json();
    // The numbers the cells in the runs dataset give.
    let ds = app.repos.join("datasets").join(RUNS_DATASET);
    let cells: domain::score::TaskOutcomes = serde_json::from_str(&crate::harness::git(
        &ds,
        &["show", &format!("main:runs/{run}/reports/eval_task_outcomes.json")],
    ))
    .unwrap();
    assert!(cells.arms.final_.is_none(), "the baseline arm alone");
    let ours = domain::score::reference(&cells);
    // Equal up to the last bit a REAL column may round.
    assert!((m["pass_rate"].as_f64().unwrap() - ours.pass_rate).abs() < 1e-12, "{m:#}");
    assert!((m["stderr"].as_f64().unwrap() - ours.stderr).abs() < 1e-12, "{m:#}");
    assert_eq!((m["trials"].clone(), m["tasks"].clone()), (json!(3), json!(12)));
    assert!(m["harness_note"].as_str().unwrap().contains(&run));
    assert_eq!(collect(app, &run, EVE).await.json()["existing"], true);

    // The challenge shows it: mean over trials ± one standard error, the harness note, the run.
    let c = app.get(&format!("/api/challenges/{CHALLENGE}")).await.json();
    let b = &c["baseline"];
    assert_eq!((b["measured"].clone(), b["run_id"].clone()), (json!(true), json!(run)));
    assert!((b["reference"]["pass_rate_pct"].as_f64().unwrap() - 100.0 * ours.pass_rate).abs() < 1e-9);
    assert!((b["reference"]["stderr_pct"].as_f64().unwrap() - 100.0 * ours.stderr).abs() < 1e-9);
    let listed = app.get(&format!("/api/challenges/{CHALLENGE}/baseline")).await.json();
    assert_eq!(listed["measurements"].as_array().unwrap().len(), 1);
    let page = app.get(&format!("/arena/challenges/{CHALLENGE}")).await.text();
    assert!(page.contains(&format!("{:.1}% ±", 100.0 * ours.pass_rate)), "the challenge page shows it");
    assert!(page.contains(&format!("/arena/runs/{run}")), "and links the measurement's run");
    let run_page = app.get(&format!("/arena/runs/{run}")).await.text();
    assert!(run_page.contains("measures the base model alone"));

    // A job of purpose baseline, priced and charged to the cap like any run.
    let jobs = app.get_as("/api/jobs", EVE).await.json();
    let job = jobs["jobs"].as_array().unwrap().iter().find(|j| j["run_id"] == run.as_str()).unwrap().clone();
    assert_eq!(job["purpose"], "baseline");
    let ledger = app.get_as("/api/arena/jobs", EVE).await.json();
    let reservation = ledger["reservations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == run.as_str())
        .unwrap()
        .clone();
    assert_eq!(reservation["state"], "settled", "{ledger:#}");
});

on_both_backends!(
    local,
    a_measurement_whose_report_differs_is_refused_and_the_database_keeps_the_purposes_apart,
    |app| {
        app.hub.jobs.stage_ms.store(40, std::sync::atomic::Ordering::Relaxed);
        let r = launch(app, "baseline-mismatch", EVE).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
        let run = r.json()["run"]["run_id"].as_str().unwrap().to_string();
        assert_eq!(ended(app, &run).await["state"], "scored");
        // The measurement's own report says more than its cells give.
        let ds = app.repos.join("datasets").join(RUNS_DATASET);
        let path = format!("runs/{run}/reports/baseline.json");
        let mut report: Value =
            serde_json::from_str(&crate::harness::git(&ds, &["show", &format!("main:{path}")])).unwrap();
        report["pass_rate"] = json!(report["pass_rate"].as_f64().unwrap() + 0.05);
        let edited = app
            .state
            .deps
            .datasets
            .commit(RUNS_DATASET, "a report that disagrees", &[(path, serde_json::to_vec(&report).unwrap())])
            .await
            .unwrap();
        app.exec(&format!("UPDATE runs SET results_commit = '{edited}' WHERE id = '{run}'")).await.unwrap();
        let refused = collect(app, &run, EVE).await;
        assert_eq!(code(&refused), (422, "RESULT_MISMATCH".into()));
        assert!(refused.json()["message"].as_str().unwrap().contains("pass_rate"), "{}", refused.text());
        assert_eq!(app.scalar("SELECT COUNT(*) FROM baselines").await, 0);
        assert_eq!(
            app.get(&format!("/api/challenges/{CHALLENGE}")).await.json()["baseline"]["run_id"],
            Value::Null
        );
        assert_eq!(code(&collect(app, "run-none", EVE).await), (404, "RUN_NOT_FOUND".into()));

        // A baseline run names no collection, and only a baseline run has a measurement.
        let with_collection =
            app.exec(&format!("UPDATE runs SET environment_id = 'env-x' WHERE id = '{run}'")).await;
        assert!(with_collection.is_err());
        let as_collection =
            app.exec(&format!("UPDATE runs SET purpose = 'collection' WHERE id = '{run}'")).await;
        assert!(as_collection.is_err(), "a collection's run names its collection");
        let foreign = app
        .exec(
            "INSERT INTO baselines (run_id, purpose, challenge_id, pass_rate, stderr, trials, per_trial, tasks, \
             scored_cells, infra_error_cells, harness_note, read_commit, collected_by, collected_at, collected_epoch) \
             VALUES ('run-none', 'baseline', 'local-demo', 0, 0, 1, '[]', 0, 0, 0, '', '', '', '', 0)",
        )
        .await;
        assert!(foreign.is_err(), "a measurement needs its baseline run");
    }
);
