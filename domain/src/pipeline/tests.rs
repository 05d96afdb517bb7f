use super::bundle::{self, JobManifest};
use super::config::{self, TrainDataset};
use super::*;
use crate::registry::{Registry, SourceFile};
use crate::runs::Purpose;

/// The registry `dev/run` serves: the shipped files and the simulated local-demo challenge.
fn local() -> Registry {
    local_with("").unwrap()
}

/// `local()` with `extra` added to the local-demo challenge's file.
fn local_with(extra: &str) -> Result<Registry, crate::ConfigErrors> {
    let challenge = include_str!("../../../dev/local-challenge/challenges/local-demo.toml");
    let mut files = crate::registry::shipped_files();
    files.extend([
        SourceFile::new(
            "methods/local-demo-v1.toml",
            include_str!("../../../dev/local-challenge/methods/local-demo-v1.toml"),
        ),
        SourceFile::new(
            "suites/local-heldout.toml",
            include_str!("../../../dev/local-challenge/suites/local-heldout.toml"),
        ),
        SourceFile::new("challenges/local-demo.toml", format!("{challenge}\n{extra}")),
        SourceFile::new(
            "fixture/task-lists/local-heldout.txt",
            include_str!("../../../dev/local-challenge/fixture/task-lists/local-heldout.txt"),
        ),
    ]);
    Registry::load(&files, &[])
}

const RUN: &str = "run-0123456789abcdef";

fn train() -> TrainDataset {
    TrainDataset {
        repo_id: "benchflow/arena-runs".into(),
        revision: "1111111111111111111111111111111111111111".into(),
        path: format!("collections/{RUN}/envs"),
    }
}

fn toml_table(text: &str) -> toml::Table {
    toml::from_str(text).unwrap_or_else(|e| panic!("not TOML ({e}):\n{text}"))
}

#[test]
fn the_local_demo_config_is_the_fixture_written_from_the_reference() {
    let r = local();
    let c = config::compose(&r, r.challenge("local-demo").unwrap(), Some(&train())).unwrap();
    let composed = toml_table(&c.to_toml());
    let fixture = toml_table(include_str!("../../../tests/fixtures/pipeline/local-demo/config.toml"));
    assert_eq!(composed, fixture, "composed:\n{}", c.to_toml());
}

#[test]
fn every_key_composed_is_one_the_loader_reads() {
    let r = local();
    let c = config::compose(&r, r.challenge("local-demo").unwrap(), Some(&train())).unwrap();
    assert_eq!(keys::check(&toml_table(&c.to_toml())), Vec::<String>::new());
    // Every optional recipe number set: each lands in a real key too.
    let mut method = r.methods["local-demo-v1"].clone();
    let t = &mut method.training;
    t.lora_dropout = Some(0.0);
    t.gate_threshold = Some(0.1);
    t.generation_batch_size = Some(16);
    t.gradient_accumulation_steps = Some(16);
    t.task_sampler = Some("cover".into());
    t.rollout_failure_policy = Some("mask".into());
    t.seed = Some(7);
    method.rollout.sandbox_user = Some("none".into());
    method.eval.max_infra_error_fraction = Some(0.2);
    let mut r2 = r.clone();
    r2.methods.insert("local-demo-v1".into(), method);
    let c = config::compose(&r2, r2.challenge("local-demo").unwrap(), Some(&train())).unwrap();
    let table = toml_table(&c.to_toml());
    assert_eq!(keys::check(&table), Vec::<String>::new());
    let grpo = table["grpo"].as_table().unwrap();
    for (key, value) in [
        ("lora_dropout", toml::Value::Float(0.0)),
        ("threshold", toml::Value::Float(0.1)),
        ("generation_batch_size", toml::Value::Integer(16)),
        ("gradient_accumulation_steps", toml::Value::Integer(16)),
        ("task_sampler", toml::Value::String("cover".into())),
        ("rollout_failure_policy", toml::Value::String("mask".into())),
        ("seed", toml::Value::Integer(7)),
    ] {
        assert_eq!(grpo.get(key), Some(&value), "grpo.{key}");
    }
    assert_eq!(table["runtime"]["sandbox_user"].as_str(), Some("none"));
    assert_eq!(table["harness"]["max_infra_error_fraction"].as_float(), Some(0.2));
}

#[test]
fn the_key_table_refuses_what_the_loader_refuses() {
    let bad = toml_table(
        r#"
[model]
id = "m"
[harness]
agent = "opencode"
max_turns = 64
[recipe]
learning_rate = 1e-5
[evaluation]
trials = "three"
"#,
    );
    let problems = keys::check(&bad);
    assert!(
        problems.contains(&"harness.max_turns is not a key the pipeline reads".to_string()),
        "{problems:?}"
    );
    assert!(problems.contains(&"[recipe] is not a table the pipeline reads".to_string()), "{problems:?}");
    assert!(problems.contains(&"evaluation.trials must be a Int".to_string()), "{problems:?}");
    let missing = keys::check(&toml_table("[model]\nid = \"m\"\n"));
    assert!(missing.contains(&"Missing required [harness] table".to_string()), "{missing:?}");
}

#[test]
fn the_bundle_files_match_the_fixtures() {
    let r = local();
    let c = r.challenge("local-demo").unwrap();
    let manifest = JobManifest {
        artifact_repo: "benchflow/arena-runs".into(),
        config: "config.toml".into(),
        leaderboard_repo: "benchflow/arena-leaderboard".into(),
        model_repo: None,
        private_artifacts: true,
        private_model: true,
        run_id: RUN.into(),
        schema_version: 1,
        submission_id: "env-0a1b2c3d4e5f".into(),
        team_name: "alice".into(),
    };
    assert_eq!(
        String::from_utf8(manifest.to_json()).unwrap(),
        include_str!("../../../tests/fixtures/pipeline/local-demo/job.json")
    );
    let setup = bundle::setup(&r, c, RUN, Purpose::Collection);
    let fixture: bundle::JobSetup =
        serde_json::from_str(include_str!("../../../tests/fixtures/pipeline/local-demo/arena.json")).unwrap();
    assert_eq!(setup, fixture);
    let pipeline = config::compose(&r, c, Some(&train())).unwrap();
    let suites: Vec<(String, Vec<String>)> =
        config::eval_suites(&r, c).unwrap().into_iter().map(|(s, tasks)| (s.name, tasks)).collect();
    let files = bundle::files(&manifest, &pipeline, &setup, &["a".into(), "b".into()], &suites);
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "job.json",
            "config.toml",
            "arena.json",
            "task-lists/train_dataset.txt",
            "task-lists/eval_suite-local-heldout.txt"
        ]
    );
    assert_eq!(files[3].1, b"a\nb\n");
    let heldout = String::from_utf8(files[4].1.clone()).unwrap();
    assert_eq!(heldout.lines().count(), 12);
    assert!(heldout.starts_with("local-heldout-01\n"));
    // Nothing secret goes into a bundle.
    for (path, bytes) in &files {
        let text = String::from_utf8_lossy(bytes);
        assert!(!text.contains("HF_TOKEN") && !text.contains("DAYTONA_API_KEY"), "{path}");
    }
}

#[test]
fn a_baseline_bundle_trains_nothing() {
    let r = local();
    let c = config::compose(&r, r.challenge("local-demo").unwrap(), None).unwrap();
    let table = toml_table(&c.to_toml());
    assert!(!table.contains_key("train_dataset"));
    assert_eq!(table["eval_suites"].as_array().unwrap().len(), 1);
}

#[test]
fn the_secrets_follow_the_pipelines_default_list() {
    let r = local();
    let c = config::compose(&r, r.challenge("local-demo").unwrap(), Some(&train())).unwrap();
    let names: Vec<&str> = secrets::needs(&c).iter().map(|n| n.name).collect();
    // reference §1.4 / tests/test_recipe_v2.py: HF, Daytona, the five served-model variables.
    assert_eq!(
        names,
        [
            "HF_TOKEN",
            "DAYTONA_API_KEY",
            "BENCHFLOW_BASE_MODEL",
            "BENCHFLOW_ADAPTER_MODEL",
            "BENCHFLOW_PROVIDER_BASE_URL",
            "BENCHFLOW_PROVIDER_API_KEY",
            "TRL_VLLM_SERVER_BASE_URL"
        ]
    );
    assert_eq!(secrets::forwarded(&c), ["HF_TOKEN", "DAYTONA_API_KEY"]);
    let mut docker = c.clone();
    docker.runtime.sandbox = "docker".into();
    assert_eq!(secrets::forwarded(&docker), ["HF_TOKEN"]);
}

/// A challenge with a Trackio Space: its runs report there (`report_to = "trackio"`), the job is
/// told the Space, W&B's key is not asked for, and each run links its own view of the dashboard.
#[test]
fn a_challenge_with_a_trackio_space_reports_there() {
    let with = local_with;
    let r = with("[tracking]\ntrackio_space = \"BenchFlow/Arena_Runs.v2\"\n").unwrap();
    let challenge = r.challenge("local-demo").unwrap();
    let c = config::compose(&r, challenge, Some(&train())).unwrap();
    assert_eq!(c.tracking.report_to, "trackio");
    assert_eq!(secrets::forwarded(&c), ["HF_TOKEN", "DAYTONA_API_KEY"], "no W&B key for Trackio");
    let setup = bundle::setup(&r, challenge, RUN, Purpose::Collection);
    assert_eq!(setup.trackio_space.as_deref(), Some("BenchFlow/Arena_Runs.v2"));
    assert_eq!(bundle::setup(&r, challenge, RUN, Purpose::Baseline).trackio_space, None);
    assert_eq!(
        challenge.spec.tracking.as_ref().unwrap().dashboard_url(RUN),
        format!(
            "https://benchflow-arena-runs-v2.hf.space/?project=huggingface&runs={RUN}-grpo&sidebar=collapsed"
        )
    );
    let e = with("[tracking]\ntrackio_space = \"https://evil.example/x\"\n").unwrap_err();
    assert!(e.to_string().contains("tracking.trackio_space"), "{e}");
    assert!(with("[tracking]\nproject = \"x\"\n").is_err(), "unknown keys are refused");
    // W&B's key is asked for only when a run reports to W&B.
    let mut wandb = c.clone();
    wandb.tracking.report_to = "wandb".into();
    assert_eq!(secrets::forwarded(&wandb), ["HF_TOKEN", "DAYTONA_API_KEY", "WANDB_API_KEY"]);
}

#[test]
fn the_job_runs_the_script_with_uv_as_run_uv_job_would() {
    let cmd = job_command(&JobArgs {
        script_url: "https://arena.example/arena_job.py",
        script_sha256: "ab",
        bundle_repo: "benchflow/arena-runs",
        bundle_revision: "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00",
        bundle_path: "job-inputs/run-1",
        pipeline_ref: "bcbaffb58a19829d05fa483662c358e6ed5ba353",
    });
    assert_eq!(
        cmd.join(" "),
        "uv run --python 3.12 https://arena.example/arena_job.py --bundle-repo benchflow/arena-runs \
         --bundle-revision c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00 --bundle-path job-inputs/run-1 --posttrainarena-ref \
         bcbaffb58a19829d05fa483662c358e6ed5ba353 --script-sha256 ab"
    );
    // Read back from HF's record of the job, it names the run's bundle again.
    assert_eq!(
        read_job_command(&cmd),
        Some(JobCommandRead {
            run_id: "run-1".into(),
            bundle_repo: "benchflow/arena-runs".into(),
            bundle_revision: "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00".into(),
            script_sha256: "ab".into(),
        })
    );
    // Anything else is not a run's job: another command, a flag twice or missing, another path.
    let edit = |i: usize, to: &str| {
        let mut c = cmd.clone();
        c[i] = to.into();
        read_job_command(&c)
    };
    assert_eq!(edit(0, "python"), None);
    assert_eq!(edit(7, "--bundle-path"), None);
    assert_eq!(edit(10, "job-inputs/a/b"), None);
    assert_eq!(edit(10, "runs/run-1"), None);
    assert_eq!(edit(10, "job-inputs/"), None);
    assert_eq!(edit(10, "job-inputs/.."), None);
    // The bundle is read at its commit, nothing else: not a branch, nor a path out of the dataset.
    assert_eq!(edit(8, "main"), None);
    assert_eq!(edit(8, "../../../datasets/mallory/x/resolve/main"), None);
    assert_eq!(edit(8, "C0FFEE00C0FFEE00C0FFEE00C0FFEE00C0FFEE00"), None);
    assert_eq!(read_job_command(&cmd[..14]), None);
    assert_eq!(read_job_command(&[]), None);
}

#[test]
fn a_bundles_origin_is_read_back_and_old_bundles_have_none() {
    let r = local();
    let c = r.challenge("local-demo").unwrap();
    let mut setup = bundle::setup(&r, c, RUN, Purpose::Collection);
    let old: bundle::JobSetup = serde_json::from_slice(&serde_json::to_vec(&setup).unwrap()).unwrap();
    assert_eq!(old.origin, None);
    setup.origin = Some(bundle::RunOrigin {
        environment_id: Some("env-0a1b2c3d4e5f".into()),
        author: "alice".into(),
        author_id: "u-alice".into(),
        agent_id: None,
        request_key: "alice-run-1".into(),
        request_body: "{}".into(),
        flavor: "h200".into(),
        timeout_s: 3600,
        reserved_cents: 250,
        eligible_tasks: 3,
        excluded_task_count: 1,
        requested_at: "2026-12-02T05:00:00Z".into(),
        requested_epoch: 1_796_187_600,
    });
    let text = serde_json::to_string(&setup).unwrap();
    let read: bundle::JobSetup = serde_json::from_str(&text).unwrap();
    assert_eq!(read, setup);
    // What its signature covers reads back byte for byte, and names the run it is for.
    let signed = setup.signed_origin().unwrap();
    assert_eq!(read.signed_origin().unwrap(), signed);
    let mut other = read.clone();
    other.run_id = "run-other".into();
    assert_ne!(other.signed_origin().unwrap(), signed, "an origin copied into another run's bundle");
    let mut edited = read;
    edited.origin.as_mut().unwrap().reserved_cents = 1;
    assert_ne!(edited.signed_origin().unwrap(), signed);
    assert_eq!(old.signed_origin(), None);
}

#[test]
fn steps_map_to_the_guides_stages() {
    use steps::{parse_line, step, EvalArm, StepKind};
    let stage = |name: &str| step(name).map(|s| s.stage);
    // The names a Branch H run prints (reference §5.2), in order.
    for (name, want) in [
        ("snapshot_train_tasks", "snapshot"),
        ("snapshot_eval_tasks", "snapshot"),
        ("snapshot_eval-lhtb_tasks", "snapshot"),
        ("baseline_eval", "baseline"),
        ("baseline_eval.tb2.t02", "baseline"),
        ("baseline_eval.lhtb.t01", "baseline"),
        ("grpo_gate_eval", "gate"),
        ("grpo_rollout_000000_000000", "training"),
        ("grpo_rollout_000031_000063", "training"),
        ("posttrain_eval", "heldout"),
        ("posttrain_eval.lhtb.t02", "heldout"),
        ("compare_eval_lift", "collect"),
    ] {
        assert_eq!(stage(name).map(|s| s.as_str()), Some(want), "{name}");
    }
    // Names the pipeline never prints.
    for name in
        ["final_eval", "write_score_report", "start_model_server", "baseline_eval.t02", "grpo_rollout_1_2"]
    {
        assert_eq!(stage(name), None, "{name}");
    }
    assert_eq!(
        step("baseline_eval.lhtb.t03").unwrap().kind,
        StepKind::Eval { arm: EvalArm::Baseline, suite: Some("lhtb"), trial: 3 }
    );
    assert_eq!(
        step("baseline_eval").unwrap().kind,
        StepKind::Eval { arm: EvalArm::Baseline, suite: None, trial: 1 }
    );
    assert_eq!(
        step("grpo_rollout_000012_000003").unwrap().kind,
        StepKind::Rollout { global_step: 12, index: 3 }
    );
    let line = "[posttrainarena] baseline_eval: bench eval run --tasks-dir /tmp/x/data/eval --agent opencode";
    assert_eq!(parse_line(line).map(|s| s.stage.as_str()), Some("baseline"));
    assert_eq!(
        parse_line("[arena-job] setup: starting the model server").map(|s| s.stage.as_str()),
        Some("setup")
    );
    assert_eq!(parse_line("[arena-job] lunch: …"), None);
    assert_eq!(parse_line("INFO: baseline_eval: done"), None);
}
