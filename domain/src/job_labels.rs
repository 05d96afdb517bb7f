//! The labels on the arena's HF jobs, built in one place. HF accepts label keys and values of 1 to
//! 100 characters of `[A-Za-z0-9_-]` and refuses the whole create otherwise (`huggingface_hub`'s
//! `update_job_labels` docstring; HF's Jobs docs: "`model=Qwen3-0.6B` is rejected by the server").
//! The arena's ids may hold `.` and `:` and run to 128 characters, so a value is the id itself when
//! HF accepts it, else a form HF accepts that still names that one id: the id with each other
//! character as `_`, cut to [`KEPT`] characters, then `-` and 16 hex digits of its SHA-256. The exact
//! ids stay in the database; a job is found by computing its label again.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// The longest key or value HF accepts.
pub const MAX: usize = 100;
/// How much of an id a rewritten value keeps before its hash (`KEPT + 1 + 16 <= MAX`).
const KEPT: usize = 83;

/// The run (or baseline evaluation) a job is for.
pub const RUN: &str = "arena-run";
pub const CHALLENGE: &str = "arena-challenge";
/// The caller's `request_id` that started the run.
pub const REQUEST: &str = "arena-request";
/// What the job is: a run's purpose, or `openenv-admission` for a sandbox.
pub const PURPOSE: &str = "arena-purpose";
pub const SUBMISSION: &str = "arena-submission";
pub const TASK: &str = "arena-task";

/// The purpose label of an OpenEnv admission sandbox.
pub const ADMISSION: &str = "openenv-admission";
/// The purpose label of a training sandbox, set by the arena's trainer (`cluster/`).
pub const TRAIN: &str = "openenv-train";
/// The purpose of a sandbox of a held-out benchmark environment (a run's evaluation).
pub const EVAL: &str = "openenv-eval";

/// Whether HF accepts `text` as a label key or value.
pub fn is_valid(text: &str) -> bool {
    (1..=MAX).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The label value HF accepts for `id`: `id` itself when it can, else its rewritten, hashed form.
pub fn value(id: &str) -> String {
    if is_valid(id) {
        return id.to_string();
    }
    let kept: String = id
        .chars()
        .take(KEPT)
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    let hash = crate::digest::hex(&Sha256::digest(id.as_bytes())[..8]);
    format!("{kept}-{hash}")
}

/// The label of a task's sandbox, which names no task: anyone who reads the namespace's jobs
/// reads their labels, and a held-out task's id is the benchmark's. `t-` and 20 hex digits of the
/// SHA-256 of the scope (the run, or the submission admission probes) and the task id; the arena
/// maps it back by computing it again for the scope's tasks ([`task_of`]).
pub fn opaque_task(scope: &str, task_id: &str) -> String {
    let digest = Sha256::digest(format!("arena-task-label\n{scope}\n{task_id}").as_bytes());
    format!("t-{}", &crate::digest::hex(digest)[..20])
}

/// Which of `tasks` the opaque label `label` of `scope` stands for.
pub fn task_of<'a>(scope: &str, label: &str, tasks: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    tasks.into_iter().find(|t| opaque_task(scope, t) == label)
}

/// The labels of one job, from `(key, id)` pairs: every value as [`value`] makes it.
pub fn labels(pairs: &[(&'static str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, id)| {
            debug_assert!(is_valid(key), "label key {key} is not one HF accepts");
            (key.to_string(), value(id))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_label_names_no_task_and_maps_back_within_its_scope() {
        let label = opaque_task("oe-1", "held-out.task-7");
        assert!(is_valid(&label) && label.starts_with("t-") && !label.contains("task"), "{label}");
        assert_ne!(label, opaque_task("oe-2", "held-out.task-7"), "another run, another label");
        assert_eq!(task_of("oe-1", &label, ["a", "held-out.task-7"]), Some("held-out.task-7"));
        assert_eq!(task_of("oe-2", &label, ["a", "held-out.task-7"]), None);
    }

    #[test]
    fn ids_hf_accepts_are_kept_as_they_are() {
        for id in ["run-0123abcd", "openenv-9b", "alice_run-0001", &"a".repeat(100)] {
            assert_eq!(value(id), id);
        }
        for key in [RUN, CHALLENGE, REQUEST, PURPOSE, SUBMISSION, TASK, ADMISSION, TRAIN, EVAL] {
            assert!(is_valid(key));
        }
    }

    #[test]
    fn other_ids_become_values_hf_accepts_and_stay_distinct() {
        let long = format!("AGENT_ID-hello:1.2-{}", "x".repeat(120));
        let ids = ["AGENT_ID-hello:1.2", "AGENT_ID-hello_1_2", "task.1", "task_1", "", long.as_str()];
        let values: Vec<String> = ids.iter().map(|id| value(id)).collect();
        for v in &values {
            assert!(is_valid(v), "{v} is not a valid label value");
        }
        let distinct: std::collections::BTreeSet<&String> = values.iter().collect();
        assert_eq!(distinct.len(), values.len(), "{values:?}");
        assert!(values[0].starts_with("AGENT_ID-hello_1_2-"));
        assert_eq!(values[0], value("AGENT_ID-hello:1.2"), "a label is computed again the same");
        assert_eq!(values[5].len(), MAX);
        // A non-ASCII character is one `_`, not one per byte.
        assert!(value("é.x").starts_with("__x-"));
    }

    #[test]
    fn labels_map_every_value() {
        let l = labels(&[(RUN, "run-1"), (REQUEST, "a:b")]);
        assert_eq!(l[RUN], "run-1");
        assert!(is_valid(&l[REQUEST]) && l[REQUEST] != "a:b");
    }
}
