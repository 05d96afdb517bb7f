//! The outside world, as ports the server holds in `Deps`: HF identity (`hub`), dataset reads
//! (`crate::sources`), dataset writes, the job launcher, container registries and the clock. Each has a real HTTP adapter
//! built from the configuration; tests swap in a fixed clock or point the adapters at the stand-in.

pub mod clock;
pub mod datasets;
pub mod http;
pub mod jobs;
pub mod registry;

use std::sync::Arc;

use crate::config::Config;

/// The adapters a server uses.
#[derive(Clone)]
pub struct Deps {
    pub clock: Arc<dyn clock::Clock>,
    pub jobs: Arc<dyn jobs::JobLauncher>,
    pub datasets: Arc<dyn datasets::DatasetWriter>,
    /// Docker Hub and GHCR, read anonymously (the OpenEnv track).
    pub registry: Arc<dyn registry::ImageRegistry>,
}

impl Deps {
    /// The real adapters, configured from `config`.
    pub fn real(config: &Config) -> Deps {
        let token = config.hf_token.clone();
        Deps {
            clock: Arc::new(clock::SystemClock),
            jobs: Arc::new(jobs::HfJobs::new(&config.hf_endpoint, &config.jobs_namespace, token.clone())),
            datasets: Arc::new(datasets::HfDatasetWriter::new(&config.hf_endpoint, token)),
            registry: Arc::new(registry::OciRegistries::new(
                &config.registry_docker_url,
                &config.registry_ghcr_url,
                &config.registry_auth_origins,
            )),
        }
    }
}
