//! The outside world, as ports the server holds in `Deps`: HF identity, collection reads (HF
//! datasets and GitHub, `crate::sources`), dataset writes, the job launchers by provider,
//! container registries and the clock. Each has a real HTTP adapter built from the configuration
//! (`Deps::real`); tests swap in a fixed clock or point the adapters at the stand-in.

pub mod clock;
pub mod datasets;
pub mod http;
pub mod identity;
pub mod jobs;
pub mod lfs;
pub mod names;
pub mod registry;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::Config;
use crate::sources::RepoReader;

/// The `compute.provider` of challenges whose runs are HF jobs.
pub const HF_JOBS: &str = "hf-jobs";

/// The adapters a server uses.
#[derive(Clone)]
pub struct Deps {
    pub clock: Arc<dyn clock::Clock>,
    /// HF's whoami: who a token belongs to.
    pub hub: Arc<dyn identity::HubIdentity>,
    /// Collections in HF datasets and in public GitHub repositories.
    pub hf_repos: Arc<dyn RepoReader>,
    pub github: Arc<dyn RepoReader>,
    /// Where a challenge's runs are launched, by its `compute.provider`.
    pub launchers: BTreeMap<String, Arc<dyn jobs::JobLauncher>>,
    /// HF Jobs in the arena's namespace: the jobs view uses it whatever a challenge's provider is.
    pub jobs: Arc<dyn jobs::JobLauncher>,
    /// HF Jobs in the sandbox namespace (`ARENA_SANDBOX_NAMESPACE`), where admission starts
    /// participants' images: an organization that holds nothing else. `None` when unset.
    pub sandboxes: Option<Arc<dyn jobs::JobLauncher>>,
    pub datasets: Arc<dyn datasets::DatasetWriter>,
    /// Docker Hub and GHCR, read anonymously (the OpenEnv track).
    pub registry: Arc<dyn registry::ImageRegistry>,
    /// Where a webhook receiver's host is (the system's resolver).
    pub names: Arc<dyn names::NameLookup>,
}

impl Deps {
    /// The real adapters, configured from `config`.
    pub fn real(config: &Config) -> Deps {
        let token = config.hf_token.clone();
        let clock: Arc<dyn clock::Clock> = Arc::new(clock::SystemClock);
        let hf_jobs: Arc<dyn jobs::JobLauncher> =
            Arc::new(jobs::HfJobs::new(&config.hf_endpoint, &config.jobs_namespace, token.clone()));
        Deps {
            hub: Arc::new(identity::HfHub::new(&config.hf_endpoint)),
            hf_repos: Arc::new(crate::sources::hf::HfDatasets::new(&config.hf_endpoint)),
            github: Arc::new(crate::sources::github::GitHub::new(
                &config.github_api_url,
                &config.github_raw_url,
                clock.clone(),
            )),
            launchers: BTreeMap::from([(HF_JOBS.to_string(), hf_jobs.clone())]),
            jobs: hf_jobs,
            sandboxes: config.sandbox_namespace.as_deref().filter(|n| !n.is_empty()).map(|namespace| {
                Arc::new(jobs::HfJobs::new(&config.hf_endpoint, namespace, token.clone()))
                    as Arc<dyn jobs::JobLauncher>
            }),
            datasets: Arc::new(datasets::HfDatasetWriter::new(&config.hf_endpoint, token)),
            registry: Arc::new(registry::OciRegistries::new(
                &config.registry_docker_url,
                &config.registry_ghcr_url,
                &config.registry_auth_origins,
            )),
            names: Arc::new(names::SystemNames),
            clock,
        }
    }

    /// The launcher of a provider, or why there is none.
    pub fn launcher(&self, provider: &str) -> Result<&Arc<dyn jobs::JobLauncher>, NoLauncher> {
        self.launchers.get(provider).ok_or_else(|| {
            let known: Vec<&str> = self.launchers.keys().map(String::as_str).collect();
            NoLauncher(format!(
                "the arena has no job launcher for provider `{provider}` (it launches on {})",
                known.join(", ")
            ))
        })
    }
}

/// Why a challenge's runs cannot be launched anywhere: the sentence says where they could.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NoLauncher(pub String);
