//! Work that outlives a request, started with the server and stopped with it: the launcher (it
//! finishes launches a crash or an HF outage left unfinished), the reconciler (it follows each
//! launched run to its end), OpenEnv admission, the OpenEnv runs' queue timeout, and the re-check of collections judged by older gates. Each pass asks the
//! database what is unfinished and takes it one step; a run is worked on by one server at a time
//! (its lease), so several replicas on one PostgreSQL share the work without doing it twice, and a
//! server that dies only loses its leases.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{service, AppState};

/// The running background work; `stop` ends it after the pass in progress.
pub struct Workers {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Workers {
    pub fn start(state: AppState, tick: Duration) -> Workers {
        let (stop, stopped) = watch::channel(false);
        let launches = state.clone();
        let launcher = tokio::spawn(every(tick, stopped.clone(), move || {
            let state = launches.clone();
            async move {
                if let Err(e) = service::runs::resume_launches(&state).await {
                    tracing::error!(error = ?e, "the launcher's pass failed");
                }
            }
        }));
        let follows = state.clone();
        let reconciler = tokio::spawn(every(tick, stopped.clone(), move || {
            let state = follows.clone();
            async move {
                if let Err(e) = service::reconcile::pass(&state).await {
                    tracing::error!(error = ?e, "the reconciler's pass failed");
                }
            }
        }));
        let admits = state.clone();
        let admission = tokio::spawn(every(tick, stopped.clone(), move || {
            let state = admits.clone();
            async move {
                if let Err(e) = service::admission::pass(&state).await {
                    tracing::error!(error = ?e, "the admission pass failed");
                }
            }
        }));
        let sweeps = state.clone();
        let openenv_runs = tokio::spawn(every(tick, stopped.clone(), move || {
            let state = sweeps.clone();
            async move {
                if let Err(e) = service::openenv_runs::sweep(&state).await {
                    tracing::error!(error = ?e, "the OpenEnv runs' sweep failed");
                }
            }
        }));
        // Gates change rarely; a pass that finds nothing to re-check is one query.
        let rechecker = tokio::spawn(every(tick * 10, stopped, move || {
            let state = state.clone();
            async move {
                if let Err(e) = service::environments::recheck_pass(&state).await {
                    tracing::error!(error = ?e, "the re-check pass failed");
                }
            }
        }));
        Workers { stop, tasks: vec![launcher, reconciler, admission, openenv_runs, rechecker] }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Runs `pass` now and then every `tick` until told to stop.
async fn every<F, Fut>(tick: Duration, mut stopped: watch::Receiver<bool>, pass: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        pass().await;
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = stopped.changed() => return,
        }
    }
}
