//! The challenge registry: `configs/{challenges,models,suites,methods}/*.toml` plus the private
//! overlay. [`Registry::load`] parses every file, cross-checks them, and refuses the whole set with
//! every problem it found (file, field, reason) rather than serving a half-valid registry.

mod challenge;
mod error;
mod method;
mod model;
mod openenv_track;
pub mod serving;
mod suite;

use std::collections::{BTreeMap, BTreeSet};

use serde::de::DeserializeOwned;

pub use challenge::{
    Baseline, ChallengeFile, ChallengeHeader, ChallengeStatus, Compute, Layout, Pipeline, ProviderStatus,
};
pub use error::{ConfigError, ConfigErrors};
pub use method::{Eval, Method, MethodFile, MethodMeta, Rollout, Training};
pub use model::{Model, ModelFile, ModelMeta};
pub use serving::{MethodServing, ModelServing, ServingLayout};
pub use suite::{Suite, SuiteDataset, SuiteFile, SuiteHeader, SuiteMeta, SuiteTasks};

/// A file handed to the loader: its path relative to the configs (or overlay) root, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub path: String,
    pub contents: String,
}

impl SourceFile {
    pub fn new(path: impl Into<String>, contents: impl Into<String>) -> Self {
        Self { path: path.into(), contents: contents.into() }
    }
}

/// A challenge whose binding resolved and whose layout was checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Challenge {
    /// `spec.challenge.id`, checked by the loader.
    pub id: crate::ids::ChallengeId,
    pub file_path: String,
    pub spec: ChallengeFile,
    pub serving: ServingLayout,
}

impl Challenge {
    pub fn id(&self) -> &crate::ids::ChallengeId {
        &self.id
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Registry {
    /// The shared compute cap, from `arena.toml`.
    pub budget_cap_cents: i64,
    /// Launch providers' hourly prices by hardware flavor (USD), from `arena.toml`.
    pub prices: BTreeMap<String, BTreeMap<String, f64>>,
    pub models: BTreeMap<String, ModelFile>,
    pub methods: BTreeMap<String, MethodFile>,
    pub suites: BTreeMap<String, Suite>,
    /// Open first, then planned, then closed; by id within each.
    pub challenges: Vec<Challenge>,
    /// Held-out OpenEnv benchmarks (`benchmarks/*.toml`).
    pub benchmarks: BTreeMap<String, crate::openenv::benchmark::Benchmark>,
    /// `[openenv] benchmark` of `arena.toml`: the benchmark the OpenEnv track's runs are
    /// evaluated on.
    pub openenv_benchmark: Option<String>,
    /// `[openenv.quota]` of `arena.toml` (the guide's one per 24 hours when absent).
    pub openenv_quota: crate::openenv::quota::QuotaPolicy,
}

/// `arena.toml`: arena-wide settings.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ArenaFile {
    budget: BudgetSettings,
    /// `[prices.PROVIDER]`: `flavor = USD per hour`.
    #[serde(default)]
    prices: BTreeMap<String, BTreeMap<String, f64>>,
    #[serde(default)]
    openenv: OpenEnvSettings,
}

/// `[openenv]` of `arena.toml`: the OpenEnv track's settings.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenEnvSettings {
    /// The held-out benchmark its runs are evaluated on, before and after training.
    #[serde(default)]
    benchmark: Option<String>,
    /// `[openenv.quota]`: accepted submissions per account and window, and who has no quota.
    #[serde(default)]
    quota: crate::openenv::quota::QuotaPolicy,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetSettings {
    cap_usd: f64,
}

const TASK_LISTS: &str = "fixture/task-lists/";

/// `arena.toml`: the shared compute cap and the hardware prices.
fn read_arena(files: &[SourceFile], registry: &mut Registry, errors: &mut Vec<ConfigError>) {
    match files.iter().find(|f| f.path == "arena.toml") {
        Some(file) => {
            if let Some(arena) = parse::<ArenaFile>(file, errors) {
                if arena.budget.cap_usd.is_finite() && arena.budget.cap_usd >= 0.0 {
                    registry.budget_cap_cents = (arena.budget.cap_usd * 100.0).round() as i64;
                } else {
                    errors.push(ConfigError::new(
                        "arena.toml",
                        "budget.cap_usd",
                        "must be a non-negative number",
                    ));
                }
                for (provider, flavors) in &arena.prices {
                    for (flavor, price) in flavors {
                        if serving::flavor_gpus(flavor).is_none() {
                            errors.push(ConfigError::new(
                                "arena.toml",
                                format!("prices.{provider}.{flavor}"),
                                "an unknown hardware flavor",
                            ));
                        } else if !(price.is_finite() && *price > 0.0) {
                            errors.push(ConfigError::new(
                                "arena.toml",
                                format!("prices.{provider}.{flavor}"),
                                "must be a positive number of USD per hour",
                            ));
                        }
                    }
                }
                registry.prices = arena.prices;
                registry.openenv_benchmark = arena.openenv.benchmark;
                for (field, reason) in arena.openenv.quota.problems() {
                    errors.push(ConfigError::new("arena.toml", field, reason));
                }
                registry.openenv_quota = arena.openenv.quota;
            }
        }
        None => errors.push(ConfigError::new("arena.toml", "", "missing: it sets the shared compute cap")),
    }
}

/// The models, methods and suites into the registry; the challenges' files, bound once every suite
/// is known.
fn read_files(
    files: &[SourceFile],
    fixtures: &BTreeMap<&str, &str>,
    registry: &mut Registry,
    errors: &mut Vec<ConfigError>,
) -> Vec<(String, ChallengeFile)> {
    let mut challenge_files = Vec::new();
    for file in files {
        let Some((dir, stem)) = toml_location(&file.path) else {
            continue;
        };
        match dir {
            "models" => {
                if let Some(m) = parse::<ModelFile>(file, errors) {
                    check_id(file, "model.id", &m.model.id, stem, errors);
                    if !is_hex(&m.model.revision, 7, 40) {
                        errors.push(ConfigError::new(
                            &file.path,
                            "model.revision",
                            "must be a commit: 7 to 40 hex digits",
                        ));
                    }
                    registry.models.insert(m.model.id.clone(), m);
                }
            }
            "methods" => {
                if let Some(m) = parse::<MethodFile>(file, errors) {
                    check_id(file, "method.id", &m.method.id, stem, errors);
                    check_method(file, &m, errors);
                    registry.methods.insert(m.method.id.clone(), m);
                }
            }
            "suites" => {
                if let Some(s) = parse::<SuiteFile>(file, errors) {
                    check_id(file, "suite.id", &s.suite.id, stem, errors);
                    let tasks = public_suite_tasks(file, &s, fixtures, errors);
                    if let Some(d) = &s.meta.dataset {
                        check_dataset(&file.path, "meta.dataset", d, errors);
                    }
                    let dataset = s.meta.dataset.clone();
                    registry
                        .suites
                        .insert(s.suite.id.clone(), Suite { header: s.suite, meta: s.meta, tasks, dataset });
                }
            }
            "benchmarks" => {
                if let Some(b) = parse::<crate::openenv::benchmark::BenchmarkFile>(file, errors) {
                    check_id(file, "benchmark.id", &b.benchmark.id, stem, errors);
                    if let Some(benchmark) = read_benchmark(file, b, errors) {
                        registry.benchmarks.insert(benchmark.header.id.clone(), benchmark);
                    }
                }
            }
            "challenges" => {
                if let Some(c) = parse::<ChallengeFile>(file, errors) {
                    check_id(file, "challenge.id", &c.challenge.id, stem, errors);
                    if c.tracking.as_ref().is_some_and(|t| !t.space_ok()) {
                        errors.push(ConfigError::new(
                            &file.path,
                            "tracking.trackio_space",
                            "must be a Space id, owner/name",
                        ));
                    }
                    challenge_files.push((file.path.clone(), c));
                }
            }
            _ => {}
        }
    }
    challenge_files
}

impl Registry {
    /// Loads the registry from the repository's config files and the private overlay's files.
    pub fn load(files: &[SourceFile], overlay: &[SourceFile]) -> Result<Registry, ConfigErrors> {
        let mut errors = Vec::new();
        let mut registry = Registry::default();
        let fixtures: BTreeMap<&str, &str> = files
            .iter()
            .filter_map(|f| f.path.strip_prefix(TASK_LISTS).map(|name| (name, f.contents.as_str())))
            .collect();

        read_arena(files, &mut registry, &mut errors);
        let challenge_files = read_files(files, &fixtures, &mut registry, &mut errors);

        apply_overlay(&mut registry.suites, overlay, &mut errors);
        apply_benchmark_overlay(&mut registry.benchmarks, overlay, &mut errors);
        if let Some(b) = &registry.openenv_benchmark {
            if !registry.benchmarks.contains_key(b) {
                errors.push(ConfigError::new(
                    "arena.toml",
                    "openenv.benchmark",
                    format!("no benchmark `{b}` in benchmarks/"),
                ));
            }
        }

        let defaults: Vec<&str> =
            registry.suites.values().filter(|s| s.meta.default).map(|s| s.id()).collect();
        if defaults.len() > 1 {
            errors.push(ConfigError::new(
                "suites/",
                "meta.default",
                format!("only one suite may be the default; these all are: {}", defaults.join(", ")),
            ));
        }

        for (path, spec) in challenge_files {
            if let Some(challenge) = bind_challenge(&registry, path, spec, &mut errors) {
                registry.challenges.push(challenge);
            }
        }
        registry.challenges.sort_by(|a, b| {
            status_rank(a.spec.challenge.status)
                .cmp(&status_rank(b.spec.challenge.status))
                .then(a.id().cmp(b.id()))
        });

        if errors.is_empty() {
            Ok(registry)
        } else {
            Err(ConfigErrors(errors))
        }
    }

    pub fn challenge(&self, id: &str) -> Option<&Challenge> {
        self.challenges.iter().find(|c| c.id() == id)
    }

    pub fn default_suite(&self) -> Option<&Suite> {
        self.suites.values().find(|s| s.meta.default)
    }

    /// The challenges that score on a suite.
    pub fn challenges_scoring_on<'a>(&'a self, suite_id: &'a str) -> impl Iterator<Item = &'a Challenge> {
        self.challenges.iter().filter(move |c| c.spec.challenge.suites.iter().any(|s| s == suite_id))
    }
}

fn status_rank(status: ChallengeStatus) -> u8 {
    match status {
        ChallengeStatus::Open => 0,
        ChallengeStatus::Planned => 1,
        ChallengeStatus::Closed => 2,
    }
}

/// `models/foo.toml` → `("models", "foo")`; anything else is not a registry fragment.
fn toml_location(path: &str) -> Option<(&str, &str)> {
    let (dir, name) = path.split_once('/')?;
    let stem = name.strip_suffix(".toml")?;
    (!stem.contains('/')).then_some((dir, stem))
}

fn parse<T: DeserializeOwned>(file: &SourceFile, errors: &mut Vec<ConfigError>) -> Option<T> {
    match toml::from_str(&file.contents) {
        Ok(v) => Some(v),
        Err(e) => {
            errors.push(ConfigError::new(&file.path, "", e.message().to_string()));
            None
        }
    }
}

fn is_hex(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn check_id(file: &SourceFile, field: &str, id: &str, stem: &str, errors: &mut Vec<ConfigError>) {
    let well_formed = (2..=64).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && id.as_bytes()[0].is_ascii_alphanumeric();
    if !well_formed {
        errors.push(ConfigError::new(
            &file.path,
            field,
            format!("`{id}` is not an id: 2-64 lowercase letters, digits, '-' or '.', starting with a letter or digit"),
        ));
    } else if id != stem {
        errors.push(ConfigError::new(
            &file.path,
            field,
            format!("`{id}` must match the file name `{stem}.toml`"),
        ));
    }
}

/// The recipe's own rules: what the pipeline's loader would refuse, said here with the fragment's
/// field names, so that a bad recipe fails at start rather than in a paid run.
fn check_method(file: &SourceFile, m: &MethodFile, errors: &mut Vec<ConfigError>) {
    let mut err = |field: &str, reason: String| errors.push(ConfigError::new(&file.path, field, reason));
    // The pipeline runs these; anything else has no recipe the arena can compose.
    for (field, value, want) in [
        ("method.algorithm", &m.method.algorithm, "GRPO"),
        ("method.adapter", &m.method.adapter, "LoRA"),
        ("method.trainer", &m.method.trainer, "TRL"),
        ("method.rollout_harness", &m.method.rollout_harness, "OpenCode"),
    ] {
        if value != want {
            err(field, format!("`{value}`: the pipeline the arena launches runs `{want}` only"));
        }
    }
    if m.eval.trials == 0 {
        err("eval.trials", "must be at least 1".into());
    }
    if m.eval.sandbox_concurrency == 0 {
        err("eval.sandbox_concurrency", "must be at least 1".into());
    }
    if m.eval.max_infra_error_fraction.is_some_and(|f| !(0.0..=0.5).contains(&f)) {
        err("eval.max_infra_error_fraction", "must be between 0 and 0.5".into());
    }
    check_training(m, &mut err);
    check_rollout(m, &mut err);
}

/// The recipe's `[training]` rules.
fn check_training(m: &MethodFile, err: &mut impl FnMut(&str, String)) {
    let one_of = |value: &str, allowed: &[&str]| allowed.contains(&value);
    let t = &m.training;
    if !one_of(&t.run_policy, &["always", "on_reward"]) {
        err("training.run_policy", format!("`{}` is not `always` or `on_reward`", t.run_policy));
    }
    if t.gate_threshold.is_some_and(|v| !(0.0..=1.0).contains(&v)) {
        err("training.gate_threshold", "must be between 0 and 1".into());
    }
    if t.generations_per_task < 2 {
        err("training.generations_per_task", "GRPO compares at least 2 rollouts per task".into());
    }
    for (field, v) in [
        ("training.lora_rank", t.lora_rank),
        ("training.lora_alpha", t.lora_alpha),
        ("training.max_steps", t.max_steps),
    ] {
        if v == 0 {
            err(field, "must be at least 1".into());
        }
    }
    if t.gate_task_count == 0 {
        err("training.gate_task_count", "must be at least 1".into());
    }
    if !(t.learning_rate.is_finite() && t.learning_rate > 0.0) {
        err("training.learning_rate", "must be a positive number".into());
    }
    if t.lora_dropout.is_some_and(|d| !(0.0..1.0).contains(&d)) {
        err("training.lora_dropout", "must be at least 0 and below 1".into());
    }
    if let Some(batch) = t.generation_batch_size {
        if batch == 0 || !batch.is_multiple_of(t.generations_per_task.max(1)) {
            err(
                "training.generation_batch_size",
                format!(
                    "{batch} is not a positive multiple of generations_per_task ({})",
                    t.generations_per_task
                ),
            );
        }
    }
    if t.gradient_accumulation_steps == Some(0) {
        err("training.gradient_accumulation_steps", "must be at least 1".into());
    }
    if let Some(sampler) = &t.task_sampler {
        if !one_of(sampler, &["trl", "cover"]) {
            err("training.task_sampler", format!("`{sampler}` is not `trl` or `cover`"));
        } else if sampler == "cover" {
            let batch =
                t.generation_batch_size.unwrap_or(t.generations_per_task * m.eval.sandbox_concurrency);
            if t.gradient_accumulation_steps != Some(batch) {
                err(
                    "training.gradient_accumulation_steps",
                    format!("task_sampler `cover` needs it equal to the generation batch ({batch}): one optimizer step per batch"),
                );
            }
        }
    }
    if let Some(policy) = &t.rollout_failure_policy {
        if !one_of(policy, &["raise", "mask"]) {
            err("training.rollout_failure_policy", format!("`{policy}` is not `raise` or `mask`"));
        }
    }
}

/// The recipe's `[rollout]` rules.
fn check_rollout(m: &MethodFile, err: &mut impl FnMut(&str, String)) {
    let one_of = |value: &str, allowed: &[&str]| allowed.contains(&value);
    let r = &m.rollout;
    if !one_of(&r.sandbox, &["daytona", "docker"]) {
        err("rollout.sandbox", format!("`{}` is not `daytona` or `docker`", r.sandbox));
    }
    if r.sandbox_user.as_deref().is_some_and(|u| u.trim().is_empty()) {
        err("rollout.sandbox_user", "name a user, or leave it out for the pipeline's `agent`".into());
    }
    for (field, v) in [
        ("rollout.per_attempt_timeout_s", r.per_attempt_timeout_s),
        ("rollout.idle_timeout_s", r.idle_timeout_s),
        ("rollout.sandbox_setup_timeout_s", r.sandbox_setup_timeout_s),
        ("rollout.completion_tokens", r.completion_tokens),
    ] {
        if v == 0 {
            err(field, "must be at least 1".into());
        }
    }
}

/// One task name per line; blank lines and `#` comments are skipped.
fn parse_task_list(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect()
}

fn check_tasks(
    file: &str,
    field: &str,
    names: &[String],
    domains: Option<&BTreeMap<String, String>>,
    errors: &mut Vec<ConfigError>,
) {
    let mut seen = BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            errors.push(ConfigError::new(file, field, format!("task `{name}` is listed twice")));
        }
    }
    if let Some(domains) = domains {
        let missing: Vec<&str> =
            names.iter().filter(|n| !domains.contains_key(*n)).map(String::as_str).collect();
        if !missing.is_empty() {
            errors.push(ConfigError::new(
                file,
                "meta.domains",
                format!("every task needs a domain; missing: {}", missing.join(", ")),
            ));
        }
        let unknown: Vec<&str> = domains.keys().filter(|k| !seen.contains(k)).map(String::as_str).collect();
        if !unknown.is_empty() {
            errors.push(ConfigError::new(
                file,
                "meta.domains",
                format!("the domain map names tasks the task list does not have: {}", unknown.join(", ")),
            ));
        }
    }
}

fn parse_domain_map(
    file: &str,
    text: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<BTreeMap<String, String>> {
    match serde_json::from_str(text) {
        Ok(map) => Some(map),
        Err(e) => {
            errors.push(ConfigError::new(
                file,
                "meta.domains",
                format!("not a JSON object of task to domain: {e}"),
            ));
            None
        }
    }
}

fn public_suite_tasks(
    file: &SourceFile,
    s: &SuiteFile,
    fixtures: &BTreeMap<&str, &str>,
    errors: &mut Vec<ConfigError>,
) -> Option<SuiteTasks> {
    let meta = &s.meta;
    if meta.private {
        for (field, present) in [
            ("meta.task_list", meta.task_list.is_some()),
            ("meta.domains", meta.domains.is_some()),
            ("meta.fingerprints", meta.fingerprints.is_some()),
            ("meta.dataset", meta.dataset.is_some()),
        ] {
            if present {
                errors.push(ConfigError::new(
                    &file.path,
                    field,
                    "a private suite keeps its task list, domains, fingerprints and dataset in the private overlay, not in this repository",
                ));
            }
        }
        return None;
    }
    let Some(list_name) = &meta.task_list else {
        if meta.domains.is_some() || meta.fingerprints.is_some() {
            errors.push(ConfigError::new(
                &file.path,
                "meta.task_list",
                "domains and fingerprints sit beside a task list; name one",
            ));
        }
        errors.push(ConfigError::new(&file.path, "meta.task_list", "a public suite names its task list"));
        return None;
    };
    let mut fixture = |name: &str, field: &str| -> Option<&str> {
        let found = fixtures.get(name).copied();
        if found.is_none() {
            errors.push(ConfigError::new(&file.path, field, format!("{TASK_LISTS}{name} does not exist")));
        }
        found
    };
    let names = parse_task_list(fixture(list_name, "meta.task_list")?);
    let domain_text = match &meta.domains {
        Some(name) => Some(fixture(name, "meta.domains")?),
        None => None,
    };
    if let Some(name) = &meta.fingerprints {
        fixture(name, "meta.fingerprints")?;
    }
    let domains = domain_text.and_then(|text| parse_domain_map(&file.path, text, errors));
    check_tasks(&file.path, "meta.task_list", &names, domains.as_ref(), errors);
    if names.is_empty() {
        errors.push(ConfigError::new(&file.path, "meta.task_list", "the task list is empty"));
    }
    Some(SuiteTasks { names, domains })
}

/// A suite's dataset: an `owner/name` HF dataset at a full commit.
fn check_dataset(file: &str, field: &str, d: &SuiteDataset, errors: &mut Vec<ConfigError>) {
    let key = |k: &str| if field.is_empty() { k.to_string() } else { format!("{field}.{k}") };
    let parts: Vec<&str> = d.repo_id.split('/').collect();
    let name_ok = |p: &str| {
        !p.is_empty()
            && p.len() <= 96
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && !p.starts_with('.')
    };
    if parts.len() != 2 || !parts.iter().all(|p| name_ok(p)) {
        errors.push(ConfigError::new(
            file,
            key("repo_id"),
            format!("`{}` is not an HF dataset id (owner/name)", d.repo_id),
        ));
    }
    if !is_hex(&d.revision, 40, 40) {
        errors.push(ConfigError::new(
            file,
            key("revision"),
            "must be a full 40-hex commit: a run's held-out tasks never move",
        ));
    }
    if d.path.starts_with('/') || d.path.split('/').any(|p| p == "..") {
        errors.push(ConfigError::new(file, key("path"), "must be a relative folder of the dataset"));
    }
}

/// The overlay holds `suites/{id}/tasks.txt`, and optionally `suites/{id}/domains.json` and
/// `suites/{id}/dataset.toml` (`repo_id`, `revision`, `path`), for each private suite.
/// A benchmark file's header and, for a public one, its environments.
fn read_benchmark(
    file: &SourceFile,
    b: crate::openenv::benchmark::BenchmarkFile,
    errors: &mut Vec<ConfigError>,
) -> Option<crate::openenv::benchmark::Benchmark> {
    use crate::openenv::benchmark::{check_environments, check_header, Benchmark};
    let mut problems = check_header(&b.benchmark);
    let environments = match (b.benchmark.private, b.environments.is_empty()) {
        (true, false) => {
            problems.push((
                "environments".into(),
                "a private benchmark's environments live in the private overlay, never here".into(),
            ));
            Vec::new()
        }
        (false, true) => {
            problems.push(("environments".into(), "a public benchmark lists its environments".into()));
            Vec::new()
        }
        _ => check_environments(&b.environments).unwrap_or_else(|p| {
            problems.extend(p);
            Vec::new()
        }),
    };
    let ok = problems.is_empty();
    errors.extend(problems.into_iter().map(|(field, why)| ConfigError::new(&file.path, field, why)));
    ok.then_some(Benchmark { header: b.benchmark, environments })
}

/// The overlay's `benchmarks/{id}.toml`: a private benchmark's environments.
fn apply_benchmark_overlay(
    benchmarks: &mut BTreeMap<String, crate::openenv::benchmark::Benchmark>,
    overlay: &[SourceFile],
    errors: &mut Vec<ConfigError>,
) {
    use crate::openenv::benchmark::{check_environments, OverlayFile};
    for file in overlay {
        let Some(("benchmarks", id)) = toml_location(&file.path) else {
            continue;
        };
        let origin = format!("overlay:{}", file.path);
        let Some(benchmark) = benchmarks.get_mut(id) else {
            errors.push(ConfigError::new(origin, "", "no benchmark with this id in configs/benchmarks/"));
            continue;
        };
        if !benchmark.header.private {
            errors.push(ConfigError::new(
                origin,
                "",
                "the overlay is for private benchmarks; this one is public",
            ));
            continue;
        }
        let Some(o) = parse::<OverlayFile>(file, errors) else {
            continue;
        };
        match check_environments(&o.environments) {
            Ok(envs) => benchmark.environments = envs,
            Err(p) => errors.extend(p.into_iter().map(|(f, why)| ConfigError::new(&origin, f, why))),
        }
    }
}

fn apply_overlay(
    suites: &mut BTreeMap<String, Suite>,
    overlay: &[SourceFile],
    errors: &mut Vec<ConfigError>,
) {
    let mut by_suite: BTreeMap<&str, BTreeMap<&str, &SourceFile>> = BTreeMap::new();
    for file in overlay {
        let Some(rest) = file.path.strip_prefix("suites/") else {
            continue;
        };
        let Some((suite_id, name)) = rest.split_once('/') else {
            continue;
        };
        by_suite.entry(suite_id).or_default().insert(name, file);
    }
    for (suite_id, files) in by_suite {
        let origin = format!("overlay:suites/{suite_id}/");
        let Some(suite) = suites.get_mut(suite_id) else {
            errors.push(ConfigError::new(origin, "", "no suite with this id in configs/suites/"));
            continue;
        };
        if !suite.meta.private {
            errors.push(ConfigError::new(
                origin,
                "",
                "the overlay is for private suites; this one is public",
            ));
            continue;
        }
        let Some(list) = files.get("tasks.txt") else {
            errors.push(ConfigError::new(
                origin,
                "tasks.txt",
                "a private suite's overlay needs its task list",
            ));
            continue;
        };
        let names = parse_task_list(&list.contents);
        let domains = files.get("domains.json").and_then(|f| parse_domain_map(&f.path, &f.contents, errors));
        check_tasks(&list.path, "tasks.txt", &names, domains.as_ref(), errors);
        suite.tasks = Some(SuiteTasks { names, domains });
        if let Some(file) = files.get("dataset.toml") {
            let origin = format!("overlay:{}", file.path);
            match toml::from_str::<SuiteDataset>(&file.contents) {
                Ok(d) => {
                    check_dataset(&origin, "", &d, errors);
                    suite.dataset = Some(d);
                }
                Err(e) => errors.push(ConfigError::new(origin, "", e.message().to_string())),
            }
        }
    }
}

/// Binds a challenge file to the registry: its header, its compute against its recipe, and the
/// serving layout against its model, each checked in the order configs/README.md documents them;
/// `None` (with the errors pushed) when anything disagrees.
fn bind_challenge(
    registry: &Registry,
    path: String,
    spec: ChallengeFile,
    errors: &mut Vec<ConfigError>,
) -> Option<Challenge> {
    let before = errors.len();
    let (model, method) = check_header(registry, &path, &spec, errors)?;
    check_compute(&path, &spec.compute, method, errors);
    let serving = &method.meta.serving;
    let method_file = format!("methods/{}.toml", method.method.id);
    for (field, reason) in serving::check_layout(
        &model.meta.serving,
        serving,
        method.rollout.context_tokens,
        method.rollout.completion_tokens,
    ) {
        errors.push(ConfigError::new(
            &method_file,
            field,
            format!("{reason} (serving model `{}` for challenge `{}`)", model.model.id, spec.challenge.id),
        ));
    }
    if errors.len() > before {
        return None;
    }
    let serving = ServingLayout {
        flavor: serving.flavor.clone(),
        gpus: spec.compute.gpus,
        vllm_gpus: serving.vllm_gpus,
        trainer_gpus: serving.trainer_gpus,
        tensor_parallel: serving.tensor_parallel,
        max_context_tokens: serving.max_context_tokens,
    };
    // `check_id` refused a malformed id above, so this parse holds.
    let id = crate::ids::ChallengeId::parse(&spec.challenge.id).ok()?;
    Some(Challenge { id, file_path: path, spec, serving })
}

/// `[challenge]` and `[pipeline]`: the pause reason, the pin, and the suites, model and recipe it
/// names; the model and recipe when both exist.
fn check_header<'r>(
    registry: &'r Registry,
    path: &str,
    spec: &ChallengeFile,
    errors: &mut Vec<ConfigError>,
) -> Option<(&'r ModelFile, &'r MethodFile)> {
    let header = &spec.challenge;
    let mut err = |field: &str, reason: String| errors.push(ConfigError::new(path, field, reason));
    if header.runs_paused.as_deref().is_some_and(|r| r.trim().is_empty()) {
        err("challenge.runs_paused", "give the reason runs are paused, or leave it out".into());
    }
    if !is_hex(&spec.pipeline.commit, 40, 40) {
        err("pipeline.commit", "the pipeline pin must be a full 40-hex commit".into());
    }
    if header.suites.is_empty() {
        err("challenge.suites", "a challenge scores on at least one suite".into());
    }
    for suite in &header.suites {
        if !registry.suites.contains_key(suite) {
            err("challenge.suites", format!("no suite `{suite}` in configs/suites/"));
        }
    }
    let model = registry.models.get(&header.model);
    if model.is_none() {
        err("challenge.model", format!("no model `{}` in configs/models/", header.model));
    }
    let method = registry.methods.get(&header.method);
    if method.is_none() {
        err("challenge.method", format!("no method `{}` in configs/methods/", header.method));
    }
    model.zip(method)
}

/// `[compute]` against the recipe's evaluation and serving: trials, sandboxes, GPUs and their
/// layout, price, wall time, one node, attempts.
fn check_compute(path: &str, compute: &Compute, method: &MethodFile, errors: &mut Vec<ConfigError>) {
    let mut err = |field: &str, reason: String| errors.push(ConfigError::new(path, field, reason));
    let recipe = &method.method.id;
    if compute.eval_trials != method.eval.trials {
        err(
            "compute.eval_trials",
            format!(
                "{} disagrees with recipe `{recipe}` (eval.trials = {})",
                compute.eval_trials, method.eval.trials
            ),
        );
    }
    if compute.sandbox_concurrency != method.eval.sandbox_concurrency {
        err(
            "compute.sandbox_concurrency",
            format!(
                "{} disagrees with recipe `{recipe}` (eval.sandbox_concurrency = {})",
                compute.sandbox_concurrency, method.eval.sandbox_concurrency
            ),
        );
    }
    let serving = &method.meta.serving;
    let layout = &compute.layout;
    let sum = layout.vllm_gpus + layout.trainer_gpus;
    if compute.gpus != sum {
        err(
            "compute.gpus",
            format!(
                "{} disagrees with [compute.layout] (vllm_gpus {} + trainer_gpus {} = {sum})",
                compute.gpus, layout.vllm_gpus, layout.trainer_gpus
            ),
        );
    }
    if let Some(flavor_gpus) = serving::flavor_gpus(&serving.flavor).filter(|g| *g != compute.gpus) {
        err(
            "compute.gpus",
            format!(
                "{} disagrees with recipe `{recipe}` flavor `{}` ({flavor_gpus} GPUs)",
                compute.gpus, serving.flavor
            ),
        );
    }
    if layout.vllm_gpus != serving.vllm_gpus || layout.trainer_gpus != serving.trainer_gpus {
        err(
            "compute.layout",
            format!(
                "vllm_gpus {} / trainer_gpus {} disagree with recipe `{recipe}` [meta.serving] ({} / {})",
                layout.vllm_gpus, layout.trainer_gpus, serving.vllm_gpus, serving.trainer_gpus
            ),
        );
    }
    if compute.hourly_price_usd.is_some_and(|p| !(p.is_finite() && p > 0.0)) {
        err("compute.hourly_price_usd", "must be a positive number".into());
    }
    if compute.max_wall_s == 0 {
        err("compute.max_wall_s", "must be positive".into());
    }
    // One HF job on one node runs the whole pipeline: the job script has no multi-node launcher.
    if compute.nodes != 1 {
        err("compute.nodes", format!("{}: a run is one job on one node", compute.nodes));
    }
    if compute.attempts == Some(0) {
        err("compute.attempts", "must be at least 1 (the job's first attempt)".into());
    }
}

/// The configuration files the repository ships (`configs/`), for tests across the crate.
#[cfg(test)]
pub(crate) fn shipped_files() -> Vec<SourceFile> {
    [
        ("challenges/openenv-9b.toml", include_str!("../../../configs/challenges/openenv-9b.toml")),
        ("models/qwen3.5-9b.toml", include_str!("../../../configs/models/qwen3.5-9b.toml")),
        ("methods/openenv-v1.toml", include_str!("../../../configs/methods/openenv-v1.toml")),
        ("suites/openenv-heldout.toml", include_str!("../../../configs/suites/openenv-heldout.toml")),
        ("arena.toml", include_str!("../../../configs/arena.toml")),
        ("benchmarks/openenv-bench.toml", include_str!("../../../configs/benchmarks/openenv-bench.toml")),
    ]
    .into_iter()
    .map(|(path, text)| SourceFile::new(path, text))
    .collect()
}

/// `shipped_files()` with the one at `path` edited.
#[cfg(test)]
pub(crate) fn shipped_files_with(path: &str, edit: impl Fn(&str) -> String) -> Vec<SourceFile> {
    shipped_files()
        .into_iter()
        .map(|f| if f.path == path { SourceFile::new(&f.path, edit(&f.contents)) } else { f })
        .collect()
}

#[cfg(test)]
mod tests;
