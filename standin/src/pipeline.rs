//! The simulated training pipeline a stand-in job runs: no model, no GPU. It reads its bundle from
//! the runs dataset (`--bundle-repo R --bundle-revision C --bundle-path P`: `P/job.json`), plays
//! the pipeline's stages with short pauses, logs `[posttrainarena] {step}: …` lines as the real one
//! does, and writes the result files of `reference/pipeline.md` (`runs/{run_id}/reports/
//! eval_task_outcomes.json` and `score.json`, score_v2) into the runs dataset. A bundle of purpose
//! `baseline` measures the base model alone: its stages skip the gate, training and held-out
//! after, its cells are of the baseline arm, and it writes `baseline.json` instead of `score.json`.
//!
//! Pass rates come from a seeded model: each held-out task has a base rate from its name; the
//! collection moves it by an effect drawn from its task identities; each cell is drawn with the
//! run id in the seed. The same collection gets the same expected Δ on every run, and runs differ
//! by realistic trial noise. Everything it writes says it is a simulation.

use std::time::{Duration, Instant};

use domain::runs::Purpose;
use domain::score::{self, Arm, BaselineReport, Cell, Outcomes, SuiteTasks};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::relay::{Relay, Target};
use crate::repos::{Kind, RepoName, RepoPath, Rev};
use crate::SharedHub;
use serde_json::json;

/// The guide's stages and the pipeline steps each covers.
pub const STAGES: &[(&str, &[&str])] = &[
    ("setup", &["start_model_server"]),
    ("snapshot", &["snapshot_train_tasks", "snapshot_eval_tasks", "validate_task_content_isolation"]),
    ("baseline", &["baseline_eval"]),
    ("gate", &["grpo_gate_eval"]),
    ("training", &["conditional_grpo"]),
    ("heldout", &["final_eval"]),
    ("collect", &["compare_eval_lift", "write_score_report"]),
];

/// `job.json`: what the arena put in the bundle.
#[derive(Debug, Deserialize)]
pub struct JobManifest {
    pub run_id: String,
    /// `collection` (the default) or `baseline`.
    #[serde(default)]
    pub purpose: Option<String>,
    #[serde(default)]
    pub train_tasks: Vec<String>,
    #[serde(default)]
    pub task_identities: Vec<String>,
    #[serde(default)]
    pub eval_suites: Vec<SuiteTasks>,
    #[serde(default = "three")]
    pub trials: u32,
}

impl JobManifest {
    fn purpose(&self) -> Purpose {
        self.purpose.as_deref().and_then(Purpose::parse).unwrap_or(Purpose::Collection)
    }
}

fn three() -> u32 {
    3
}

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}

/// A number in [0, 1) from text.
fn unit(parts: &[&str]) -> f64 {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    let d = h.finalize();
    u64::from_be_bytes(d[..8].try_into().expect("8 bytes")) as f64 / (u64::MAX as f64 + 1.0)
}

/// The held-out cells of a run: both arms, every task and trial.
pub fn simulate_cells(m: &JobManifest) -> Outcomes {
    let identities = m.task_identities.join(",");
    let effect = -0.04 + 0.16 * unit(&["effect", &identities]);
    let mut cells = Vec::new();
    let suites: Vec<SuiteTasks> = m
        .eval_suites
        .iter()
        .map(|s| SuiteTasks {
            name: s.name.clone(),
            task_ids: if s.task_ids.is_empty() {
                (1..=20).map(|i| format!("simulated-heldout-{i:03}")).collect()
            } else {
                s.task_ids.clone()
            },
        })
        .collect();
    for suite in &suites {
        for task in &suite.task_ids {
            let base = 0.05 + 0.55 * unit(&["base", &suite.name, task]);
            let after =
                (base + effect + 0.1 * (unit(&["task-effect", task, &identities]) - 0.5)).clamp(0.0, 1.0);
            let arms: &[(Arm, f64)] = match m.purpose() {
                Purpose::Collection => &[(Arm::Baseline, base), (Arm::Final, after)],
                Purpose::Baseline => &[(Arm::Baseline, base)],
            };
            for &(arm, p) in arms {
                let arm_name = if arm == Arm::Baseline { "baseline" } else { "final" };
                for trial in 0..m.trials {
                    let t = trial.to_string();
                    let infra = unit(&["infra", &m.run_id, task, arm_name, &t]) < 0.01;
                    let pass = unit(&["cell", &m.run_id, task, arm_name, &t]) < p;
                    cells.push(Cell {
                        suite: suite.name.clone(),
                        task_id: task.clone(),
                        arm,
                        trial,
                        reward: (!infra).then_some(if pass { 1.0 } else { 0.0 }),
                        scored: !infra,
                        error_category: infra.then(|| "sandbox_start_timeout".to_string()),
                    });
                }
            }
        }
    }
    Outcomes {
        schema_version: 2,
        run_id: m.run_id.clone(),
        metric: "pass@1".into(),
        trials: m.trials,
        suites,
        cells,
    }
}

enum Stop {
    Canceled,
    TimedOut,
}

/// Runs one job to its end.
pub async fn run(hub: SharedHub, id: String) {
    let Some((args, faults, timeout_s, cancel, target)) = hub.jobs.with(&id, |j| {
        let target = match (
            j.view.environment.get("ARENA_URL"),
            j.view.environment.get("ARENA_RUN_ID"),
            j.secrets.get("ARENA_RUN_SECRET"),
        ) {
            (Some(url), Some(run_id), Some(secret)) => {
                Some(Target { url: url.clone(), run_id: run_id.clone(), secret: secret.clone() })
            }
            _ => None,
        };
        (j.view.arguments.clone(), j.faults.clone(), j.view.timeout, j.cancel.clone(), target)
    }) else {
        return;
    };
    let stage_ms = hub.jobs.stage_ms.load(std::sync::atomic::Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    let pause = |ms: u64| {
        let cancel = cancel.clone();
        async move {
            let wait = Duration::from_millis(ms).min(deadline.saturating_duration_since(Instant::now()));
            tokio::select! {
                _ = cancel.notified() => Err(Stop::Canceled),
                _ = tokio::time::sleep(wait) => if Instant::now() >= deadline { Err(Stop::TimedOut) } else { Ok(()) },
            }
        }
    };
    let end = |stop: Stop| match stop {
        Stop::Canceled => {}
        Stop::TimedOut => hub.jobs.set_stage(&id, "ERROR", Some("Job timeout".into())),
    };
    if let Err(stop) = pause(faults.scheduling_ms.unwrap_or(stage_ms / 2)).await {
        return end(stop);
    }
    hub.jobs.set_stage(&id, "RUNNING", None);
    hub.jobs.log(&id, format!("===== Job started at {} =====", crate::jobs::now_rfc3339()));
    hub.jobs
        .log(&id, "[posttrainarena] SIMULATED pipeline on the local stand-in: no model is served or trained");
    let manifest = match read_manifest(&hub, &args).await {
        Ok(m) => m,
        Err(e) => {
            hub.jobs.log(&id, format!("[posttrainarena] setup: could not read the bundle: {e}"));
            hub.jobs.set_stage(&id, "ERROR", Some(format!("could not read the bundle: {e}")));
            return;
        }
    };
    // In setup the job connects to the arena, unless told not to (then the log is all it says).
    let relay = match (&target, faults.relay_off) {
        (Some(t), false) => {
            Some(Relay::start(t.clone(), Duration::from_millis((stage_ms / 4).clamp(50, 1000))))
        }
        _ => None,
    };
    let send = |m: serde_json::Value| {
        if let Some(r) = &relay {
            r.send(m);
        }
    };
    send(json!({"kind": "hello", "detail": "SIMULATED pipeline on the local stand-in"}));
    let outcomes = simulate_cells(&manifest);
    let purpose = manifest.purpose();
    for (stage, steps) in STAGES.iter().filter(|(s, _)| purpose.stages().contains(s)) {
        if faults.relay_drop_at.as_deref() == Some(*stage) {
            if let Some(r) = &relay {
                r.drop_connection();
            }
        }
        send(json!({"kind": "stage_started", "stage": stage}));
        for step in *steps {
            let line =
                format!("[posttrainarena] {step}: simulated ({} training tasks)", manifest.train_tasks.len());
            hub.jobs.log(&id, line);
        }
        if faults.hang_at.as_deref() == Some(*stage) {
            // Silent from here on (no heartbeat, no log line), until canceled or timed out.
            if let Some(r) = &relay {
                r.silence();
            }
            if let Err(stop) = pause(u64::MAX / 4).await {
                return end(stop);
            }
        }
        if faults.fail_at.as_deref() == Some(*stage) {
            let reason = faults.reason.clone().unwrap_or_else(|| format!("{stage} failed (simulated fault)"));
            hub.jobs.log(&id, format!("[posttrainarena] {stage}: ERROR {reason}"));
            send(json!({"kind": "error", "stage": stage, "detail": reason}));
            if let Some(r) = &relay {
                r.close().await;
            }
            hub.jobs.set_stage(&id, "ERROR", Some(reason));
            return;
        }
        if let Err(stop) = pause(stage_ms).await {
            return end(stop);
        }
        let mut finished = json!({"kind": "stage_finished", "stage": stage});
        if let Some((passed, total, errors)) = counts(&outcomes, &manifest, stage) {
            finished["passed"] = json!(passed);
            finished["total"] = json!(total);
            finished["errors"] = json!(errors);
            finished["timeouts"] = json!(0);
        }
        if *stage == "collect" && !faults.no_results {
            if let Err(e) = write_results(&hub, &args, &manifest, &outcomes, faults.mismatch).await {
                hub.jobs.log(&id, format!("[posttrainarena] publish: ERROR {e}"));
                hub.jobs.set_stage(&id, "ERROR", Some(format!("publishing results failed: {e}")));
                return;
            }
            let line =
                format!("[posttrainarena] publish: results written to runs/{}/reports/", manifest.run_id);
            hub.jobs.log(&id, line);
        }
        send(finished);
    }
    if let Some(r) = &relay {
        r.close().await;
    }
    hub.jobs.set_stage(&id, "COMPLETED", None);
}

/// An evaluation stage's pass counts: (passed, attempts, infrastructure errors).
fn counts(o: &Outcomes, m: &JobManifest, stage: &str) -> Option<(u64, u64, u64)> {
    let arm = match stage {
        "baseline" => Arm::Baseline,
        "heldout" => Arm::Final,
        "gate" => {
            // The base model on up to 8 training tasks, 4 attempts each.
            let tasks: Vec<&String> = m.train_tasks.iter().take(8).collect();
            let passed = tasks
                .iter()
                .flat_map(|t| (0..4).map(move |a| unit(&["gate", &m.run_id, t, &a.to_string()]) < 0.35))
                .filter(|p| *p)
                .count();
            return Some((passed as u64, tasks.len() as u64 * 4, 0));
        }
        _ => return None,
    };
    let cells: Vec<&Cell> = o.cells.iter().filter(|c| c.arm == arm).collect();
    let passed = cells.iter().filter(|c| c.scored && c.reward.unwrap_or(0.0) >= 1.0).count();
    let errors = cells.iter().filter(|c| !c.scored).count();
    Some((passed as u64, cells.len() as u64, errors as u64))
}

async fn read_manifest(hub: &SharedHub, args: &[String]) -> Result<JobManifest, String> {
    let (repo, revision, path) = (
        arg(args, "--bundle-repo").ok_or("no --bundle-repo")?,
        arg(args, "--bundle-revision").ok_or("no --bundle-revision")?,
        arg(args, "--bundle-path").ok_or("no --bundle-path")?,
    );
    let (owner, name) = repo.split_once('/').ok_or("--bundle-repo is not owner/name")?;
    let repos = hub.repos.as_ref().ok_or("the stand-in serves no repositories")?;
    let id = RepoName::parse(owner, name).ok_or("a bad repository name")?;
    let repo = repos.open(Kind::Dataset, &id).await.map_err(|e| e.to_string())?.ok_or("no such dataset")?;
    let rev = Rev::parse(revision).ok_or("a bad revision")?;
    let sha = repo.commit(&rev).await.map_err(|e| e.to_string())?.ok_or("no such revision")?;
    let tree = repo.tree(&sha).await.map_err(|e| e.to_string())?;
    let file = RepoPath::parse(&format!("{path}/job.json")).ok_or("a bad bundle path")?;
    let entry = tree.get(&file).ok_or("the bundle has no job.json")?;
    let bytes = repo.blob(&entry.oid).await.map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| format!("job.json: {e}"))
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, String> {
    serde_json::to_vec_pretty(v).map_err(|e| e.to_string())
}

async fn write_results(
    hub: &SharedHub,
    args: &[String],
    m: &JobManifest,
    outcomes: &Outcomes,
    mismatch: bool,
) -> Result<(), String> {
    let repo_id = arg(args, "--bundle-repo").ok_or("no --bundle-repo")?;
    let (owner, name) = repo_id.split_once('/').ok_or("--bundle-repo is not owner/name")?;
    let repos = hub.repos.as_ref().ok_or("the stand-in serves no repositories")?;
    let id = RepoName::parse(owner, name).ok_or("a bad repository name")?;
    let repo = repos.open(Kind::Dataset, &id).await.map_err(|e| e.to_string())?.ok_or("no such dataset")?;
    let dir = format!("runs/{}/reports", m.run_id);
    let file = |name: &str, value: Vec<u8>| {
        (RepoPath::parse(&format!("{dir}/{name}")).expect("a plain path"), value)
    };
    let report = match m.purpose() {
        Purpose::Collection => {
            let mut report = score::score(outcomes);
            if mismatch {
                report.pooled.delta += 0.05;
            }
            file("score.json", to_json(&report)?)
        }
        Purpose::Baseline => {
            let mut reference = score::reference(outcomes);
            if mismatch {
                reference.pass_rate += 0.05;
            }
            let report = BaselineReport { schema_version: 1, metric: outcomes.metric.clone(), reference };
            file("baseline.json", to_json(&report)?)
        }
    };
    let files = vec![file("eval_task_outcomes.json", to_json(outcomes)?), report];
    repo.write(&format!("Simulated results of {} (local stand-in)", m.run_id), &files)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(run: &str, identities: &[&str]) -> JobManifest {
        JobManifest {
            run_id: run.into(),
            purpose: None,
            train_tasks: vec!["a".into()],
            task_identities: identities.iter().map(|s| s.to_string()).collect(),
            eval_suites: vec![SuiteTasks { name: "heldout".into(), task_ids: Vec::new() }],
            trials: 3,
        }
    }

    #[test]
    fn results_are_reproducible_and_depend_on_the_collection_and_the_run() {
        let a1 = score::score(&simulate_cells(&manifest("run-1", &["sha256:a"])));
        let again = score::score(&simulate_cells(&manifest("run-1", &["sha256:a"])));
        let a2 = score::score(&simulate_cells(&manifest("run-2", &["sha256:a"])));
        let b1 = score::score(&simulate_cells(&manifest("run-1", &["sha256:b"])));
        assert_eq!(a1, again);
        assert_ne!(a1.pooled.delta, a2.pooled.delta, "runs differ by trial noise");
        assert_ne!(a1.pooled.delta, b1.pooled.delta, "collections differ");
        assert_eq!(a1.pooled.paired_task_count, 20);
        assert!(a1.pooled.stderr > 0.0);
    }

    #[test]
    fn a_baseline_measurement_evaluates_the_base_model_alone() {
        let m = JobManifest { purpose: Some("baseline".into()), ..manifest("run-b", &[]) };
        let o = simulate_cells(&m);
        assert_eq!(o.cells.len(), 20 * 3, "20 simulated tasks, 3 trials, one arm");
        assert!(o.cells.iter().all(|c| c.arm == Arm::Baseline));
    }
}
