//! Task packages: where the tasks are in a collection's listing, which files the checks must read,
//! and each task read as a BenchFlow-native package whatever its format. The three formats:
//! - BenchFlow-native: `task.md` whose frontmatter has `schema_version` and `task`;
//! - PostTrain: `task.md` with any other frontmatter (the starter kit);
//! - Harbor: `task.toml` + `instruction.md`, read as `bench tasks migrate` converts it
//!   (`[environment]` → `sandbox`, unknown keys under `benchflow.compat`, `instruction.md` → the
//!   prompt, `tests/` → `verifier/`, `solution/` → `oracle/`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::credit::Credit;
use super::frontmatter;
use super::issue::Issue;
use super::listing::{
    listed_bytes, unsafe_path, Contents, Entry, MAX_COLLECTION_BYTES, MAX_FILES, MAX_FILE_BYTES,
    MAX_READ_BYTES, MAX_TASKS,
};
use crate::gates::names;
pub use crate::task::{Format, Task};

/// A task directory found in the listing: `dir` is relative to the collection root, the files'
/// paths to the task directory.
#[derive(Debug, Clone)]
pub struct TaskDir {
    pub dir_name: String,
    pub dir: String,
    pub files: Vec<Entry>,
}

/// Where the tasks are.
#[derive(Debug, Default)]
pub struct Layout {
    /// `envs` or `tasks`.
    pub tasks_dir: Option<&'static str>,
    pub tasks: Vec<TaskDir>,
    pub submission_yaml: Option<Entry>,
    /// Collection-level problems (no tasks, too many, unsafe paths, over the listing bound).
    pub errors: Vec<Issue>,
}

// Long: the layouts a collection may have (envs/, tasks/, one task, a folder of tasks), tried in
// the guide's order.
/// Finds the task directories. Paths are relative to the collection root (`entry_path`).
pub fn discover(listing: &[Entry]) -> Layout {
    let mut layout = Layout::default();
    if listing.len() > MAX_FILES {
        layout.errors.push(Issue::collection(
            "S-TOO-MANY-FILES",
            format!("the collection lists {} files; at most {MAX_FILES} are read", listing.len()),
        ));
        return layout;
    }
    // Refused before any file is read: the run's mirror could not carry it.
    let total = listed_bytes(listing);
    if total > MAX_COLLECTION_BYTES {
        layout.errors.push(Issue::collection(
            "S-COLLECTION-TOO-LARGE",
            format!(
                "the collection's files total {:.1} MiB; at most {} MiB, every path counted (a run copies each one)",
                total as f64 / f64::from(1u32 << 20),
                MAX_COLLECTION_BYTES >> 20
            ),
        ));
        return layout;
    }
    let mut safe = Vec::with_capacity(listing.len());
    for entry in listing {
        match unsafe_path(&entry.path) {
            // Files outside the tasks are never read: an odd path there is no concern of the checks.
            Some(_) if !(entry.path.starts_with("envs/") || entry.path.starts_with("tasks/")) => {}
            Some(why) => layout.errors.push(Issue {
                code: "S-UNSAFE-PATH".into(),
                task: None,
                file: Some(entry.path.chars().take(200).collect()),
                field: None,
                message: format!("the path {why}; it is not read"),
            }),
            None => safe.push(entry),
        }
    }
    layout.submission_yaml = safe.iter().find(|e| e.path == "submission.yaml").map(|e| (*e).clone());
    let has = |prefix: &str| safe.iter().any(|e| e.path.starts_with(prefix));
    let tasks_dir = if has("envs/") {
        "envs"
    } else if has("tasks/") {
        "tasks"
    } else {
        layout.errors.push(Issue::collection(
            "S-NO-TASKS",
            "no `envs/` (or Harbor `tasks/`) directory with tasks beside `submission.yaml`; check `entry_path`",
        ));
        return layout;
    };
    layout.tasks_dir = Some(tasks_dir);
    let mut by_dir: BTreeMap<&str, Vec<Entry>> = BTreeMap::new();
    for entry in safe {
        let Some(rest) = entry.path.strip_prefix(tasks_dir).and_then(|r| r.strip_prefix('/')) else {
            continue;
        };
        // Files directly under envs/ (a README, .gitkeep) are not tasks.
        let Some((dir, inner)) = rest.split_once('/') else { continue };
        by_dir.entry(dir).or_default().push(Entry { path: inner.to_string(), ..entry.clone() });
    }
    if by_dir.is_empty() {
        layout.errors.push(Issue::collection(
            "S-NO-TASKS",
            format!("`{tasks_dir}/` holds no task directories; a collection holds 1 to {MAX_TASKS} tasks"),
        ));
        return layout;
    }
    if by_dir.len() > MAX_TASKS {
        layout.errors.push(Issue::collection(
            "S-TOO-MANY-TASKS",
            format!(
                "`{tasks_dir}/` holds {} task directories; a collection holds at most {MAX_TASKS}: submit a subset",
                by_dir.len()
            ),
        ));
        return layout;
    }
    layout.tasks = by_dir
        .into_iter()
        .map(|(dir, files)| TaskDir { dir_name: dir.to_string(), dir: format!("{tasks_dir}/{dir}"), files })
        .collect();
    layout
}

/// The package's own files: always read (a missing read is an error).
const PACKAGE_FILES: &[&str] = &[
    "task.md",
    "task.toml",
    "instruction.md",
    "environment/Dockerfile",
    "verifier/test.sh",
    "tests/test.sh",
    "verifier/test_outputs.py",
    "tests/test_outputs.py",
    "oracle/solve.sh",
    "solution/solve.sh",
];

/// Other verifier sources read per task, and data files read per task (answer-like names in the
/// image, to compare with what the verifier checks): bounded so one task cannot make the arena
/// read hundreds of files.
const MAX_VERIFIER_SOURCES: usize = 32;
const MAX_DATA_FILES: usize = 16;

fn is_verifier_source(path: &str) -> bool {
    (path.starts_with("verifier/") || path.starts_with("tests/")) && path.ends_with(".py")
}

fn is_data_read(path: &str) -> bool {
    path.starts_with("environment/") && path != "environment/Dockerfile" && names::answer_like(path)
}

/// The files (relative to the task directory) a task's checks read when they exist.
pub(crate) fn wanted(path: &str) -> bool {
    PACKAGE_FILES.contains(&path) || is_verifier_source(path) || is_data_read(path)
}

/// The paths (relative to the collection root) to read: first every task's package files and
/// verifier sources, then data files, within the per-file bound and the total bound. Every path
/// counts against the total, even one whose blob another path holds: the fetch reads that blob
/// once, but each path's text is checked. Paths over a bound are left out; `check` reports the
/// package files among them.
pub fn reads(layout: &Layout) -> Vec<String> {
    let mut out = Vec::new();
    let mut total = 0u64;
    let mut take = |entry: &Entry, path: String, out: &mut Vec<String>| {
        if entry.size <= MAX_FILE_BYTES && total + entry.size <= MAX_READ_BYTES {
            total += entry.size;
            out.push(path);
        }
    };
    if let Some(s) = &layout.submission_yaml {
        take(s, s.path.clone(), &mut out);
    }
    for task in &layout.tasks {
        let mut sources = 0;
        for f in task.files.iter().filter(|f| !f.symlink) {
            let package = PACKAGE_FILES.contains(&f.path.as_str());
            if !package && is_verifier_source(&f.path) {
                sources += 1;
                if sources > MAX_VERIFIER_SOURCES {
                    continue;
                }
            } else if !package {
                continue;
            }
            take(f, format!("{}/{}", task.dir, f.path), &mut out);
        }
    }
    for task in &layout.tasks {
        for f in task.files.iter().filter(|f| !f.symlink && is_data_read(&f.path)).take(MAX_DATA_FILES) {
            take(f, format!("{}/{}", task.dir, f.path), &mut out);
        }
    }
    out
}

/// Reads one task directory; structural problems go to `issues`. `None` when the task cannot be
/// read at all (no `task.md`, unreadable frontmatter).
pub fn read_task(dir: &TaskDir, contents: &Contents, issues: &mut Vec<Issue>) -> Option<Task> {
    let mut out = TaskIssues { dir, issues };
    let texts = read_texts(dir, contents, &mut out);
    let (format, meta, prompt) = read_meta(dir, &texts, &mut out)?;
    check_structure(dir, format, &meta, &prompt, &texts, &mut out);
    let name = task_name(&meta).unwrap_or_else(|| dir.dir_name.clone());
    let credit = credit_of(&meta["metadata"]);
    Some(Task { name, dir: dir.dir.clone(), format, meta, prompt, files: dir.files.clone(), texts, credit })
}

/// A task's structural problems, each naming the task and a file of it.
struct TaskIssues<'a> {
    dir: &'a TaskDir,
    issues: &'a mut Vec<Issue>,
}

impl TaskIssues<'_> {
    fn push(&mut self, code: &str, file: Option<&str>, field: Option<&str>, message: String) {
        self.issues.push(Issue {
            code: code.into(),
            task: Some(self.dir.dir_name.clone()),
            file: file.map(|f| format!("{}/{f}", self.dir.dir)),
            field: field.map(str::to_string),
            message,
        });
    }
}

fn has_file(dir: &TaskDir, path: &str) -> bool {
    dir.files.iter().any(|f| f.path == path && !f.symlink)
}

/// The task's files the checks read, as text (symlinks refused, each file bounded).
fn read_texts(dir: &TaskDir, contents: &Contents, out: &mut TaskIssues) -> BTreeMap<String, Arc<str>> {
    for f in dir.files.iter().filter(|f| f.symlink) {
        out.push(
            "S-SYMLINK",
            Some(&f.path),
            None,
            "a symbolic link; tasks must hold regular files only".into(),
        );
    }
    let mut texts = BTreeMap::new();
    for f in &dir.files {
        if f.symlink || !wanted(&f.path) {
            continue;
        }
        let root_path = format!("{}/{}", dir.dir, f.path);
        let read = if f.size > MAX_FILE_BYTES { None } else { contents.get(&root_path) };
        match read {
            // Data files in the image are only searched for values: binary ones are read loosely.
            Some(blob) if f.path.starts_with("environment/") && f.path != "environment/Dockerfile" => {
                texts.insert(f.path.clone(), blob.lossy());
            }
            Some(blob) => match blob.text() {
                Some(text) => {
                    texts.insert(f.path.clone(), text);
                }
                None => out.push(
                    "S-NOT-TEXT",
                    Some(&f.path),
                    None,
                    "not UTF-8 text; the checks need to read it".into(),
                ),
            },
            None if f.size > MAX_FILE_BYTES => out.push(
                "S-FILE-TOO-LARGE",
                Some(&f.path),
                None,
                format!("{} bytes; the checks read files of at most {MAX_FILE_BYTES} bytes", f.size),
            ),
            // Data files and extra verifier sources are optional reads; the package's own files must be read.
            None if !PACKAGE_FILES.contains(&f.path.as_str()) => {}
            None => out.push(
                "S-FILE-UNREADABLE",
                Some(&f.path),
                None,
                format!(
                    "could not be read: stored with Git LFS, or past the {} MiB one validation reads; keep task files as plain git files",
                    MAX_READ_BYTES >> 20
                ),
            ),
        }
    }
    texts
}

/// Files the checks would search but did not read (past the bytes one validation reads, or
/// unreadable), each with why, for the report's `S-FILES-NOT-READ` warning. The package's own
/// files are errors instead (`S-FILE-UNREADABLE`, `S-FILE-TOO-LARGE`), and files the checks never
/// search are not listed: a run's mirror copies every file whole either way.
pub fn not_read(layout: &Layout, contents: &Contents) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for dir in &layout.tasks {
        for f in dir
            .files
            .iter()
            .filter(|f| !f.symlink && wanted(&f.path) && !PACKAGE_FILES.contains(&f.path.as_str()))
        {
            let path = format!("{}/{}", dir.dir, f.path);
            if f.size > MAX_FILE_BYTES || contents.contains_key(&path) {
                continue;
            }
            out.push((
                path,
                format!(
                    "not read: past the {} MiB one validation reads, or unreadable",
                    MAX_READ_BYTES >> 20
                ),
            ));
        }
    }
    out
}

/// The task's format, its metadata and its prompt: from `task.md`'s frontmatter, or a Harbor
/// `task.toml` with `instruction.md`. `None` when there is neither, or it cannot be read.
fn read_meta(
    dir: &TaskDir,
    texts: &BTreeMap<String, Arc<str>>,
    out: &mut TaskIssues,
) -> Option<(Format, Value, String)> {
    let has = |p: &str| has_file(dir, p);
    Some(if has("task.md") {
        let text = texts.get("task.md")?;
        let doc = match frontmatter::split(text) {
            Ok(doc) => doc,
            Err(e) => {
                out.push("S-FRONTMATTER", Some("task.md"), None, e.into());
                return None;
            }
        };
        let meta = match frontmatter::parse_yaml(doc.yaml) {
            Ok(v) => v,
            Err(e) => {
                out.push("S-FRONTMATTER", Some("task.md"), None, format!("unreadable YAML frontmatter: {e}"));
                return None;
            }
        };
        let benchflow = meta.get("schema_version").is_some() && meta.get("task").is_some();
        let prompt = frontmatter::prompt_section(doc.body).unwrap_or_default().to_string();
        (if benchflow { Format::Benchflow } else { Format::Posttrain }, meta, prompt)
    } else if has("task.toml") {
        let text = texts.get("task.toml")?;
        let meta = match harbor_meta(text) {
            Ok(v) => v,
            Err(e) => {
                out.push("S-TOML", Some("task.toml"), None, e.into());
                return None;
            }
        };
        if !has("instruction.md") {
            out.push(
                "S-MISSING-FILE",
                Some("instruction.md"),
                None,
                "a Harbor task needs `instruction.md`, its prompt".into(),
            );
        }
        let prompt = texts.get("instruction.md").map(|t| t.trim().to_string()).unwrap_or_default();
        (Format::Harbor, meta, prompt)
    } else {
        out.push(
            "S-MISSING-FILE",
            Some("task.md"),
            None,
            "no `task.md` (nor a Harbor `task.toml` with `instruction.md`): this directory is not a task"
                .into(),
        );
        return None;
    })
}

/// The fields and files the task's format requires, its prompt, and its Dockerfile's start.
fn check_structure(
    dir: &TaskDir,
    format: Format,
    meta: &Value,
    prompt: &str,
    texts: &BTreeMap<String, Arc<str>>,
    out: &mut TaskIssues,
) {
    let has = |p: &str| has_file(dir, p);
    let required_fields: &[&str] = match format {
        Format::Benchflow => &["task", "metadata", "agent", "verifier", "sandbox"],
        Format::Posttrain => &["version", "metadata", "agent", "verifier"],
        Format::Harbor => &[],
    };
    for field in required_fields {
        if meta.get(*field).is_none_or(Value::is_null) {
            out.push(
                "S-MISSING-FIELD",
                Some("task.md"),
                Some(field),
                format!("the frontmatter has no `{field}`"),
            );
        }
    }
    if format == Format::Posttrain && meta.get("environment").is_none() && meta.get("sandbox").is_none() {
        out.push(
            "S-MISSING-FIELD",
            Some("task.md"),
            Some("environment"),
            "the frontmatter has no `environment` (or `sandbox`) block".into(),
        );
    }
    if prompt.is_empty() {
        let (file, what) = match format {
            Format::Harbor => ("instruction.md", "`instruction.md` is empty"),
            _ => ("task.md", "`task.md` has no `## prompt` section, or it is empty"),
        };
        if format != Format::Harbor || has("instruction.md") {
            out.push("S-NO-PROMPT", Some(file), None, what.into());
        }
    }
    let test_sh = if format == Format::Harbor { "tests/test.sh" } else { "verifier/test.sh" };
    let mut required: Vec<&str> = vec!["environment/Dockerfile", test_sh];
    if format == Format::Posttrain {
        required.extend(["verifier/test_outputs.py", "verifier/verifier.md", "oracle/solve.sh"]);
        if !dir.files.iter().any(|f| f.path.starts_with("verifier/rubrics/") && f.path.ends_with(".md")) {
            out.push(
                "S-MISSING-FILE",
                Some("verifier/rubrics/"),
                None,
                "a PostTrain task needs at least one rubric, `verifier/rubrics/*.md`".into(),
            );
        }
    }
    for file in required {
        if !has(file) {
            out.push("S-MISSING-FILE", Some(file), None, format!("`{file}` is required"));
        }
    }
    if let Some(docker) = texts.get("environment/Dockerfile") {
        if !crate::gates::dockerfile::starts_with_from(docker) {
            out.push(
                "S-DOCKERFILE",
                Some("environment/Dockerfile"),
                None,
                "the Dockerfile must start with `FROM` (comments, parser directives and `ARG` may come first)".into(),
            );
        }
    }
}

/// BenchFlow's `task: {name}` (or `task: NAME`); otherwise the directory name is the task name.
fn task_name(meta: &Value) -> Option<String> {
    let t = &meta["task"];
    let name = t["name"].as_str().or_else(|| t["id"].as_str()).or_else(|| t.as_str())?;
    let name = name.trim();
    (!name.is_empty() && name.len() <= 128).then(|| name.to_string())
}

fn credit_of(metadata: &Value) -> Credit {
    let field = |k: &str| match &metadata[k] {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    Credit {
        author_hub: field("author_hub"),
        author_name: field("author_name"),
        license: field("license"),
        category: field("category"),
        origin: field("origin"),
        origin_url: field("origin_url"),
    }
}

/// Keys `bench tasks migrate` maps into the frontmatter; the rest go under `benchflow.compat`.
const HARBOR_KNOWN: &[&str] = &["version", "metadata", "verifier", "agent", "environment"];

/// `task.toml` as the BenchFlow frontmatter it migrates to.
pub fn harbor_meta(text: &str) -> Result<Value, crate::invalid::Invalid> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let msg = e.to_string();
        format!("unreadable TOML: {}", msg.lines().last().unwrap_or("").trim())
    })?;
    let json = serde_json::to_value(&table).map_err(|e| e.to_string())?;
    let Value::Object(map) = json else { return Err("task.toml must be a table".into()) };
    let mut out = Map::new();
    let mut compat = Map::new();
    for (k, v) in map {
        match k.as_str() {
            "environment" => {
                out.insert("sandbox".into(), v);
            }
            k if HARBOR_KNOWN.contains(&k) => {
                out.insert(k.to_string(), v);
            }
            _ => {
                compat.insert(k, v);
            }
        }
    }
    if !compat.is_empty() {
        out.insert("benchflow".into(), serde_json::json!({ "compat": compat }));
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str) -> Entry {
        Entry {
            path: path.into(),
            blob: "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391".into(),
            size: 10,
            symlink: false,
        }
    }

    #[test]
    fn finds_tasks_under_envs_or_tasks() {
        let l = discover(&[
            entry("submission.yaml"),
            entry("envs/a/task.md"),
            entry("envs/README.md"),
            entry("envs/b/x"),
        ]);
        assert_eq!(l.tasks_dir, Some("envs"));
        assert_eq!(l.tasks.iter().map(|t| t.dir.as_str()).collect::<Vec<_>>(), ["envs/a", "envs/b"]);
        assert!(l.submission_yaml.is_some());
        let h = discover(&[entry("tasks/t/task.toml")]);
        assert_eq!(h.tasks_dir, Some("tasks"));
        assert_eq!(discover(&[entry("envs/.gitkeep")]).errors[0].code, "S-NO-TASKS");
        assert_eq!(discover(&[entry("README.md")]).errors[0].code, "S-NO-TASKS");
    }

    #[test]
    fn a_collection_over_the_bound_is_refused_before_any_read() {
        // One blob under 49 paths: git stores it once, a run's mirror would copy it 49 times.
        let mut listing = vec![Entry { size: 0, ..entry("envs/a/task.md") }];
        listing
            .extend((0..49).map(|i| Entry { size: 1 << 20, ..entry(&format!("envs/a/verifier/c{i}.py")) }));
        let layout = discover(&listing);
        assert_eq!(layout.errors[0].code, "S-COLLECTION-TOO-LARGE");
        assert!(layout.errors[0].message.contains("49.0 MiB"), "{}", layout.errors[0].message);
        assert!(reads(&layout).is_empty());
        listing.pop();
        assert!(discover(&listing).errors.is_empty(), "48 MiB and one empty file is within the bound");
    }

    #[test]
    fn paths_holding_one_blob_share_its_buffer_and_its_text() {
        let test = b"def test_x():\n    assert open('/app/out.txt').read() == 'ok'\n".to_vec();
        let files: Vec<(String, Vec<u8>)> = ["a", "b"]
            .iter()
            .flat_map(|t| {
                [
                    (format!("envs/{t}/task.md"), b"---\nversion: 1\n---\n## prompt\nDo it.\n".to_vec()),
                    (format!("envs/{t}/verifier/test_outputs.py"), test.clone()),
                ]
            })
            .collect();
        let (listing, contents) =
            super::super::listing::from_files(files.iter().map(|(p, b)| (p.as_str(), b.as_slice(), false)));
        assert!(
            contents["envs/a/verifier/test_outputs.py"].shares(&contents["envs/b/verifier/test_outputs.py"])
        );
        let layout = discover(&listing);
        let mut issues = Vec::new();
        let tasks: Vec<Task> =
            layout.tasks.iter().filter_map(|d| read_task(d, &contents, &mut issues)).collect();
        let (a, b) =
            (&tasks[0].texts["verifier/test_outputs.py"], &tasks[1].texts["verifier/test_outputs.py"]);
        assert!(std::sync::Arc::ptr_eq(a, b), "decoded once");
    }

    #[test]
    fn bounds_tasks_and_paths() {
        let many: Vec<Entry> = (0..=MAX_TASKS).map(|i| entry(&format!("envs/t{i}/task.md"))).collect();
        assert_eq!(discover(&many).errors[0].code, "S-TOO-MANY-TASKS");
        let l = discover(&[entry("envs/x/../../escape.txt"), entry("envs/x/task.md")]);
        assert_eq!(l.errors[0].code, "S-UNSAFE-PATH");
        assert_eq!(l.tasks.len(), 1);
    }

    #[test]
    fn converts_harbor_task_toml() {
        let meta = harbor_meta(
            "version = \"1.0\"\n[metadata]\ncategory = \"games\"\n[environment]\nallow_internet = false\n[custom]\nfoo = 1\n",
        )
        .unwrap();
        assert_eq!(meta["sandbox"]["allow_internet"], false);
        assert_eq!(meta["benchflow"]["compat"]["custom"]["foo"], 1);
        assert_eq!(meta["metadata"]["category"], "games");
        assert!(harbor_meta("version = ").is_err());
    }
}
