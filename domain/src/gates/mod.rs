//! The static quality gates: heuristics run at validation on each task read as a BenchFlow-native
//! package. Each finding has a stable code and a severity:
//! - `block`: validation fails (a near-copy of a held-out prompt, a held-out verifier or reference
//!   solution copied, a task named like an evaluated sealed task);
//! - `reject`: the task is excluded (leaks into the agent image, an answer key the verifier reads,
//!   a prompt sharing a 13-gram with an evaluated held-out task, a held-out data file copied);
//! - `controls`: no working reference solution; the task counts only if its dynamic controls pass;
//! - `review`: advisory, for a person to look at.
//!
//! The catalogue with every code is `CATALOGUE`; `/api/gates` (and the guide) list it.

pub mod dockerfile;
pub mod dynamic;
pub mod fingerprint;
pub mod names;
pub mod python;
pub mod shell;
pub mod text;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::task::Task;
use fingerprint::{HeldOut, Role};

/// The version of the gates a summary was computed with.
pub const GATES_VERSION: &str = "gates-v4";

/// A near-copy is at least this much 13-gram containment.
pub const NEAR_COPY: f64 = 0.5;

/// Files smaller than this are too generic to call a copy (an empty `__init__.py`, `set -e`).
const MIN_COPY_BYTES: u64 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Block,
    Reject,
    Controls,
    Review,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Finding {
    pub code: String,
    pub severity: Severity,
    /// The task's directory name.
    pub task: String,
    /// The file concerned, relative to the collection root.
    pub file: Option<String>,
    pub message: String,
}

/// Every gate: code, usual severity, what it means.
pub const CATALOGUE: &[(&str, Severity, &str)] = &[
    ("D-PROMPT-COPY", Severity::Block, "the prompt is a near-copy (≥ 50% 13-gram containment) of an evaluated held-out task's prompt"),
    ("D-FILE-COPY", Severity::Block, "a file is identical (git blob id) to a held-out task's verifier or reference solution (block), data file (reject), or a public benchmark's skill or image build file (review)"),
    ("D-NAME-SEALED", Severity::Block, "the task name matches a task of an evaluated sealed suite"),
    ("D-PROMPT-OVERLAP", Severity::Reject, "the prompt shares a 13-gram with an evaluated held-out task's prompt"),
    ("L-IMAGE-COPIES-SOLUTION", Severity::Reject, "the Dockerfile copies reference-solution files into the agent image"),
    ("L-IMAGE-COPIES-VERIFIER", Severity::Reject, "the Dockerfile copies verifier test or expected-output files into the agent image"),
    ("L-ANSWER-KEY-READ", Severity::Reject, "the verifier reads grading data named like an answer key that the image holds and the prompt never mentions"),
    ("L-ANSWER-FILE", Severity::Reject, "an answer-like file in the image, not named by the prompt, holds what the verifier checks"),
    ("C-NO-ORACLE", Severity::Controls, "no reference solution (`oracle/solve.sh` or `solution/solve.sh`)"),
    ("C-NOOP-ORACLE", Severity::Controls, "the reference solution does nothing"),
    ("R-ANSWER-LIKE-FILE", Severity::Review, "an answer-like file in the image that holds nothing the verifier checks"),
    ("R-VERIFIER-FILE-IN-IMAGE", Severity::Review, "a file named like one of the verifier's is in the image"),
    ("R-IMAGE-JUNK", Severity::Review, "bytecode, caches or `.git` are copied into the image"),
    ("R-REMOTE-ADD", Severity::Review, "the Dockerfile `ADD`s a remote address"),
    ("R-ORACLE-DOWNLOADS", Severity::Review, "the reference solution downloads from other hosts"),
    ("R-GRADING-DATA-IN-IMAGE", Severity::Review, "the verifier reads a file the image holds that the prompt never mentions"),
    ("R-VERIFIER-EXISTS-ONLY", Severity::Review, "the verifier's assertions only check that paths exist"),
    ("R-VERIFIER-NO-ASSERTIONS", Severity::Review, "the verifier has no assertions"),
    ("R-REWARD-ALWAYS-ONE", Severity::Review, "`test.sh` can only write reward 1"),
    ("R-VERIFIER-DOWNLOADS-OFFLINE", Severity::Review, "the verifier downloads tools or data while the task turns the network off"),
    ("R-SEALED-OVERLAP", Severity::Review, "overlap with sealed tasks outside the evaluated suite"),
    ("R-NAME-PUBLIC", Severity::Review, "the task name matches a public benchmark task"),
];

struct Out<'a> {
    task: &'a Task,
    findings: Vec<Finding>,
    seen: BTreeSet<(String, Option<String>)>,
}

impl Out<'_> {
    /// One finding per code and file; a more severe one replaces a milder one (a file copied from
    /// both a public benchmark and the evaluated suite blocks).
    fn push(&mut self, code: &str, severity: Severity, file: Option<String>, message: String) {
        if !self.seen.insert((code.to_string(), file.clone())) {
            if let Some(f) = self.findings.iter_mut().find(|f| f.code == code && f.file == file) {
                if severity < f.severity {
                    f.severity = severity;
                    f.message = message;
                }
            }
            return;
        }
        self.findings.push(Finding {
            code: code.into(),
            severity,
            task: self.task.dir.rsplit('/').next().unwrap_or(&self.task.dir).to_string(),
            file,
            message,
        });
    }
}

/// Runs every gate on one task: what its image holds, its reference solution, its verifier, and
/// its overlap with the held-out suites.
pub fn check_task(task: &Task, heldout: &HeldOut) -> Vec<Finding> {
    let mut out = Out { task, findings: Vec::new(), seen: BTreeSet::new() };
    let verifier = VerifierFacts::of(task);
    let image = image_files(task, &verifier, &mut out);
    image_gates(task, &verifier, &image, &mut out);
    oracle_gates(task, &mut out);
    verifier_gates(task, &verifier, &mut out);
    held_out(&mut out, heldout);
    out.findings
}

/// The prompt names the file (by its base name, case-insensitively).
fn mentioned(prompt_lower: &str, path: &str) -> bool {
    let base = names::basename(path).to_lowercase();
    !base.is_empty() && prompt_lower.contains(&base)
}

/// What the gates know of a task's verifier.
struct VerifierFacts<'a> {
    dir: &'a str,
    /// Its Python files analysed together.
    analysis: python::Verifier,
    has_python: bool,
    /// Its files' base names (not `__init__.py`, `README.md`, `conftest.py`).
    names: BTreeSet<&'a str>,
}

impl<'a> VerifierFacts<'a> {
    fn of(task: &'a Task) -> VerifierFacts<'a> {
        let mut analysis = python::Verifier::default();
        let mut has_python = false;
        for (_, src) in task.verifier_sources() {
            has_python = true;
            let v = python::analyse(src);
            analysis.paths.extend(v.paths);
            analysis.fields.extend(v.fields);
            analysis.compared.extend(v.compared);
            analysis.assertions += v.assertions;
            analysis.existence_assertions += v.existence_assertions;
            analysis.downloads |= v.downloads;
        }
        let dir = task.verifier_dir();
        let names = task
            .files
            .iter()
            .filter(|f| Self::inside(dir, &f.path))
            .map(|f| names::basename(&f.path))
            .filter(|b| !matches!(*b, "__init__.py" | "README.md" | "conftest.py"))
            .collect();
        VerifierFacts { dir, analysis, has_python, names }
    }

    fn inside(dir: &str, path: &str) -> bool {
        path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/')
    }

    /// The verifier opens a file of this base name.
    fn reads(&self, path: &str) -> bool {
        self.analysis.paths.iter().any(|p| names::basename(p) == names::basename(path))
    }

    /// The verifier keeps its own copy of an input, byte for byte (the same git blob).
    fn keeps_copy(&self, task: &Task, path: &str) -> bool {
        let Some(blob) = task.files.iter().find(|f| f.path == path).map(|f| f.blob.as_str()) else {
            return false;
        };
        task.files.iter().any(|f| {
            Self::inside(self.dir, &f.path)
                && names::basename(&f.path) == names::basename(path)
                && f.blob == blob
        })
    }
}

/// What the agent's image holds, from the Dockerfile: (task-relative path or absolute target,
/// content), with the copies that leak the solution or the verifier reported on the way.
fn image_files(task: &Task, verifier: &VerifierFacts, out: &mut Out) -> Vec<(String, Option<String>)> {
    let docker_path = task.path("environment/Dockerfile");
    let mut image: Vec<(String, Option<String>)> = Vec::new();
    if let Some(docker) = task.text("environment/Dockerfile") {
        let ins = dockerfile::instructions(docker);
        let copies = dockerfile::copies(&ins);
        for c in dockerfile::remote_adds(&copies) {
            out.push(
                "R-REMOTE-ADD",
                Severity::Review,
                Some(docker_path.clone()),
                format!("line {}: `ADD` of a remote address; download at build time with a pinned checksum, or vendor the file", c.line),
            );
        }
        let env_files: Vec<&str> =
            task.files.iter().filter_map(|f| f.path.strip_prefix("environment/")).collect();
        for c in copies.iter().filter(|c| !c.from_stage) {
            for src in &c.sources {
                let src = src.trim_start_matches("./");
                let up = src.trim_start_matches("../");
                let first = up.split('/').next().unwrap_or("");
                // The build context's own folder of that name (`environment/tests/`) is not the verifier.
                let dir = up.trim_end_matches('/');
                let own_dir = !src.starts_with("../")
                    && env_files.iter().any(|e| *e == dir || e.starts_with(&format!("{dir}/")));
                if !own_dir && (matches!(first, "oracle" | "solution") || names::basename(up) == "solve.sh") {
                    out.push(
                        "L-IMAGE-COPIES-SOLUTION",
                        Severity::Reject,
                        Some(docker_path.clone()),
                        format!("line {}: `{src}` puts reference-solution files in the agent's image; the agent could read the answer. Remove the copy", c.line),
                    );
                    continue;
                }
                let own = env_files.iter().any(|e| names::basename(e) == names::basename(up));
                if !own_dir
                    && (matches!(first, "verifier" | "tests")
                        || (!own && verifier.names.contains(names::basename(up))))
                {
                    out.push(
                        "L-IMAGE-COPIES-VERIFIER",
                        Severity::Reject,
                        Some(docker_path.clone()),
                        format!("line {}: `{src}` puts verifier files in the agent's image; the verifier reaches the sandbox after the agent finishes. Remove the copy", c.line),
                    );
                    continue;
                }
                let rel = src.strip_prefix("environment/").unwrap_or(src).trim_end_matches('/');
                let rel = rel.trim_end_matches("/*").trim_end_matches('*');
                for e in &env_files {
                    let inside =
                        rel.is_empty() || rel == "." || *e == rel || e.starts_with(&format!("{rel}/"));
                    if inside
                        && *e != "Dockerfile"
                        && !image.iter().any(|(p, _)| p == &format!("environment/{e}"))
                    {
                        let path = format!("environment/{e}");
                        let content = task.text(&path).map(str::to_string);
                        image.push((path, content));
                    }
                }
            }
        }
        for (target, cmd) in dockerfile::written_files(&ins) {
            image.push((target, Some(cmd)));
        }
    }
    image
}

/// Answer keys, grading data and verifier files the image holds, and junk copied into it.
fn image_gates(task: &Task, verifier: &VerifierFacts, image: &[(String, Option<String>)], out: &mut Out) {
    let docker_path = task.path("environment/Dockerfile");
    let prompt_lower = task.prompt.to_lowercase();
    let verifier_dir = verifier.dir;
    if let Some((junk, _)) = image.iter().find(|(p, _)| names::junk(p)) {
        out.push(
            "R-IMAGE-JUNK",
            Severity::Review,
            Some(task.path(junk)),
            "bytecode, caches or `.git` are copied into the image; delete them from the build context or add a `.dockerignore`".into(),
        );
    }

    for (path, content) in image {
        // A file the build writes is shown as the Dockerfile that writes it.
        let shown = if path.starts_with('/') { docker_path.clone() } else { task.path(path) };
        if names::answer_like(path) {
            if mentioned(&prompt_lower, path) {
                continue;
            }
            if verifier.reads(path) {
                out.push(
                    "L-ANSWER-KEY-READ",
                    Severity::Reject,
                    Some(shown),
                    format!("the verifier reads `{}`, an answer key the image holds and the prompt never mentions: the agent can read it. Move it under `{verifier_dir}/`, which reaches the sandbox after the agent finishes", names::basename(path)),
                );
            } else if holds_checked_values(content.as_deref(), &verifier.analysis, &prompt_lower) {
                out.push(
                    "L-ANSWER-FILE",
                    Severity::Reject,
                    Some(shown),
                    format!("`{}` is in the image, the prompt does not name it, and it holds what the verifier checks. Move it under `{verifier_dir}/` or remove it", names::basename(path)),
                );
            } else {
                out.push(
                    "R-ANSWER-LIKE-FILE",
                    Severity::Review,
                    Some(shown),
                    format!("`{}` is named like an answer and is in the image, but holds nothing the verifier checks; rename it or say in the prompt what it is", names::basename(path)),
                );
            }
            continue;
        }
        if verifier.names.contains(names::basename(path)) {
            // An input the prompt names, or one the verifier keeps an identical copy of to
            // recompute the answer, is the normal shape of a task, not a leak.
            if mentioned(&prompt_lower, path) || verifier.keeps_copy(task, path) {
                continue;
            }
            out.push(
                "R-VERIFIER-FILE-IN-IMAGE",
                Severity::Review,
                Some(shown),
                format!("`{}` has the name of a verifier file and is in the image", names::basename(path)),
            );
        } else if verifier.reads(path) && !mentioned(&prompt_lower, path) && !names::junk(path) {
            out.push(
                "R-GRADING-DATA-IN-IMAGE",
                Severity::Review,
                Some(shown),
                format!(
                    "the verifier reads `{}`, which the image holds and the prompt never mentions",
                    names::basename(path)
                ),
            );
        }
    }
}

/// The reference solution: missing, a no-op, or downloading.
fn oracle_gates(task: &Task, out: &mut Out) {
    match task.oracle_path() {
        None => out.push(
            "C-NO-ORACLE",
            Severity::Controls,
            None,
            "no reference solution (`oracle/solve.sh`): the task counts only if its no-op control scores 0 and the base model solves it at least once".into(),
        ),
        Some(p) => {
            let text = task.text(p).unwrap_or_default();
            if shell::is_noop(text) {
                out.push(
                    "C-NOOP-ORACLE",
                    Severity::Controls,
                    Some(task.path(p)),
                    "the reference solution does nothing, so it cannot show the verifier passes a correct answer".into(),
                );
            } else if shell::downloads(text) {
                out.push(
                    "R-ORACLE-DOWNLOADS",
                    Severity::Review,
                    Some(task.path(p)),
                    "the reference solution downloads from other hosts; it should work from the task's own files".into(),
                );
            }
        }
    }
}

/// The verifier: assertions that cannot fail, a reward always 1, downloads with the network off.
fn verifier_gates(task: &Task, verifier: &VerifierFacts, out: &mut Out) {
    let verifier_dir = verifier.dir;
    let test_sh = task.test_sh_path();
    if verifier.has_python {
        let file = Some(task.path(&format!("{verifier_dir}/")));
        if verifier.analysis.assertions == 0 {
            out.push(
                "R-VERIFIER-NO-ASSERTIONS",
                Severity::Review,
                file,
                "the verifier's Python files have no assertions: it cannot fail a wrong answer".into(),
            );
        } else if verifier.analysis.existence_assertions == verifier.analysis.assertions {
            out.push(
                "R-VERIFIER-EXISTS-ONLY",
                Severity::Review,
                file,
                "the verifier only checks that paths exist, not what they hold".into(),
            );
        }
    }
    if let Some(sh) = task.text(&test_sh) {
        if shell::reward_always_one(sh) {
            out.push(
                "R-REWARD-ALWAYS-ONE",
                Severity::Review,
                Some(task.path(&test_sh)),
                "`test.sh` can only write reward 1: write 0 when the checks fail".into(),
            );
        }
        if task.network_off() && (shell::downloads(sh) || verifier.analysis.downloads) {
            out.push(
                "R-VERIFIER-DOWNLOADS-OFFLINE",
                Severity::Review,
                Some(task.path(&test_sh)),
                format!("the verifier downloads tools or data but the task turns the network off; install them in the Dockerfile and put data under `{verifier_dir}/`"),
            );
        }
    } else if task.network_off() && verifier.analysis.downloads {
        out.push(
            "R-VERIFIER-DOWNLOADS-OFFLINE",
            Severity::Review,
            Some(task.path(&format!("{verifier_dir}/"))),
            "the verifier downloads data but the task turns the network off".into(),
        );
    }
}

/// The file holds at least two fields the verifier reads, or a value its checks compare with that
/// the prompt does not show. The file is split into tokens once, so the work is linear in its size
/// (the verifier's fields and values are capped).
fn holds_checked_values(content: Option<&str>, v: &python::Verifier, prompt_lower: &str) -> bool {
    let Some(content) = content else { return false };
    let tokens: BTreeSet<&str> = content
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '-' || c == '+'))
        .map(|t| t.trim_end_matches('.'))
        .filter(|t| !t.is_empty())
        .collect();
    let words: BTreeSet<&str> =
        content.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|t| !t.is_empty()).collect();
    if v.fields.iter().filter(|f| words.contains(f.as_str())).count() >= 2 {
        return true;
    }
    v.compared.iter().any(|value| {
        // Small integers (counts, indexes, flags) say nothing about an answer.
        let trivial = match value.parse::<f64>() {
            Ok(n) => n.fract() == 0.0 && n.abs() < 100.0,
            Err(_) => value.chars().count() < 3 || matches!(value.as_str(), "True" | "False" | "None"),
        };
        let found = tokens.contains(value.as_str())
            || (value.contains(char::is_whitespace) && content.contains(value.as_str()));
        !trivial && found && !prompt_lower.contains(&value.to_lowercase())
    })
}

/// Each task against each held-out suite: its prompt, its name and its files.
fn held_out(out: &mut Out<'_>, heldout: &HeldOut) {
    let task = out.task;
    let dir_name = task.dir.rsplit('/').next().unwrap_or(&task.dir).to_lowercase();
    let name = task.name.to_lowercase();
    for (suite, evaluated) in &heldout.suites {
        let mut cand = text::shingles(&task.prompt);
        cand.retain(|s| !suite.template_shingles.contains(s));
        let files: BTreeMap<&str, &str> = task
            .files
            .iter()
            .filter(|f| f.size >= MIN_COPY_BYTES && !f.symlink && !suite.template_blobs.contains(&f.blob))
            .map(|f| (f.blob.as_str(), f.path.as_str()))
            .collect();
        for held in &suite.tasks {
            prompt_overlap(out, suite, *evaluated, &cand, held);
            let held_name = held.name.to_lowercase();
            if held_name == name || held_name == dir_name {
                name_match(out, suite, *evaluated);
            }
            file_copies(out, suite, *evaluated, &files, held);
        }
    }
}

/// The prompt shares 13-word phrases with a held-out task's (the suite's template text set apart).
fn prompt_overlap(
    out: &mut Out<'_>,
    suite: &fingerprint::SuiteFingerprint,
    evaluated: bool,
    cand: &BTreeSet<u64>,
    held: &fingerprint::TaskPrint,
) {
    let task = out.task;
    let shared = cand.intersection(&held.shingles).count();
    if shared > 0 {
        let c = text::containment(cand, &held.shingles);
        // A sealed suite's findings carry no numbers: a containment or a phrase count
        // would let a participant measure, edit by edit, how close a prompt is to a task
        // nobody may see.
        let (copy, overlap) = if suite.sealed {
            (String::new(), "a 13-word phrase".to_string())
        } else {
            (
                format!(" ({}% 13-gram containment)", (c * 100.0).round()),
                format!("{shared} 13-word phrase(s)"),
            )
        };
        if evaluated && c >= NEAR_COPY {
            out.push(
                "D-PROMPT-COPY",
                Severity::Block,
                Some(task.path(prompt_file(task))),
                format!(
                    "the prompt is a near-copy{copy} of a task of the held-out suite `{}`; write a new task",
                    suite.suite
                ),
            );
        } else if evaluated {
            out.push(
                "D-PROMPT-OVERLAP",
                Severity::Reject,
                Some(task.path(prompt_file(task))),
                format!(
                    "the prompt shares {overlap} with a task of the held-out suite `{}`; reword it",
                    suite.suite
                ),
            );
        } else if suite.sealed {
            out.push("R-SEALED-OVERLAP", Severity::Review, Some(task.path(prompt_file(task))),
                format!("the prompt shares {overlap} with a sealed task of `{}` (not evaluated by this challenge)", suite.suite));
        }
    }
}

/// The task's name is a held-out task's.
fn name_match(out: &mut Out<'_>, suite: &fingerprint::SuiteFingerprint, evaluated: bool) {
    let task = out.task;
    if evaluated && suite.sealed {
        out.push(
            "D-NAME-SEALED",
            Severity::Block,
            None,
            format!(
                "the task name `{}` is the name of a task of the sealed held-out suite `{}`; rename the task",
                task.name, suite.suite
            ),
        );
    } else if suite.sealed {
        out.push(
            "R-SEALED-OVERLAP",
            Severity::Review,
            None,
            format!(
                "the task name matches a sealed task of `{}` (not evaluated by this challenge)",
                suite.suite
            ),
        );
    } else {
        out.push(
            "R-NAME-PUBLIC",
            Severity::Review,
            None,
            format!("the task name matches a task of the public benchmark `{}`", suite.suite),
        );
    }
}

/// The task holds a file identical to one of a held-out task's.
fn file_copies(
    out: &mut Out<'_>,
    suite: &fingerprint::SuiteFingerprint,
    evaluated: bool,
    files: &BTreeMap<&str, &str>,
    held: &fingerprint::TaskPrint,
) {
    let task = out.task;
    let kind = if suite.sealed { "sealed" } else { "public" };
    for (blob, role) in &held.files {
        let Some(path) = files.get(blob.as_str()) else { continue };
        let (severity, what) = match role {
            // Copies matter most from the suite the challenge scores on; a public suite's
            // data is still held-out data; a sealed suite not scored here is advisory.
            Role::Verifier | Role::Solution if evaluated => {
                (Severity::Block, "verifier or reference solution")
            }
            Role::Verifier | Role::Solution => (Severity::Review, "verifier or reference solution"),
            Role::Data if evaluated || !suite.sealed => (Severity::Reject, "data file"),
            Role::Data => (Severity::Review, "data file"),
            Role::Skill => (Severity::Review, "skill file (the benchmark hands it to every agent)"),
            Role::Build => (Severity::Review, "image build file"),
        };
        out.push(
            "D-FILE-COPY",
            severity,
            Some(task.path(path)),
            format!("identical (same git blob id) to a {kind} held-out task's {what} in `{}`", suite.suite),
        );
    }
}

fn prompt_file(task: &Task) -> &'static str {
    if task.format == crate::task::Format::Harbor {
        "instruction.md"
    } else {
        "task.md"
    }
}
