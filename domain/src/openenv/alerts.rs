//! Alerts in words a participant can act on: what happened (the cluster's own report, as plain
//! text), whether the last checkpoint is kept, what the arena does next, and where the run's
//! dashboard is. The arena writes these messages when it serves events, so every alert it holds
//! reads the same, whichever trainer or agent sent it.

use super::run::{Alert, RunEvent, RunState, MAX_TEXT};

/// How much of the cluster's report an alert quotes.
const MAX_REPORTED: usize = 600;

/// The cluster's report as one line of plain text: control characters become spaces, runs of
/// spaces one, and it is cut to `MAX_REPORTED` characters. It may quote a participant's image.
fn plain(reported: &str) -> String {
    let spaced: String = reported.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let line = words.join(" ").trim_end_matches('.').to_string();
    if line.chars().count() <= MAX_REPORTED {
        return line;
    }
    let cut: String = line.chars().take(MAX_REPORTED - 1).collect();
    format!("{cut}…")
}

fn checkpoint(alert: Alert, policy_version: i64) -> String {
    match (alert, policy_version) {
        (Alert::TrainerRestarted, 0) => {
            "No optimizer step had been taken, so the trainer starts from the base model.".into()
        }
        (_, 0) => "No optimizer step has been taken yet, so no checkpoint is at stake.".into(),
        (_, n) => format!("The last checkpoint (step {n}) is kept."),
    }
}

fn next(alert: Alert, state: RunState, policy_version: i64) -> String {
    let evaluating = state == RunState::Evaluating;
    match alert {
        Alert::SandboxFailed if evaluating => "The arena plays that held-out episode again in a fresh sandbox; one still \
             lost is left out of the evaluation, not scored 0."
            .into(),
        Alert::SandboxFailed => {
            "The episode is played again in a fresh sandbox before the step counts its rewards.".into()
        }
        Alert::EpisodeRetried if evaluating => {
            "The evaluation goes on with the replays, which it counts as `replays`.".into()
        }
        Alert::EpisodeRetried => {
            "The step goes on with the replayed episodes, counted as the step's `group_retries`.".into()
        }
        Alert::NoUpdate => format!(
            "The run goes on with its next step; only this step's time was spent. After {} such steps in a row it \
             ends (RUN_NO_TRAINING_SIGNAL) and is never ranked.",
            super::episode::NO_UPDATE_STEPS
        ),
        Alert::CleanupFailed => format!(
            "Cleanup continues: the trainer stops what it can, and a cleanup that lasts over {} minutes is shown \
             as stalled, with the sandboxes left, until an organizer releases it.",
            super::controls::CLEANUP_STALL_S / 60
        ),
        Alert::TrainerRestarted => {
            "The trainer starts again from there within the run's own time limit; nothing needs doing.".into()
        }
        Alert::Resumed => format!("Training continues after step {policy_version}."),
    }
}

/// The message of one alert.
pub fn message(
    alert: Alert,
    reported: Option<&str>,
    state: RunState,
    policy_version: i64,
    dashboard: Option<&str>,
) -> String {
    let mut what = alert.words().to_string();
    if let Some(r) = reported.map(plain).filter(|r| !r.is_empty()) {
        what = format!("{what}: {r}");
    }
    let mut text = format!(
        "{}{}. {} {}",
        what[..1].to_uppercase(),
        &what[1..],
        checkpoint(alert, policy_version),
        next(alert, state, policy_version)
    );
    if let Some(d) = dashboard {
        text.push_str(&format!(" The run's dashboard: {d}"));
    }
    if text.chars().count() > MAX_TEXT {
        text = text.chars().take(MAX_TEXT - 1).collect::<String>() + "…";
    }
    text
}

/// Every alert event's message in words, with the dashboard its run's trainer reported before it;
/// the cluster's report is quoted where the event still carries it (`reported`: editors only).
pub fn in_words(events: &mut [RunEvent]) {
    let mut dashboard: Option<String> = None;
    for e in events.iter_mut() {
        if let Some(d) = e.trainer.as_ref().and_then(|t| t.dashboard.clone()) {
            dashboard = Some(d);
        }
        if let Some(alert) = e.alert {
            // A step that trained nothing is said with its own numbers (the participant's train
            // task's rewards and how its episodes ended); editors also read the cluster's words.
            let counted = e
                .ends
                .as_ref()
                .map(|n| format!("rewards in the order they ended {}; {}", n.scores_words(), n.words()));
            let reported = e.reported.as_ref().and_then(|r| r.message.as_deref());
            let said = match (counted, reported) {
                (Some(c), Some(r)) => Some(format!("{c} (the trainer: {r})")),
                (c, r) => c.or(r.map(String::from)),
            };
            e.message =
                Some(message(alert, said.as_deref(), e.state, e.policy_version, dashboard.as_deref()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Alert; 6] = [
        Alert::SandboxFailed,
        Alert::EpisodeRetried,
        Alert::NoUpdate,
        Alert::CleanupFailed,
        Alert::TrainerRestarted,
        Alert::Resumed,
    ];

    #[test]
    fn each_alert_says_what_happened_the_checkpoint_and_what_comes_next() {
        for alert in ALL {
            let m = message(alert, Some("the cluster's words"), RunState::Rolling, 3, None);
            assert!(m.starts_with(&alert.words()[..1].to_uppercase()), "{m}");
            assert!(m.contains("the cluster's words"), "{m}");
            assert!(m.contains("The last checkpoint (step 3) is kept."), "{m}");
            assert!(m.len() > 120 && m.chars().count() <= MAX_TEXT, "{m}");
        }
        let m = message(Alert::CleanupFailed, None, RunState::Cleanup, 5, None);
        assert!(m.contains("Cleanup continues") && m.contains("15 minutes"), "{m}");
        let m = message(Alert::TrainerRestarted, None, RunState::Loading, 0, None);
        assert!(m.contains("starts from the base model"), "{m}");
        let m = message(Alert::SandboxFailed, None, RunState::Evaluating, 0, None);
        assert!(m.contains("left out of the evaluation"), "{m}");
    }

    #[test]
    fn the_report_is_one_bounded_line_and_the_dashboard_is_linked() {
        let hostile = format!("<script>x</script>\n\u{1b}[31m{}", "a".repeat(5000));
        let m = message(
            Alert::SandboxFailed,
            Some(&hostile),
            RunState::Rolling,
            1,
            Some("https://huggingface.co/spaces/o/d"),
        );
        assert!(!m.chars().any(char::is_control), "{m}");
        assert!(m.chars().count() <= MAX_TEXT);
        assert!(m.ends_with("The run's dashboard: https://huggingface.co/spaces/o/d"), "{m}");
        assert!(m.contains('…'), "the report is cut");
    }

    #[test]
    fn events_get_the_dashboard_their_trainer_reported_before_them() {
        let event = |seq, alert: Option<Alert>, dashboard: Option<&str>| RunEvent {
            seq,
            state: RunState::Rolling,
            policy_version: 1,
            at: String::new(),
            rewards: None,
            message: Some("the arena's sentence".into()),
            metrics: None,
            alert,
            trainer: dashboard.map(|d| super::super::run::TrainerInfo {
                trl: "1".into(),
                transformers: "1".into(),
                torch: "1".into(),
                model: "m".into(),
                device: "cpu".into(),
                dashboard: Some(d.into()),
                trackio_project: None,
            }),
            evaluation: None,
            task_id: None,
            reported: Some(super::super::run::Reported {
                message: Some("reported".into()),
                incomplete: None,
            }),
            ends: None,
        };
        let mut events = [
            event(1, Some(Alert::NoUpdate), None),
            event(2, None, Some("https://huggingface.co/spaces/o/d")),
            event(3, Some(Alert::NoUpdate), None),
        ];
        in_words(&mut events);
        assert!(!events[0].message.as_ref().unwrap().contains("dashboard"));
        assert_eq!(events[1].message.as_deref(), Some("the arena's sentence"), "not an alert: as stored");
        assert!(
            events[2].message.as_ref().unwrap().contains("reported"),
            "an editor reads the cluster's words"
        );
        let mut participants = events.clone();
        participants.iter_mut().for_each(|e| e.reported = None);
        in_words(&mut participants);
        assert!(!participants[2].message.as_ref().unwrap().contains("reported"));
        assert!(events[2].message.as_ref().unwrap().contains("spaces/o/d"));
    }
}
