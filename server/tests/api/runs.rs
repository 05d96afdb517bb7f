//! Runs through the API: the preflight's checks in order, every refusal of a launch (and that a
//! refusal stores nothing), the launch through the stand-in's HF Jobs and dataset commits, the
//! idempotent repeat, the race, HF's 402 and 5xx, and resuming a launch after a crash.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::harness::{
    copy_tree, fixture, Backend, Options, TestApp, ALICE, ARENA_BOT, BOB, EVE, RUNS_DATASET,
};
use crate::on_both_backends;

const CHALLENGE: &str = "local-demo";

/// Publishes a fixture as alice's dataset and submits it; answers the collection id.
async fn submitted(app: &TestApp, case: &str, repo: &str, token: &str) -> String {
    app.publish("datasets", repo, &fixture(case));
    let body = json!({"agent_id": null, "challenge_id": CHALLENGE, "repo_type": "dataset", "repo_id": repo,
        "revision": "main", "entry_path": "", "title": repo, "notes": ""});
    let r = app.post_as("/api/environments", &body.to_string(), token).await;
    assert!(r.status.is_success(), "{}", r.text());
    r.json()["environment_id"].as_str().unwrap().to_string()
}

fn run_body(request_id: &str, env: &str) -> String {
    json!({"request_id": request_id, "environment_id": env}).to_string()
}

async fn launch(app: &TestApp, request_id: &str, env: &str, token: &str) -> crate::harness::Answer {
    app.post_as(&format!("/api/challenges/{CHALLENGE}/runs"), &run_body(request_id, env), token).await
}

async fn preflight(app: &TestApp, env: &str, token: Option<&str>) -> Value {
    let uri = format!("/api/challenges/{CHALLENGE}/runs/preflight?environment_id={env}");
    let r = match token {
        Some(t) => app.get_as(&uri, t).await,
        None => app.get(&uri).await,
    };
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    r.json()
}

fn oks(p: &Value) -> Vec<Value> {
    p["checks"].as_array().unwrap().iter().map(|c| c["ok"].clone()).collect()
}

async fn rows(app: &TestApp) -> (i64, i64) {
    (app.scalar("SELECT COUNT(*) FROM runs").await, app.scalar("SELECT COUNT(*) FROM budget_ledger").await)
}

/// The stand-in's jobs that carry the run's label.
fn jobs_of(app: &TestApp, run_id: &str) -> usize {
    let jobs = app.hub.jobs.jobs.lock().unwrap();
    jobs.iter().filter(|j| j.view.labels.get("arena-run").map(String::as_str) == Some(run_id)).count()
}

on_both_backends!(local, the_preflight_shows_every_check_in_order_and_stores_nothing, |app| {
    let env = submitted(app, "good", "alice/pack", ALICE).await;
    let p = preflight(app, &env, Some(ALICE)).await;
    assert_eq!(p["allowed"], true, "{p:#}");
    let names: Vec<&str> =
        p["checks"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "challenge open",
            "signed in",
            "author or editor",
            "no counted run in the last 24 hours",
            "job layout valid",
            "no other arena job active",
            "cap covers the allocation",
            "at least one eligible task",
            "no training task named like a held-out task"
        ]
    );
    // h200x2 at $10/h for the 900 s timeout.
    assert_eq!(p["max_compute_usd"], 2.5);
    assert_eq!(p["eligible_tasks"], 2);
    assert!(p["checks"][4]["detail"].as_str().unwrap().contains("h200x2"));

    let anon = preflight(app, &env, None).await;
    assert_eq!(anon["allowed"], false);
    assert_eq!(oks(&anon)[1..3], [json!(false), Value::Null]);
    let bob = preflight(app, &env, Some(BOB)).await;
    assert_eq!(oks(&bob)[2], json!(false));
    let editor = preflight(app, &env, Some(EVE)).await;
    assert_eq!(editor["allowed"], true);

    // The real challenge: runs paused, provider planned, so no quote.
    let real = app
        .get_as(&format!("/api/challenges/openenv-9b/runs/preflight?environment_id={env}"), ALICE)
        .await
        .json();
    assert_eq!(real["checks"][0]["ok"], false);
    assert!(real["checks"][0]["detail"].as_str().unwrap().contains("paused"));
    assert_eq!(real["max_compute_usd"], Value::Null);

    assert_eq!(rows(app).await, (0, 0));
    let missing =
        app.get(&format!("/api/challenges/{CHALLENGE}/runs/preflight?environment_id=env-0000")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let no_env = app.get(&format!("/api/challenges/{CHALLENGE}/runs/preflight")).await;
    assert_eq!(no_env.json()["code"], "INVALID_QUERY");
});

on_both_backends!(local, a_launch_mirrors_the_collection_and_starts_one_labelled_job, |app| {
    let env = submitted(app, "good", "alice/pack", ALICE).await;
    let r = launch(app, "alice-run-0001", &env, ALICE).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let v = r.json();
    let run = v["run"]["run_id"].as_str().unwrap().to_string();
    assert_eq!((v["existing"].clone(), v["launched"].clone()), (json!(false), json!(true)));
    assert_eq!(v["run"]["state"], "queued");
    assert_eq!(v["run"]["request_key"], "alice-run-0001");
    assert_eq!(v["run"]["max_compute_usd"], 2.5);
    assert!(v["run"]["job_url"].as_str().unwrap().contains("/jobs/benchflow/"));
    assert_eq!(jobs_of(app, &run), 1);

    // The job: the uv image running the arena's job script by URL (pinned by its hash) on the
    // bundle's commit, the flavor and timeout, its labels, the bridge's port exposed publicly, and
    // the secrets the pipeline needs: the arena's token, Daytona's key, the run's relay secret and
    // its bridge key.
    let job = {
        let jobs = app.hub.jobs.jobs.lock().unwrap();
        jobs.iter().find(|j| j.view.labels.get("arena-run") == Some(&run)).unwrap().view.clone()
    };
    assert_eq!(job.docker_image.as_deref(), Some("ghcr.io/astral-sh/uv:python3.12-bookworm"));
    assert_eq!(job.command[..5], ["uv", "run", "--python", "3.12", &format!("{}/arena_job.py", app.url)]);
    let arg = |name: &str| job.command.windows(2).find(|w| w[0] == name).map(|w| w[1].clone()).unwrap();
    let bundle = format!("job-inputs/{run}");
    assert_eq!(arg("--bundle-path"), bundle);
    assert_eq!(arg("--bundle-repo"), RUNS_DATASET);
    assert_eq!(arg("--posttrainarena-ref"), "bcbaffb58a19829d05fa483662c358e6ed5ba353");
    let script = app.get("/arena_job.py").await;
    assert_eq!(
        arg("--script-sha256"),
        server::identity::sha256_hex(&script.text()),
        "the hash of the served script"
    );
    assert!(job.arguments.is_empty());
    assert_eq!(job.flavor, "h200x2");
    assert_eq!(job.timeout, 900);
    assert_eq!((job.attempts, job.retry), (2, 1), "HF answers retry = attempts - 1");
    let mut secrets = job.secrets.clone();
    secrets.sort();
    assert_eq!(secrets, ["ARENA_RUN_SECRET", "BENCHFLOW_PROVIDER_API_KEY", "DAYTONA_API_KEY", "HF_TOKEN"]);
    assert_eq!(job.environment["ARENA_RUN_ID"], run);
    assert_eq!(job.environment["ARENA_JOB_NAMESPACE"], "benchflow");
    let port = domain::pipeline::bundle::bridge_port(&run);
    let expose = job.expose.clone().unwrap();
    assert_eq!((expose.ports, expose.ports_public), (vec![port], vec![port]));
    assert_eq!(job.labels["arena-challenge"], CHALLENGE);
    assert_eq!(job.labels["arena-request"], "alice-run-0001");

    // The bundle in the runs dataset, as the pipeline's create_job_bundle lays it out, and the
    // collection mirrored beside it at the commit its config names.
    let ds = app.repos.join("datasets").join(RUNS_DATASET);
    let show = |path: &str| crate::harness::git(&ds, &["show", &format!("main:{path}")]);
    let train = show(&format!("{bundle}/task-lists/train_dataset.txt"));
    assert_eq!(train.lines().count(), 2, "the eligible tasks: {train}");
    let manifest: Value = serde_json::from_str(&show(&format!("{bundle}/job.json"))).unwrap();
    assert_eq!(
        manifest,
        json!({"artifact_repo": RUNS_DATASET, "config": "config.toml", "leaderboard_repo": crate::harness::LEADERBOARD_DATASET,
               "model_repo": null, "private_artifacts": true, "private_model": true, "run_id": run,
               "schema_version": 1, "submission_id": env, "team_name": "alice"})
    );
    let config: toml::Table = toml::from_str(&show(&format!("{bundle}/config.toml"))).unwrap();
    assert_eq!(domain::pipeline::keys::check(&config), Vec::<String>::new(), "only keys the loader reads");
    let mirror = config["train_dataset"]["revision"].as_str().unwrap();
    assert_eq!(config["train_dataset"]["path"].as_str(), Some(format!("collections/{run}/envs").as_str()));
    assert_eq!(
        config["eval_suites"][0]["task_list"].as_str(),
        Some("task-lists/eval_suite-local-heldout.txt")
    );
    let heldout = show(&format!("{bundle}/task-lists/eval_suite-local-heldout.txt"));
    assert_eq!(heldout.lines().count(), 12);
    let in_mirror =
        crate::harness::git(&ds, &["show", &format!("{mirror}:collections/{run}/submission.yaml")]);
    assert!(in_mirror.contains("team_name"));
    let setup: Value = serde_json::from_str(&show(&format!("{bundle}/arena.json"))).unwrap();
    assert_eq!(setup["bridge"]["port"], port);
    // The leaderboard dataset the pipeline writes exists, and is private.
    assert!(app.state.deps.datasets.is_private(crate::harness::LEADERBOARD_DATASET).await.unwrap());

    // The ledger holds its reservation; the budget says so.
    let ledger = app.get("/api/arena/jobs").await.json();
    assert_eq!(ledger["reservations"][0]["run_id"], run.as_str());
    assert_eq!(ledger["reservations"][0]["state"], "live");
    assert_eq!(ledger["budget"]["live_reservations_usd"], 2.5);
    let runs = app.get(&format!("/api/challenges/{CHALLENGE}/runs")).await.json();
    assert_eq!(runs["runs"][0]["status"], "SCHEDULING");

    // The same request again: the same run, no second job.
    let again = launch(app, "alice-run-0001", &env, ALICE).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text());
    assert_eq!(again.json()["run"]["run_id"], run.as_str());
    assert_eq!(again.json()["existing"], true);
    assert_eq!(jobs_of(app, &run), 1);
    // The same request id for something else: refused.
    let other_env = submitted(app, "no-oracle", "alice/other", ALICE).await;
    let reused = launch(app, "alice-run-0001", &other_env, ALICE).await;
    assert_eq!(reused.status, StatusCode::CONFLICT);
    assert_eq!(reused.json()["code"], "REQUEST_ID_REUSED");
    assert_eq!(rows(app).await, (1, 1));

    let detail = app.get(&format!("/api/challenges/{CHALLENGE}/runs/{run}")).await.json();
    let kinds: Vec<&str> =
        detail["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds[..4], ["requested", "collection mirrored", "mirrored", "launched"]);
});

/// The job gets the secrets the pipeline needs from the arena's own environment: without one, the
/// preflight's layout check and the launch say which, before anything is reserved or written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_job_secret_refuses_the_launch_by_name_and_stores_nothing() {
    for backend in crate::harness::BACKENDS {
        let options = crate::harness::Options {
            job_secrets: vec![("HF_TOKEN", crate::harness::ARENA_BOT)],
            ..crate::harness::Options::local()
        };
        let app = TestApp::with(backend, options).await;
        let env = submitted(&app, "good", "alice/pack", ALICE).await;
        let p = preflight(&app, &env, Some(ALICE)).await;
        assert_eq!(p["allowed"], false);
        let layout = &p["checks"][4];
        assert_eq!((layout["name"].clone(), layout["ok"].clone()), (json!("job layout valid"), json!(false)));
        assert!(layout["detail"].as_str().unwrap().contains("DAYTONA_API_KEY"), "{layout:#}");
        let r = launch(&app, "alice-run-0001", &env, ALICE).await;
        assert_eq!(r.json()["code"], "LAYOUT_INVALID", "{}", r.text());
        assert!(r.json()["message"].as_str().unwrap().contains("DAYTONA_API_KEY"));
        assert_eq!(rows(&app).await, (0, 0), "nothing reserved");
        assert!(app.state.deps.datasets.head(RUNS_DATASET).await.is_err(), "nothing mirrored");
        let jobs = app.get_as("/api/jobs", EVE).await.json();
        let daytona = jobs["job_secrets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "DAYTONA_API_KEY")
            .unwrap()
            .clone();
        assert_eq!(
            daytona,
            json!({"name": "DAYTONA_API_KEY", "needed_by": ["local-demo"], "configured": false})
        );
        app.finish().await;
    }
}

on_both_backends!(local, every_refusal_has_its_status_and_code_and_stores_nothing, |app| {
    let env = submitted(app, "good", "alice/pack", ALICE).await;
    let refused = |r: &crate::harness::Answer, status: u16, code: &str| {
        assert_eq!(r.status.as_u16(), status, "{}", r.text());
        assert_eq!(r.json()["code"], code, "{}", r.text());
    };
    // Not signed in, not the author, a paused challenge, an unknown collection, a bad body.
    let anon = app
        .request(
            axum::http::Method::POST,
            &format!("/api/challenges/{CHALLENGE}/runs"),
            Some(&run_body("anon-run-01", &env)),
        )
        .await;
    refused(&anon, 401, "AUTH_REQUIRED");
    refused(&launch(app, "bob-run-0001", &env, BOB).await, 403, "NOT_AUTHOR_OR_EDITOR");
    let paused =
        app.post_as("/api/challenges/openenv-9b/runs", &run_body("alice-run-paused", &env), ALICE).await;
    refused(&paused, 409, "CHALLENGE_NOT_OPEN");
    refused(&launch(app, "alice-run-0404", "env-00000000", ALICE).await, 404, "ENVIRONMENT_NOT_FOUND");
    refused(&launch(app, "short", &env, ALICE).await, 422, "INVALID_RUN_REQUEST");
    let unknown_field = app
        .post_as(
            &format!("/api/challenges/{CHALLENGE}/runs"),
            r#"{"request_id":"alice-run-x1","environment_id":"e","x":1}"#,
            ALICE,
        )
        .await;
    refused(&unknown_field, 400, "INVALID_JSON");
    // No eligible task.
    let leaky = submitted(app, "dockerfile-copies-oracle", "alice/leaky", ALICE).await;
    refused(&launch(app, "alice-run-leaky", &leaky, ALICE).await, 422, "NO_ELIGIBLE_TASKS");
    // A training task named like a held-out task.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("good"), dir.path());
    let envs = dir.path().join("envs");
    let first = std::fs::read_dir(&envs).unwrap().next().unwrap().unwrap().path();
    std::fs::rename(&first, envs.join("local-heldout-01")).unwrap();
    app.publish("datasets", "alice/clash", dir.path());
    let body = json!({"agent_id": null, "challenge_id": CHALLENGE, "repo_type": "dataset", "repo_id": "alice/clash",
        "revision": "main", "entry_path": "", "title": "clash", "notes": ""});
    let clash = app.post_as("/api/environments", &body.to_string(), ALICE).await.json()["environment_id"]
        .as_str()
        .unwrap()
        .to_string();
    refused(&launch(app, "alice-run-clash", &clash, ALICE).await, 422, "HELDOUT_NAME_COLLISION");
    assert_eq!(rows(app).await, (0, 0), "a refused launch stores nothing");

    // One run goes; then the daily limit for its collection and the one slot for everyone else.
    assert_eq!(launch(app, "alice-run-0001", &env, ALICE).await.status, StatusCode::CREATED);
    let daily = launch(app, "alice-run-0002", &env, ALICE).await;
    refused(&daily, 429, "DAILY_RUN_LIMIT");
    assert!(daily.json()["retry_after_s"].as_u64().unwrap() > 23 * 3600);
    assert!(daily.headers.get("retry-after").is_some());
    let bobs = submitted(app, "good", "bob/pack", BOB).await;
    refused(&launch(app, "bob-run-0001", &bobs, BOB).await, 409, "ANOTHER_RUN_ACTIVE");
    assert_eq!(rows(app).await, (1, 1));
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_too_low_refuses_on_both_backends() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let local = Options::local();
        let arena = local.configs_dir.join("arena.toml");
        let text = std::fs::read_to_string(&arena).unwrap().replace("cap_usd = 5000.0", "cap_usd = 2.0");
        std::fs::write(&arena, text).unwrap();
        let app = TestApp::with(backend, local).await;
        let env = submitted(&app, "good", "alice/pack", ALICE).await;
        let r = launch(&app, "alice-run-0001", &env, ALICE).await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());
        assert_eq!(r.json()["code"], "CAP_EXCEEDED");
        assert!(r.json()["message"].as_str().unwrap().contains("$2.50"));
        assert_eq!(rows(&app).await, (0, 0));
        app.finish().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_launches_make_one_run_on_both_backends() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = TestApp::with(backend, Options::local()).await;
        let env = submitted(&app, "good", "alice/pack", ALICE).await;
        let answers = futures_util::future::join_all((0..50).map(|i| {
            let app = &app;
            let env = env.clone();
            async move { launch(app, &format!("alice-race-{i:04}"), &env, ALICE).await }
        }))
        .await;
        let created = answers.iter().filter(|a| a.status == StatusCode::CREATED).count();
        assert_eq!(created, 1, "{backend:?}");
        for a in answers.iter().filter(|a| a.status != StatusCode::CREATED) {
            let code = a.json()["code"].as_str().unwrap().to_string();
            assert!(["ANOTHER_RUN_ACTIVE", "DAILY_RUN_LIMIT"].contains(&code.as_str()), "{}", a.text());
        }
        assert_eq!(rows(&app).await, (1, 1), "{backend:?}");
        assert_eq!(app.scalar("SELECT COUNT(*) FROM budget_ledger WHERE state = 'live'").await, 1);
        assert_eq!(app.hub.jobs.jobs.lock().unwrap().len(), 1);
        app.finish().await;
    }
}

/// The same request sent many times at once (retries, or two replicas): one run, and every answer
/// is that run, never a refusal by the checks its own run now fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_request_sent_at_once_many_times_is_one_run_in_every_answer() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = TestApp::with(backend, Options::local()).await;
        let env = submitted(&app, "good", "alice/pack", ALICE).await;
        let answers = futures_util::future::join_all((0..20).map(|_| {
            let app = &app;
            let env = env.clone();
            async move { launch(app, "alice-same-0001", &env, ALICE).await }
        }))
        .await;
        let created = answers.iter().filter(|a| a.status == StatusCode::CREATED).count();
        assert_eq!(created, 1, "{backend:?}");
        let ids: std::collections::BTreeSet<String> = answers
            .iter()
            .map(|a| a.json()["run"]["run_id"].as_str().unwrap_or(&a.text()).to_string())
            .collect();
        assert_eq!(ids.len(), 1, "{backend:?}: {ids:?}");
        assert_eq!(rows(&app).await, (1, 1), "{backend:?}");
        app.finish().await;
    }
}

on_both_backends!(
    local,
    no_prepaid_credit_fails_the_run_releases_its_reservation_and_does_not_count,
    |app| {
        let env = submitted(app, "good", "alice/pack", ALICE).await;
        app.hub.jobs.faults.lock().unwrap().create_status = Some(402);
        let r = launch(app, "alice-run-0001", &env, ALICE).await;
        assert_eq!(r.status, StatusCode::BAD_GATEWAY, "{}", r.text());
        let v = r.json();
        assert_eq!(
            (v["code"].clone(), v["launched"].clone(), v["retry_with_same_request_id"].clone()),
            (json!("LAUNCH_FAILED"), json!(false), json!(false))
        );
        assert!(v["message"].as_str().unwrap().contains("tell an organizer"));
        let run = v["run_id"].as_str().unwrap().to_string();
        let detail = app.get(&format!("/api/challenges/{CHALLENGE}/runs/{run}")).await.json();
        assert_eq!(detail["state"], "failed");
        assert_eq!(detail["status"], "not launched");
        assert_eq!(detail["platform_fault"], true);
        assert_eq!(app.scalar("SELECT COUNT(*) FROM budget_ledger WHERE state = 'released'").await, 1);
        // The same file again answers the same failure; a new request id may run now.
        assert_eq!(launch(app, "alice-run-0001", &env, ALICE).await.json()["run_id"], run.as_str());
        let next = launch(app, "alice-run-0002", &env, ALICE).await;
        assert_eq!(next.status, StatusCode::CREATED, "{}", next.text());
    }
);

on_both_backends!(local, hf_down_leaves_the_outcome_unknown_and_the_same_request_finishes_it, |app| {
    let env = submitted(app, "good", "alice/pack", ALICE).await;
    {
        let mut f = app.hub.jobs.faults.lock().unwrap();
        f.create_status = Some(503);
        f.create_count = Some(1);
    }
    let r = launch(app, "alice-run-0001", &env, ALICE).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["code"].clone(), v["launched"].clone(), v["retry_with_same_request_id"].clone()),
        (json!("LAUNCH_UNKNOWN"), json!("unknown"), json!(true))
    );
    let run = v["run_id"].as_str().unwrap().to_string();
    assert_eq!(
        app.get(&format!("/api/challenges/{CHALLENGE}/runs")).await.json()["runs"][0]["status"],
        "not launched"
    );
    let again = launch(app, "alice-run-0001", &env, ALICE).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text());
    assert_eq!(again.json()["launched"], true);
    assert_eq!(jobs_of(app, &run), 1);
});

// The launch request and the background launcher of one server are two holders of a run's lease:
// pushed on at once, an unfinished launch still gets one bundle and one job.
on_both_backends!(local, one_server_advancing_a_launch_from_several_tasks_makes_one_job, |app| {
    let env = submitted(app, "good", "alice/pack", ALICE).await;
    {
        let mut f = app.hub.jobs.faults.lock().unwrap();
        f.create_status = Some(503);
        f.create_count = Some(1);
    }
    let r = launch(app, "alice-run-0001", &env, ALICE).await;
    let run = domain::ids::RunId::parse(r.json()["run_id"].as_str().unwrap()).unwrap();
    app.exec(&format!("UPDATE runs SET launch = 'reserved', bundle_commit = NULL WHERE id = '{run}'"))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let (state, run) = (app.state.clone(), run.clone());
            tokio::spawn(async move { server::runs::launch::advance(&state, &run).await.is_ok() })
        })
        .collect();
    let mut advanced = 0;
    for t in tasks {
        advanced += usize::from(t.await.unwrap());
    }
    assert!(advanced >= 1);
    let finished = launch(app, "alice-run-0001", &env, ALICE).await;
    assert_eq!(finished.json()["launched"], true, "{}", finished.text());
    assert_eq!(jobs_of(app, &run), 1);
    let d = app.get(&format!("/api/challenges/{CHALLENGE}/runs/{run}")).await.json();
    let launched = d["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "launched").count();
    assert_eq!(launched, 1, "{d:#}");
});

/// A server dies after the job was created at HF but before it recorded it; another server (or the
/// restarted one) resumes the launch from the database, finds the job by its label, and never
/// creates a second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_interrupted_anywhere_resumes_with_exactly_one_job() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = TestApp::with(backend, Options::local()).await;
        let env = submitted(&app, "good", "alice/pack", ALICE).await;
        // Step 1 done, then the "crash": HF does not answer the create.
        {
            let mut f = app.hub.jobs.faults.lock().unwrap();
            f.create_status = Some(500);
            f.create_count = Some(1);
        }
        let r = launch(&app, "alice-run-0001", &env, ALICE).await;
        let run = r.json()["run_id"].as_str().unwrap().to_string();
        assert_eq!(
            app.scalar(&format!("SELECT COUNT(*) FROM runs WHERE id = '{run}' AND launch = 'mirrored'"))
                .await,
            1
        );
        // The create had reached HF after all: a job with the run's label exists.
        let created = reqwest::Client::new()
            .post(format!("{}/api/jobs/benchflow", app.hub_url))
            .bearer_auth(ARENA_BOT)
            .json(&json!({"dockerImage": "x", "command": ["posttrainarena-train", "run"], "flavor": "h200x2",
                "labels": {"arena-run": run}}))
            .send()
            .await
            .unwrap();
        assert!(created.status().is_success());
        // A restarted server's background launcher finishes it.
        let restarted = app.replica().await;
        let workers = server::workers::Workers::start(restarted.state.clone(), Duration::from_millis(100));
        let start = Instant::now();
        while app
            .scalar(&format!("SELECT COUNT(*) FROM runs WHERE id = '{run}' AND launch = 'launched'"))
            .await
            == 0
        {
            assert!(start.elapsed() < Duration::from_secs(60), "the launch was not resumed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        workers.stop().await;
        assert_eq!(jobs_of(&app, &run), 1, "{backend:?}: found by its label, not created again");

        // Interrupted before the mirror was recorded: the bundle is found, not committed again.
        let bobs = submitted(&app, "good", "bob/pack", BOB).await;
        app.exec("UPDATE budget_ledger SET state = 'released'").await.unwrap();
        {
            let mut f = app.hub.jobs.faults.lock().unwrap();
            f.create_status = Some(500);
            f.create_count = Some(1);
        }
        let r = launch(&app, "bob-run-0001", &bobs, BOB).await;
        let bob_run = r.json()["run_id"].as_str().unwrap().to_string();
        app.exec(&format!(
            "UPDATE runs SET launch = 'reserved', bundle_commit = NULL WHERE id = '{bob_run}'"
        ))
        .await
        .unwrap();
        let ds = app.repos.join("datasets").join(RUNS_DATASET);
        let commits = || crate::harness::git(&ds, &["rev-list", "--count", "main"]);
        let before = commits();
        let again = launch(&app, "bob-run-0001", &bobs, BOB).await;
        assert_eq!(again.json()["launched"], true, "{}", again.text());
        assert_eq!(commits(), before, "{backend:?}: the mirror was found, not written twice");
        assert_eq!(jobs_of(&app, &bob_run), 1);
        restarted.finish().await;
        app.finish().await;
    }
}

// A collection stored before the size bound existed (its row edited here to point at one that
// is over it): the launch fails with the reason, from the listing, before reading any of its files
// (a read past the bound would say "the files read total…"), and a repeat of the same request
// answers the same failure instead of trying again.
on_both_backends!(
    local,
    a_stored_collection_over_the_mirrors_bound_fails_its_launch_without_reading_it,
    |app| {
        let env = submitted(app, "good", "alice/pack", ALICE).await;
        let big = tempfile::tempdir().unwrap();
        copy_tree(&fixture("good"), big.path());
        let filler = vec![b'x'; 1 << 20];
        for i in 0..49 {
            std::fs::write(
                big.path().join(format!("envs/expense-report/environment/filler-{i:02}.bin")),
                &filler,
            )
            .unwrap();
        }
        let commit = app.publish("datasets", "alice/big", big.path());
        app.exec(&format!(
            "UPDATE environments SET repo_id = 'alice/big', commit_sha = '{commit}' WHERE id = '{env}'"
        ))
        .await
        .unwrap();
        let r = launch(app, "alice-big-0001", &env, ALICE).await;
        assert_eq!(r.status, StatusCode::BAD_GATEWAY, "{}", r.text());
        assert_eq!(r.json()["code"], "LAUNCH_FAILED");
        let run = r.json()["run_id"].as_str().unwrap().to_string();
        let detail = app.get(&format!("/api/challenges/{CHALLENGE}/runs/{run}")).await.json();
        assert_eq!(detail["state"], "failed", "{detail:#}");
        let reason = detail["reason"].as_str().unwrap();
        assert!(
            reason.contains("the collection's files total more than 48 MiB, every path counted"),
            "{detail:#}"
        );
        assert_eq!(app.scalar("SELECT COUNT(*) FROM budget_ledger WHERE state = 'released'").await, 1);
        let reads = app.hub.dataset_file_requests();
        let again = launch(app, "alice-big-0001", &env, ALICE).await;
        assert_eq!(again.json()["run_id"], run.as_str());
        assert_eq!(app.hub.dataset_file_requests(), reads, "the repeat read nothing");
    }
);

on_both_backends!(local, a_run_whose_row_was_lost_is_taken_back_from_its_job, |app| {
    let env = submitted(app, "good", "alice/pack", ALICE).await;
    let r = launch(app, "alice-lost-0001", &env, ALICE).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let run = r.json()["run"]["run_id"].as_str().unwrap().to_string();
    let uri = format!("/api/challenges/{CHALLENGE}/runs/{run}");
    let before = app.get(&uri).await.json();
    assert!(before["job_id"].is_string(), "{before:#}");
    // What a restore from a snapshot older than the launch does not hold.
    for sql in [
        format!("DELETE FROM run_events WHERE run_id = '{run}'"),
        format!("DELETE FROM budget_ledger WHERE run_id = '{run}'"),
        format!("DELETE FROM runs WHERE id = '{run}'"),
    ] {
        app.exec(&sql).await.unwrap();
    }
    assert_eq!(app.get(&uri).await.status, StatusCode::NOT_FOUND);
    // Another run ended after the snapshot, its reservation still live there: the lost run waits
    // for the reconciler to end that one, and is not taken back meanwhile.
    app.exec(
        "INSERT INTO budget_ledger (id, challenge_id, run_id, amount_cents, state, created_at, updated_at) \
         VALUES ('other-run', 'local-demo', NULL, 100, 'live', 'then', 'then')",
    )
    .await
    .unwrap();
    let found = server::runs::recover::pass(&app.state).await.unwrap();
    assert!(found.taken_back.is_empty(), "{found:?}");
    assert!(found.waiting.iter().any(|w| w.starts_with(&run) && w.contains("live reservation")), "{found:?}");
    assert_eq!(app.get(&uri).await.status, StatusCode::NOT_FOUND);
    app.exec("UPDATE budget_ledger SET state = 'released' WHERE id = 'other-run'").await.unwrap();

    let found = server::runs::recover::pass(&app.state).await.unwrap();
    assert_eq!(found.taken_back, std::slice::from_ref(&run), "{found:?}");
    assert!(found.waiting.is_empty() && found.skipped.is_empty(), "{found:?}");
    let after = app.get(&uri).await.json();
    for field in ["job_id", "author", "environment_id", "request_key", "purpose", "max_compute_usd"] {
        assert_eq!(after[field], before[field], "{field}");
    }
    assert!(after["events"].as_array().unwrap().iter().any(|e| e["kind"] == "found again"), "{after:#}");
    assert_eq!(
        app.scalar(&format!("SELECT COUNT(*) FROM budget_ledger WHERE run_id = '{run}' AND state = 'live'"))
            .await,
        1
    );
    // Once back, a pass finds nothing more; the request again is the same run and no second job.
    assert_eq!(server::runs::recover::pass(&app.state).await.unwrap(), Default::default());
    let again = launch(app, "alice-lost-0001", &env, ALICE).await;
    assert_eq!(again.json()["run"]["run_id"], run.as_str(), "{}", again.text());
    assert_eq!(again.json()["existing"], true);
    assert_eq!(jobs_of(app, &run), 1);
});

// Jobs anyone who can start a job in the namespace could make, each carrying a run label and a
// command that names a bundle: one pointed out of the runs dataset (`../…`), two whose bundle's
// origin is forged (re-targeted at another run) or unsigned, and a sandbox's copy of a genuine
// run's command. None is taken back, and each is named; the genuine run's own job is.
on_both_backends!(local, only_the_arenas_own_signed_runs_are_found_again, |app| {
    let env = submitted(app, "good", "alice/pack", ALICE).await;
    let r = launch(app, "alice-signed-0001", &env, ALICE).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let run = r.json()["run"]["run_id"].as_str().unwrap().to_string();
    let (command, commit) = {
        let jobs = app.hub.jobs.jobs.lock().unwrap();
        let job = jobs.iter().find(|j| j.view.labels.get("arena-run") == Some(&run)).unwrap();
        let read = domain::pipeline::read_job_command(&job.view.command).expect("the arena's own command");
        (job.view.command.clone(), read.bundle_revision)
    };
    for sql in [
        format!("DELETE FROM run_events WHERE run_id = '{run}'"),
        format!("DELETE FROM budget_ledger WHERE run_id = '{run}'"),
        format!("DELETE FROM runs WHERE id = '{run}'"),
    ] {
        app.exec(&sql).await.unwrap();
    }
    // The genuine bundle, copied into other runs' bundles: re-targeted, and with no signature.
    let datasets = app.state.deps.datasets.clone();
    let dir = domain::pipeline::bundle_dir(&run);
    let genuine: Value = serde_json::from_slice(
        &datasets.read(RUNS_DATASET, &commit, &format!("{dir}/arena.json"), 1 << 20).await.unwrap(),
    )
    .unwrap();
    assert!(genuine["origin_signature"].is_string(), "the arena signs its origins: {genuine:#}");
    let config = datasets.read(RUNS_DATASET, &commit, &format!("{dir}/config.toml"), 1 << 20).await.unwrap();
    let mut files = Vec::new();
    for (forged_run, unsigned) in [("run-forged-retargeted", false), ("run-forged-unsigned", true)] {
        let mut setup = genuine.clone();
        setup["run_id"] = json!(forged_run);
        setup["origin"]["author"] = json!("mallory");
        if unsigned {
            setup.as_object_mut().unwrap().remove("origin_signature");
        }
        let d = domain::pipeline::bundle_dir(forged_run);
        files.push((format!("{d}/arena.json"), serde_json::to_vec(&setup).unwrap()));
        files.push((format!("{d}/config.toml"), config.clone()));
    }
    let forged_commit = datasets.commit(RUNS_DATASET, "not the arena's", &files).await.unwrap();
    let with = |run_id: &str, revision: &str| {
        let mut c = command.clone();
        let at = |flag: &str| c.iter().position(|a| a == flag).unwrap() + 1;
        let (p, r) = (at("--bundle-path"), at("--bundle-revision"));
        c[p] = domain::pipeline::bundle_dir(run_id);
        c[r] = revision.to_string();
        c
    };
    let attacks = [
        ("run-escaped", with("run-escaped", "../../../datasets/mallory/x/resolve/main"), "challenge-run"),
        ("run-forged-retargeted", with("run-forged-retargeted", &forged_commit), "challenge-run"),
        ("run-forged-unsigned", with("run-forged-unsigned", &forged_commit), "challenge-run"),
        (run.as_str(), command.clone(), "openenv-train"),
    ];
    let http = reqwest::Client::new();
    for (run_id, command, purpose) in &attacks {
        let created = http
            .post(format!("{}/api/jobs/benchflow", app.hub_url))
            .bearer_auth(ARENA_BOT)
            .json(
                &json!({"dockerImage": "ghcr.io/test/echo-ok:v1", "command": command, "flavor": "cpu-basic",
                "labels": {"arena-run": run_id, "arena-purpose": purpose}}),
            )
            .send()
            .await
            .unwrap();
        assert!(created.status().is_success(), "{}", created.text().await.unwrap());
    }
    let found = server::runs::recover::pass(&app.state).await.unwrap();
    assert_eq!(found.taken_back, std::slice::from_ref(&run), "{found:?}");
    let skipped = found.skipped.iter().map(|(_, why)| why.as_str()).collect::<Vec<_>>().join("\n");
    assert!(skipped.contains("does not pin a bundle of this arena's runs dataset at a commit"), "{skipped}");
    assert!(
        skipped.contains("run-forged-retargeted") && skipped.contains("run-forged-unsigned"),
        "{skipped}"
    );
    assert_eq!(skipped.matches("does not carry the arena's signature").count(), 2, "{skipped}");
    assert!(skipped.contains("its purpose label (openenv-train) is not a collection run's"), "{skipped}");
    for forged in ["run-escaped", "run-forged-retargeted", "run-forged-unsigned"] {
        assert_eq!(app.scalar(&format!("SELECT COUNT(*) FROM runs WHERE id = '{forged}'")).await, 0);
    }
    let after = app.get(&format!("/api/challenges/{CHALLENGE}/runs/{run}")).await.json();
    assert_eq!(after["author"], "alice", "{after:#}");
    // Left alone for good: recorded, a later pass does not read those jobs (nor their bundles)
    // again, and editors still see why.
    let key = server::signing::SigningKey::new(&server::config::Secret(crate::harness::SIGNING_KEY.into()))
        .unwrap();
    let backups = std::sync::Arc::new(server::backup::Backups::new(
        "benchflow/arena-backups".into(),
        3600,
        3,
        key,
        app.data_dir().join("unused.sqlite"),
        None,
    ));
    let mut state = app.state.clone();
    state.backups = Some(backups.clone());
    let found = server::runs::recover::pass(&state).await.unwrap();
    assert_eq!(found.skipped.len(), 4, "{found:?}");
    backups.found_runs(found.taken_back, &found.waiting, found.skipped);
    assert_eq!(server::runs::recover::pass(&state).await.unwrap(), Default::default());
    let finding = backups.view().runs_finding.unwrap_or_default();
    assert_eq!(finding.matches("not rebuilt: ").count(), 4, "{finding}");
});
