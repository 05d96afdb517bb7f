use super::*;
use crate::catalog;

const CHALLENGE: &str = include_str!("../../../configs/challenges/openenv-9b.toml");
const METHOD: &str = include_str!("../../../configs/methods/openenv-v1.toml");

fn shipped() -> Vec<SourceFile> {
    shipped_files()
}

/// The shipped files with one of them edited.
fn with(path: &str, edit: impl Fn(&str) -> String) -> Vec<SourceFile> {
    shipped_files_with(path, edit)
}

fn refusals(files: &[SourceFile], overlay: &[SourceFile]) -> Vec<ConfigError> {
    Registry::load(files, overlay).expect_err("the loader should refuse this").0
}

fn assert_refused(files: &[SourceFile], file: &str, field: &str, reason_part: &str) {
    let errors = refusals(files, &[]);
    assert!(
        errors.iter().any(|e| e.file == file && e.field == field && e.reason.contains(reason_part)),
        "expected {file}: {field}: …{reason_part}…, got:\n{}",
        ConfigErrors(errors.clone())
    );
}

#[test]
fn shipped_configs_load_as_the_guide_describes() {
    let registry = Registry::load(&shipped(), &[]).unwrap();
    let c = registry.challenge("openenv-9b").unwrap();
    assert_eq!(c.spec.challenge.status, ChallengeStatus::Open);
    assert!(c.spec.challenge.runs_paused.as_deref().unwrap().contains("not measured"));
    let model = &registry.models["qwen3.5-9b"].model;
    assert_eq!((model.repo.as_str(), model.revision.as_str()), ("Qwen/Qwen3.5-9B", "c202236"));
    let method = &registry.methods["openenv-v1"];
    assert!(method.method.placeholder);
    assert_eq!((method.method.algorithm.as_str(), method.method.adapter.as_str()), ("GRPO", "LoRA"));
    assert_eq!((method.method.trainer.as_str(), method.method.rollout_harness.as_str()), ("TRL", "OpenCode"));
    let suite = &registry.suites["openenv-heldout"];
    assert!(suite.meta.private && suite.meta.sealed && suite.meta.default);
    assert_eq!(suite.header.described_domains.len(), 8);
    assert_eq!(suite.tasks, None, "no overlay: the private suite's facts are unknown");
    assert_eq!(c.spec.compute.provider_status, ProviderStatus::Planned);
    assert_eq!((c.spec.compute.nodes, c.spec.compute.gpus, c.spec.compute.eval_trials), (1, 8, 3));
    assert_eq!(c.serving.flavor, "h200x8");
}

#[test]
fn every_number_of_the_placeholder_recipe_is_marked_owner_set() {
    let unmarked: Vec<&str> = METHOD
        .lines()
        .filter(|l| {
            let value = l.split('#').next().unwrap_or("");
            value.contains('=') && value.trim_end().ends_with(|c: char| c.is_ascii_digit() || c == '"')
        })
        .filter(|l| {
            let key = l.split('=').next().unwrap().trim();
            !["id", "name", "algorithm", "adapter", "trainer", "rollout_harness", "derived_from", "note"]
                .contains(&key)
        })
        .filter(|l| !l.contains("OWNER: set"))
        .collect();
    assert!(unmarked.is_empty(), "numbers without OWNER: set: {unmarked:?}");
}

#[test]
fn the_private_suite_cannot_be_composed_without_its_overlay() {
    let registry = Registry::load(&shipped(), &[]).unwrap();
    let e = crate::pipeline::config::compose(&registry, registry.challenge("openenv-9b").unwrap(), None)
        .unwrap_err();
    assert!(e.to_string().contains("`openenv-heldout` names no dataset"), "{e}");
}

#[test]
fn refuses_trials_that_disagree_with_the_recipe() {
    let files = with("challenges/openenv-9b.toml", |s| s.replace("eval_trials = 3", "eval_trials = 2"));
    assert_refused(
        &files,
        "challenges/openenv-9b.toml",
        "compute.eval_trials",
        "disagrees with recipe `openenv-v1`",
    );
}

#[test]
fn refuses_sandbox_concurrency_that_disagrees_with_the_recipe() {
    let files = with("challenges/openenv-9b.toml", |s| {
        s.replace("sandbox_concurrency = 32", "sandbox_concurrency = 16")
    });
    assert_refused(
        &files,
        "challenges/openenv-9b.toml",
        "compute.sandbox_concurrency",
        "eval.sandbox_concurrency = 32",
    );
}

#[test]
fn refuses_a_gpu_count_that_disagrees_with_the_layout() {
    let files = with("challenges/openenv-9b.toml", |s| s.replace("gpus = 8", "gpus = 4"));
    assert_refused(&files, "challenges/openenv-9b.toml", "compute.gpus", "disagrees with [compute.layout]");
    assert_refused(&files, "challenges/openenv-9b.toml", "compute.gpus", "flavor `h200x8` (8 GPUs)");
}

#[test]
fn refuses_a_layout_that_disagrees_with_the_recipe_serving() {
    let files = with("challenges/openenv-9b.toml", |s| {
        s.replace("vllm_gpus = 4\ntrainer_gpus = 4", "vllm_gpus = 2\ntrainer_gpus = 6")
    });
    assert_refused(
        &files,
        "challenges/openenv-9b.toml",
        "compute.layout",
        "disagree with recipe `openenv-v1`",
    );
}

#[test]
fn refuses_serving_layouts_that_cannot_work() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "tensor_parallel = 4 ",
            "tensor_parallel = 3 ",
            "meta.serving.tensor_parallel",
            "not a power of two",
        ),
        (
            "tensor_parallel = 4 ",
            "tensor_parallel = 8 ",
            "meta.serving.tensor_parallel",
            "does not divide vllm_gpus",
        ),
        ("flavor = \"h200x8\"", "flavor = \"h300x8\"", "meta.serving.flavor", "unknown flavor"),
        (
            "max_context_tokens = 16384",
            "max_context_tokens = 65536",
            "meta.serving.max_context_tokens",
            "max_model_len",
        ),
        ("completion_tokens = 4096", "completion_tokens = 16384", "rollout.completion_tokens", "no room"),
        ("trainer_gpus = 4 ", "trainer_gpus = 0 ", "meta.serving.trainer_gpus", "at least one GPU"),
    ];
    for (from, to, field, reason) in cases {
        let files = with("methods/openenv-v1.toml", |s| {
            assert!(s.contains(from), "fixture edit `{from}` does not apply");
            s.replace(from, to)
        });
        assert_refused(&files, "methods/openenv-v1.toml", field, reason);
    }
}

#[test]
fn refuses_tensor_parallelism_the_model_cannot_split() {
    let files = with("models/qwen3.5-9b.toml", |s| s.replace("attention_heads = 16", "attention_heads = 6"));
    assert_refused(&files, "methods/openenv-v1.toml", "meta.serving.tensor_parallel", "6 attention heads");
}

#[test]
fn refuses_unknown_references() {
    let files =
        with("challenges/openenv-9b.toml", |s| s.replace("model = \"qwen3.5-9b\"", "model = \"qwen9\""));
    assert_refused(&files, "challenges/openenv-9b.toml", "challenge.model", "no model `qwen9`");
    let files =
        with("challenges/openenv-9b.toml", |s| s.replace("method = \"openenv-v1\"", "method = \"v9\""));
    assert_refused(&files, "challenges/openenv-9b.toml", "challenge.method", "no method `v9`");
    let files = with("challenges/openenv-9b.toml", |s| {
        s.replace("suites = [\"openenv-heldout\"]", "suites = [\"nope\"]")
    });
    assert_refused(&files, "challenges/openenv-9b.toml", "challenge.suites", "no suite `nope`");
    let files =
        with("challenges/openenv-9b.toml", |s| s.replace("suites = [\"openenv-heldout\"]", "suites = []"));
    assert_refused(&files, "challenges/openenv-9b.toml", "challenge.suites", "at least one suite");
}

#[test]
fn refuses_malformed_files_naming_the_problem() {
    let files =
        with("challenges/openenv-9b.toml", |s| s.replace("status = \"open\"", "status = \"running\""));
    assert_refused(&files, "challenges/openenv-9b.toml", "", "unknown variant `running`");
    let files = with("models/qwen3.5-9b.toml", |s| format!("{s}\nunexpected = 1\n"));
    assert_refused(&files, "models/qwen3.5-9b.toml", "", "unknown field `unexpected`");
    let files = with("methods/openenv-v1.toml", |s| s.replace("[eval]", "[eval"));
    assert_eq!(refusals(&files, &[]).iter().filter(|e| e.file == "methods/openenv-v1.toml").count(), 1);
    let files =
        with("models/qwen3.5-9b.toml", |s| s.replace("revision = \"c202236\"", "revision = \"main\""));
    assert_refused(&files, "models/qwen3.5-9b.toml", "model.revision", "hex");
    let files = with("challenges/openenv-9b.toml", |s| {
        s.replace("commit = \"bcbaffb58a19829d05fa483662c358e6ed5ba353\"", "commit = \"bcbaffb\"")
    });
    assert_refused(&files, "challenges/openenv-9b.toml", "pipeline.commit", "40-hex");
    let files = with("challenges/openenv-9b.toml", |s| {
        let start = s.find("runs_paused = ").unwrap();
        let end = start + s[start..].find('\n').unwrap();
        format!("{}runs_paused = \"  \"{}", &s[..start], &s[end..])
    });
    assert_refused(&files, "challenges/openenv-9b.toml", "challenge.runs_paused", "give the reason");
}

#[test]
fn refuses_an_id_that_does_not_match_its_file() {
    let mut files = shipped();
    let model = files.iter().position(|f| f.path.starts_with("models/")).unwrap();
    files[model].path = "models/other.toml".into();
    assert_refused(&files, "models/other.toml", "model.id", "must match the file name");
    let files = with("models/qwen3.5-9b.toml", |s| s.replace("id = \"qwen3.5-9b\"", "id = \"Qwen!\""));
    assert_refused(&files, "models/qwen3.5-9b.toml", "model.id", "is not an id");
}

#[test]
fn refuses_private_suite_facts_in_the_repository() {
    let files = with("suites/openenv-heldout.toml", |s| format!("{s}task_list = \"openenv-heldout.txt\"\n"));
    assert_refused(&files, "suites/openenv-heldout.toml", "meta.task_list", "private overlay");
}

#[test]
fn reads_a_private_suite_from_the_overlay() {
    let overlay = vec![
        SourceFile::new("suites/openenv-heldout/tasks.txt", "# held-out\nalpha\nbeta\n\ngamma\n"),
        SourceFile::new(
            "suites/openenv-heldout/domains.json",
            r#"{"alpha":"cybersecurity","beta":"natural science","gamma":"cybersecurity"}"#,
        ),
    ];
    let registry = Registry::load(&shipped(), &overlay).unwrap();
    let suite = &registry.suites["openenv-heldout"];
    assert_eq!(suite.task_count(), Some(3));
    assert_eq!(suite.published_domain_counts(), None, "a private suite never publishes per-domain counts");
}

#[test]
fn refuses_a_bad_overlay() {
    let overlay = vec![SourceFile::new("suites/openenv-heldout/domains.json", "{}")];
    let errors = refusals(&shipped(), &overlay);
    assert!(errors.iter().any(|e| e.field == "tasks.txt" && e.reason.contains("needs its task list")));
    let overlay = vec![
        SourceFile::new("suites/openenv-heldout/tasks.txt", "alpha\nalpha\nbeta\n"),
        SourceFile::new("suites/openenv-heldout/domains.json", r#"{"alpha":"x"}"#),
    ];
    let errors = refusals(&shipped(), &overlay);
    assert!(errors.iter().any(|e| e.reason.contains("listed twice")));
    assert!(errors.iter().any(|e| e.reason.contains("missing: beta")));
    let overlay = vec![SourceFile::new("suites/unknown/tasks.txt", "a\n")];
    assert!(refusals(&shipped(), &overlay).iter().any(|e| e.reason.contains("no suite with this id")));
}

fn public_suite(meta: &str) -> SourceFile {
    SourceFile::new(
        "suites/demo-public.toml",
        format!("[suite]\nid = \"demo-public\"\nname = \"Demo\"\ndescription = \"d\"\n\n[meta]\n{meta}"),
    )
}

#[test]
fn public_suite_publishes_domain_counts_and_needs_a_domain_per_task() {
    let mut files = shipped();
    files.push(public_suite("task_list = \"demo.txt\"\ndomains = \"demo.json\"\n"));
    files.push(SourceFile::new("fixture/task-lists/demo.txt", "a\nb\nc\n"));
    files.push(SourceFile::new("fixture/task-lists/demo.json", r#"{"a":"math","b":"math","c":"science"}"#));
    let registry = Registry::load(&files, &[]).unwrap();
    let counts = registry.suites["demo-public"].published_domain_counts().unwrap();
    assert_eq!(counts["math"], 2);
    assert_eq!(counts["science"], 1);
    let list = catalog::benchmark_list(&registry);
    assert_eq!(list.default.as_deref(), Some("openenv-heldout"));
    assert_eq!(list.benchmarks.len(), 2);

    files.pop();
    files.push(SourceFile::new("fixture/task-lists/demo.json", r#"{"a":"math"}"#));
    assert_refused(&files, "suites/demo-public.toml", "meta.domains", "missing: b, c");
}

#[test]
fn public_suite_needs_its_files() {
    let mut files = shipped();
    files.push(public_suite("task_list = \"absent.txt\"\n"));
    assert_refused(&files, "suites/demo-public.toml", "meta.task_list", "does not exist");
    let mut files = shipped();
    files.push(public_suite(""));
    assert_refused(&files, "suites/demo-public.toml", "meta.task_list", "names its task list");
}

#[test]
fn refuses_two_default_suites() {
    let mut files = shipped();
    files.push(public_suite("default = true\ntask_list = \"demo.txt\"\n"));
    files.push(SourceFile::new("fixture/task-lists/demo.txt", "a\n"));
    assert_refused(&files, "suites/", "meta.default", "only one suite may be the default");
}

#[test]
fn collects_every_problem_in_one_pass() {
    let files = with("challenges/openenv-9b.toml", |s| {
        s.replace("eval_trials = 3", "eval_trials = 1")
            .replace("sandbox_concurrency = 32", "sandbox_concurrency = 1")
    });
    assert!(refusals(&files, &[]).len() >= 2);
}

#[test]
fn lists_open_challenges_before_planned_ones() {
    let mut files = shipped();
    let planned = CHALLENGE
        .replace("id = \"openenv-9b\"", "id = \"aaa-planned\"")
        .replace("status = \"open\"", "status = \"planned\"");
    files.insert(0, SourceFile::new("challenges/aaa-planned.toml", planned));
    let registry = Registry::load(&files, &[]).unwrap();
    let ids: Vec<&str> = registry.challenges.iter().map(|c| c.id().as_str()).collect();
    assert_eq!(ids, ["openenv-9b", "aaa-planned"]);
}

#[test]
fn reads_the_budget_cap_and_refuses_a_bad_one() {
    assert_eq!(Registry::load(&shipped(), &[]).unwrap().budget_cap_cents, 500_000);
    let files = with("arena.toml", |s| s.replace("cap_usd = 5000.0", "cap_usd = -1.0"));
    assert_refused(&files, "arena.toml", "budget.cap_usd", "non-negative");
    let files: Vec<SourceFile> = shipped().into_iter().filter(|f| f.path != "arena.toml").collect();
    assert_refused(&files, "arena.toml", "", "missing");
}

#[test]
fn reads_the_openenv_quota_and_refuses_values_out_of_range() {
    let registry = Registry::load(&shipped(), &[]).unwrap();
    assert_eq!(registry.openenv_quota, crate::openenv::quota::QuotaPolicy::default());
    let files = with("arena.toml", |s| {
        s.replace("limit = 1\n", "limit = 5\n")
            .replace("exempt = []", "exempt = [\"64a1f0c2e4b0a1b2c3d4e5f6\"]")
    });
    let registry = Registry::load(&files, &[]).unwrap();
    assert_eq!((registry.openenv_quota.limit, registry.openenv_quota.exempt.len()), (5, 1));
    let files = with("arena.toml", |s| s.replace("limit = 1\n", "limit = 0\n"));
    assert_refused(&files, "arena.toml", "openenv.quota.limit", "must be 1 to 1000");
    let files = with("arena.toml", |s| s.replace("window_s = 86400", "window_s = 2592001"));
    assert_refused(&files, "arena.toml", "openenv.quota.window_s", "30 days");
    let files = with("arena.toml", |s| s.replace("exempt = []", "exempt = [\"not a name\"]"));
    assert_refused(&files, "arena.toml", "openenv.quota.exempt", "not an HF account id");
}
