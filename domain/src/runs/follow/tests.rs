use super::*;

const LIMITS: Limits = Limits { stall_s: 600, scheduling_s: 1800 };

fn facts(job_stage: &str) -> Facts {
    Facts {
        state: RunState::Running,
        stage: Some("training".into()),
        relay: RelayState::Connected,
        relay_seen_epoch: Some(10_000),
        log_seen_epoch: Some(9_990),
        log_stage: Some("training".into()),
        now: 10_010,
        job: Job {
            stage: job_stage.into(),
            message: None,
            created_epoch: 1_000,
            started_epoch: Some(1_100),
            has_results: None,
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
        (d.state, d.settle, d.stage.as_deref()),
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
    assert!(d.reason.as_deref().unwrap().contains("at stage training: NCCL error"));
    f.job.message = Some("Job timeout".into());
    let d = decide(&f, LIMITS).unwrap();
    assert!(d.reason.unwrap().contains("hit its timeout at stage training"));
    assert!(!d.platform_fault);
    f.job.message = Some("Only 3 verified trajectories; required 8".into());
    assert!(!decide(&f, LIMITS).unwrap().platform_fault, "the collection's own making");
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
fn logs_move_the_stage_when_the_relay_missed_it_and_running_starts_a_queued_run() {
    let mut f = facts("RUNNING");
    f.log_stage = Some("heldout".into());
    let d = decide(&f, LIMITS).unwrap();
    assert_eq!(
        (d.state, d.stage.as_deref(), d.event.0.as_str()),
        (RunState::Running, Some("heldout"), "logs")
    );
    let mut q = facts("RUNNING");
    q.state = RunState::Queued;
    q.stage = None;
    q.log_stage = None;
    let d = decide(&q, LIMITS).unwrap();
    assert_eq!((d.state, d.stage.as_deref()), (RunState::Running, Some("setup")));
}

#[test]
fn log_lines_name_their_stage() {
    assert_eq!(stage_of_log_line("[posttrainarena] baseline_eval: python -m eval"), Some("baseline"));
    assert_eq!(stage_of_log_line("2026 [posttrainarena] grpo_gate_eval: x"), Some("gate"));
    assert_eq!(stage_of_log_line("[posttrainarena] training: simulated"), Some("training"));
    assert_eq!(stage_of_log_line("plain output"), None);
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
    let m = |seq, kind, stage: Option<&str>| RelayMessage {
        seq,
        kind,
        stage: stage.map(String::from),
        detail: None,
        passed: None,
        total: None,
        timeouts: None,
        errors: None,
    };
    assert!(m(1, RelayKind::StageStarted, Some("baseline")).check().is_ok());
    assert!(m(0, RelayKind::Heartbeat, None).check().is_err());
    assert!(m(2, RelayKind::StageStarted, None).check().is_err());
    assert!(m(2, RelayKind::StageFinished, Some("lunch")).check().is_err());
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
    let mut events = vec![
        ev(10, "stage_started", "setup"),
        ev(20, "stage_finished", "setup"),
        ev(20, "stage_started", "snapshot"),
    ];
    events.push(StageEvent { passed: Some(3), total: Some(9), ..ev(40, "stage_finished", "snapshot") });
    events.push(ev(40, "stage_started", "baseline"));
    let t = timeline(&events, RunState::Running, Some("baseline"), Purpose::Collection);
    let status: Vec<&str> = t.iter().map(|s| s.status.as_str()).collect();
    assert_eq!(status, ["done", "done", "running", "pending", "pending", "pending", "pending"]);
    assert_eq!(
        (t[1].started_epoch, t[1].finished_epoch, t[1].passed, t[1].total),
        (Some(20), Some(40), Some(3), Some(9))
    );
    let failed = timeline(&events, RunState::Failed, Some("baseline"), Purpose::Collection);
    assert_eq!(failed[2].status, "failed");
    // Stages known only from the log (no relay events) still show how far the run got.
    let from_logs = timeline(&[], RunState::Running, Some("gate"), Purpose::Collection);
    let status: Vec<&str> = from_logs.iter().map(|s| s.status.as_str()).collect();
    assert_eq!(status, ["done", "done", "done", "running", "pending", "pending", "pending"]);
    let scored = timeline(&[], RunState::Scored, Some("collect"), Purpose::Collection);
    assert!(scored.iter().all(|s| s.status == "done"));
}

#[test]
fn a_baseline_measurement_shows_only_its_own_stages() {
    let events = vec![ev(10, "stage_finished", "setup"), ev(20, "stage_started", "baseline")];
    let t = timeline(&events, RunState::Running, Some("baseline"), Purpose::Baseline);
    let shown: Vec<(&str, &str)> = t.iter().map(|s| (s.stage.as_str(), s.status.as_str())).collect();
    assert_eq!(
        shown,
        [("setup", "done"), ("snapshot", "done"), ("baseline", "running"), ("collect", "pending")]
    );
    let scored = timeline(&events, RunState::Scored, Some("collect"), Purpose::Baseline);
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
