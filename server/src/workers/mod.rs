//! Work that outlives a request, started with the server and stopped with it: every feature's
//! passes (the launcher and the reconciler of runs, OpenEnv admission and its runs' sweep, the
//! re-check of collections judged by older gates). Each pass asks the
//! database what is unfinished and takes it one step; a run is worked on by one server at a time
//! (its lease), so several replicas on one PostgreSQL share the work without doing it twice, and a
//! server that dies only loses its leases.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::AppState;

/// The running background work; `stop` ends it after the pass in progress.
pub struct Workers {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Starts every feature's passes (`crate::FEATURES`), each on its own task.
    pub fn start(state: AppState, tick: Duration) -> Workers {
        let (stop, stopped) = watch::channel(false);
        let tasks = crate::FEATURES
            .iter()
            .flat_map(|feature| feature.passes)
            .map(|pass| {
                let (state, stopped) = (state.clone(), stopped.clone());
                let (run, name, wake) = (pass.run, pass.name, pass.wake);
                let tick = tick * pass.every_ticks;
                tokio::spawn(async move {
                    let woken = wake.map(|w| w(&state));
                    every(name, tick, woken, stopped, || {
                        run(&state).instrument(tracing::info_span!("pass", name))
                    })
                    .await
                })
            })
            .collect();
        Workers { stop, tasks }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Runs `pass` now and then every `tick`, or sooner when `woken` fires (a firing while the pass
/// runs is kept for the next wait), until told to stop. A pass that panics is logged and runs again
/// at its next tick: one bad row must not stop a feature's background work for good.
pub async fn every<F, Fut>(
    name: &str,
    tick: Duration,
    woken: Option<&tokio::sync::Notify>,
    mut stopped: watch::Receiver<bool>,
    pass: F,
) where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    use futures_util::FutureExt;
    loop {
        if let Err(panic) = std::panic::AssertUnwindSafe(pass()).catch_unwind().await {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            tracing::error!(
                pass = name,
                "the background pass panicked ({why}); it runs again at its next tick"
            );
        }
        let fired = async {
            match woken {
                Some(n) => n.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = fired => {}
            _ = stopped.changed() => return,
        }
    }
}
