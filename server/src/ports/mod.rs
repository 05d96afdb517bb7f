//! The outside world, as ports the server holds in `Deps`: HF identity (`hub`), dataset reads
//! (`crate::sources`), dataset writes, the job launcher and the clock. Each has a real HTTP adapter
//! built from the configuration; tests swap in a fixed clock or point the adapters at the stand-in.

pub mod clock;
pub mod datasets;
pub mod http;
pub mod jobs;

use std::sync::Arc;

use crate::config::Config;

/// The adapters a server uses.
#[derive(Clone)]
pub struct Deps {
    pub clock: Arc<dyn clock::Clock>,
    pub jobs: Arc<dyn jobs::JobLauncher>,
    pub datasets: Arc<dyn datasets::DatasetWriter>,
}

impl Deps {
    /// The real adapters, configured from `config`.
    pub fn real(config: &Config) -> Deps {
        let token = config.hf_token.clone();
        Deps {
            clock: Arc::new(clock::SystemClock),
            jobs: Arc::new(jobs::HfJobs::new(&config.hf_endpoint, &config.jobs_namespace, token.clone())),
            datasets: Arc::new(datasets::HfDatasetWriter::new(&config.hf_endpoint, token)),
        }
    }
}
