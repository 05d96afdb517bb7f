//! The answer of a validation: structure problems, credit warnings, each task's identity and
//! status, and the static gates' findings and summary. `check` is the one implementation the
//! server, the stateless check route (and so `check_task.py` / `validation_gates.py`) and the
//! browser checker all run.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::credit::{self, Credit, Defaults};
use super::listing::{Contents, Entry};
use super::package::{self, Format, Task};
use super::submission;
use super::task_identity::task_identity;
use crate::gates::{self, fingerprint::HeldOut, Finding, Severity, GATES_VERSION};

pub use super::issue::Issue;

/// A warning: validation still passes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Warning {
    pub code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// How many tasks it concerns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<String>,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Eligible,
    Rejected,
    Blocked,
    /// The package could not be read (a structural error).
    Invalid,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskReport {
    /// The task's directory name.
    pub name: String,
    /// The declared name (BenchFlow `task.name`), when it differs from the directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_name: Option<String>,
    pub dir: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    pub identity: String,
    pub status: TaskStatus,
    pub findings: Vec<String>,
    pub credit: Credit,
    pub has_oracle: bool,
    pub files: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Summary {
    pub tasks: usize,
    pub blocked: usize,
    pub rejected: usize,
    pub eligible: usize,
    pub needs_controls: usize,
    pub review: usize,
    pub clean: usize,
    pub by_code: BTreeMap<String, usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeldOutChecked {
    pub suite: String,
    pub sealed: bool,
    pub evaluated: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StaticGates {
    pub version: String,
    pub summary: Summary,
    pub findings: Vec<Finding>,
    /// Task directory name → `sha256:` content hash.
    pub task_identity: BTreeMap<String, String>,
    /// The held-out suites the collection was compared with.
    pub heldout: Vec<HeldOutChecked>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QualityGates {
    #[serde(rename = "static")]
    pub static_: StaticGates,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SubmissionInfo {
    pub present: bool,
    pub team_name: Option<String>,
    pub track: Option<String>,
    pub license: Option<String>,
    pub origin: Option<String>,
}

/// What validation answers (the server adds the source and fetch figures).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Report {
    /// The structure is sound and no blocking gate fired. It does not mean any task is eligible.
    pub valid: bool,
    pub tasks: usize,
    pub eligible_tasks: usize,
    pub errors: Vec<Issue>,
    pub warnings: Vec<Warning>,
    pub submission: SubmissionInfo,
    pub task_list: Vec<TaskReport>,
    pub quality_gates: QualityGates,
}

/// Checks a collection from its listing and the contents read for `package::reads`.
pub fn check(listing: &[Entry], contents: &Contents, heldout: &HeldOut) -> Report {
    check_with(listing, contents, heldout, true)
}

/// Checks tasks on their own (a local folder, one task, an `envs/` directory): a missing
/// `submission.yaml` is a warning there, since validation reads the one in the repository.
pub fn check_tasks(listing: &[Entry], contents: &Contents, heldout: &HeldOut) -> Report {
    check_with(listing, contents, heldout, false)
}

fn check_with(listing: &[Entry], contents: &Contents, heldout: &HeldOut, require_submission: bool) -> Report {
    let layout = package::discover(listing);
    let mut errors = layout.errors.clone();
    let mut warnings = Vec::new();
    let (info, defaults) = read_submission(&layout, contents, require_submission, &mut errors, &mut warnings);

    let tasks: Vec<Option<Task>> =
        layout.tasks.iter().map(|dir| package::read_task(dir, contents, &mut errors)).collect();
    duplicate_names(&tasks, &mut errors);
    let resolved = credits(&tasks, &defaults, &mut warnings);

    let mut findings: Vec<Finding> = Vec::new();
    let mut task_list = Vec::with_capacity(layout.tasks.len());
    let mut identity = BTreeMap::new();
    let mut summary = Summary { tasks: layout.tasks.len(), ..Summary::default() };
    let errored: BTreeSet<&str> = errors.iter().filter_map(|e| e.task.as_deref()).collect();
    for (dir, task) in layout.tasks.iter().zip(&tasks) {
        let hash = task_identity(dir.files.iter().map(|f| (f.path.as_str(), f.blob.as_str())));
        identity.insert(dir.dir_name.clone(), hash.clone());
        let own: Vec<Finding> = task.as_ref().map(|t| gates::check_task(t, heldout)).unwrap_or_default();
        let status = status_of(task.is_none() || errored.contains(dir.dir_name.as_str()), &own);
        tally(&mut summary, status, &own);
        task_list.push(TaskReport {
            name: dir.dir_name.clone(),
            declared_name: task.as_ref().map(|t| t.name.clone()).filter(|n| n != &dir.dir_name),
            dir: dir.dir.clone(),
            format: task.as_ref().map(|t| t.format),
            identity: hash,
            status,
            findings: own.iter().map(|f| f.code.clone()).collect(),
            credit: resolved.get(&dir.dir_name).cloned().unwrap_or_default(),
            has_oracle: task.as_ref().is_some_and(|t| t.oracle_path().is_some()),
            files: dir.files.len(),
        });
        findings.extend(own);
    }

    let unread = package::not_read(&layout, contents);
    if !unread.is_empty() {
        let shown: Vec<String> =
            unread.iter().take(20).map(|(path, why)| format!("{path} ({why})")).collect();
        let more = unread.len().saturating_sub(shown.len());
        warnings.push(Warning {
            code: "S-FILES-NOT-READ".into(),
            field: None,
            count: Some(unread.len()),
            tasks: Vec::new(),
            message: format!(
                "{} file(s) the checks search were not read, so no gate looked at them (a run still gets them whole): {}{}",
                unread.len(),
                shown.join("; "),
                if more > 0 { format!("; and {more} more") } else { String::new() }
            ),
        });
    }
    let blocked = findings.iter().any(|f| f.severity == Severity::Block);
    let valid = errors.is_empty() && !blocked && !layout.tasks.is_empty();
    Report {
        valid,
        tasks: layout.tasks.len(),
        eligible_tasks: summary.eligible,
        errors,
        warnings,
        submission: info,
        task_list,
        quality_gates: QualityGates {
            static_: StaticGates {
                version: GATES_VERSION.into(),
                summary,
                findings,
                task_identity: identity,
                heldout: heldout
                    .suites
                    .iter()
                    .map(|(s, evaluated)| HeldOutChecked {
                        suite: s.suite.clone(),
                        sealed: s.sealed,
                        evaluated: *evaluated,
                    })
                    .collect(),
            },
        },
    }
}

/// A task's status from whether it could be read and its own findings.
fn status_of(invalid: bool, own: &[Finding]) -> TaskStatus {
    let has = |s: Severity| own.iter().any(|f| f.severity == s);
    if invalid {
        TaskStatus::Invalid
    } else if has(Severity::Block) {
        TaskStatus::Blocked
    } else if has(Severity::Reject) {
        TaskStatus::Rejected
    } else {
        TaskStatus::Eligible
    }
}

/// Counts one task into the summary.
fn tally(summary: &mut Summary, status: TaskStatus, own: &[Finding]) {
    let has = |s: Severity| own.iter().any(|f| f.severity == s);
    match status {
        TaskStatus::Blocked => summary.blocked += 1,
        TaskStatus::Rejected | TaskStatus::Invalid => summary.rejected += 1,
        TaskStatus::Eligible => {
            summary.eligible += 1;
            if has(Severity::Controls) {
                summary.needs_controls += 1;
            }
            if has(Severity::Review) {
                summary.review += 1;
            }
            if own.is_empty() {
                summary.clean += 1;
            }
        }
    }
    for f in own {
        *summary.by_code.entry(f.code.clone()).or_default() += 1;
    }
}

fn submission_issue(field: Option<&str>, message: String) -> Issue {
    Issue {
        code: "S-SUBMISSION-YAML".into(),
        task: None,
        file: Some("submission.yaml".into()),
        field: field.map(str::to_string),
        message,
    }
}

/// `submission.yaml`: what it says, and the defaults its license and origin give the tasks.
fn read_submission(
    layout: &package::Layout,
    contents: &Contents,
    require_submission: bool,
    errors: &mut Vec<Issue>,
    warnings: &mut Vec<Warning>,
) -> (SubmissionInfo, Defaults) {
    let mut info = SubmissionInfo::default();
    let mut defaults = Defaults::default();
    match &layout.submission_yaml {
        Some(entry) => {
            info.present = true;
            match contents.get(&entry.path).map(|b| b.text().ok_or(())) {
                Some(Ok(text)) => {
                    let (sub, problems) = submission::parse(&text);
                    for p in problems {
                        errors.push(submission_issue(None, format!("line {}: {}", p.line, p.message)));
                    }
                    if sub.team_name.is_none() {
                        errors.push(submission_issue(Some("team_name"), "`submission.yaml` needs a flat `team_name`".into()));
                    }
                    if sub.track.is_none() {
                        errors.push(submission_issue(Some("track"), "`submission.yaml` needs `track: environments`".into()));
                    }
                    defaults = Defaults { license: sub.license.clone(), origin: sub.origin.clone() };
                    info.team_name = sub.team_name;
                    info.track = sub.track;
                    info.license = sub.license;
                    info.origin = sub.origin;
                }
                _ => errors.push(submission_issue(None, "`submission.yaml` could not be read as UTF-8 text of at most 1 MiB".into())),
            }
        }
        // Harbor datasets validate without one (credited to the submitting account).
        None if layout.tasks_dir == Some("tasks") || layout.tasks.is_empty() => {}
        None if !require_submission => warnings.push(Warning {
            code: "W-NO-SUBMISSION-YAML".into(),
            field: None,
            count: None,
            tasks: Vec::new(),
            message: "no `submission.yaml` was checked; the collection needs one beside `envs/` (`team_name`, `track: environments`)".into(),
        }),
        None => errors.push(submission_issue(None, "no `submission.yaml` beside `envs/`: it needs `team_name` and `track: environments`"
                .into())),
    }
    (info, defaults)
}

/// Names must be unique (case-insensitively): results and identities are keyed by them.
fn duplicate_names(tasks: &[Option<Task>], errors: &mut Vec<Issue>) {
    let mut by_name: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for t in tasks.iter().flatten() {
        by_name.entry(t.name.to_lowercase()).or_default().push(&t.dir);
    }
    for (name, dirs) in by_name.iter().filter(|(_, d)| d.len() > 1) {
        errors.push(Issue {
            code: "S-DUPLICATE-TASK".into(),
            task: None,
            file: None,
            field: Some("task.name".into()),
            message: format!(
                "the task name `{name}` is used by {} directories: {}",
                dirs.len(),
                dirs.join(", ")
            ),
        });
    }
}

/// Each task's credit, judged against the collection's defaults; the warnings it gives.
fn credits(
    tasks: &[Option<Task>],
    defaults: &Defaults,
    warnings: &mut Vec<Warning>,
) -> BTreeMap<String, Credit> {
    let credits: Vec<(String, Credit)> =
        tasks.iter().flatten().map(|t| (dir_name(&t.dir).to_string(), t.credit.clone())).collect();
    let (resolved, credit_warnings) = credit::judge(&credits, defaults);
    for w in credit_warnings {
        let count = w.missing + w.invalid;
        warnings.push(Warning {
            code: "W-CREDIT".into(),
            field: Some(w.field.clone()),
            count: Some(count),
            tasks: w.tasks.clone(),
            message: w.message.clone(),
        });
    }
    resolved.into_iter().collect()
}

fn dir_name(dir: &str) -> &str {
    dir.rsplit('/').next().unwrap_or(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collection::listing::from_files;

    const TASK_MD: &str = "---\nversion: \"1.0\"\nmetadata:\n  author_hub: alice\n  license: MIT\n  category: data-processing\n  origin: original\nagent: {timeout_sec: 600}\nverifier: {timeout_sec: 60}\nenvironment: {allow_internet: false}\n---\n## prompt\nSum the numbers in /app/data/in.txt and write the total to /app/out/total.txt as one line.\n";

    fn task(extra: &[(&str, &[u8])]) -> Report {
        let mut files: Vec<(&str, &[u8])> = vec![
            ("submission.yaml", b"team_name: t\ntrack: environments\n"),
            ("envs/sum/task.md", TASK_MD.as_bytes()),
            ("envs/sum/environment/Dockerfile", b"FROM python:3.11-slim\nCOPY data/ /app/data/\n"),
            ("envs/sum/environment/data/in.txt", b"1\n2\n"),
            ("envs/sum/verifier/test.sh", b"if pytest /tests; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"),
            ("envs/sum/verifier/test_outputs.py", b"def test_total():\n    assert open('/app/out/total.txt').read().strip() == '3'\n"),
            ("envs/sum/verifier/verifier.md", b"checks the total\n"),
            ("envs/sum/verifier/rubrics/total.md", b"the total is right\n"),
            ("envs/sum/oracle/solve.sh", b"mkdir -p /app/out && python3 -c 'print(3)' > /app/out/total.txt\n"),
        ];
        files.extend_from_slice(extra);
        let (listing, contents) = from_files(files.into_iter().map(|(p, b)| (p, b, false)));
        check(&listing, &contents, &HeldOut::none())
    }

    #[test]
    fn a_clean_task_is_valid_eligible_and_clean() {
        let r = task(&[]);
        assert!(r.valid, "{r:#?}");
        assert_eq!((r.tasks, r.eligible_tasks, r.quality_gates.static_.summary.clean), (1, 1, 1));
        assert!(r.errors.is_empty() && r.warnings.is_empty());
        assert_eq!(r.task_list[0].format, Some(Format::Posttrain));
    }

    #[test]
    fn a_binary_data_file_named_like_labels_is_no_structure_error() {
        let r = task(&[("envs/sum/environment/data/labels.png", b"\x89PNG\r\n\x1a\n\xff\x00")]);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let codes: Vec<&str> = r.quality_gates.static_.findings.iter().map(|f| f.code.as_str()).collect();
        assert_eq!(codes, ["R-ANSWER-LIKE-FILE"]);
    }

    #[test]
    fn a_listed_file_that_could_not_be_read_is_an_error_not_a_silence() {
        let (listing, mut contents) = from_files([
            ("submission.yaml", b"team_name: t\ntrack: environments\n".as_slice(), false),
            ("envs/sum/task.md", TASK_MD.as_bytes(), false),
        ]);
        contents.remove("envs/sum/task.md");
        let r = check(&listing, &contents, &HeldOut::none());
        let e = r.errors.iter().find(|e| e.code == "S-FILE-UNREADABLE").expect("reported");
        assert_eq!(e.file.as_deref(), Some("envs/sum/task.md"));
        assert_eq!(r.task_list[0].status, TaskStatus::Invalid);
    }

    #[test]
    fn a_searched_data_file_left_unread_is_named_in_a_warning() {
        let (listing, mut contents) = from_files([
            ("submission.yaml", b"team_name: t\ntrack: environments\n".as_slice(), false),
            ("envs/sum/task.md", TASK_MD.as_bytes(), false),
            ("envs/sum/environment/data/labels.csv", b"id,label\n1,a\n".as_slice(), false),
        ]);
        let read = check(&listing, &contents, &HeldOut::none());
        assert!(!read.warnings.iter().any(|w| w.code == "S-FILES-NOT-READ"), "{:?}", read.warnings);
        contents.remove("envs/sum/environment/data/labels.csv");
        let r = check(&listing, &contents, &HeldOut::none());
        let w = r.warnings.iter().find(|w| w.code == "S-FILES-NOT-READ").expect("named");
        assert_eq!(w.count, Some(1));
        assert!(
            w.message.contains("envs/sum/environment/data/labels.csv (not read: past the"),
            "{}",
            w.message
        );
    }

    #[test]
    fn a_task_without_submission_yaml_beside_envs_is_refused() {
        let (listing, contents) = from_files([("envs/sum/task.md", TASK_MD.as_bytes(), false)]);
        let r = check(&listing, &contents, &HeldOut::none());
        assert!(!r.valid);
        assert!(r.errors.iter().any(|e| e.code == "S-SUBMISSION-YAML"));
        assert_eq!(r.quality_gates.static_.summary.rejected, 1, "an unreadable task counts as rejected");
    }
}
