use super::*;
use crate::runs::Stage;

fn stage_of_log_line_str(line: &str) -> Option<&'static str> {
    stage_of_log_line(line).map(Stage::as_str)
}

const LIMITS: Limits = Limits { stall_s: 600, scheduling_s: 1800, relay_grace_s: 120 };

fn facts(job_stage: &str) -> Facts {
    Facts {
        state: RunState::Running,
        stage: Stage::parse("training"),
        relay: RelayState::Connected,
        relay_seen_epoch: Some(10_000),
        log_seen_epoch: Some(9_990),
        log_stage: Stage::parse("training"),
        gpus_idle_since: None,
        now: 10_010,
        job: Job {
            stage: job_stage.into(),
            message: None,
            created_epoch: 1_000,
            started_epoch: Some(1_100),
            has_results: None,
            pipeline_error: None,
        },
    }
}

#[test]
fn a_healthy_running_run_is_left_alone() {
    assert_eq!(decide(&facts("RUNNING"), LIMITS), None);
}

#[test]
fn completed_means_scored_only_with_results() {
    let mut f = facts("COMPLETED");
    f.job.has_results = Some(true);
    let d = decide(&f, LIMITS).unwrap();
    assert_eq!(
        (d.state, d.settle, d.stage.map(Stage::as_str)),
        (RunState::Scored, Some(Settle::AtDuration), Some("collect"))
    );
    f.job.has_results = Some(false);
    let d = decide(&f, LIMITS).unwrap();
    assert_eq!(d.state, RunState::Failed);
    assert!(d.reason.unwrap().contains("the pipeline exited without a result"));
}

#[test]
fn errors_fail_with_hfs_message_and_name_platform_faults() {
    let mut f = facts("ERROR");
    f.job.message = Some("NCCL error: unhandled system error".into());
    let d = decide(&f, LIMITS).unwrap();
    assert_eq!(d.state, RunState::Failed);
    assert!(d.platform_fault);
    assert!(d
        .reason
        .as_deref()
        .unwrap()
        .contains("at stage training, before the pipeline published anything: NCCL error"));
    f.job.message = Some("Job timeout".into());
    let d = decide(&f, LIMITS).unwrap();
    assert!(d.reason.unwrap().contains("hit its timeout at stage training"));
    assert!(!d.platform_fault);
    f.job.message = Some("Only 3 verified trajectories; required 8".into());
    assert!(!decide(&f, LIMITS).unwrap().platform_fault, "the collection's own making");
}

#[test]
fn a_published_failure_gives_the_pipelines_own_reason_and_a_killed_job_hfs() {
    let mut f = facts("ERROR");
    f.job.message = Some("Job failed with exit code 1".into());
    f.job.pipeline_error =
        Some("RuntimeError: OpenCode evaluation contains agent or verifier errors (3 > 2 tolerated)".into());
    let d = decide(&f, LIMITS).unwrap();
    assert_eq!(
        d.reason.as_deref(),
        Some("the pipeline failed at stage training: RuntimeError: OpenCode evaluation contains agent or verifier errors (3 > 2 tolerated)")
    );
    f.job.pipeline_error = None;
    f.job.message = Some("Job failed with signal 9".into());
    let d = decide(&f, LIMITS).unwrap();
    assert!(d
        .reason
        .as_deref()
        .unwrap()
        .contains("before the pipeline published anything: Job failed with signal 9"));
}

#[test]
fn canceled_jobs_are_priced_to_their_last_log_line_or_released() {
    let d = decide(&facts("CANCELED"), LIMITS).unwrap();
    assert_eq!((d.state, d.settle), (RunState::Canceled, Some(Settle::UpToLastLog)));
    let mut never = facts("CANCELED");
    never.job.started_epoch = None;
    assert_eq!(decide(&never, LIMITS).unwrap().settle, Some(Settle::Release));
}

#[test]
fn silence_past_the_limit_fails_the_run_and_cancels_the_job() {
    let mut f = facts("RUNNING");
    f.now = 10_000 + 601;
    let d = decide(&f, LIMITS).unwrap();
    assert_eq!(d.state, RunState::Failed);
    assert!(d.cancel_job);
    assert!(d
        .reason
        .as_deref()
        .unwrap()
        .contains("no heartbeat and no new log line for 10 min at stage training"));
    // A fresh log line is enough to keep it alive while the relay is down.
    f.relay = RelayState::Gone;
    f.log_seen_epoch = Some(f.now - 5);
    assert_eq!(decide(&f, LIMITS), None);
}

#[test]
fn a_heartbeating_relay_keeps_a_silent_run_alive_and_idle_gpus_stall_one_without() {
    // A 20-minute evaluation prints nothing; the relay's heartbeats keep coming.
    let mut f = facts("RUNNING");
    f.log_seen_epoch = Some(10_000);
    f.now = 10_000 + 1_200;
    f.relay_seen_epoch = Some(f.now - 15);
    f.gpus_idle_since = Some(10_000);
    assert_eq!(decide(&f, LIMITS), None, "heartbeating: never stalled");
    // Without the relay, the log's silence decides, at the challenge's limit.
    f.relay = RelayState::Gone;
    f.relay_seen_epoch = Some(9_000);
    f.gpus_idle_since = None;
    let long = Limits { stall_s: 3_300, ..LIMITS };
    assert_eq!(decide(&f, long), None, "within the challenge's silence limit");
    let d = decide(&f, LIMITS).unwrap();
    assert!(d.reason.unwrap().contains("no heartbeat and no new log line for 20 min"));
    // Log lines keep coming, but the GPUs have sat idle through the limit.
    f.log_seen_epoch = Some(f.now - 5);
    f.gpus_idle_since = Some(f.now - 700);
    let d = decide(&f, LIMITS).unwrap();
    assert!(d.cancel_job);
    assert!(d
        .reason
        .unwrap()
        .contains("the job's GPUs sat idle for 11 min at stage training with no heartbeat"));
}

#[test]
fn stuck_in_scheduling_is_canceled_and_released() {
    let mut f = facts("SCHEDULING");
    f.state = RunState::Queued;
    f.job.started_epoch = None;
    f.now = f.job.created_epoch + 1801;
    let d = decide(&f, LIMITS).unwrap();
    assert_eq!((d.state, d.cancel_job, d.settle), (RunState::Failed, true, Some(Settle::Release)));
    assert!(d.reason.unwrap().contains("SCHEDULING for 30 min"));
    f.now = f.job.created_epoch + 100;
    assert_eq!(decide(&f, LIMITS), None);
}

#[test]
fn updating_is_running_not_scheduling() {
    // huggingface_hub counts UPDATING as active: past the scheduling limit it is not "never
    // started", and it is followed as a running job is.
    let mut f = facts("UPDATING");
    f.now = f.job.created_epoch + 1801;
    f.log_seen_epoch = Some(f.now - 10);
    assert_eq!(decide(&f, LIMITS), None);
    let mut s = facts("SCHEDULING");
    s.now = f.now;
    assert!(decide(&s, LIMITS).is_some(), "SCHEDULING that long is canceled");
}

#[test]
fn logs_move_the_stage_when_the_relay_missed_it_and_running_starts_a_queued_run() {
    let mut f = facts("RUNNING");
    f.log_stage = Stage::parse("heldout");
    let d = decide(&f, LIMITS).unwrap();
    assert_eq!(
        (d.state, d.stage.map(Stage::as_str), d.event.0.as_str()),
        (RunState::Running, Some("heldout"), "logs")
    );
    let mut q = facts("RUNNING");
    q.state = RunState::Queued;
    q.stage = None;
    q.log_stage = None;
    let d = decide(&q, LIMITS).unwrap();
    assert_eq!((d.state, d.stage.map(Stage::as_str)), (RunState::Running, Some("setup")));
}

#[test]
fn log_lines_name_their_stage() {
    assert_eq!(
        stage_of_log_line_str("[posttrainarena] baseline_eval: bench eval run --tasks-dir x"),
        Some("baseline")
    );
    assert_eq!(stage_of_log_line_str("2026 [posttrainarena] grpo_gate_eval: x"), Some("gate"));
    assert_eq!(
        stage_of_log_line_str("[posttrainarena] grpo_rollout_000004_000001: bench eval run"),
        Some("training")
    );
    assert_eq!(
        stage_of_log_line_str("[posttrainarena] posttrain_eval.tb2.t02: bench eval run"),
        Some("heldout")
    );
    assert_eq!(stage_of_log_line_str("[arena-job] setup: starting vllm"), Some("setup"));
    assert_eq!(
        stage_of_log_line_str("[posttrainarena] final_eval: x"),
        None,
        "a step the pipeline never prints"
    );
    assert_eq!(stage_of_log_line_str("plain output"), None);
}

#[test]
fn a_relay_not_heard_from_within_its_grace_is_gone() {
    assert_eq!(relay_now(RelayState::Connected, Some(100), 150, 60), RelayState::Connected);
    assert_eq!(relay_now(RelayState::Connected, Some(100), 161, 60), RelayState::Gone);
    assert_eq!(relay_now(RelayState::Reconnecting, Some(100), 161, 60), RelayState::Gone);
    assert_eq!(relay_now(RelayState::None, None, 1_000, 60), RelayState::None);
}

#[test]
fn relay_messages_are_checked() {
    let m = |seq, kind, step: Option<&str>| RelayMessage {
        seq,
        kind,
        step: step.map(String::from),
        stage: None,
        detail: None,
        passed: None,
        total: None,
        timeouts: None,
        errors: None,
        done: None,
        planned: None,
        metrics: None,
    };
    assert!(m(1, RelayKind::Step, Some("baseline_eval.tb2.t02")).check().is_ok());
    assert_eq!(
        m(1, RelayKind::Step, Some("baseline_eval.tb2.t02")).stage().map(Stage::as_str),
        Some("baseline")
    );
    assert_eq!(m(1, RelayKind::Step, Some("setup")).stage().map(Stage::as_str), Some("setup"));
    assert!(m(1, RelayKind::Eval, Some("grpo_gate_eval")).check().is_ok());
    assert!(m(1, RelayKind::Eval, Some("snapshot_train_tasks")).check().is_err(), "not an evaluation");
    assert!(m(0, RelayKind::Heartbeat, None).check().is_err());
    assert!(m(2, RelayKind::Step, None).check().is_err());
    assert!(m(2, RelayKind::Step, Some("final_eval")).check().is_err());
    assert!(m(2, RelayKind::Progress, None).check().is_err());
    assert!(RelayMessage { done: Some(3), planned: Some(10), ..m(3, RelayKind::Progress, None) }
        .check()
        .is_ok());
    // TRL's numbers at an optimizer step: the step from 1, some finite numbers.
    let loss = |v: f64| Some(crate::training::TrainMetrics { loss: Some(v), ..Default::default() });
    let metrics = m(4, RelayKind::Metrics, None);
    assert!(RelayMessage { done: Some(1), metrics: loss(0.5), ..metrics.clone() }.check().is_ok());
    assert_eq!(
        RelayMessage { done: Some(1), metrics: loss(0.5), ..metrics.clone() }.stage(),
        Some(Stage::Training)
    );
    assert!(RelayMessage { done: Some(0), metrics: loss(0.5), ..metrics.clone() }.check().is_err());
    assert!(RelayMessage { done: Some(2), metrics: loss(f64::NAN), ..metrics.clone() }.check().is_err());
    assert!(RelayMessage { done: Some(2), metrics: Some(Default::default()), ..metrics.clone() }
        .check()
        .is_err());
    assert!(RelayMessage { done: None, metrics: loss(0.5), ..metrics }.check().is_err());
}

fn ev(epoch: i64, kind: &str, stage: &str) -> StageEvent {
    StageEvent {
        epoch,
        kind: kind.into(),
        stage: Some(stage.into()),
        passed: None,
        total: None,
        timeouts: None,
        errors: None,
    }
}

#[test]
fn the_timeline_marks_done_running_failed_and_pending() {
    let mut events = vec![ev(10, "step", "setup"), ev(20, "step", "snapshot"), ev(25, "step", "snapshot")];
    // Two evaluation cells of one stage add up.
    events.push(StageEvent { passed: Some(1), total: Some(4), ..ev(30, "eval", "snapshot") });
    events.push(StageEvent { passed: Some(2), total: Some(5), ..ev(35, "eval", "snapshot") });
    events.push(ev(40, "step", "baseline"));
    let t = timeline(&events, RunState::Running, Stage::parse("baseline"), Purpose::Collection);
    let status: Vec<&str> = t.iter().map(|s| s.status.as_str()).collect();
    assert_eq!(status, ["done", "done", "running", "pending", "pending", "pending", "pending"]);
    assert_eq!(
        (t[1].started_epoch, t[1].finished_epoch, t[1].passed, t[1].total),
        (Some(20), Some(40), Some(3), Some(9))
    );
    let failed = timeline(&events, RunState::Failed, Stage::parse("baseline"), Purpose::Collection);
    assert_eq!(failed[2].status, "failed");
    // Stages known only from the log (no relay events) still show how far the run got.
    let from_logs = timeline(&[], RunState::Running, Stage::parse("gate"), Purpose::Collection);
    let status: Vec<&str> = from_logs.iter().map(|s| s.status.as_str()).collect();
    assert_eq!(status, ["done", "done", "done", "running", "pending", "pending", "pending"]);
    let scored = timeline(&[], RunState::Scored, Stage::parse("collect"), Purpose::Collection);
    assert!(scored.iter().all(|s| s.status == "done"));
}

#[test]
fn a_baseline_measurement_shows_only_its_own_stages() {
    let events = vec![ev(10, "step", "setup"), ev(20, "step", "baseline")];
    let t = timeline(&events, RunState::Running, Stage::parse("baseline"), Purpose::Baseline);
    let shown: Vec<(&str, &str)> = t.iter().map(|s| (s.stage.as_str(), s.status.as_str())).collect();
    assert_eq!(
        shown,
        [("setup", "done"), ("snapshot", "done"), ("baseline", "running"), ("collect", "pending")]
    );
    let scored = timeline(&events, RunState::Scored, Stage::parse("collect"), Purpose::Baseline);
    assert_eq!(scored.len(), 4);
    assert!(scored.iter().all(|s| s.status == "done"));
}

#[test]
fn jobs_are_priced_per_started_minute() {
    assert_eq!(cost_cents(10.0, 0.0), 0);
    assert_eq!(cost_cents(10.0, 1.0), 17, "one started minute of $10/h");
    assert_eq!(cost_cents(10.0, 3600.0), 1000);
    assert_eq!(cost_cents(40.0, 14_400.0), 16_000);
}
