//! Held-out OpenEnv benchmarks: what the OpenEnv track measures its runs on. Organizers define one
//! per file, `configs/benchmarks/{id}.toml`, like a suite: a header (`[benchmark]`: name,
//! description, `private`, `trials` per task, the `phase_allowance_s` each evaluation phase may take
//! beside the run's training time, and for a private one the domains it publishes), then its
//! held-out environments (`[[environments]]`). A private benchmark's environments live in the
//! private overlay (`benchmarks/{id}.toml`, environments only), never in the repository.
//!
//! Each environment is an image at a pinned digest with the port, command and environment its
//! sandbox starts it with (the organizers state them: nothing is read from a registry at run time),
//! its action and observation schemas, its `finish_action`, a domain, and its tasks with the same
//! fields and limits as a submission's.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{check_task, TaskSpec, MAX_START_ARGS, MAX_TASKS, RESERVED_PORT};

/// At most this many trials per task, and this many held-out tasks in one benchmark.
pub const MAX_TRIALS: u32 = 16;
pub const MAX_BENCHMARK_TASKS: usize = 200;
/// An evaluation phase's own allowance: at least a minute, at most the run's training time.
pub const PHASE_ALLOWANCE_S: std::ops::RangeInclusive<u64> = 60..=14_400;

/// `[benchmark]` of `configs/benchmarks/{id}.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchmarkHeader {
    pub id: String,
    pub name: String,
    pub description: String,
    /// Its environments live in the private overlay, and only editors see its tasks.
    #[serde(default)]
    pub private: bool,
    /// Episodes per held-out task in each phase (before and after training).
    pub trials: u32,
    /// Seconds each phase may take, beside the run's training time.
    pub phase_allowance_s: u64,
}

/// One held-out environment as the file states it; its tasks are read as a submission's
/// (`split` is always `eval` here and may be left out).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentFile {
    pub image: String,
    pub port: u16,
    pub command: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub domain: String,
    /// What the server's `GET /schema` answers, as JSON text (TOML has no null, which schemas use).
    pub schema: String,
    #[serde(default)]
    pub finish_action: Option<Value>,
    pub tasks: Vec<Value>,
}

/// `configs/benchmarks/{id}.toml`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchmarkFile {
    pub benchmark: BenchmarkHeader,
    #[serde(default)]
    pub environments: Vec<EnvironmentFile>,
}

/// The overlay's `benchmarks/{id}.toml` of a private benchmark.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverlayFile {
    pub environments: Vec<EnvironmentFile>,
}

/// A held-out environment as the registry checked it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeldOutEnvironment {
    pub image: String,
    pub port: u16,
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub domain: String,
    pub schema: Value,
    pub finish_action: Option<Value>,
    pub tasks: Vec<TaskSpec>,
}

/// A benchmark of the registry. `environments` is empty for a private benchmark whose overlay is
/// not on this server: runs then say their evaluation could not be played.
#[derive(Debug, Clone, PartialEq)]
pub struct Benchmark {
    pub header: BenchmarkHeader,
    pub environments: Vec<HeldOutEnvironment>,
}

impl Benchmark {
    pub fn id(&self) -> &str {
        &self.header.id
    }

    /// The domains, in the order their environments come.
    pub fn domains(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in &self.environments {
            if !out.contains(&e.domain) {
                out.push(e.domain.clone());
            }
        }
        out
    }

    /// What a run plays and the arena scores: every held-out task with its domain, `trials` times
    /// in each phase.
    pub fn plan(&self) -> super::evaluation::Plan {
        super::evaluation::Plan {
            benchmark: self.header.id.clone(),
            trials: self.header.trials,
            phase_allowance_s: self.header.phase_allowance_s,
            tasks: self
                .environments
                .iter()
                .flat_map(|e| {
                    e.tasks.iter().map(|t| super::evaluation::PlannedTask {
                        task_id: t.task_id.clone(),
                        domain: e.domain.clone(),
                    })
                })
                .collect(),
        }
    }
}

/// Problems with one benchmark file: (field, reason).
pub type Problems = Vec<(String, String)>;

/// Reads and checks environments as the file (or the overlay) states them.
pub fn check_environments(envs: &[EnvironmentFile]) -> Result<Vec<HeldOutEnvironment>, Problems> {
    let mut problems = Problems::new();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, e) in envs.iter().enumerate() {
        let at = |field: &str| format!("environments[{i}].{field}");
        let mut bad = |field: &str, why: String| problems.push((at(field), why));
        if !pinned(&e.image) {
            bad("image", format!("`{}` must be pinned: `host/name@sha256:` and 64 hex digits", e.image));
        }
        if e.port == 0 || e.port == RESERVED_PORT {
            bad("port", format!("{} is not a port a sandbox serves on", e.port));
        }
        if e.command.is_empty() || e.command.len() > MAX_START_ARGS {
            bad("command", format!("1 to {MAX_START_ARGS} arguments"));
        }
        if e.domain.trim().is_empty() || e.domain.chars().count() > 80 {
            bad("domain", "1 to 80 characters".into());
        }
        let schema: Value = serde_json::from_str(&e.schema).unwrap_or_default();
        if !schema["action"].is_object() || !schema["observation"].is_object() {
            bad("schema", "JSON text with `action` and `observation` JSON Schemas".into());
        }
        for part in ["action", "observation"] {
            if let Err(why) = super::schema::draft_of(&schema[part]) {
                bad("schema", format!("`{part}`: {why}"));
            }
        }
        if e.tasks.is_empty() || e.tasks.len() > MAX_TASKS {
            bad("tasks", format!("1 to {MAX_TASKS} tasks"));
        }
        let mut tasks = Vec::new();
        for (j, t) in e.tasks.iter().enumerate() {
            let mut t = t.clone();
            if let Some(o) = t.as_object_mut() {
                o.entry("split").or_insert_with(|| "eval".into());
            }
            match serde_json::from_value::<TaskSpec>(t) {
                Ok(task) => {
                    if let Err(r) = check_task(&task) {
                        bad(&format!("tasks[{j}]"), r.message);
                    } else if !seen.insert(task.task_id.clone()) {
                        bad(&format!("tasks[{j}]"), format!("task id `{}` appears twice", task.task_id));
                    }
                    tasks.push(task);
                }
                Err(err) => bad(&format!("tasks[{j}]"), err.to_string()),
            }
        }
        out.push(HeldOutEnvironment {
            image: e.image.clone(),
            port: e.port,
            command: e.command.clone(),
            env: e.env.clone(),
            domain: e.domain.trim().to_string(),
            schema,
            finish_action: e.finish_action.clone(),
            tasks,
        });
    }
    if seen.len() > MAX_BENCHMARK_TASKS {
        problems.push(("environments".into(), format!("at most {MAX_BENCHMARK_TASKS} held-out tasks")));
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The header's own rules.
pub fn check_header(h: &BenchmarkHeader) -> Problems {
    let mut problems = Problems::new();
    if !(1..=MAX_TRIALS).contains(&h.trials) {
        problems.push(("benchmark.trials".into(), format!("must be 1 to {MAX_TRIALS}")));
    }
    if !PHASE_ALLOWANCE_S.contains(&h.phase_allowance_s) {
        problems.push((
            "benchmark.phase_allowance_s".into(),
            format!("must be {} to {} s", PHASE_ALLOWANCE_S.start(), PHASE_ALLOWANCE_S.end()),
        ));
    }
    problems
}

fn pinned(image: &str) -> bool {
    image.split_once("@sha256:").is_some_and(|(name, hex)| {
        name.contains('/')
            && hex.len() == 64
            && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The benchmark as run `run_id`'s assignment carries it to the cluster: every environment with
/// its start and the draft its schemas are compiled with, and each task with a label that names
/// no task (`job_labels::opaque_task`: its sandboxes' labels are read by whoever reads their
/// namespace).
pub fn assignment_part(b: &Benchmark, run_id: &str) -> Value {
    let environments: Vec<Value> = b
        .environments
        .iter()
        .map(|e| {
            let tasks: Vec<Value> = e
                .tasks
                .iter()
                .map(|t| {
                    let mut v = serde_json::to_value(t).unwrap_or_default();
                    v["task_label"] = Value::String(crate::job_labels::opaque_task(run_id, &t.task_id));
                    v
                })
                .collect();
            // Checked when the registry loaded.
            let draft = super::schema::draft_of(&e.schema["action"]).unwrap_or(super::schema::DEFAULT_DRAFT);
            serde_json::json!({
                "image": e.image, "port": e.port, "command": e.command, "env": e.env,
                "domain": e.domain, "schema": e.schema, "schema_draft": draft.as_str(),
                "finish_action": e.finish_action, "tasks": tasks,
            })
        })
        .collect();
    serde_json::json!({
        "id": b.header.id,
        "trials": b.header.trials,
        "phase_allowance_s": b.header.phase_allowance_s,
        "environments": environments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(tasks: Value) -> EnvironmentFile {
        EnvironmentFile {
            image: format!("ghcr.io/a/b@sha256:{}", "a".repeat(64)),
            port: 8000,
            command: vec!["uvicorn".into()],
            env: BTreeMap::new(),
            domain: "finance".into(),
            schema: r#"{"action": {"type": "object"}, "observation": {"type": "object"}}"#.into(),
            finish_action: None,
            tasks: tasks.as_array().unwrap().clone(),
        }
    }

    #[test]
    fn environments_take_a_submissions_task_fields_and_limits() {
        let ok =
            check_environments(&[env(serde_json::json!([{"task_id": "t1", "rollout_wall_s": 60}]))]).unwrap();
        assert_eq!(ok[0].tasks[0].split, "eval");
        assert_eq!(ok[0].tasks[0].reset_wall_s, 180, "the guide's defaults");
        let over = check_environments(&[env(serde_json::json!([{"task_id": "t1", "rollout_wall_s": 4000}]))]);
        assert!(over.unwrap_err()[0].1.contains("rollout_wall_s"));
        let twice = check_environments(&[
            env(serde_json::json!([{"task_id": "t1"}])),
            env(serde_json::json!([{"task_id": "t1"}])),
        ]);
        assert!(twice.unwrap_err()[0].1.contains("appears twice"));
        let mut tag = env(serde_json::json!([{"task_id": "t1"}]));
        tag.image = "ghcr.io/a/b:v1".into();
        assert_eq!(check_environments(&[tag]).unwrap_err()[0].0, "environments[0].image");
    }

    #[test]
    fn a_header_bounds_trials_and_the_phase_allowance() {
        let h = |trials, allowance| BenchmarkHeader {
            id: "b".into(),
            name: "b".into(),
            description: "b".into(),
            private: false,
            trials,
            phase_allowance_s: allowance,
        };
        assert!(check_header(&h(2, 1800)).is_empty());
        assert_eq!(check_header(&h(0, 1800))[0].0, "benchmark.trials");
        assert_eq!(check_header(&h(2, 20_000))[0].0, "benchmark.phase_allowance_s");
    }
}
