//! The whole check on a small collection: `listing::from_files` (blob ids, sizes, symlink flags),
//! then `collection::check` with no held-out suites (structure, frontmatter / task.toml, credit,
//! submission.yaml and every static gate), then the report serialised as the API would.
//!
//! The input picks a base collection (a complete BenchFlow/PostTrain task under `envs/t/`, a
//! complete Harbor task under `tasks/t/`, or nothing), whether `submission.yaml` is there (as the
//! fixture's, edited, or raw bytes), and up to 8 files under the task directory (`t` or a second
//! task `u`) or anywhere in the collection. A file's bytes are raw or one of the fixture texts
//! with an arbitrary splice, so even a short input checks realistic files. A generated file
//! replaces the base file at the same path; generated files may repeat a path, as `/api/check`
//! allows.
#![no_main]

use arbitrary::Arbitrary;
use domain::collection::listing::from_files;
use domain::gates::fingerprint::HeldOut;
use libfuzzer_sys::fuzz_target;

const MAX_GENERATED_FILES: usize = 8;

const TASK_MD: &[u8] = include_bytes!("../seeds/frontmatter/good-expense-report.task.md");
const TASK_MD_BENCHFLOW: &[u8] = include_bytes!("../seeds/frontmatter/good-benchflow.task.md");
const TASK_TOML: &[u8] = include_bytes!("../seeds/harbor_toml/good-harbor-log-summary.task.toml");
const DOCKERFILE: &[u8] = include_bytes!("../seeds/dockerfile/good-expense-report.Dockerfile");
const DOCKERFILE_COPIES: &[u8] = include_bytes!("../seeds/dockerfile/copies-solution.Dockerfile");
const TEST_SH: &[u8] = include_bytes!("../seeds/shell/good-expense-report.test.sh");
const SOLVE_SH: &[u8] = include_bytes!("../seeds/shell/good-expense-report.solve.sh");
const TEST_PY: &[u8] = include_bytes!("../seeds/python_verifier/good-expense-report.test_outputs.py");
const HARBOR_TEST_PY: &[u8] =
    include_bytes!("../seeds/python_verifier/good-harbor-log-summary.test_outputs.py");
const SUBMISSION: &[u8] = include_bytes!("../templates/submission.yaml");
const EXPENSES_CSV: &[u8] = include_bytes!("../templates/expenses.csv");
const INSTRUCTION_MD: &[u8] = include_bytes!("../templates/instruction.md");
const HARBOR_SOLVE_SH: &[u8] = include_bytes!("../templates/harbor-solve.sh");

const TEMPLATES: &[&[u8]] = &[
    TASK_MD,
    TASK_MD_BENCHFLOW,
    TASK_TOML,
    DOCKERFILE,
    DOCKERFILE_COPIES,
    TEST_SH,
    SOLVE_SH,
    TEST_PY,
    HARBOR_TEST_PY,
    SUBMISSION,
    EXPENSES_CSV,
    INSTRUCTION_MD,
    HARBOR_SOLVE_SH,
];

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq)]
enum Base {
    /// `envs/t/`: task.md, Dockerfile, data, verifier/test.sh + test_outputs.py, oracle/solve.sh.
    Native,
    /// `tasks/t/`: task.toml, instruction.md, Dockerfile, tests/, solution/.
    Harbor,
    /// No base files: only the generated ones, under `envs/`.
    EmptyEnvs,
    /// No base files: only the generated ones, under `tasks/`.
    EmptyTasks,
}

#[derive(Arbitrary, Debug)]
enum SubmissionYaml {
    Fixture,
    Absent,
    Edited(Splice),
    Raw(Vec<u8>),
}

/// A template with `cut` bytes at `at` replaced by `insert` (the offset wraps to the length).
#[derive(Arbitrary, Debug)]
struct Splice {
    at: u16,
    cut: u8,
    insert: Vec<u8>,
}

impl Splice {
    fn apply(&self, template: &[u8]) -> Vec<u8> {
        let at = self.at as usize % (template.len() + 1);
        let end = (at + self.cut as usize).min(template.len());
        let mut out = Vec::with_capacity(template.len() + self.insert.len());
        out.extend_from_slice(&template[..at]);
        out.extend_from_slice(&self.insert);
        out.extend_from_slice(&template[end..]);
        out
    }
}

#[derive(Arbitrary, Debug)]
enum Body {
    /// The template that fits the file's name.
    Natural(Splice),
    /// Any template, by index.
    Template(u8, Splice),
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
enum Name {
    TaskMd,
    TaskToml,
    InstructionMd,
    Dockerfile,
    VerifierTestSh,
    VerifierPy,
    TestsTestSh,
    TestsPy,
    OracleSolveSh,
    SolutionSolveSh,
    /// `environment/data/<name>` (answer-like names are read too).
    EnvData(String),
    /// Any path under the task directory.
    InTask(String),
    /// Any path relative to the collection root (`..`, absolute, control characters, ...).
    Root(String),
}

impl Name {
    fn natural(&self) -> &'static [u8] {
        match self {
            Name::TaskMd => TASK_MD,
            Name::TaskToml => TASK_TOML,
            Name::InstructionMd => INSTRUCTION_MD,
            Name::Dockerfile => DOCKERFILE,
            Name::VerifierTestSh | Name::TestsTestSh => TEST_SH,
            Name::VerifierPy | Name::TestsPy => TEST_PY,
            Name::OracleSolveSh | Name::SolutionSolveSh => SOLVE_SH,
            Name::EnvData(_) | Name::InTask(_) => EXPENSES_CSV,
            Name::Root(_) => SUBMISSION,
        }
    }

    fn path(&self, root: &str, task: &str) -> String {
        let rel = match self {
            Name::TaskMd => "task.md".to_string(),
            Name::TaskToml => "task.toml".to_string(),
            Name::InstructionMd => "instruction.md".to_string(),
            Name::Dockerfile => "environment/Dockerfile".to_string(),
            Name::VerifierTestSh => "verifier/test.sh".to_string(),
            Name::VerifierPy => "verifier/test_outputs.py".to_string(),
            Name::TestsTestSh => "tests/test.sh".to_string(),
            Name::TestsPy => "tests/test_outputs.py".to_string(),
            Name::OracleSolveSh => "oracle/solve.sh".to_string(),
            Name::SolutionSolveSh => "solution/solve.sh".to_string(),
            Name::EnvData(n) => format!("environment/data/{n}"),
            Name::InTask(p) => p.clone(),
            Name::Root(p) => return p.clone(),
        };
        format!("{root}/{task}/{rel}")
    }
}

#[derive(Arbitrary, Debug)]
struct File {
    /// `t` or a second task `u`.
    second_task: bool,
    name: Name,
    body: Body,
    symlink: bool,
}

#[derive(Arbitrary, Debug)]
struct Input {
    base: Base,
    submission: SubmissionYaml,
    files: Vec<File>,
}

fn base_files(base: Base) -> Vec<(String, Vec<u8>, bool)> {
    let files: &[(&str, &[u8])] = match base {
        Base::Native => &[
            ("envs/t/task.md", TASK_MD),
            ("envs/t/environment/Dockerfile", DOCKERFILE),
            ("envs/t/environment/data/expenses.csv", EXPENSES_CSV),
            ("envs/t/verifier/test.sh", TEST_SH),
            ("envs/t/verifier/test_outputs.py", TEST_PY),
            ("envs/t/oracle/solve.sh", SOLVE_SH),
        ],
        Base::Harbor => &[
            ("tasks/t/task.toml", TASK_TOML),
            ("tasks/t/instruction.md", INSTRUCTION_MD),
            ("tasks/t/environment/Dockerfile", DOCKERFILE),
            ("tasks/t/environment/data/expenses.csv", EXPENSES_CSV),
            ("tasks/t/tests/test.sh", TEST_SH),
            ("tasks/t/tests/test_outputs.py", HARBOR_TEST_PY),
            ("tasks/t/solution/solve.sh", HARBOR_SOLVE_SH),
        ],
        Base::EmptyEnvs | Base::EmptyTasks => &[],
    };
    files.iter().map(|(p, b)| (p.to_string(), b.to_vec(), false)).collect()
}

fuzz_target!(|input: Input| {
    let root = match input.base {
        Base::Native | Base::EmptyEnvs => "envs",
        Base::Harbor | Base::EmptyTasks => "tasks",
    };
    let mut files = base_files(input.base);
    match &input.submission {
        SubmissionYaml::Fixture => files.push(("submission.yaml".into(), SUBMISSION.to_vec(), false)),
        SubmissionYaml::Absent => {}
        SubmissionYaml::Edited(s) => files.push(("submission.yaml".into(), s.apply(SUBMISSION), false)),
        SubmissionYaml::Raw(b) => files.push(("submission.yaml".into(), b.clone(), false)),
    }
    let base_len = files.len();
    for f in input.files.iter().take(MAX_GENERATED_FILES) {
        let task = if f.second_task { "u" } else { "t" };
        let path = f.name.path(root, task);
        let bytes = match &f.body {
            Body::Natural(s) => s.apply(f.name.natural()),
            Body::Template(i, s) => s.apply(TEMPLATES[*i as usize % TEMPLATES.len()]),
            Body::Raw(b) => b.clone(),
        };
        // A generated file replaces the base file at its path; generated files may repeat.
        match files[..base_len].iter().position(|(p, _, _)| *p == path) {
            Some(i) => files[i] = (path, bytes, f.symlink),
            None => files.push((path, bytes, f.symlink)),
        }
    }

    let (listing, contents) = from_files(files.iter().map(|(p, b, s)| (p.as_str(), b.as_slice(), *s)));
    let report = domain::collection::check(&listing, &contents, &HeldOut::none());
    assert!(
        report.eligible_tasks <= report.tasks,
        "{} eligible of {} tasks",
        report.eligible_tasks,
        report.tasks
    );
    serde_json::to_string(&report).expect("the report serialises");
});
