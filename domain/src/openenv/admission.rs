//! Admission: what the probe of one task's fresh sandbox decides, and what the tasks' outcomes make
//! of the submission. The probe's I/O (starting the sandbox, the HTTP calls, the episode over the
//! server's WebSocket) lives in the server; these rules are shared with any trainer adapter.
//!
//! The six `openenv validate --url` criteria are read as the reference describes them: the OpenAPI
//! document with a string `info.version`, `/health` healthy, `/metadata` with a name and a
//! description, `/schema` with `action`, `observation` and `state` objects, `/mcp` answering JSON-RPC
//! 2.0 (an error reply passes), and consistent modes (`/reset` in the OpenAPI paths only together with
//! `/step` and `/state`: simulation; none of the three: production).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ErrorCode;

/// An HTTP answer as the probe saw it: the status and the body when it was JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub json: Option<Value>,
}

/// The five reads `openenv validate` makes (`None`: no answer at all).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probe {
    pub openapi: Option<Answer>,
    pub health: Option<Answer>,
    pub metadata: Option<Answer>,
    pub schema: Option<Answer>,
    pub mcp: Option<Answer>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    pub id: String,
    pub passed: bool,
    pub required: bool,
    pub expected: String,
    pub actual: String,
}

fn ok_json(a: &Option<Answer>) -> Option<&Value> {
    a.as_ref().filter(|a| a.status == 200).and_then(|a| a.json.as_ref())
}

fn actual(a: &Option<Answer>) -> String {
    match a {
        None => "no answer".into(),
        Some(Answer { status, json: None }) => format!("HTTP {status}, not JSON"),
        Some(Answer { status, json: Some(v) }) => {
            let text = v.to_string();
            format!("HTTP {status}: {}", text.chars().take(200).collect::<String>())
        }
    }
}

/// The six criteria, in `openenv validate`'s order.
pub fn criteria(p: &Probe) -> Vec<Criterion> {
    let c = |id: &str, passed: bool, expected: &str, actual: String| Criterion {
        id: id.into(),
        passed,
        required: true,
        expected: expected.into(),
        actual,
    };
    let openapi = ok_json(&p.openapi);
    let version = openapi.and_then(|v| v["info"]["version"].as_str()).is_some();
    let health = ok_json(&p.health).is_some_and(|v| v["status"] == "healthy");
    let metadata =
        ok_json(&p.metadata).is_some_and(|v| v["name"].is_string() && v["description"].is_string());
    let schema = ok_json(&p.schema)
        .is_some_and(|v| ["action", "observation", "state"].iter().all(|k| v[*k].is_object()));
    let mcp = ok_json(&p.mcp).is_some_and(|v| v["jsonrpc"] == "2.0");
    let paths: Vec<&str> = openapi
        .and_then(|v| v["paths"].as_object())
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let has = |p: &str| paths.contains(&p);
    let mode = match (has("/reset"), has("/step"), has("/state")) {
        (true, true, true) => Some("simulation"),
        (false, false, false) => Some("production"),
        _ => None,
    };
    vec![
        c(
            "openapi_version_available",
            version,
            "GET /openapi.json: 200 with a string info.version",
            actual(&p.openapi),
        ),
        c("health_endpoint", health, "GET /health: 200 {\"status\": \"healthy\"}", actual(&p.health)),
        c("metadata_endpoint", metadata, "GET /metadata: a string name and description", actual(&p.metadata)),
        c("schema_endpoint", schema, "GET /schema: objects action, observation and state", actual(&p.schema)),
        c("mcp_endpoint", mcp, "POST /mcp {}: 200 JSON-RPC 2.0 (an error reply passes)", actual(&p.mcp)),
        c(
            "mode_endpoint_consistency",
            mode.is_some(),
            "/reset, /step and /state all in the OpenAPI paths (simulation) or none of them (production)",
            format!("paths: {}", paths.join(", ")),
        ),
    ]
}

/// The server's `/schema` serves the submission's `action` and `observation` schemas.
pub fn schema_matches(served: &Value, submitted: &Value) -> Result<(), String> {
    for part in ["action", "observation"] {
        if served[part] != submitted[part] {
            return Err(format!("the image's /schema `{part}` differs from the submission's"));
        }
    }
    Ok(())
}

/// One observation message of an episode: `{observation, reward, done}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Step {
    #[serde(default)]
    pub reward: Option<f64>,
    #[serde(default)]
    pub done: bool,
}

/// The example episode: after the reset, the steps the example actions produced in order. It must
/// end (`done: true`) with a reward in [0, 1]; answers the terminal reward.
pub fn judge_episode(reset: &Step, steps: &[Step], actions: usize) -> Result<f64, String> {
    if reset.done {
        return Err("the episode ended at reset, before any action".into());
    }
    for (i, step) in steps.iter().enumerate() {
        if step.done {
            return match step.reward {
                Some(r) if (0.0..=1.0).contains(&r) => Ok(r),
                Some(r) => Err(format!("the episode ended after action {i} with reward {r}, outside [0, 1]")),
                None => Err(format!("the episode ended after action {i} without a reward")),
            };
        }
    }
    Err(format!("the episode did not end after the {actions} example action(s) (no `done: true`)"))
}

/// What one probe of one task found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum Outcome {
    Passed,
    /// The image or its example episode failed: counts against the submitter.
    Author {
        code: ErrorCode,
        message: String,
    },
    /// The sandbox, the registry or the arena failed: retried, never counted.
    Platform {
        code: ErrorCode,
        message: String,
    },
}

/// A task's probes so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskProbe {
    pub task_id: String,
    /// Sandboxes started for it.
    pub attempts: u32,
    pub last: Option<Outcome>,
}

/// A task whose sandbox never served `/health`, or whose probe failed on our side, gets one more
/// fresh sandbox.
pub const SANDBOX_ATTEMPTS: u32 = 2;

crate::words!(
    /// An OpenEnv submission's state.
    pub enum SubmissionState {
        Validating = "validating",
        Validated = "validated",
        Rejected = "rejected",
    }
);

crate::words!(
    /// What a submission's slot is: `held` while it is checked, `used` when it counts,
    /// `returned` when it does not.
    pub enum SlotState {
        Held = "held",
        Used = "used",
        Returned = "returned",
    }
);

crate::words!(
    /// Whose side a rejection is on.
    pub enum ErrorOrigin {
        Author = "author",
        Platform = "platform",
    }
);

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Some task still needs a probe (a first one, or a retry after a platform failure).
    Pending,
    /// Every task passed: the slot is used.
    Validated,
    /// A task failed on the submitter's side (slot used), or on ours with no attempt left (slot
    /// returned). The errors name each failing task.
    Rejected { origin: ErrorOrigin, slot: SlotState, errors: Vec<(String, ErrorCode, String)> },
}

/// The submission's state from its tasks' probes.
pub fn verdict(tasks: &[TaskProbe]) -> Verdict {
    let author: Vec<(String, ErrorCode, String)> = tasks
        .iter()
        .filter_map(|t| match &t.last {
            Some(Outcome::Author { code, message }) => Some((t.task_id.clone(), *code, message.clone())),
            _ => None,
        })
        .collect();
    if !author.is_empty() {
        return Verdict::Rejected { origin: ErrorOrigin::Author, slot: SlotState::Used, errors: author };
    }
    let retry = |t: &TaskProbe| match t.last {
        None => true,
        Some(Outcome::Platform { .. }) => t.attempts < SANDBOX_ATTEMPTS,
        _ => false,
    };
    if tasks.iter().any(retry) {
        return Verdict::Pending;
    }
    let platform: Vec<(String, ErrorCode, String)> = tasks
        .iter()
        .filter_map(|t| match &t.last {
            Some(Outcome::Platform { code, message }) => Some((t.task_id.clone(), *code, message.clone())),
            _ => None,
        })
        .collect();
    if platform.is_empty() {
        Verdict::Validated
    } else {
        Verdict::Rejected { origin: ErrorOrigin::Platform, slot: SlotState::Returned, errors: platform }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ok(v: Value) -> Option<Answer> {
        Some(Answer { status: 200, json: Some(v) })
    }

    /// What the echo environment `openenv init` generates answers.
    fn echo() -> Probe {
        Probe {
            openapi: ok(
                json!({"info": {"version": "1.0.0"}, "paths": {"/reset": {}, "/step": {}, "/state": {}, "/health": {}}}),
            ),
            health: ok(json!({"status": "healthy"})),
            metadata: ok(json!({"name": "echo_env", "description": "Echo"})),
            schema: ok(json!({"action": {}, "observation": {}, "state": {}})),
            mcp: ok(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32603, "message": "no MCP"}})),
        }
    }

    #[test]
    fn the_echo_environment_passes_all_six_and_each_break_fails_its_own() {
        assert!(criteria(&echo()).iter().all(|c| c.passed));
        let failed = |p: Probe| -> Vec<String> {
            criteria(&p).into_iter().filter(|c| !c.passed).map(|c| c.id).collect()
        };
        assert_eq!(failed(Probe { health: None, ..echo() }), ["health_endpoint"]);
        assert_eq!(
            failed(Probe { health: ok(json!({"status": "starting"})), ..echo() }),
            ["health_endpoint"]
        );
        assert_eq!(
            failed(Probe { mcp: Some(Answer { status: 404, json: None }), ..echo() }),
            ["mcp_endpoint"],
            "a server without /mcp"
        );
        assert_eq!(
            failed(Probe { schema: ok(json!({"action": {}, "observation": {}})), ..echo() }),
            ["schema_endpoint"]
        );
        assert_eq!(failed(Probe { metadata: ok(json!({"name": "x"})), ..echo() }), ["metadata_endpoint"]);
        let half = ok(json!({"info": {"version": "1"}, "paths": {"/reset": {}, "/health": {}}}));
        assert_eq!(failed(Probe { openapi: half, ..echo() }), ["mode_endpoint_consistency"]);
        let production = ok(json!({"info": {"version": "1"}, "paths": {"/health": {}}}));
        assert!(failed(Probe { openapi: production, ..echo() }).is_empty(), "production mode");
        let no_version = ok(json!({"info": {"version": 1}, "paths": {}}));
        assert_eq!(failed(Probe { openapi: no_version, ..echo() }), ["openapi_version_available"]);
    }

    #[test]
    fn the_served_schema_must_be_the_submitted_one() {
        let a = json!({"action": {"type": "object"}, "observation": {"type": "object"}, "state": {}});
        assert_eq!(
            schema_matches(&a, &json!({"action": {"type": "object"}, "observation": {"type": "object"}})),
            Ok(())
        );
        assert!(schema_matches(
            &a,
            &json!({"action": {"type": "string"}, "observation": {"type": "object"}})
        )
        .is_err());
    }

    #[test]
    fn an_example_episode_ends_with_a_reward_in_zero_to_one() {
        let step = |reward: Option<f64>, done| Step { reward, done };
        let reset = step(None, false);
        assert_eq!(judge_episode(&reset, &[step(Some(0.0), false), step(Some(1.0), true)], 2), Ok(1.0));
        assert!(judge_episode(&reset, &[step(Some(0.5), false)], 1).unwrap_err().contains("did not end"));
        assert!(judge_episode(&reset, &[step(Some(1.5), true)], 1).unwrap_err().contains("outside [0, 1]"));
        assert!(judge_episode(&reset, &[step(None, true)], 1).unwrap_err().contains("without a reward"));
        assert!(judge_episode(&step(None, true), &[], 1).is_err());
    }

    #[test]
    fn author_failures_use_the_slot_platform_ones_retry_then_return_it() {
        let t = |id: &str, attempts, last| TaskProbe { task_id: id.into(), attempts, last };
        let passed = Some(Outcome::Passed);
        let platform =
            Some(Outcome::Platform { code: ErrorCode::SandboxStartupFailed, message: "no /health".into() });
        let author =
            Some(Outcome::Author { code: ErrorCode::ImageSchemaMismatch, message: "differs".into() });
        assert_eq!(verdict(&[t("a", 1, passed.clone()), t("b", 0, None)]), Verdict::Pending);
        assert_eq!(verdict(&[t("a", 1, passed.clone()), t("b", 1, passed.clone())]), Verdict::Validated);
        assert_eq!(
            verdict(&[t("a", 1, passed.clone()), t("b", 1, platform.clone())]),
            Verdict::Pending,
            "one more sandbox"
        );
        assert!(matches!(
            verdict(&[t("a", 1, passed.clone()), t("b", 2, platform.clone())]),
            Verdict::Rejected { origin: ErrorOrigin::Platform, slot: SlotState::Returned, .. }
        ));
        assert!(matches!(
            verdict(&[t("a", 1, author), t("b", 1, platform)]),
            Verdict::Rejected { origin: ErrorOrigin::Author, slot: SlotState::Used, ref errors } if errors.len() == 1 && errors[0].0 == "a"
        ));
    }
}
