//! OpenEnv environments as openenv 0.10 builds them, through admission and into the assignment:
//! a task API chooses the task played by `(split, index)` (a task it does not list is refused),
//! a tools environment's tools travel to the trainer's system message, and an observation's
//! `metadata` is no part of what is shown. Both backends.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::controls::Cluster;
use crate::harness::{ALICE, BOB};
use crate::on_both_backends;
use crate::openenv::admitted;

const TOOLS_SUBMISSION: &str = include_str!("../../../dev/demo/openenv/submission-tools-echo.json");

fn echo_action() -> Value {
    json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"],
        "additionalProperties": false})
}

fn task_api_submission(id: &str, tasks: &[&str]) -> Value {
    json!({
        "submission_id": id,
        "name": "Task API echo (test)",
        "image": "ghcr.io/test/echo-task-api:v1",
        "schema": {"action": echo_action(), "observation": {"type": "object"}},
        "tasks": tasks.iter().map(|t| json!({"task_id": t, "split": "train"})).collect::<Vec<_>>(),
        // Three steps end every task (0.5): whichever task a reset plays.
        "example_actions": [{"message": "a"}, {"message": "b"}, {"message": "c"}],
    })
}

/// The assignment the arena sends the (test's) cluster for the next admitted submission.
async fn assignment(cluster: &mut Cluster) -> Value {
    cluster.send(json!({"kind": "heartbeat", "gpus_free": 1, "sandboxes_free": 5})).await;
    let assign = cluster.next_where(|m| m["kind"] == "assign").await;
    cluster.send(json!({"kind": "accepted", "run_id": assign["run_id"]})).await;
    assign
}

on_both_backends!(multi_thread, a_task_api_environment_plays_the_task_it_is_asked_for, |app| {
    let mut cluster = Cluster::connect(app).await;
    // A task the environment's task API does not list: the author's failure, and it counts.
    let r = app
        .post_as(
            "/api/openenv/submissions",
            &task_api_submission("unlisted", &["echo-1", "nope"]).to_string(),
            BOB,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    admitted(&app.state).await;
    let v = app.get_as("/api/openenv/submissions/unlisted", BOB).await.json();
    let got = (v["state"].as_str(), v["slot"]["state"].as_str(), v["error_origin"].as_str());
    assert_eq!(got, (Some("rejected"), Some("used"), Some("author")), "{v:#}");
    let error = &v["report"]["errors"][0];
    assert_eq!(
        (error["code"].as_str(), error["task_id"].as_str()),
        (Some("TASK_NOT_LISTED"), Some("nope")),
        "{v:#}"
    );
    assert!(error["message"].as_str().unwrap().contains("echo-2 (train)"), "it says what is listed: {v:#}");
    // The listed tasks: each reset chooses it by its split and index, which training repeats.
    let r = app
        .post_as(
            "/api/openenv/submissions",
            &task_api_submission("listed", &["echo-1", "echo-2"]).to_string(),
            ALICE,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    admitted(&app.state).await;
    assert_eq!(app.get_as("/api/openenv/submissions/listed", ALICE).await.json()["state"], "validated");
    let assign = assignment(&mut cluster).await;
    let tasks = assign["submission"]["tasks"].as_array().unwrap();
    let resets: Vec<&Value> = tasks.iter().map(|t| &t["reset"]).collect();
    assert_eq!(
        resets,
        [&json!({"split": "train", "index": 0}), &json!({"split": "train", "index": 1})],
        "{assign:#}"
    );
});

on_both_backends!(multi_thread, a_tools_environments_tools_reach_the_system_message, |app| {
    let mut cluster = Cluster::connect(app).await;
    let mut body: Value = serde_json::from_str(TOOLS_SUBMISSION).unwrap();
    body["submission_id"] = json!("tools");
    body["image"] = json!("ghcr.io/test/echo-tools:v1");
    let r = app.post_as("/api/openenv/submissions", &body.to_string(), ALICE).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    admitted(&app.state).await;
    let v = app.get_as("/api/openenv/submissions/tools", ALICE).await.json();
    assert_eq!(v["state"], "validated", "{v:#}");
    let assign = assignment(&mut cluster).await;
    let task = &assign["submission"]["tasks"][0];
    let tools = task["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["echo", "finish"], "{task:#}");
    assert_eq!(tools[0]["input_schema"]["required"], json!(["message"]));
    // What the trainer's system message says of them (the contract both sides share).
    let system = domain::openenv::episode::system_prompt(&assign["submission"]["schema"]["action"], tools);
    assert!(system.contains(r#""name":"echo""#) && system.contains("Echo a message back."), "{system}");
    assert_eq!(assign["submission"]["schema_draft"], "draft2020-12");
});

on_both_backends!(multi_thread, an_openenv_010_observation_keeps_its_metadata_from_the_model, |app| {
    let mut cluster = Cluster::connect(app).await;
    let mut body = task_api_submission("meta", &["echo-1"]);
    body["image"] = json!("ghcr.io/test/echo-openenv-010:v1");
    body["example_actions"] = json!([{"message": "hello"}, {"message": "done"}]);
    let r = app.post_as("/api/openenv/submissions", &body.to_string(), ALICE).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    admitted(&app.state).await;
    assert_eq!(app.get_as("/api/openenv/submissions/meta", ALICE).await.json()["state"], "validated");
    let assign = assignment(&mut cluster).await;
    assert_eq!(
        assign["submission"]["tasks"][0]["reset"],
        json!({"task_id": "echo-1"}),
        "no task API: by its id"
    );
    // 0.10 sends `metadata` in the observation and beside it; what the model is shown has none.
    let message = json!({"type": "observation", "data": {"observation": {"metadata": {"step": 1},
        "echoed_message": "hello"}, "reward": 0.0, "done": false, "metadata": {"step": 1}}});
    let (shown, _, _) = domain::openenv::episode::ws_observation(&message).unwrap();
    assert_eq!(shown, json!({"echoed_message": "hello"}));
});
