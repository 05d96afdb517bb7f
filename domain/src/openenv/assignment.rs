//! The `assign` message: everything the cluster's trainer needs to train one admitted submission,
//! and nothing it does not (no token: the node has its own). Per task: the pinned digest, the port,
//! the command and environment its sandbox starts it with (read from the pinned config at
//! submission), the walls and budgets, an opaque label (it names no task), how a reset chooses it and
//! its environment's tools (as admission played it); then the schema and its draft,
//! the example and finish actions; the model and revision the track trains; and the recipe's
//! numbers, each of which lands in a named argument of TRL's `GRPOConfig` or peft's `LoraConfig`
//! (the trainer checks the names against the installed versions and refuses one it does not know).

use serde_json::{json, Value};

use super::{SandboxStart, SubmissionRequest};
use crate::job_labels;

/// The registry's recipe the OpenEnv track trains with; its model is the one the challenge that
/// binds it names (`configs/challenges/openenv-9b.toml`).
pub const TRACK_METHOD: &str = "openenv-v1";

/// One image of a submission as admission pinned it.
#[derive(Debug, Clone, PartialEq)]
pub struct PinnedImage {
    pub resolved: String,
    pub port: u16,
    pub tasks: Vec<String>,
    pub start: SandboxStart,
}

/// How admission played a task, which training plays alike: the reset that chooses it (its id,
/// or the task API's `{"split", "index"}`) and its environment's tools (a tools environment).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Played {
    pub reset: Option<Value>,
    pub tools: Vec<Value>,
}

/// The assignment of run `run_id`; `None` when a task has no pinned image (a stored row the arena
/// cannot read, never guessed). `played` says how admission played each task (by task id).
pub fn assignment(
    run_id: &str,
    time_limit_s: u64,
    request: &SubmissionRequest,
    images: &[PinnedImage],
    played: &std::collections::BTreeMap<String, Played>,
    model: &Value,
    recipe: &Value,
) -> Option<Value> {
    let tasks: Option<Vec<Value>> = request
        .tasks
        .iter()
        .map(|t| {
            let image = images.iter().find(|i| i.tasks.contains(&t.task_id))?;
            let mut v = serde_json::to_value(t).ok()?;
            v["image"] = json!(image.resolved);
            v["port"] = json!(image.port);
            v["command"] = json!(image.start.command);
            v["env"] = json!(image.start.env);
            v["task_label"] = json!(job_labels::opaque_task(run_id, &t.task_id));
            let how = played.get(&t.task_id).cloned().unwrap_or_default();
            v["reset"] = how.reset.unwrap_or_else(|| super::episode::reset_for(&t.task_id));
            v["tools"] = json!(how.tools);
            Some(v)
        })
        .collect();
    // Checked at submission: a stored schema the rules now refuse is no assignment.
    let draft = super::schema::draft_of(&request.schema["action"]).ok()?;
    Some(json!({
        "kind": "assign",
        "run_id": run_id,
        "time_limit_s": time_limit_s,
        "model": model,
        "recipe": recipe,
        "submission": {
            "submission_id": request.submission_id,
            "name": request.name,
            "schema": request.schema,
            "schema_draft": draft.as_str(),
            "tasks": tasks?,
            "example_actions": request.example_actions,
            "finish_action": request.finish_action,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> SubmissionRequest {
        serde_json::from_value(json!({
            "submission_id": "s", "name": "n", "image": "ghcr.io/a/b:v1",
            "schema": {"action": {"type": "object"}, "observation": {"type": "object"}},
            "tasks": [{"task_id": "echo.1", "split": "train"}, {"task_id": "e2", "split": "eval", "rollout_wall_s": 60}],
            "example_actions": [{"m": 1}], "finish_action": {"m": 0}
        }))
        .unwrap()
    }

    fn image(tasks: &[&str]) -> PinnedImage {
        PinnedImage {
            resolved: "ghcr.io/a/b@sha256:ab".into(),
            port: 8000,
            tasks: tasks.iter().map(|t| t.to_string()).collect(),
            start: SandboxStart {
                command: vec!["uvicorn".into(), "app:app".into()],
                env: [("PATH".to_string(), "/usr/bin".to_string())].into(),
            },
        }
    }

    #[test]
    fn each_task_carries_its_pinned_image_start_limits_and_label() {
        let a = assignment(
            "oe-1",
            14_400,
            &request(),
            &[image(&["echo.1", "e2"])],
            &[(
                "e2".to_string(),
                Played {
                    reset: Some(json!({"split": "test", "index": 3})),
                    tools: vec![json!({"name": "t"})],
                },
            )]
            .into(),
            &json!({"repo": "m"}),
            &json!({}),
        )
        .unwrap();
        let t = &a["submission"]["tasks"];
        assert_eq!(t[0]["image"], "ghcr.io/a/b@sha256:ab");
        assert_eq!(t[0]["command"], json!(["uvicorn", "app:app"]));
        assert_eq!(t[0]["env"]["PATH"], "/usr/bin");
        assert_eq!(t[0]["port"], 8000);
        assert_eq!(t[0]["reset_wall_s"], 180, "the guide's defaults are spelled out");
        assert_eq!(t[1]["rollout_wall_s"], 60);
        assert_eq!(t[0]["task_label"], job_labels::opaque_task("oe-1", "echo.1"));
        assert_eq!(a["submission"]["schema_draft"], "draft2020-12");
        // Each task resets and is told its tools as admission played it.
        assert_eq!((&t[0]["reset"], &t[0]["tools"]), (&json!({"task_id": "echo.1"}), &json!([])));
        assert_eq!(
            (&t[1]["reset"], &t[1]["tools"]),
            (&json!({"split": "test", "index": 3}), &json!([{"name": "t"}]))
        );
        assert!(job_labels::is_valid(t[0]["task_label"].as_str().unwrap()));
        assert_eq!(a["submission"]["finish_action"], json!({"m": 0}));
        assert!(a.get("token").is_none() && !a.to_string().contains("hf_"));
    }

    #[test]
    fn a_task_without_a_pinned_image_is_no_assignment() {
        assert!(assignment(
            "oe-1",
            14_400,
            &request(),
            &[image(&["echo.1"])],
            &Default::default(),
            &json!({}),
            &json!({})
        )
        .is_none());
    }
}
