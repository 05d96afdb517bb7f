//! Admission: what the probe of one task's fresh sandbox decides, and what the tasks' outcomes make
//! of the submission. The probe's I/O (starting the sandbox, the HTTP calls, the episode over the
//! server's WebSocket) lives in the server; these rules are shared with any trainer adapter.
//!
//! The six `openenv validate --url` criteria are read as the reference describes them: the OpenAPI
//! document with a string `info.version`, `/health` healthy, `/metadata` with a name and a
//! description, `/schema` with `action`, `observation` and `state` objects, `/mcp` answering JSON-RPC
//! 2.0 (an error reply passes), and consistent modes (`/reset` in the OpenAPI paths only together with
//! `/step` and `/state`: simulation; none of the three: production).

use crate::invalid::Invalid;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

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
    // As the tool decides it: without paths the mode cannot be told, and that fails.
    let mode = match (paths.is_empty(), has("/reset"), has("/step"), has("/state")) {
        (true, ..) => None,
        (false, true, true, true) => Some("simulation"),
        (false, false, false, false) => Some("production"),
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
            format!("paths: {}", super::evidence::listed(&paths, "paths")),
        ),
    ]
}

/// The server's `/schema` serves the submission's `action` and `observation` schemas; else where
/// they differ (`super::evidence::schema_differences`), in words and as evidence.
pub fn schema_matches(served: &Value, submitted: &Value) -> Result<(), (Invalid, Value)> {
    match (
        super::evidence::schema_message(served, submitted),
        super::evidence::schema_evidence(served, submitted),
    ) {
        (Some(message), Some(evidence)) => Err((Invalid(message), evidence)),
        _ => Ok(()),
    }
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
pub fn judge_episode(reset: &Step, steps: &[Step], actions: usize) -> Result<f64, Invalid> {
    if reset.done {
        return Err("the episode ended at reset, before any action".into());
    }
    // Actions are counted from 1, as a person counts them.
    for (n, step) in (1..).zip(steps) {
        if step.done {
            return match step.reward {
                Some(r) if (0.0..=1.0).contains(&r) => Ok(r),
                Some(r) => {
                    Err(format!("the episode ended after action {n} with reward {r}, outside [0, 1]").into())
                }
                None => Err(format!("the episode ended after action {n} without a reward").into()),
            };
        }
    }
    Err(format!("the episode did not end after the {actions} example action(s) (no `done: true`)").into())
}

/// `finish_action`'s answer, sent from a fresh reset or after the first example action: it must
/// end the episode (`done: true`) with a reward in [0, 1], as the trainer relies on it to score an
/// episode that did not end by itself.
pub fn judge_finish(answer: &Step, when: &str) -> Result<f64, Invalid> {
    match (answer.done, answer.reward) {
        (true, Some(r)) if (0.0..=1.0).contains(&r) => Ok(r),
        (true, Some(r)) => Err(format!("`finish_action` {when} ended the episode with reward {r}, outside [0, 1]").into()),
        (true, None) => Err(format!("`finish_action` {when} ended the episode without a reward").into()),
        (false, _) => Err(format!(
            "`finish_action` {when} did not end the episode (no `done: true`): the trainer sends it to end an \
             episode the model stops, and an episode that never ends trains nothing"
        )
        .into()),
    }
}

/// What one probe of one task found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum Outcome {
    /// The task passed: how its episodes reset to it (the task API's `{"split", "index"}`, or its
    /// id), the tools its environment lists (a tools environment), as training plays them, and
    /// the fingerprints of its first observations (`super::evidence::fingerprint`).
    Passed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reset: Option<Value>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tools: Vec<Value>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        first_observations: Vec<String>,
        /// The terminal rewards its example episode and its finish actions gave, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        rewards: Vec<f64>,
    },
    /// The image or its example episode failed: counts against the submitter. `evidence`: what
    /// their server answered (`super::evidence`).
    Author {
        code: ErrorCode,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evidence: Option<Value>,
    },
    /// The sandbox, the registry or the arena failed: retried, never counted. `evidence`: a
    /// server that exited, its exit and last lines.
    Platform {
        code: ErrorCode,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evidence: Option<Value>,
    },
}

/// A task's refusal in a verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskError {
    pub task_id: String,
    pub code: ErrorCode,
    pub message: String,
    pub evidence: Option<Value>,
}

/// A task's probes so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskProbe {
    pub task_id: String,
    /// Sandboxes started for it.
    pub attempts: u32,
    pub last: Option<Outcome>,
    /// Seconds its probes took, all attempts together.
    #[serde(default)]
    pub spent_s: u64,
}

impl TaskProbe {
    pub fn new(task_id: &str) -> TaskProbe {
        TaskProbe { task_id: task_id.to_string(), attempts: 0, last: None, spent_s: 0 }
    }

    /// Probes of this task that failed on the platform's side (only those are tried again).
    fn platform_failures(&self) -> u32 {
        match self.last {
            Some(Outcome::Platform { .. }) => self.attempts,
            _ => self.attempts.saturating_sub(1),
        }
    }

    /// Whether it needs a probe: a first one, or another after a platform failure.
    pub fn pending(&self) -> bool {
        match self.last {
            None => true,
            Some(Outcome::Platform { .. }) => self.attempts < SANDBOX_ATTEMPTS,
            _ => false,
        }
    }
}

/// A task whose sandbox never served `/health`, or whose probe failed on our side, gets one more
/// fresh sandbox.
pub const SANDBOX_ATTEMPTS: u32 = 2;

/// What one submission's admission may spend, whoever is at fault: the sandbox time of all its
/// probes together, and probes that fail on the platform's side (an image that never serves fails
/// that way in every sandbox: past a few, its other tasks are not tried).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowance {
    pub sandbox_s: u64,
    pub platform_failures: u32,
}

impl Default for Allowance {
    fn default() -> Self {
        Allowance { sandbox_s: 5_400, platform_failures: 4 }
    }
}

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

#[cfg(feature = "sqlx")]
crate::text_column!(SubmissionState, "submission state");
#[cfg(feature = "sqlx")]
crate::text_column!(SlotState, "slot state");

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
    Rejected { origin: ErrorOrigin, slot: SlotState, errors: Vec<TaskError> },
}

/// The submission's state from its tasks' probes, within its allowance.
pub fn verdict(tasks: &[TaskProbe], allowance: &Allowance) -> Verdict {
    let errors = |platform: bool| -> Vec<TaskError> {
        let error = |t: &TaskProbe, code: &ErrorCode, message: &String, evidence: &Option<Value>| TaskError {
            task_id: t.task_id.clone(),
            code: *code,
            message: message.clone(),
            evidence: evidence.clone(),
        };
        tasks
            .iter()
            .filter_map(|t| match &t.last {
                Some(Outcome::Author { code, message, evidence }) if !platform => {
                    Some(error(t, code, message, evidence))
                }
                Some(Outcome::Platform { code, message, evidence }) if platform => {
                    Some(error(t, code, message, evidence))
                }
                _ => None,
            })
            .collect()
    };
    let author = errors(false);
    if !author.is_empty() {
        return Verdict::Rejected { origin: ErrorOrigin::Author, slot: SlotState::Used, errors: author };
    }
    let pending: Vec<&TaskProbe> = tasks.iter().filter(|t| t.pending()).collect();
    let spent: u64 = tasks.iter().map(|t| t.spent_s).sum();
    let failures: u32 = tasks.iter().map(TaskProbe::platform_failures).sum();
    let spent_all = spent >= allowance.sandbox_s || failures >= allowance.platform_failures;
    if !pending.is_empty() && !spent_all {
        return Verdict::Pending;
    }
    let mut platform = errors(true);
    if !pending.is_empty() {
        let why = format!(
            "not checked: the submission's admission spent its allowance ({spent} of {} sandbox-seconds, {failures}              of {} probes failed on the platform's side) with {} of {} tasks checked",
            allowance.sandbox_s,
            allowance.platform_failures,
            tasks.len() - pending.len(),
            tasks.len()
        );
        platform.retain(|e| !pending.iter().any(|p| p.task_id == e.task_id));
        platform.extend(pending.iter().map(|p| TaskError {
            task_id: p.task_id.clone(),
            code: ErrorCode::AdmissionInfrastructureFailure,
            message: why.clone(),
            evidence: None,
        }));
    }
    if platform.is_empty() {
        Verdict::Validated
    } else {
        Verdict::Rejected { origin: ErrorOrigin::Platform, slot: SlotState::Returned, errors: platform }
    }
}

/// A warning of a validated submission: admitted all the same, with what may keep it from
/// training.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    pub code: &'static str,
    /// The task it is about; none: the whole submission.
    pub task_id: Option<String>,
    pub message: String,
}

/// The warnings of a validated submission: each task whose first observations suggest the
/// environment ignores `task_id` (`super::evidence::ignored_task_ids`); no `finish_action`
/// (`has_finish`); and example episodes whose rewards never differ, across every task's example
/// actions and finish actions (a reward that may not depend on the action: nothing to learn).
pub fn warnings(tasks: &[TaskProbe], has_finish: bool) -> Vec<Warning> {
    let seen: Vec<(String, Vec<String>)> = tasks
        .iter()
        .filter_map(|t| match &t.last {
            Some(Outcome::Passed { first_observations, .. }) => {
                Some((t.task_id.clone(), first_observations.clone()))
            }
            _ => None,
        })
        .collect();
    let mut out: Vec<Warning> = super::evidence::ignored_task_ids(&seen)
        .into_iter()
        .map(|t| Warning {
            code: "RESET_IGNORES_TASK",
            task_id: Some(t),
            message: super::evidence::RESET_IGNORES_TASK.to_string(),
        })
        .collect();
    if !has_finish {
        out.push(Warning {
            code: "FINISH_ACTION_MISSING",
            task_id: None,
            message: super::evidence::FINISH_ACTION_MISSING.into(),
        });
    }
    let rewards: Vec<f64> = tasks
        .iter()
        .filter_map(|t| match &t.last {
            Some(Outcome::Passed { rewards, .. }) => Some(rewards.iter().copied()),
            _ => None,
        })
        .flatten()
        .collect();
    if rewards.len() >= 2 && !super::episode::group_has_signal(&rewards) {
        out.push(Warning {
            code: "REWARD_NEVER_VARIES",
            task_id: None,
            message: super::evidence::reward_never_varies(rewards[0], rewards.len()),
        });
    }
    out
}

/// The tools a tools environment lists at most, and their text in the system message at most.
pub const MAX_TOOLS: usize = 32;
pub const MAX_TOOLS_TEXT: usize = 16 << 10;

/// The tools of a tools environment, from its `tools/list` answer (OpenEnv's JSON-RPC on `POST
/// /mcp`: `result.tools`, each `inputSchema` or `input_schema`), as the system message lists them:
/// `{name, description, input_schema}` in the environment's order. `Ok(empty)`: it lists none
/// (an error reply: not a tools environment). `Err`: a list the model cannot be shown.
pub fn tool_list(answer: &Value) -> Result<Vec<Value>, Invalid> {
    let Some(listed) = answer["result"]["tools"].as_array() else { return Ok(Vec::new()) };
    if listed.len() > MAX_TOOLS {
        return Err(format!(
            "tools/list lists {} tools; the system message shows at most {MAX_TOOLS}",
            listed.len()
        )
        .into());
    }
    let tools: Vec<Value> = listed
        .iter()
        .map(|t| {
            let name = t["name"].as_str().filter(|n| !n.is_empty() && n.len() <= 128);
            let name = name.ok_or(Invalid::new("a tool without a name (1 to 128 characters)"))?;
            let schema = t.get("inputSchema").or_else(|| t.get("input_schema")).cloned().unwrap_or(json!({}));
            if !schema.is_object() {
                return Err(Invalid(format!("tool `{name}`'s input schema is not a JSON object")));
            }
            let description = t["description"].as_str().unwrap_or_default();
            Ok(json!({"name": name, "description": description, "input_schema": schema}))
        })
        .collect::<Result<_, Invalid>>()?;
    let text = Value::Array(tools.clone()).to_string().len();
    if text > MAX_TOOLS_TEXT {
        return Err(format!(
            "the tools' names, descriptions and schemas are {text} bytes; at most {MAX_TOOLS_TEXT}"
        )
        .into());
    }
    Ok(tools)
}

/// Whether a server's OpenAPI paths hold openenv 0.10's task API (`/list_environments` and
/// `/{env_name}/tasks`): its tasks are then chosen at reset by `(split, index)`.
pub fn has_task_api(openapi: &Value) -> bool {
    let paths = openapi["paths"].as_object();
    paths.is_some_and(|p| p.contains_key("/list_environments") && p.keys().any(|k| k.ends_with("/tasks")))
}

/// The reset that plays `task_id`, from the task API's listing: per split, its name and its
/// `tasks` answer (`{"tasks": [spec, …]}`). A task's id is its spec's `id` (or `task_id`); the
/// reset is `{"split", "index"}`. `None`: no listed task has that id.
pub fn task_reset(splits: &[(String, Value)], task_id: &str) -> Option<Value> {
    splits.iter().find_map(|(split, listing)| {
        let tasks = listing["tasks"].as_array()?;
        let index = tasks.iter().position(|t| {
            t.get("id").or_else(|| t.get("task_id")).and_then(Value::as_str) == Some(task_id)
        })?;
        Some(json!({"split": split, "index": index}))
    })
}

/// The ids a task API listing names, for a refusal's message (at most `max`).
pub fn listed_ids(splits: &[(String, Value)], max: usize) -> Vec<String> {
    splits
        .iter()
        .flat_map(|(split, l)| l["tasks"].as_array().into_iter().flatten().map(move |t| (split, t)))
        .filter_map(|(split, t)| {
            let id = t.get("id").or_else(|| t.get("task_id")).and_then(Value::as_str)?;
            Some(format!("{id} ({split})"))
        })
        .take(max)
        .collect()
}

#[cfg(test)]
mod cases;

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
        let no_version = ok(json!({"info": {"version": 1}, "paths": {"/health": {}}}));
        assert_eq!(failed(Probe { openapi: no_version, ..echo() }), ["openapi_version_available"]);
        // `openenv validate` cannot tell a mode without paths: it fails the consistency check too.
        let no_paths = ok(json!({"info": {"version": "1"}, "paths": {}}));
        assert_eq!(failed(Probe { openapi: no_paths, ..echo() }), ["mode_endpoint_consistency"]);
    }

    #[test]
    fn the_served_schema_must_be_the_submitted_one() {
        let a = json!({"action": {"type": "object"}, "observation": {"type": "object"}, "state": {}});
        assert_eq!(
            schema_matches(&a, &json!({"action": {"type": "object"}, "observation": {"type": "object"}})),
            Ok(())
        );
        let (why, evidence) =
            schema_matches(&a, &json!({"action": {"type": "string"}, "observation": {"type": "object"}}))
                .unwrap_err();
        assert!(why.contains("`/action/type`"), "{why}");
        assert_eq!(evidence["differences"][0]["pointer"], "/action/type");
    }

    #[test]
    fn an_example_episode_ends_with_a_reward_in_zero_to_one() {
        let step = |reward: Option<f64>, done| Step { reward, done };
        let reset = step(None, false);
        assert_eq!(judge_episode(&reset, &[step(Some(0.0), false), step(Some(1.0), true)], 2), Ok(1.0));
        assert!(judge_episode(&reset, &[step(Some(0.5), false)], 1).unwrap_err().contains("did not end"));
        assert!(judge_episode(&reset, &[step(Some(1.5), true)], 1).unwrap_err().contains("outside [0, 1]"));
        // Actions are counted from 1.
        let third = [step(Some(0.0), false), step(Some(0.0), false), step(Some(-1.0), true)];
        assert!(judge_episode(&reset, &third, 3).unwrap_err().contains("after action 3 with reward -1"));
        assert!(judge_episode(&reset, &[step(None, true)], 1).unwrap_err().contains("without a reward"));
        assert!(judge_episode(&step(None, true), &[], 1).is_err());
    }

    #[test]
    fn a_finish_action_must_end_the_episode_with_a_reward_in_zero_to_one() {
        let step = |reward: Option<f64>, done| Step { reward, done };
        assert_eq!(judge_finish(&step(Some(0.25), true), "from a fresh reset"), Ok(0.25));
        assert!(judge_finish(&step(Some(0.0), false), "x").unwrap_err().contains("did not end"));
        assert!(judge_finish(&step(Some(2.0), true), "x").unwrap_err().contains("outside [0, 1]"));
        assert!(judge_finish(&step(None, true), "x").unwrap_err().contains("without a reward"));
    }

    #[test]
    fn author_failures_use_the_slot_platform_ones_retry_then_return_it() {
        let t = |id: &str, attempts, last| TaskProbe { task_id: id.into(), attempts, last, spent_s: 10 };
        let verdict = |tasks: &[TaskProbe]| verdict(tasks, &Allowance::default());
        let passed = Some(Outcome::Passed {
            reset: None,
            tools: Vec::new(),
            first_observations: Vec::new(),
            rewards: Vec::new(),
        });
        let platform = Some(Outcome::Platform {
            code: ErrorCode::SandboxStartupFailed,
            message: "no /health".into(),
            evidence: None,
        });
        let author = Some(Outcome::Author {
            code: ErrorCode::ImageSchemaMismatch,
            message: "differs".into(),
            evidence: None,
        });
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
            Verdict::Rejected { origin: ErrorOrigin::Author, slot: SlotState::Used, ref errors } if errors.len() == 1 && errors[0].task_id == "a"
        ));
    }

    #[test]
    fn an_admission_stops_at_its_allowance_whatever_the_image_does() {
        let never_served = || {
            Some(Outcome::Platform {
                code: ErrorCode::SandboxStartupFailed,
                message: "the image never answered GET /health within 120 s".into(),
                evidence: None,
            })
        };
        // Fifty tasks of an image that never serves: four sandboxes, not a hundred.
        let mut tasks: Vec<TaskProbe> = (0..50).map(|i| TaskProbe::new(&format!("t{i}"))).collect();
        let allowance = Allowance::default();
        let mut started = 0;
        while verdict(&tasks, &allowance) == Verdict::Pending {
            let next = tasks.iter_mut().find(|t| t.pending()).unwrap();
            next.attempts += 1;
            next.spent_s += 120;
            next.last = never_served();
            started += 1;
        }
        assert_eq!(started, allowance.platform_failures);
        let Verdict::Rejected { origin, slot, errors } = verdict(&tasks, &allowance) else { panic!() };
        assert_eq!((origin, slot, errors.len()), (ErrorOrigin::Platform, SlotState::Returned, 50));
        assert!(errors.iter().filter(|e| e.message.contains("allowance")).count() >= 48, "{errors:?}");
        // Slow probes that pass spend the sandbox time instead.
        let slow: Vec<TaskProbe> = (0..50)
            .map(|i| TaskProbe { spent_s: if i < 7 { 800 } else { 0 }, ..TaskProbe::new(&format!("t{i}")) })
            .map(|t| {
                let passed = Some(Outcome::Passed {
                    reset: None,
                    tools: Vec::new(),
                    first_observations: Vec::new(),
                    rewards: Vec::new(),
                });
                if t.spent_s > 0 {
                    TaskProbe { attempts: 1, last: passed, ..t }
                } else {
                    t
                }
            })
            .collect();
        assert!(matches!(
            verdict(&slow, &allowance),
            Verdict::Rejected { origin: ErrorOrigin::Platform, .. }
        ));
    }

    #[test]
    fn a_task_api_chooses_a_task_by_its_listed_id() {
        let openapi = json!({"paths": {"/list_environments": {}, "/{env_name}/tasks": {}, "/reset": {}}});
        assert!(has_task_api(&openapi) && !has_task_api(&json!({"paths": {"/reset": {}}})));
        let splits = vec![
            ("train".to_string(), json!({"tasks": [{"id": "echo-1", "answer": "hi"}, {"id": "echo-2"}]})),
            ("test".to_string(), json!({"tasks": [{"task_id": "echo-3"}]})),
        ];
        assert_eq!(task_reset(&splits, "echo-2"), Some(json!({"split": "train", "index": 1})));
        assert_eq!(task_reset(&splits, "echo-3"), Some(json!({"split": "test", "index": 0})));
        assert_eq!(task_reset(&splits, "nope"), None);
        assert_eq!(listed_ids(&splits, 2), ["echo-1 (train)", "echo-2 (train)"]);
        // A stored outcome from before the task API reads as a plain pass.
        let old: Outcome = serde_json::from_value(json!({"outcome": "passed"})).unwrap();
        assert_eq!(
            old,
            Outcome::Passed {
                reset: None,
                tools: Vec::new(),
                first_observations: Vec::new(),
                rewards: Vec::new()
            }
        );
    }

    #[test]
    fn a_tools_environment_lists_its_tools_in_either_spelling_and_within_bounds() {
        let answer = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
            {"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}, "outputSchema": {}},
            {"name": "submit", "input_schema": {"type": "object", "properties": {"c": {}}}},
        ]}});
        let tools = tool_list(&answer).unwrap();
        assert_eq!(
            tools[0],
            json!({"name": "echo", "description": "Echo.", "input_schema": {"type": "object"}})
        );
        assert_eq!(tools[1]["description"], "");
        let none = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "no MCP"}});
        assert_eq!(tool_list(&none), Ok(Vec::new()));
        let many: Vec<Value> = (0..40).map(|i| json!({"name": format!("t{i}")})).collect();
        assert!(tool_list(&json!({"result": {"tools": many}})).is_err());
        let huge = json!({"result": {"tools": [{"name": "t", "description": "x".repeat(MAX_TOOLS_TEXT)}]}});
        assert!(tool_list(&huge).is_err());
        assert!(tool_list(&json!({"result": {"tools": [{"description": "no name"}]}})).is_err());
    }
}
