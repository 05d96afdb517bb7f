//! Results through the API: collect re-reads the simulated pipeline's evidence and refuses what does
//! not hold up, an editor reviews once, and the leaderboard ranks accepted runs. Both backends.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{json, Value};
use server::workers::Workers;
use standin::jobs::JobFaults;

use crate::harness::{fixture, TestApp, ALICE, BOB, EVE, RUNS_DATASET};
use crate::on_both_backends;

const CHALLENGE: &str = "local-demo";

async fn submitted(app: &TestApp, repo: &str, token: &str) -> String {
    app.publish("datasets", repo, &fixture("good"));
    let body = json!({"agent_id": null, "challenge_id": CHALLENGE, "repo_type": "dataset", "repo_id": repo,
        "revision": "main", "entry_path": "", "title": repo, "notes": ""});
    let r = app.post_as("/api/environments", &body.to_string(), token).await;
    assert!(r.status.is_success(), "{}", r.text());
    r.json()["environment_id"].as_str().unwrap().to_string()
}

/// Runs the collection to its end with the stand-in's job behaving as `faults` say; answers the
/// run id. Earlier runs are moved a day back, so the daily limit lets this one through.
async fn run_to_end(app: &TestApp, env: &str, token: &str, faults: JobFaults) -> String {
    app.exec("UPDATE runs SET created_epoch = created_epoch - 90000").await.unwrap();
    *app.hub.jobs.faults.lock().unwrap() = JobFaults { count: Some(1), ..faults };
    let body =
        json!({"request_id": format!("req-{}", server::identity::random_hex(6)), "environment_id": env})
            .to_string();
    let r = app.post_as(&format!("/api/challenges/{CHALLENGE}/runs"), &body, token).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let run = r.json()["run"]["run_id"].as_str().unwrap().to_string();
    let w = Workers::start(app.state.clone(), Duration::from_millis(100));
    let start = Instant::now();
    loop {
        let d = app.get(&format!("/api/challenges/{CHALLENGE}/runs/{run}")).await.json();
        if ["scored", "failed", "canceled"].contains(&d["state"].as_str().unwrap()) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(240), "{d:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    w.stop().await;
    run
}

async fn collect(app: &TestApp, run: &str, token: &str) -> crate::harness::Answer {
    app.post_as(&format!("/api/challenges/{CHALLENGE}/runs/{run}/result"), "", token).await
}

async fn review(app: &TestApp, run: &str, accepted: bool, token: &str) -> crate::harness::Answer {
    let body = json!({"accepted": accepted, "note": "The cells cover every held-out task; the report matches them."});
    app.post_as(&format!("/api/challenges/{CHALLENGE}/runs/{run}/result/review"), &body.to_string(), token)
        .await
}

/// Puts back the file at `path` as commit `published` holds it (the runs dataset's next commit
/// builds on its newest, which holds the last edit), and points the run at the commit.
async fn restore_evidence(app: &TestApp, run: &str, published: &str, path: &str) {
    let ds = app.repos.join("datasets").join(RUNS_DATASET);
    let original = crate::harness::git(&ds, &["show", &format!("{published}:{path}")]);
    let file = (path.to_string(), original.into_bytes());
    let restored =
        app.state.deps.datasets.commit(RUNS_DATASET, "put the evidence back", &[file]).await.unwrap();
    app.exec(&format!("UPDATE runs SET results_commit = '{restored}' WHERE id = '{run}'")).await.unwrap();
}

/// Edits one of a run's JSON files in the runs dataset, as found at the run's results commit, and
/// points the run at the new commit, as if the pipeline had published the edited file (collect
/// reads where the reconciler found them).
async fn edit_evidence(app: &TestApp, run: &str, path: &str, edit: impl FnOnce(&mut Value)) {
    let ds = app.repos.join("datasets").join(RUNS_DATASET);
    let at = app.text(&format!("SELECT results_commit FROM runs WHERE id = '{run}'")).await;
    let mut v: Value =
        serde_json::from_str(&crate::harness::git(&ds, &["show", &format!("{at}:{path}")])).unwrap();
    edit(&mut v);
    let file = (path.to_string(), serde_json::to_vec(&v).unwrap());
    let edited = app.state.deps.datasets.commit(RUNS_DATASET, "edit the evidence", &[file]).await.unwrap();
    app.exec(&format!("UPDATE runs SET results_commit = '{edited}' WHERE id = '{run}'")).await.unwrap();
}

fn code(a: &crate::harness::Answer) -> (u16, String) {
    (a.status.as_u16(), a.json()["code"].as_str().unwrap_or("").to_string())
}

on_both_backends!(local, collect_reads_the_evidence_again_and_review_is_final, |app| {
    app.hub.jobs.stage_ms.store(40, std::sync::atomic::Ordering::Relaxed);
    let env = submitted(app, "alice/pack", ALICE).await;
    // GRPO never draws one task and always solves the other: neither gives it anything to learn.
    let shaped = JobFaults {
        unsampled_task: Some("contacts-dedup".into()),
        all_pass_task: Some("expense-report".into()),
        ..Default::default()
    };
    let run = run_to_end(app, &env, ALICE, shaped).await;
    // Seen once beside a CPU hog: this run ended `failed`; its reason and events say why.
    let d = app.get(&format!("/api/challenges/{CHALLENGE}/runs/{run}")).await.json();
    assert_eq!(d["state"], "scored", "{d:#}");
    assert_eq!(code(&collect(app, &run, BOB).await), (403, "NOT_AUTHOR_OR_EDITOR".into()));
    let r = collect(app, &run, ALICE).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let v = r.json();
    assert_eq!(v["status"], "pending");
    assert_eq!(v["trials"], 3);
    assert_eq!(v["paired_tasks"], 12);
    assert!(v["baseline_pass_rate"].as_f64().unwrap() <= 1.0);
    let delta = v["delta_pp"].as_f64().unwrap();
    let ci = v["ci95_pp"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() < delta && delta < ci[1].as_f64().unwrap());
    assert_eq!(v["suites"][0]["suite"], "local-heldout");
    assert_eq!(v["task_identities"].as_array().unwrap().len(), 2);
    // What training learned, from GRPO's own records in its jobs folder.
    let t = &v["training"];
    assert_eq!(
        t["summary"],
        "0 of 2 tasks gave the model something to learn; 1 was always solved, 1 was never sampled."
    );
    let verdicts: Vec<(&str, &str)> = t["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["task"].as_str().unwrap(), x["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(verdicts, [("contacts-dedup", "never_sampled"), ("expense-report", "always_solved")], "{t:#}");
    assert_eq!(t["tasks"][1]["pass_rate"], 1.0);
    assert_eq!(t["planned_steps"], 10);
    // The curves: every step TRL logged, whichever source told first, to the ten planned.
    let d = app.get(&format!("/api/challenges/{CHALLENGE}/runs/{run}")).await.json();
    let steps: Vec<u64> =
        d["training"]["points"].as_array().unwrap().iter().map(|p| p["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, (1..=10).collect::<Vec<_>>(), "{:#}", d["training"]);
    assert_eq!(
        (d["training"]["planned_steps"].clone(), d["training_steps_logged"].clone()),
        (json!(10), json!(10))
    );
    assert_eq!(d["training"]["points"][0]["metrics"]["reward"], 1.0, "every drawn rollout passes");
    // The run page draws them on the server: three panels, a dot a step, the axis ending at 10.
    let page = app.get(&format!("/arena/runs/{run}")).await.text();
    assert!(page.contains("10 optimizer steps logged, the latest step 10 of 10 planned"), "{page}");
    assert_eq!(page.matches("<figure class=\"curve").count(), 3);
    assert!(page.contains("0 of 2 tasks gave the model something to learn"), "the result's table");
    // The number the (simulated) pipeline's own score_v2 reports: its Python and the arena's Rust
    // agree.
    let ds = app.repos.join("datasets").join(RUNS_DATASET);
    let score: Value = serde_json::from_str(&crate::harness::git(
        &ds,
        &["show", &format!("main:runs/{run}/reports/score.json")],
    ))
    .unwrap();
    let reported = score["score_v2"]["pooled"]["delta"]["delta"].as_f64().unwrap();
    assert!((reported * 100.0 - delta).abs() < 1e-9, "{reported} vs {delta}");
    // `arena verify-run` on a local copy of the runs dataset agrees, without a server; and names
    // the first difference of a copy whose report was edited.
    let copy = tempfile::tempdir().unwrap();
    let archive = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("git -C '{}' archive main | tar -x -C '{}'", ds.display(), copy.path().display()))
        .status()
        .unwrap();
    assert!(archive.success());
    let offline = server::local::verify_run(copy.path(), &run).unwrap();
    // Equal up to the last bit a REAL column may round.
    let same = |a: &Value, b: &Value| (a.as_f64().unwrap() - b.as_f64().unwrap()).abs() < 1e-9;
    assert!(
        same(&offline["delta_pp"], &v["delta_pp"]) && same(&offline["stderr_pp"], &v["stderr_pp"]),
        "{offline:#}"
    );
    assert!(same(&offline["suites"][0]["delta_pp"], &v["suites"][0]["delta_pp"]));
    assert!(same(&offline["suites"][0]["stderr_pp"], &v["suites"][0]["stderr_pp"]));
    assert_eq!(
        (offline["trials"].clone(), offline["infra_error_cells"].clone()),
        (v["trials"].clone(), v["infra_error_cells"].clone())
    );
    assert_eq!(offline["training"], v["training"], "verify-run reads GRPO's records as collect does");
    // A train_task_stats.json that leaves a train task out is refused, naming it.
    let stats_path = copy.path().join(format!("runs/{run}/jobs/grpo-train/train_task_stats.json"));
    let stats: Value = serde_json::from_slice(&std::fs::read(&stats_path).unwrap()).unwrap();
    let mut short = stats.clone();
    short["tasks"].as_object_mut().unwrap().remove("expense-report");
    std::fs::write(&stats_path, serde_json::to_vec(&short).unwrap()).unwrap();
    let e = server::local::verify_run(copy.path(), &run).unwrap_err().to_string();
    assert!(e.contains("does not account for train task `expense-report`"), "{e}");
    std::fs::remove_file(&stats_path).unwrap();
    let e = server::local::verify_run(copy.path(), &run).unwrap_err().to_string();
    assert!(e.contains("train_task_stats.json is missing"), "{e}");
    std::fs::write(&stats_path, serde_json::to_vec(&stats).unwrap()).unwrap();
    let score_path = copy.path().join(format!("runs/{run}/reports/score.json"));
    let mut edited = score.clone();
    edited["score_v2"]["suites"][0]["baseline"]["pass_rate"] = json!(0.99);
    std::fs::write(&score_path, serde_json::to_vec(&edited).unwrap()).unwrap();
    let e = server::local::verify_run(copy.path(), &run).unwrap_err().to_string();
    assert!(e.contains("score_v2.suites[0].baseline.pass_rate: the report says 0.99"), "{e}");
    let again = collect(app, &run, EVE).await;
    assert_eq!((again.status, again.json()["existing"].clone()), (StatusCode::OK, json!(true)));

    // Review: editors only, a factual note, once.
    assert_eq!(code(&review(app, &run, true, ALICE).await), (403, "FORBIDDEN".into()));
    let short = app
        .post_as(
            &format!("/api/challenges/{CHALLENGE}/runs/{run}/result/review"),
            r#"{"accepted":true,"note":"ok"}"#,
            EVE,
        )
        .await;
    assert_eq!(code(&short), (422, "INVALID_REVIEW".into()));
    let ok = review(app, &run, true, EVE).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text());
    assert_eq!(ok.json()["status"], "accepted");
    assert_eq!(ok.json()["review"]["by"], "eve");
    assert_eq!(code(&review(app, &run, false, EVE).await), (409, "REVIEW_EXISTS".into()), "whatever it says");
    assert_eq!(code(&review(app, &run, true, EVE).await), (409, "REVIEW_EXISTS".into()));
    let body = app.post_as(&format!("/api/challenges/{CHALLENGE}/runs/{run}/result/review"), "{}", EVE).await;
    assert_eq!(code(&body), (400, "INVALID_JSON".into()));
    assert_eq!(code(&review(app, "run-0", true, EVE).await), (404, "RESULT_NOT_FOUND".into()));
});

// One scored run, its evidence edited case by case as a pipeline that lied or lost files would
// have published it (each case starts from the pipeline's own commit): a refusal stores nothing,
// so the same run is refused again and again.
on_both_backends!(local, collect_refuses_evidence_that_does_not_hold_up, |app| {
    app.hub.jobs.stage_ms.store(40, std::sync::atomic::Ordering::Relaxed);
    let env = submitted(app, "alice/pack", ALICE).await;
    let run = run_to_end(app, &env, ALICE, JobFaults::default()).await;
    let published = app.text(&format!("SELECT results_commit FROM runs WHERE id = '{run}'")).await;
    let from_published = format!("UPDATE runs SET results_commit = '{published}' WHERE id = '{run}'");
    // Each case edits one file on top of the last: the case before is put back first.
    // Not scored (it failed): nothing to collect.
    app.exec(&format!("UPDATE runs SET state = 'failed' WHERE id = '{run}'")).await.unwrap();
    assert_eq!(code(&collect(app, &run, ALICE).await), (409, "RUN_NOT_SCORED".into()));
    app.exec(&format!("UPDATE runs SET state = 'scored' WHERE id = '{run}'")).await.unwrap();
    // A report that differs from its cells (the stand-in's `mismatch` fault writes the same).
    edit_evidence(app, &run, &format!("runs/{run}/reports/score.json"), |report| {
        let delta = &mut report["score_v2"]["pooled"]["delta"]["delta"];
        *delta = json!(delta.as_f64().unwrap() + 0.05);
    })
    .await;
    let r = collect(app, &run, ALICE).await;
    assert_eq!(code(&r), (422, "RESULT_MISMATCH".into()));
    // The details name held-out tasks: the author is told the code, an editor where.
    assert!(
        r.json()["message"].as_str().unwrap().contains("only a BenchFlow editor sees them"),
        "{}",
        r.text()
    );
    let r = collect(app, &run, EVE).await;
    assert!(r.json()["message"].as_str().unwrap().contains("score_v2.pooled.delta.delta"), "{}", r.text());
    // Cells that leave a task out.
    restore_evidence(app, &run, &published, &format!("runs/{run}/reports/score.json")).await;
    let path = format!("runs/{run}/reports/eval_task_outcomes.json");
    edit_evidence(app, &run, &path, |cells| {
        for cell in cells["arms"]["final"]["cells"].as_array_mut().unwrap() {
            cell["outcomes"].as_object_mut().unwrap().remove("local-heldout-07");
        }
    })
    .await;
    let r = collect(app, &run, ALICE).await;
    assert_eq!(code(&r), (422, "RESULT_INCOMPLETE".into()));
    assert!(!r.text().contains("local-heldout"), "no held-out task id for the author: {}", r.text());
    let r = collect(app, &run, EVE).await;
    assert_eq!(code(&r), (422, "RESULT_INCOMPLETE".into()));
    assert!(r.json()["message"].as_str().unwrap().contains("local-heldout-07"));
    // GRPO's records that name a task the run did not train on.
    restore_evidence(app, &run, &published, &path).await;
    let path = format!("runs/{run}/jobs/grpo-train/train_task_stats.json");
    edit_evidence(app, &run, &path, |stats| {
        stats["tasks"]["someone-elses-task"] = stats["tasks"]["expense-report"].clone();
    })
    .await;
    let r = collect(app, &run, ALICE).await;
    assert_eq!(code(&r), (422, "TRAINING_RECORDS_INVALID".into()));
    assert!(r.json()["message"].as_str().unwrap().contains("names `someone-elses-task`"), "{}", r.text());
    // Files gone: a run marked scored whose results commit holds no result (its bundle's commit,
    // from before the pipeline wrote any).
    let bundle = app.text(&format!("SELECT bundle_commit FROM runs WHERE id = '{run}'")).await;
    app.exec(&format!("UPDATE runs SET results_commit = '{bundle}' WHERE id = '{run}'")).await.unwrap();
    assert_eq!(code(&collect(app, &run, ALICE).await), (422, "RESULT_FILES_MISSING".into()));
    // Nothing was stored by any refusal; the pipeline's own evidence is still collected.
    assert_eq!(app.scalar("SELECT COUNT(*) FROM results").await, 0);
    let none = app.get(&format!("/api/challenges/{CHALLENGE}/runs/{run}/result")).await;
    assert_eq!(code(&none), (404, "RESULT_NOT_FOUND".into()));
    app.exec(&from_published).await.unwrap();
    let r = collect(app, &run, ALICE).await;
    assert_eq!(r.status, StatusCode::CREATED, "the pipeline's own evidence holds up: {}", r.text());
});

on_both_backends!(local, the_leaderboard_ranks_the_mean_of_accepted_runs, |app| {
    app.hub.jobs.stage_ms.store(40, std::sync::atomic::Ordering::Relaxed);
    let a = submitted(app, "alice/pack", ALICE).await;
    let b = submitted(app, "bob/pack", BOB).await;
    let mut a_runs = Vec::new();
    for _ in 0..2 {
        let run = run_to_end(app, &a, ALICE, JobFaults::default()).await;
        assert_eq!(collect(app, &run, ALICE).await.status, StatusCode::CREATED);
        assert_eq!(review(app, &run, true, EVE).await.status, StatusCode::OK);
        a_runs.push(run);
    }
    let b1 = run_to_end(app, &b, BOB, JobFaults::default()).await;
    collect(app, &b1, BOB).await;
    review(app, &b1, true, EVE).await;
    let b2 = run_to_end(app, &b, BOB, JobFaults::default()).await;
    collect(app, &b2, BOB).await;
    review(app, &b2, false, EVE).await;
    let pending = run_to_end(app, &b, BOB, JobFaults::default()).await;
    collect(app, &pending, BOB).await;

    let board = app.get(&format!("/api/challenges/{CHALLENGE}/leaderboard")).await.json();
    assert_eq!(board["benchmark"], "local-heldout", "one suite: the ranking is on it");
    assert_eq!(board["benchmarks"], json!(["local-heldout"]));
    assert_eq!(board["pending_count"], 1);
    let rows = board["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let row = |env: &str| rows.iter().find(|r| r["environment_id"] == env).unwrap().clone();
    let (ra, rb) = (row(&a), row(&b));
    assert_eq!((ra["verified_runs"].clone(), ra["rejected_runs"].clone()), (json!(2), json!(0)));
    assert_eq!((rb["verified_runs"].clone(), rb["rejected_runs"].clone()), (json!(1), json!(1)));
    let deltas: Vec<f64> =
        ra["run_deltas_pp"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert!((ra["delta_pp"].as_f64().unwrap() - (deltas[0] + deltas[1]) / 2.0).abs() < 1e-9, "the mean");
    assert_eq!(ra["run_ids"], json!(a_runs));
    // Only A has repeats: the pooled run-to-run SD is |Δ1 − Δ2| / sqrt(2).
    let sd = board["per_run_sd_pp"].as_f64().unwrap();
    assert!((sd - (deltas[0] - deltas[1]).abs() / 2f64.sqrt()).abs() < 1e-9);
    assert_eq!(rows[0]["rank"], 1);
    assert_eq!(rows[0]["tied_with_leader"], true);
    assert_eq!(ra["title"], "alice/pack");

    let on_bench =
        app.get(&format!("/api/challenges/{CHALLENGE}/leaderboard?benchmark=local-heldout")).await.json();
    assert_eq!(on_bench["rows"], board["rows"]);
    let other = app.get(&format!("/api/challenges/{CHALLENGE}/leaderboard?benchmark=openenv-heldout")).await;
    assert_eq!(code(&other), (404, "BENCHMARK_NOT_SCORED".into()));
    assert!(other.json()["message"].as_str().unwrap().contains("local-heldout"));
    let bench = app.get("/api/benchmarks/local-heldout").await.json();
    assert_eq!(bench["leaderboards"][0]["challenge_id"], CHALLENGE);
    assert_eq!(bench["leaderboards"][0]["rows"].as_array().unwrap().len(), 2);
});

on_both_backends!(local, the_gate_plan_is_deterministic_and_attach_judges_it_again, |app| {
    let env = submitted(app, "alice/pack", ALICE).await;
    let uri = format!("/api/challenges/{CHALLENGE}/environments/{env}/gates");
    let first = app.get_as(&format!("{uri}/plan"), ALICE).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text());
    assert_eq!(first.body, app.get_as(&format!("{uri}/plan"), EVE).await.body, "the same bytes every time");
    let plan = first.json();
    assert_eq!(plan["tasks"].as_array().unwrap().len(), 2);
    assert_eq!(plan["policy"], json!({"controls_reruns": 8, "band_attempts": 4, "no_oracle": "allow"}));
    assert_eq!(code(&app.get_as(&format!("{uri}/plan"), BOB).await), (403, "NOT_AUTHOR_OR_EDITOR".into()));
    assert_eq!(
        code(&app.get_as(&format!("{uri}/plan?band_attempts=1"), ALICE).await),
        (422, "INVALID_POLICY".into())
    );
    let got = app.get(&uri).await.json();
    assert_eq!(got["static"]["eligible"], 2);
    assert_eq!(got["verdict"], Value::Null);

    let trials = |reward: f64, n: usize| vec![json!({"reward": reward, "checks_passed": true}); n];
    let tasks: Vec<Value> = plan["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            json!({"task": t["task"], "oracle": trials(1.0, 8), "noop": trials(0.0, 8),
                "band": [{"reward": 1.0}, {"reward": 0.0}, {"reward": 0.0}, {"reward": 0.0}]})
        })
        .collect();
    let results = json!({"schema_version": 1, "plan_hash": plan["plan_hash"], "environment_id": env,
        "policy": plan["policy"], "tasks": tasks});
    assert_eq!(code(&app.post_as(&uri, &results.to_string(), ALICE).await), (403, "FORBIDDEN".into()));
    let mut other = results.clone();
    other["policy"]["band_attempts"] = json!(6);
    assert_eq!(code(&app.post_as(&uri, &other.to_string(), EVE).await), (409, "PLAN_CHANGED".into()));
    let r = app.post_as(&uri, &results.to_string(), EVE).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let verdicts = r.json()["verdict"]["tasks"].as_array().unwrap().clone();
    assert_eq!(verdicts.len(), 2);
    assert!(verdicts.iter().all(|v| v["verdict"] == "accepted"), "{verdicts:#?}");
    assert_eq!(verdicts[0]["band_pass_rate"], 0.25);
    assert_eq!(app.get(&uri).await.json()["verdict"]["attached_by"], "eve");
});

// Worked by hand, over the local demo's twelve held-out tasks and three trials, the cells the
// simulated evaluation is told to give: t01 before [1, 0, 0] after [1, 1, 1] (d = 2/3); t02 before
// [0, 0, 0] after [1, timeout scored 0, 1] (d = 2/3: the timeout is a failure); t03 before
// [1, infrastructure error, 1] after [1, 1, 0] (the infrastructure cell is left out: 1 → 2/3,
// d = −1/3); nine tasks failing throughout (d = 0). Δ = 1/12 = 8.33 pp; s_d² = 1/12, so
// SE = sqrt(1/12 / 12) = 1/12 = 8.33 pp; before 1/9, after 7/36 on the twelve paired tasks.
on_both_backends!(
    local,
    a_run_collects_the_hand_worked_delta_with_a_scored_timeout_and_an_infrastructure_cell,
    |app| {
        app.hub.jobs.stage_ms.store(40, std::sync::atomic::Ordering::Relaxed);
        let env = submitted(app, "alice/pack", ALICE).await;
        let fail = json!(["fail", "fail", "fail"]);
        let faults = JobFaults {
            script: Some(json!({
                "local-heldout-01": {"baseline": ["pass", "fail", "fail"], "final": ["pass", "pass", "pass"]},
                "local-heldout-02": {"baseline": fail, "final": ["pass", "fail", "pass"]},
                "local-heldout-03": {"baseline": ["pass", "pass", "pass"], "final": ["pass", "pass", "fail"]},
                "*": {"baseline": fail, "final": fail},
            })),
            timeout: vec!["posttrain_eval.local-heldout.t02:local-heldout-02".into()],
            infra: vec!["baseline_eval.local-heldout.t02:local-heldout-03".into()],
            ..Default::default()
        };
        let run = run_to_end(app, &env, ALICE, faults).await;
        let r = collect(app, &run, ALICE).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
        let v = r.json();
        let close = |field: &str, want: f64| {
            let got = v[field].as_f64().unwrap_or(f64::NAN);
            assert!((got - want).abs() < 1e-9, "{field}: {got} vs {want}");
        };
        close("delta_pp", 100.0 / 12.0);
        close("stderr_pp", 100.0 / 12.0);
        close("baseline_pass_rate", 1.0 / 9.0);
        close("after_pass_rate", 7.0 / 36.0);
        assert_eq!(
            (v["paired_tasks"].clone(), v["infra_error_cells"].clone(), v["trials"].clone()),
            (json!(12), json!(1), json!(3))
        );
        // The run page's baseline stage counts the scored timeout and the infrastructure error.
        let d = app.get(&format!("/api/challenges/{CHALLENGE}/runs/{run}")).await.json();
        let stage =
            |name: &str| d["stages"].as_array().unwrap().iter().find(|s| s["stage"] == name).unwrap().clone();
        assert_eq!(
            (stage("baseline")["errors"].clone(), stage("baseline")["total"].clone()),
            (json!(1), json!(36))
        );
        assert_eq!(
            (stage("heldout")["timeouts"].clone(), stage("heldout")["passed"].clone()),
            (json!(1), json!(7))
        );
    }
);

/// A suite of one task: the pipeline gives its Δ no standard error (`null`), and so does the
/// stored result; the leaderboard ranks it by its Δ.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_task_suite_stores_and_shows_a_null_standard_error() {
    for backend in crate::harness::BACKENDS {
        let options = crate::harness::Options::local();
        std::fs::write(
            options.configs_dir.join("fixture/task-lists/local-heldout.txt"),
            "local-heldout-01\n",
        )
        .unwrap();
        let app = TestApp::with(backend, options).await;
        app.hub.jobs.stage_ms.store(40, std::sync::atomic::Ordering::Relaxed);
        let env = submitted(&app, "alice/pack", ALICE).await;
        let faults = JobFaults {
            script: Some(
                json!({"local-heldout-01": {"baseline": ["fail", "fail", "fail"], "final": ["pass", "fail", "pass"]}}),
            ),
            ..Default::default()
        };
        let run = run_to_end(&app, &env, ALICE, faults).await;
        let r = collect(&app, &run, ALICE).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
        let v = r.json();
        assert!((v["delta_pp"].as_f64().unwrap() - 200.0 / 3.0).abs() < 1e-9);
        assert_eq!((v["stderr_pp"].clone(), v["ci95_pp"].clone()), (Value::Null, Value::Null), "{v:#}");
        assert_eq!(v["suites"][0]["stderr_pp"], Value::Null);
        assert_eq!(review(&app, &run, true, EVE).await.status, StatusCode::OK);
        let board = app.get(&format!("/api/challenges/{CHALLENGE}/leaderboard")).await.json();
        assert_eq!(board["rows"][0]["stderr_pp"], Value::Null);
        assert_eq!(board["rows"][0]["rank"], 1);
        let page = app.get(&format!("/arena/runs/{run}")).await.text();
        assert!(page.contains("n/a (one paired task)"), "the run page says there is no standard error");
        app.finish().await;
    }
}
