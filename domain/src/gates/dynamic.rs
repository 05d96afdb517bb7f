//! The dynamic gates, which an organizer runs: the plan (pinned BenchFlow `bench eval run`
//! commands per eligible task: the reference solution and the no-op control on reruns, and the
//! challenge's base model on a few attempts for the difficulty band), and the judgement of the
//! trials an organizer attaches.
//!
//! A plan is derived only from the collection's pinned commit, its stored validation and the
//! challenge, so deriving it again gives the same bytes: its hash is what an attached results file
//! must name.

use crate::invalid::Invalid;
use serde::{Deserialize, Serialize};

pub const PLAN_SCHEMA: u32 = 1;
pub const DEFAULT_RERUNS: u32 = 8;
pub const DEFAULT_ATTEMPTS: u32 = 4;

/// What the plan does with a task that has no reference solution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum NoOracle {
    /// Rejected: the task needs a working reference solution.
    Require,
    /// Planned without the oracle control (the Space's policy today).
    Allow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Policy {
    pub controls_reruns: u32,
    pub band_attempts: u32,
    pub no_oracle: NoOracle,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            controls_reruns: DEFAULT_RERUNS,
            band_attempts: DEFAULT_ATTEMPTS,
            no_oracle: NoOracle::Allow,
        }
    }
}

impl Policy {
    pub fn check(&self) -> Result<(), Invalid> {
        if !(1..=32).contains(&self.controls_reruns) {
            return Err("`controls_reruns` is 1 to 32".into());
        }
        if !(2..=16).contains(&self.band_attempts) {
            return Err("`band_attempts` is 2 to 16 (the band needs room between none and all)".into());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Oracle,
    Noop,
    Band,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlannedRun {
    pub kind: Kind,
    pub trials: u32,
    pub command: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanTask {
    pub task: String,
    pub identity: String,
    /// The task's directory in the repository.
    pub path: String,
    pub has_oracle: bool,
    pub runs: Vec<PlannedRun>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Plan {
    pub schema_version: u32,
    pub environment_id: String,
    pub challenge_id: String,
    /// `dataset:owner/name` or `github:owner/name`.
    pub source: String,
    pub commit: String,
    pub gates_version: String,
    /// The base model (`repo@revision`) and harness the band uses.
    pub model: String,
    pub harness: String,
    pub policy: Policy,
    pub tasks: Vec<PlanTask>,
    /// SHA-256 of the plan's canonical JSON without this field.
    pub plan_hash: String,
}

/// A task of the stored validation the plan reads.
#[derive(Debug, Clone)]
pub struct EligibleTask {
    pub name: String,
    pub dir: String,
    pub identity: String,
    pub has_oracle: bool,
}

pub struct PlanInput<'a> {
    pub environment_id: &'a str,
    pub challenge_id: &'a str,
    pub source: &'a str,
    pub commit: &'a str,
    pub entry_path: &'a str,
    pub gates_version: &'a str,
    pub model: &'a str,
    pub harness: &'a str,
    pub tasks: &'a [EligibleTask],
    pub policy: Policy,
}

fn hash(plan: &Plan) -> String {
    let mut unhashed = plan.clone();
    unhashed.plan_hash = String::new();
    // Struct fields serialize in declaration order and the task list is sorted: canonical bytes.
    let bytes = serde_json::to_vec(&unhashed).expect("a plan serializes");
    crate::digest::sha256_hex(&bytes)
}

/// The plan for every eligible task, sorted by name.
pub fn plan(i: &PlanInput) -> Plan {
    let mut tasks: Vec<&EligibleTask> = i.tasks.iter().collect();
    tasks.sort_by(|a, b| a.name.cmp(&b.name));
    let p = i.policy;
    let planned = tasks
        .into_iter()
        .map(|t| {
            let path =
                if i.entry_path.is_empty() { t.dir.clone() } else { format!("{}/{}", i.entry_path, t.dir) };
            let base = format!("bench eval run --source {}@{} --task {path}", i.source, i.commit);
            let out = |kind: &str| format!("--jobs-root gates/{}/{kind}", t.name);
            let mut runs = Vec::new();
            if t.has_oracle {
                runs.push(PlannedRun {
                    kind: Kind::Oracle,
                    trials: p.controls_reruns,
                    command: format!(
                        "{base} --agent oracle --reruns {} {}",
                        p.controls_reruns,
                        out("oracle")
                    ),
                });
            }
            runs.push(PlannedRun {
                kind: Kind::Noop,
                trials: p.controls_reruns,
                command: format!("{base} --agent noop --reruns {} {}", p.controls_reruns, out("noop")),
            });
            runs.push(PlannedRun {
                kind: Kind::Band,
                trials: p.band_attempts,
                command: format!(
                    "{base} --agent {} --model {} --attempts {} {}",
                    i.harness,
                    i.model,
                    p.band_attempts,
                    out("band")
                ),
            });
            PlanTask {
                task: t.name.clone(),
                identity: t.identity.clone(),
                path,
                has_oracle: t.has_oracle,
                runs,
            }
        })
        .collect();
    let mut plan = Plan {
        schema_version: PLAN_SCHEMA,
        environment_id: i.environment_id.into(),
        challenge_id: i.challenge_id.into(),
        source: i.source.into(),
        commit: i.commit.into(),
        gates_version: i.gates_version.into(),
        model: i.model.into(),
        harness: i.harness.into(),
        policy: p,
        tasks: planned,
        plan_hash: String::new(),
    };
    plan.plan_hash = hash(&plan);
    plan
}

/// One trial as `validation_gates.py collect` reads it from a BenchFlow job folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Trial {
    /// The verifier's reward; `null` when the trial never produced one.
    pub reward: Option<f64>,
    /// Whether every check of the verifier passed (`null` when it did not say).
    #[serde(default)]
    pub checks_passed: Option<bool>,
    /// An infrastructure error (the sandbox, the build, the harness): the trial does not count.
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskTrials {
    pub task: String,
    #[serde(default)]
    pub oracle: Vec<Trial>,
    #[serde(default)]
    pub noop: Vec<Trial>,
    #[serde(default)]
    pub band: Vec<Trial>,
}

/// `results.json`, as `validation_gates.py collect` writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GateResults {
    pub schema_version: u32,
    pub plan_hash: String,
    pub environment_id: String,
    pub policy: Policy,
    pub tasks: Vec<TaskTrials>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Accepted,
    Rejected,
    /// Infrastructure errors or missing attempts: rerun them.
    Inconclusive,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskVerdict {
    pub task: String,
    pub verdict: Outcome,
    pub reasons: Vec<String>,
    /// The base model's pass rate over the band's attempts that counted.
    pub band_pass_rate: Option<f64>,
}

/// Judges one control: every rerun must score `want`.
fn control(
    name: &str,
    trials: &[Trial],
    planned: u32,
    want: f64,
    checks: bool,
    reasons: &mut Vec<String>,
) -> Outcome {
    let errors = trials.iter().filter(|t| t.error.is_some() || t.reward.is_none()).count();
    if errors > 0 || (trials.len() as u32) < planned {
        reasons.push(format!(
            "{name}: {} of {planned} reruns usable ({errors} infrastructure error(s)); rerun them",
            trials.len() - errors
        ));
        return Outcome::Inconclusive;
    }
    let bad = trials
        .iter()
        .filter(|t| t.reward != Some(want) || (checks && t.checks_passed == Some(false)))
        .count();
    if bad > 0 {
        reasons
            .push(format!("{name}: {bad} of {planned} reruns did not score {want} with every check passing"));
        Outcome::Rejected
    } else {
        reasons.push(format!("{name}: {want} on all {planned} reruns"));
        Outcome::Accepted
    }
}

/// The verdict of every planned task from its trials.
pub fn judge(plan: &Plan, results: &GateResults) -> Vec<TaskVerdict> {
    plan.tasks
        .iter()
        .map(|t| {
            let empty = TaskTrials { task: t.task.clone(), oracle: vec![], noop: vec![], band: vec![] };
            let got = results.tasks.iter().find(|r| r.task == t.task).unwrap_or(&empty);
            let mut reasons = Vec::new();
            let mut outcomes = Vec::new();
            let p = plan.policy;
            if t.has_oracle {
                outcomes.push(control("oracle", &got.oracle, p.controls_reruns, 1.0, true, &mut reasons));
            } else if p.no_oracle == NoOracle::Require {
                reasons.push("no reference solution, and the plan requires one".into());
                outcomes.push(Outcome::Rejected);
            } else {
                reasons.push("no reference solution: the oracle control is skipped by policy".into());
            }
            outcomes.push(control("no-op", &got.noop, p.controls_reruns, 0.0, false, &mut reasons));
            let counted: Vec<&Trial> =
                got.band.iter().filter(|t| t.error.is_none() && t.reward.is_some()).collect();
            let passes = counted.iter().filter(|t| t.reward.unwrap_or(0.0) >= 1.0).count() as u32;
            let band_pass_rate = (!counted.is_empty()).then(|| f64::from(passes) / counted.len() as f64);
            if (counted.len() as u32) < p.band_attempts {
                reasons.push(format!(
                    "band: {} of {} attempts usable; rerun them",
                    counted.len(),
                    p.band_attempts
                ));
                outcomes.push(Outcome::Inconclusive);
            } else if passes == 0 || passes >= p.band_attempts {
                let why = if passes == 0 { "too hard: never solved" } else { "too easy: always solved" };
                reasons.push(format!("band: solved in {passes} of {} attempts, {why}", p.band_attempts));
                outcomes.push(Outcome::Rejected);
            } else {
                reasons.push(format!("band: solved in {passes} of {} attempts", p.band_attempts));
                outcomes.push(Outcome::Accepted);
            }
            let verdict = if outcomes.contains(&Outcome::Rejected) {
                Outcome::Rejected
            } else if outcomes.contains(&Outcome::Inconclusive) {
                Outcome::Inconclusive
            } else {
                Outcome::Accepted
            };
            TaskVerdict { task: t.task.clone(), verdict, reasons, band_pass_rate }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(tasks: &'a [EligibleTask], policy: Policy) -> PlanInput<'a> {
        PlanInput {
            environment_id: "env-1",
            challenge_id: "local-demo",
            source: "dataset:alice/pack",
            commit: "0123456789abcdef0123456789abcdef01234567",
            entry_path: "",
            gates_version: "gates-v4",
            model: "Qwen/Qwen3.5-9B@c202236",
            harness: "opencode",
            tasks,
            policy,
        }
    }

    fn tasks() -> Vec<EligibleTask> {
        vec![
            EligibleTask {
                name: "b".into(),
                dir: "envs/b".into(),
                identity: "sha256:b".into(),
                has_oracle: false,
            },
            EligibleTask {
                name: "a".into(),
                dir: "envs/a".into(),
                identity: "sha256:a".into(),
                has_oracle: true,
            },
        ]
    }

    fn trials(rewards: &[f64]) -> Vec<Trial> {
        rewards.iter().map(|r| Trial { reward: Some(*r), checks_passed: Some(true), error: None }).collect()
    }

    #[test]
    fn a_plan_is_the_same_bytes_every_time_and_its_hash_covers_the_policy() {
        let t = tasks();
        let p1 = plan(&input(&t, Policy::default()));
        let mut reversed = t.clone();
        reversed.reverse();
        let p2 = plan(&input(&reversed, Policy::default()));
        assert_eq!(serde_json::to_vec(&p1).unwrap(), serde_json::to_vec(&p2).unwrap());
        assert_eq!(p1.tasks[0].task, "a");
        assert_eq!(p1.tasks[0].runs.len(), 3, "oracle, no-op, band");
        assert_eq!(p1.tasks[1].runs.len(), 2, "no oracle: no-op and band");
        assert!(p1.tasks[0].runs[0].command.contains("--agent oracle --reruns 8"));
        assert!(p1.tasks[0].runs[2].command.contains("--model Qwen/Qwen3.5-9B@c202236 --attempts 4"));
        let other = plan(&input(&t, Policy { band_attempts: 6, ..Policy::default() }));
        assert_ne!(other.plan_hash, p1.plan_hash);
    }

    fn results(plan: &Plan, oracle: Vec<Trial>, noop: Vec<Trial>, band: Vec<Trial>) -> GateResults {
        GateResults {
            schema_version: 1,
            plan_hash: plan.plan_hash.clone(),
            environment_id: plan.environment_id.clone(),
            policy: plan.policy,
            tasks: vec![TaskTrials { task: "a".into(), oracle, noop, band }],
        }
    }

    #[test]
    fn verdicts_accept_reject_and_stay_inconclusive() {
        let t = tasks();
        let p = plan(&input(&t, Policy::default()));
        let good =
            judge(&p, &results(&p, trials(&[1.0; 8]), trials(&[0.0; 8]), trials(&[1.0, 0.0, 0.0, 1.0])));
        assert_eq!(good[0].verdict, Outcome::Accepted, "{:?}", good[0].reasons);
        assert_eq!(good[0].band_pass_rate, Some(0.5));
        let easy = judge(&p, &results(&p, trials(&[1.0; 8]), trials(&[0.0; 8]), trials(&[1.0; 4])));
        assert_eq!(easy[0].verdict, Outcome::Rejected);
        assert!(easy[0].reasons.iter().any(|r| r.contains("too easy")));
        let noop_wins = judge(
            &p,
            &results(
                &p,
                trials(&[1.0; 8]),
                trials(&[0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
                trials(&[1.0, 0.0, 0.0, 0.0]),
            ),
        );
        assert_eq!(noop_wins[0].verdict, Outcome::Rejected);
        let mut flaky = trials(&[1.0; 8]);
        flaky[3] = Trial { reward: None, checks_passed: None, error: Some("sandbox start timeout".into()) };
        let infra = judge(&p, &results(&p, flaky, trials(&[0.0; 8]), trials(&[1.0, 0.0, 0.0, 0.0])));
        assert_eq!(infra[0].verdict, Outcome::Inconclusive);
        // Task b has no trials at all: inconclusive (missing attempts), its oracle skipped by policy.
        assert_eq!(good[1].verdict, Outcome::Inconclusive);
        assert!(good[1].reasons[0].contains("skipped by policy"));
        let strict = plan(&input(&t, Policy { no_oracle: NoOracle::Require, ..Policy::default() }));
        let v = judge(
            &strict,
            &results(&strict, trials(&[1.0; 8]), trials(&[0.0; 8]), trials(&[1.0, 0.0, 0.0, 0.0])),
        );
        assert_eq!(v[1].verdict, Outcome::Rejected, "b has no reference solution");
    }
}
