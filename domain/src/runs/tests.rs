use super::*;
use crate::registry::Registry;

/// The shipped challenge, unpaused on HF Jobs (its flavor's price from `arena.toml`).
fn registry(edit: impl Fn(String) -> String) -> Registry {
    let challenge = include_str!("../../../configs/challenges/openenv-9b.toml");
    let start = challenge.find("runs_paused = ").unwrap();
    let end = start + challenge[start..].find('\n').unwrap() + 1;
    let unpaused = format!("{}{}", &challenge[..start], &challenge[end..])
        .replace("provider = \"nebius\"", "provider = \"hf-jobs\"")
        .replace("provider_status = \"planned\"", "provider_status = \"connected\"");
    let files = crate::registry::shipped_files_with("challenges/openenv-9b.toml", |_| edit(unpaused.clone()));
    Registry::load(&files, &[]).unwrap()
}

struct World {
    registry: Registry,
    heldout: BTreeSet<String>,
    job_problems: Vec<String>,
}

impl World {
    fn new() -> World {
        World {
            registry: registry(|s| s),
            heldout: ["sealed-task".to_string()].into(),
            job_problems: Vec::new(),
        }
    }

    fn facts(&self) -> Facts<'_> {
        let challenge = self.registry.challenge("openenv-9b").unwrap();
        let allocation = crate::catalog::allocation(&self.registry, challenge);
        Facts {
            challenge,
            allocation: allocation
                .usd
                .map(|u| (u * 100.0).round() as i64)
                .ok_or(Unpriced(allocation.reason.unwrap_or_default())),
            caller: Some(Caller { id: "u-alice".into(), name: "alice".into(), editor: false }),
            collection: Collection {
                id: "env-1".into(),
                author_id: "u-alice".into(),
                author: "alice".into(),
                eligible_tasks: vec!["expense-report".into()],
                excluded_task_count: 1,
            },
            last_counted_epoch: None,
            now_epoch: 1_000_000,
            active_run: None,
            remaining_cents: 500_000,
            heldout_names: &self.heldout,
            job_problems: self.job_problems.clone(),
        }
    }
}

fn oks(p: &Preflight) -> Vec<Option<bool>> {
    p.checks.iter().map(|c| c.ok).collect()
}

#[test]
fn everything_in_order_allows_and_quotes_the_flavors_price() {
    let w = World::new();
    let f = w.facts();
    let p = preflight(&f);
    assert!(p.allowed, "{:#?}", p.checks);
    let names: Vec<&str> = p.checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            check::CHALLENGE_OPEN,
            check::SIGNED_IN,
            check::AUTHOR_OR_EDITOR,
            check::DAILY_LIMIT,
            check::LAYOUT,
            check::NO_ACTIVE_JOB,
            check::CAP,
            check::ELIGIBLE,
            check::NAMES
        ]
    );
    // h200x8 at $40/h for the 4 h hard timeout.
    assert_eq!(p.max_compute_usd, Some(160.0));
    assert_eq!((p.eligible_tasks, p.excluded_task_count), (1, 1));
    assert!(p.checks[4].detail.contains("h200x8"), "{}", p.checks[4].detail);
    assert_eq!(refusal(&p, &f), None);
}

#[test]
fn each_failure_refuses_with_its_code() {
    let w = World::new();
    type Edit = Box<dyn Fn(&mut Facts)>;
    let cases: Vec<(Edit, ErrorCode)> = vec![
        (Box::new(|f| f.caller = None), ErrorCode::AuthRequired),
        (
            Box::new(|f| f.caller = Some(Caller { id: "u-bob".into(), name: "bob".into(), editor: false })),
            ErrorCode::NotAuthorOrEditor,
        ),
        (Box::new(|f| f.last_counted_epoch = Some(f.now_epoch - 3600)), ErrorCode::DailyRunLimit),
        (Box::new(|f| f.active_run = Some("run-x".into())), ErrorCode::AnotherRunActive),
        (Box::new(|f| f.remaining_cents = 15_999), ErrorCode::CapExceeded),
        (Box::new(|f| f.collection.eligible_tasks.clear()), ErrorCode::NoEligibleTasks),
        (
            Box::new(|f| f.collection.eligible_tasks.push("sealed-task".into())),
            ErrorCode::HeldoutNameCollision,
        ),
    ];
    for (edit, code) in cases {
        let mut f = w.facts();
        edit(&mut f);
        let p = preflight(&f);
        assert!(!p.allowed);
        let r = refusal(&p, &f).unwrap();
        assert_eq!(r.code, code, "{}", r.message);
    }
}

#[test]
fn the_daily_limit_says_when_the_next_run_fits() {
    let w = World::new();
    let mut f = w.facts();
    f.last_counted_epoch = Some(f.now_epoch - 3600);
    let r = refusal(&preflight(&f), &f).unwrap();
    assert_eq!(r.retry_after_s, Some(23 * 3600));
    // A day later it passes.
    f.last_counted_epoch = Some(f.now_epoch - DAILY_WINDOW_S);
    assert!(preflight(&f).allowed);
}

#[test]
fn an_editor_may_run_anyones_collection() {
    let w = World::new();
    let mut f = w.facts();
    f.caller = Some(Caller { id: "u-eve".into(), name: "eve".into(), editor: true });
    assert!(preflight(&f).allowed);
}

#[test]
fn without_a_caller_the_ownership_check_cannot_run() {
    let w = World::new();
    let mut f = w.facts();
    f.caller = None;
    let p = preflight(&f);
    assert_eq!(oks(&p)[1..3], [Some(false), None]);
}

#[test]
fn a_paused_or_planned_challenge_fails_the_first_check_and_quotes_nothing_when_planned() {
    let paused =
        registry(|s| s.replace("[challenge]\n", "[challenge]\nruns_paused = \"waiting for the baseline\"\n"));
    let held = BTreeSet::new();
    let challenge = paused.challenge("openenv-9b").unwrap();
    let mut f = World::new().facts().clone_with(challenge, &held);
    let p = preflight(&f);
    assert_eq!(p.checks[0].ok, Some(false));
    assert!(p.checks[0].detail.contains("waiting for the baseline"));
    assert_eq!(refusal(&p, &f).unwrap().code, ErrorCode::ChallengeNotOpen);

    let planned = registry(|s| s.replace("provider_status = \"connected\"", "provider_status = \"planned\""));
    let challenge = planned.challenge("openenv-9b").unwrap();
    f = f.clone_with(challenge, &held);
    f.allocation = Err(Unpriced("provider is planned".into()));
    let p = preflight(&f);
    assert_eq!(p.checks[0].ok, Some(false));
    assert!(p.checks[0].detail.contains("planned"));
    assert_eq!(p.max_compute_usd, None);
    assert_eq!(p.checks[6].ok, None, "no quote, so the cap cannot be checked");
}

impl<'a> Facts<'a> {
    fn clone_with<'b>(&self, challenge: &'b Challenge, heldout: &'b BTreeSet<String>) -> Facts<'b> {
        Facts {
            challenge,
            allocation: self.allocation.clone(),
            caller: self.caller.clone(),
            collection: self.collection.clone(),
            last_counted_epoch: self.last_counted_epoch,
            now_epoch: self.now_epoch,
            active_run: self.active_run.clone(),
            remaining_cents: self.remaining_cents,
            heldout_names: heldout,
            job_problems: Vec::new(),
        }
    }
}

#[test]
fn a_job_that_cannot_start_fails_the_layout_check_naming_why() {
    let mut w = World::new();
    w.job_problems =
        vec!["the arena has no value for the job secret(s) DAYTONA_API_KEY the pipeline needs".into()];
    let f = w.facts();
    let p = preflight(&f);
    assert!(!p.allowed);
    let layout = p.checks.iter().find(|c| c.name == check::LAYOUT).unwrap();
    assert_eq!(layout.ok, Some(false));
    assert!(layout
        .detail
        .contains("the job cannot start: the arena has no value for the job secret(s) DAYTONA_API_KEY"));
    let r = refusal(&p, &f).unwrap();
    assert_eq!(r.code, ErrorCode::LayoutInvalid);
    assert!(r.message.contains("DAYTONA_API_KEY"));
}

#[test]
fn a_launch_request_is_parsed() {
    let ok = Launch::parse(RunRequest {
        request_id: "alice-run-001".into(),
        environment_id: "env-1".into(),
        agent_id: Some("alice-agent".into()),
    })
    .unwrap();
    assert_eq!(ok.body_key("openenv-9b"), "openenv-9b\nenv-1\nalice-agent");
    for (rid, env) in [("short", "env-1"), ("alice-run-001", " ")] {
        let req = RunRequest { request_id: rid.into(), environment_id: env.into(), agent_id: None };
        assert!(Launch::parse(req).is_err());
    }
}

#[test]
fn platform_faults_are_named_by_their_reason() {
    for reason in [
        "NCCL error: unhandled system error",
        "vLLM failed to start",
        "Daytona sandbox quota",
        "ACP initialize timed out",
        "HF answered 402 Payment Required",
    ] {
        assert!(is_platform_fault(reason), "{reason}");
    }
    assert!(!is_platform_fault("Only 3 verified trajectories; required 8"));
    // A run id's hex holding the digits is the collection's failure still.
    let missing =
        "publish-run exited with 1: FileNotFoundError: runs/run-6dfc60ff6d01402d/reports/score.json";
    assert!(!is_platform_fault(missing));
}

#[test]
fn states_round_trip_and_count() {
    for s in [RunState::Queued, RunState::Running, RunState::Scored, RunState::Failed, RunState::Canceled] {
        assert_eq!(RunState::parse(s.as_str()), Some(s));
    }
    assert!(RunState::Scored.counts() && !RunState::Failed.counts() && !RunState::Canceled.counts());
}

#[test]
fn a_baseline_measurement_ignores_paused_runs_but_needs_an_editor_a_free_slot_and_the_cap() {
    let paused =
        registry(|s| s.replace("[challenge]\n", "[challenge]\nruns_paused = \"waiting for the baseline\"\n"));
    let challenge = paused.challenge("openenv-9b").unwrap();
    let allocation = crate::catalog::allocation(&paused, challenge).usd.map(|u| (u * 100.0).round() as i64);
    let editor = Caller { id: "u-ed".into(), name: "ed".into(), editor: true };
    let mut f = BaselineFacts {
        challenge,
        allocation: allocation.ok_or_else(|| Unpriced(String::new())),
        caller: Some(editor),
        active_run: None,
        remaining_cents: 500_000,
        job_problems: Vec::new(),
    };
    assert_eq!(baseline_refusal(&f), None, "paused runs wait for this measurement");
    let code = |f: &BaselineFacts| baseline_refusal(f).map(|r| r.code);
    f.caller = Some(Caller { id: "u-alice".into(), name: "alice".into(), editor: false });
    assert_eq!(code(&f), Some(ErrorCode::Forbidden));
    f.caller = None;
    assert_eq!(code(&f), Some(ErrorCode::AuthRequired));
    f.caller = Some(Caller { id: "u-ed".into(), name: "ed".into(), editor: true });
    f.active_run = Some("run-x".into());
    assert_eq!(code(&f), Some(ErrorCode::AnotherRunActive));
    f.active_run = None;
    f.remaining_cents = 1;
    assert_eq!(code(&f), Some(ErrorCode::CapExceeded));
    let planned = registry(|s| s.replace("provider_status = \"connected\"", "provider_status = \"planned\""));
    f.challenge = planned.challenge("openenv-9b").unwrap();
    assert_eq!(code(&f), Some(ErrorCode::ChallengeNotOpen));
}

#[test]
fn sealed_task_ids_are_redacted_from_what_anyone_reads() {
    let hidden: std::collections::BTreeSet<String> =
        ["sealed-bond-yield".to_string(), "t01".to_string()].into_iter().collect();
    assert_eq!(
        super::redact_tasks(
            "RuntimeError: task sealed-bond-yield failed (t01, t012, my-sealed-bond-yield)",
            &hidden
        ),
        "RuntimeError: task [a held-out task] failed ([a held-out task], t012, my-sealed-bond-yield)"
    );
    assert_eq!(super::redact_tasks("café sealed-bond-yield.", &hidden), "café [a held-out task].");
    assert_eq!(super::redact_tasks("nothing to hide", &Default::default()), "nothing to hide");
}

#[test]
fn an_event_says_what_happened_at_which_stage_and_who_said_so() {
    let e = |source: &str, kind: &str, stage: Option<&str>, detail: &str| {
        RunEvent::new("t".into(), source.into(), kind.into(), stage.map(String::from), detail.into())
    };
    let step = e("relay", "step", Some("baseline"), "baseline_eval.tb2.t02");
    assert_eq!(step.what, "Began baseline_eval.tb2.t02 in stage baseline");
    assert_eq!((step.by.as_str(), step.rest()), ("the job, over its relay", ""));
    let moved = e("logs", "stage", Some("heldout"), "the job's log shows stage heldout");
    assert_eq!(moved.what, "Moved on in stage heldout");
    assert_eq!(moved.by, "the job's log");
    let started = e("relay", "stage_started", Some("gate"), "");
    assert_eq!(started.what, "Stage started in stage gate");
    let failed = e("job status", "failed", Some("training"), "the HF job failed");
    assert_eq!((failed.what.as_str(), failed.rest()), ("Failed in stage training", "the HF job failed"));
    assert_eq!(e("launch", "requested", None, "x").what, "Run requested");
    assert_eq!(e("reconciler", "something_new", None, "").what, "something new");
}
