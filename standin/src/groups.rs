//! The process groups the stand-in starts (sandboxes, jobs). Each is its own group, so a signal
//! to the stand-in's group never reaches them: they are stopped when they end, and all of them
//! when the stand-in is told to stop (a Ctrl-C during an episode would otherwise leave
//! sandboxes serving).

use std::collections::BTreeSet;
use std::sync::Mutex;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// A group started.
pub fn started(pgid: i32) {
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).insert(pgid);
}

/// Stops a group (it may have ended already) and forgets it.
pub fn stop(pgid: i32) {
    let _ = killpg(Pid::from_raw(pgid), Signal::SIGCONT);
    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).remove(&pgid);
}

/// Stops every group still live; returns how many there were.
pub fn stop_all() -> usize {
    let live: Vec<i32> =
        std::mem::take(&mut *LIVE.lock().unwrap_or_else(|e| e.into_inner())).into_iter().collect();
    for pgid in &live {
        let _ = killpg(Pid::from_raw(*pgid), Signal::SIGCONT);
        let _ = killpg(Pid::from_raw(*pgid), Signal::SIGKILL);
    }
    live.len()
}

/// Waits for SIGTERM or SIGINT.
pub async fn until_told_to_stop() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;

    #[test]
    fn stopping_all_stops_each_group_started() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 60 & sleep 60; wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id() as i32;
        super::started(pgid);
        assert!(super::stop_all() >= 1);
        let status = child.wait().unwrap();
        assert!(!status.success(), "killed: {status:?}");
        // Nothing of the group is left running (its background `sleep` too). A killed process
        // reparented to a PID 1 that does not reap (a container's) stays a zombie: dead, so not
        // counted. Signals land asynchronously: look again for up to 5 s.
        let mut running = group_running(pgid);
        for _ in 0..50 {
            if running.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            running = group_running(pgid);
        }
        assert!(running.is_empty(), "still running in group {pgid}: {running:?}");
        assert_eq!(super::stop_all(), 0, "forgotten once stopped");
    }

    /// The processes of group `pgid` that are not zombies, from /proc/<pid>/stat (the fields after
    /// the command's closing parenthesis: state, ppid, pgrp, ...).
    fn group_running(pgid: i32) -> Vec<(i32, char)> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            let Some((_, rest)) = stat.rsplit_once(')') else { continue };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let (Some(state), Some(pgrp)) = (fields.first(), fields.get(2)) else { continue };
            let state = state.chars().next().unwrap_or('?');
            if pgrp.parse::<i32>() == Ok(pgid) && state != 'Z' && state != 'X' {
                found.push((pid, state));
            }
        }
        found
    }
}
