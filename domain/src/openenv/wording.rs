//! What participants read of their run is written for them, by the arena. The cluster's own text
//! (an exception, a sandbox's answer, a validator's error) can hold anything the trainer touched:
//! a held-out task's id, a benchmark's image, a file the trainer read. So every event the arena
//! stores passes through [`for_participants`] once: its `message` becomes the arena's sentence for
//! the event's state, code, counts and the participant's own train task, and the cluster's words
//! are kept in `reported`, which only editors (and the logs) see.

use super::run::{Reported, RunEvent, RunState};

/// The failure codes a trainer's `failed` event may carry (`CODE: why`); any other is reported
/// as the trainer's failure.
const RUN_CODES: [&str; 4] =
    ["RUN_TRAINER_FAILED", "RUN_STEP_DOES_NOT_FIT", "RUN_QUEUE_TIMEOUT", "RUN_NO_TRAINING_SIGNAL"];

/// The code a failure's text starts with (`RUN_…: why`), when it is one the guide names.
pub fn failure_code(text: &str) -> Option<&'static str> {
    let (code, _) = text.split_once(':')?;
    RUN_CODES.into_iter().find(|c| *c == code.trim())
}

/// Rewrites an event the cluster sent as participants may read it: the arena's sentence in
/// `message`, a `task_id` only when it is one of `train_tasks` (the submission's own), the
/// evaluation's `incomplete` in the arena's words, and what the cluster wrote in `reported`.
pub fn for_participants(e: &mut RunEvent, train_tasks: &[String]) {
    let mut reported = Reported { message: e.message.take(), incomplete: None };
    if e.task_id.as_ref().is_some_and(|t| !train_tasks.contains(t)) {
        e.task_id = None;
    }
    if let Some(evaluation) = e.evaluation.as_mut() {
        reported.incomplete = evaluation.incomplete.take();
        if reported.incomplete.is_some() {
            evaluation.incomplete = Some(incomplete_sentence(evaluation.phase.as_str()));
        }
    }
    e.message = sentence(e, reported.message.as_deref());
    e.reported = (reported != Reported::default()).then_some(reported);
}

/// Why a phase is incomplete, as participants read it (editors read the cluster's reason).
pub fn incomplete_sentence(phase: &str) -> String {
    format!(
        "the held-out phase {phase} training could not be played to its end (lost sandboxes, its time \
         allowance, or the trainer); the organizers have the details"
    )
}

/// The arena's sentence for an event; `None` for an alert (said in words when it is served,
/// `super::alerts`).
fn sentence(e: &RunEvent, reported: Option<&str>) -> Option<String> {
    if e.alert.is_some() {
        return None;
    }
    let task = e.task_id.as_ref().map_or("the next train task".to_string(), |t| format!("`{t}`"));
    Some(match e.state {
        RunState::Starting => "the run is on the training cluster, waiting for a GPU".into(),
        RunState::Loading => "the trainer started and is loading the model".into(),
        RunState::Evaluating => evaluating(e),
        RunState::Rolling => format!("five episodes of {task} are played, each in a fresh sandbox"),
        RunState::Updating => updating(e, &task),
        RunState::Cleanup => "training is over; the run's sandboxes are being stopped".into(),
        RunState::Completed => format!("{} optimizer steps taken", e.policy_version),
        RunState::Failed => failed(reported, e),
        RunState::Cancelled => "cancelled".into(),
    })
}

fn evaluating(e: &RunEvent) -> String {
    let Some(r) = &e.evaluation else { return "the held-out evaluation".into() };
    let words = format!("held-out episodes {} training", r.phase.as_str());
    let simulated = if r.simulated { " (simulated: a scripted policy, no model)" } else { "" };
    if r.incomplete.is_some() {
        return format!(
            "{} of {} {words} were played; the phase is incomplete{simulated}",
            r.done, r.planned
        );
    }
    match (r.done, r.planned) {
        (0, n) => format!("{n} {words}, five at a time{simulated}"),
        (d, n) if d == n => format!("all {n} {words} were played{simulated}"),
        (d, n) => format!("{d} of {n} {words} played{simulated}"),
    }
}

fn updating(e: &RunEvent, task: &str) -> String {
    let rewards: Vec<String> =
        e.rewards.iter().flatten().map(|r| r.map_or("none".to_string(), |r| format!("{r}"))).collect();
    if rewards.is_empty() {
        let how = e.ends.as_ref().map_or(String::new(), |n| {
            format!(": rewards in the order they ended {}; {}", n.scores_words(), n.words())
        });
        return format!(
            "the step of {task} trained nothing: fewer than four episodes ended with a valid reward{how}"
        );
    }
    let valid: Vec<f64> = e.rewards.iter().flatten().flatten().copied().collect();
    let equal = valid.windows(2).all(|w| w[0] == w[1]);
    let learned =
        if equal { "; the four rewards are equal, so the update had nothing to learn from" } else { "" };
    format!(
        "optimizer step {} trained on {task} with the first four valid rewards [{}]{learned}",
        e.policy_version,
        rewards.join(", ")
    )
}

/// A run ended for want of a training signal, in the participant's terms: which of the trainer's
/// two reasons (`cluster/arena_cluster/trainer.py`, `no_training_signal`), how the episodes of
/// those steps ended, and advice that points at what failed, never at a check that passes.
fn no_signal(reported: &str, e: &RunEvent) -> String {
    let head = if reported.contains("in a row") {
        format!(
            "{} steps in a row had no training signal (fewer than four of five episodes ended with a valid \
             reward, or the four rewards were equal), so the run ended early",
            super::episode::NO_UPDATE_STEPS
        )
    } else if reported.contains("no optimizer step") {
        "the run's steps took no optimizer step (none had four of five episodes end with a valid reward)"
            .to_string()
    } else {
        "none of the run's steps had a training signal (the four rewards that trained each step were equal)"
            .to_string()
    };
    let Some(n) = e.ends.as_ref() else {
        return format!("RUN_NO_TRAINING_SIGNAL: {head}; it is never ranked.");
    };
    let how = format!(" Of their {} episodes: {}.", n.total(), n.words());
    let valid: Vec<f64> = n.scores.iter().flatten().copied().collect();
    let next = if n.sandbox * 2 > n.total() {
        "Most of its episodes were lost to the platform (their sandboxes never served): the organizers \
         look into it."
            .to_string()
    } else if n.invalid_reply * 2 > n.total() {
        let quoted: Vec<String> = n.replies.iter().map(|r| format!("`{}`", escaped(r))).collect();
        let among =
            if quoted.is_empty() { String::new() } else { format!(" (among them {})", quoted.join(", ")) };
        format!(
            "Most replies were not valid actions{among}: check that your action schema and the observation \
             the model sees at reset tell it what to send (the schema is the model's only description of an \
             action)."
        )
    } else if !valid.is_empty() && valid.iter().all(|r| *r == valid[0]) {
        format!(
            "Every valid reward was {}: a reward that does not depend on the action teaches nothing; check \
             your reward function.",
            valid[0]
        )
    } else {
        "Too few episodes ended with a reward in [0, 1] that differs between episodes: check how your \
         episodes end and what your reward function answers."
            .to_string()
    };
    format!("RUN_NO_TRAINING_SIGNAL: {head}; it is never ranked.{how} {next}")
}

/// A reply quoted in a sentence: control characters escaped, so nothing a model wrote reaches a
/// terminal or a page raw.
fn escaped(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { format!("\\u{{{:04x}}}", c as u32) } else { c.to_string() })
        .collect()
}

fn failed(reported: Option<&str>, e: &RunEvent) -> String {
    match reported.and_then(failure_code) {
        Some("RUN_NO_TRAINING_SIGNAL") => no_signal(reported.unwrap_or(""), e),
        Some("RUN_STEP_DOES_NOT_FIT") => "RUN_STEP_DOES_NOT_FIT: one optimizer step of the next train task \
             (its three walls and the update) does not fit in the time the run has left"
            .into(),
        Some("RUN_QUEUE_TIMEOUT") => {
            "RUN_QUEUE_TIMEOUT: the trainer did not start on a GPU within two hours".into()
        }
        _ => "RUN_TRAINER_FAILED: the trainer stopped on an error; the organizers have its details and \
              look into it"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::evaluation::{EvaluationReport, Phase};
    use super::super::run::{Alert, EpisodeEnds};
    use super::*;

    const SECRET: &str = "heldout-secret-task-7 ghcr.io/benchflow/bench@sha256:abc /var/lib/arena-agent/done";

    fn event(state: RunState) -> RunEvent {
        RunEvent {
            seq: 1,
            state,
            policy_version: 2,
            at: String::new(),
            rewards: None,
            message: Some(format!("RUN_TRAINER_FAILED: Unresolvable: {SECRET}")),
            metrics: None,
            alert: None,
            trainer: None,
            evaluation: None,
            task_id: None,
            reported: None,
            ends: None,
        }
    }

    fn participants_read(e: &RunEvent) -> String {
        let mut shown = e.clone();
        shown.reported = None;
        serde_json::to_string(&shown).unwrap()
    }

    #[test]
    fn no_kind_of_message_carries_the_clusters_words_to_participants() {
        let train = vec!["echo-1".to_string()];
        let evaluation = |incomplete: Option<&str>| EvaluationReport {
            phase: Phase::Before,
            done: 3,
            planned: 6,
            records: Vec::new(),
            incomplete: incomplete.map(String::from),
            simulated: false,
        };
        let kinds = [
            event(RunState::Loading),
            event(RunState::Rolling),
            RunEvent { task_id: Some(SECRET.into()), ..event(RunState::Rolling) },
            RunEvent {
                rewards: Some(vec![Some(0.5), Some(1.0), Some(0.0), Some(1.0)]),
                ..event(RunState::Updating)
            },
            RunEvent { alert: Some(Alert::NoUpdate), rewards: Some(vec![]), ..event(RunState::Updating) },
            RunEvent { alert: Some(Alert::SandboxFailed), ..event(RunState::Evaluating) },
            RunEvent { alert: Some(Alert::TrainerRestarted), ..event(RunState::Loading) },
            RunEvent { alert: Some(Alert::CleanupFailed), ..event(RunState::Cleanup) },
            RunEvent { evaluation: Some(evaluation(None)), ..event(RunState::Evaluating) },
            RunEvent { evaluation: Some(evaluation(Some(SECRET))), ..event(RunState::Evaluating) },
            event(RunState::Cleanup),
            event(RunState::Completed),
            event(RunState::Failed),
            RunEvent { message: Some(format!("RUN_STEP_DOES_NOT_FIT: {SECRET}")), ..event(RunState::Failed) },
            RunEvent { message: Some(format!("NOT_A_CODE: {SECRET}")), ..event(RunState::Failed) },
        ];
        for mut e in kinds {
            for_participants(&mut e, &train);
            let shown = participants_read(&e);
            for secret in SECRET.split(' ') {
                assert!(!shown.contains(secret), "{shown}");
            }
            assert!(
                e.reported.as_ref().is_some_and(|r| r.message.as_deref().unwrap().contains(SECRET)),
                "{e:?}"
            );
        }
    }

    #[test]
    fn each_sentence_carries_the_code_counts_and_own_task() {
        let train = vec!["echo-1".to_string()];
        let mut rolling = RunEvent { task_id: Some("echo-1".into()), ..event(RunState::Rolling) };
        for_participants(&mut rolling, &train);
        assert_eq!(
            rolling.message.as_deref(),
            Some("five episodes of `echo-1` are played, each in a fresh sandbox")
        );
        let mut failed = event(RunState::Failed);
        for_participants(&mut failed, &train);
        assert!(failed.message.as_deref().unwrap().starts_with("RUN_TRAINER_FAILED: "));
        let mut fit =
            RunEvent { message: Some("RUN_STEP_DOES_NOT_FIT: x".into()), ..event(RunState::Failed) };
        for_participants(&mut fit, &train);
        assert!(fit.message.as_deref().unwrap().starts_with("RUN_STEP_DOES_NOT_FIT: "));
        let mut updating = RunEvent {
            task_id: Some("echo-1".into()),
            rewards: Some(vec![Some(1.0); 4]),
            ..event(RunState::Updating)
        };
        for_participants(&mut updating, &train);
        let m = updating.message.unwrap();
        assert!(
            m.contains("step 2 trained on `echo-1`") && m.contains("[1, 1, 1, 1]") && m.contains("equal"),
            "{m}"
        );
        let mut alert = RunEvent { alert: Some(Alert::Resumed), ..event(RunState::Rolling) };
        for_participants(&mut alert, &train);
        assert_eq!(alert.message, None, "alerts are said in words when served");
        assert_eq!(failure_code("RUN_QUEUE_TIMEOUT: late"), Some("RUN_QUEUE_TIMEOUT"));
        assert_eq!(failure_code("OTHER: x"), None);
    }

    fn ends(scores: Vec<Option<f64>>, invalid_reply: u32, done: u32, sandbox: u32) -> EpisodeEnds {
        EpisodeEnds { invalid_reply, done, sandbox, scores, ..EpisodeEnds::default() }
    }

    #[test]
    fn authors_read_their_own_steps_rewards_and_how_their_episodes_ended() {
        let train = vec!["echo-1".to_string()];
        let mut step = RunEvent {
            task_id: Some("echo-1".into()),
            alert: None,
            rewards: Some(vec![]),
            ends: Some(ends(vec![None, None, Some(0.0), Some(0.0), Some(0.0)], 2, 3, 0)),
            ..event(RunState::Updating)
        };
        for_participants(&mut step, &train);
        let m = step.message.unwrap();
        assert!(
            m.contains("`echo-1` trained nothing")
                && m.contains("[none, none, 0, 0, 0]")
                && m.contains("2 ended by an invalid reply")
                && m.contains("3 ended by themselves"),
            "{m}"
        );
        let streak = RunEvent {
            message: Some(
                "RUN_NO_TRAINING_SIGNAL: 5 steps in a row trained nothing: of their 25 episodes".into(),
            ),
            ends: Some(EpisodeEnds {
                replies: vec![r#"{"text": "hi"}"#.into(), "Sure.\u{1b}[2J".into()],
                ..ends(vec![], 20, 5, 0)
            }),
            ..event(RunState::Failed)
        };
        let mut shown = streak.clone();
        for_participants(&mut shown, &train);
        let m = shown.message.unwrap();
        assert!(
            m.contains("5 steps in a row") && m.contains("Of their 25 episodes: 5 ended by themselves"),
            "{m}"
        );
        assert!(m.contains("never ranked") && !m.contains("openenv_check"), "{m}");
        // The model's own replies, quoted, with no raw control character.
        assert!(m.contains(r#"among them `{"text": "hi"}`, `Sure.\u{001b}[2J`"#), "{m}");
        assert!(!m.contains('\u{1b}') && m.contains("action schema"), "{m}");
        let mut no_step = RunEvent {
            message: Some("RUN_NO_TRAINING_SIGNAL: 7 step(s) played and no optimizer step taken: x".into()),
            ends: Some(ends(vec![], 0, 2, 33)),
            ..streak
        };
        for_participants(&mut no_step, &train);
        let m = no_step.message.unwrap();
        assert!(!m.contains("in a row") && m.contains("took no optimizer step"), "{m}");
        assert!(m.contains("lost to the platform") && !m.contains("finish_action"), "{m}");
        let equal = RunEvent {
            message: Some("RUN_NO_TRAINING_SIGNAL: 5 steps in a row trained nothing: x".into()),
            ends: Some(ends(vec![Some(0.0); 5], 0, 5, 0)),
            ..event(RunState::Failed)
        };
        let mut shown = equal;
        for_participants(&mut shown, &train);
        let m = shown.message.unwrap();
        assert!(m.contains("had no training signal") && m.contains("Every valid reward was 0"), "{m}");
        assert!(m.contains("reward function") && !m.contains("finish"), "{m}");
    }

    #[test]
    fn an_ended_run_keeps_no_alert_of_a_run_that_goes_on() {
        let no_update = RunEvent { alert: Some(Alert::NoUpdate), ..event(RunState::Updating) };
        let rolling = vec![event(RunState::Rolling), no_update.clone()];
        assert_eq!(super::super::run::latest_alert(&rolling).map(|a| a.alert), Some(Alert::NoUpdate));
        let ended = vec![event(RunState::Rolling), no_update, event(RunState::Failed)];
        assert_eq!(super::super::run::latest_alert(&ended).map(|a| a.alert), None);
        let left = vec![
            RunEvent { alert: Some(Alert::CleanupFailed), ..event(RunState::Cleanup) },
            event(RunState::Failed),
        ];
        assert_eq!(super::super::run::latest_alert(&left).map(|a| a.alert), Some(Alert::CleanupFailed));
    }
}
