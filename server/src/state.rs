use std::sync::Arc;

use domain::limits::Window;

use axum::extract::FromRef;
use domain::Registry;
use leptos::config::LeptosOptions;

use crate::caches::Caches;
use crate::changes::Changes;
use crate::config::{Config, Secret};
use crate::db::Db;
use crate::identity::cache::CachedHub;
use crate::identity::provider::OAuthSettings;
use crate::ports::Deps;
use crate::sources::fetch::Sources;
use crate::version::BuildInfo;
use domain::gates::fingerprint::SuiteFingerprint;

/// How callers are identified.
pub struct AuthSettings {
    pub editor_org: String,
    /// `scheme://host[:port]` of the arena's public URL, which its own pages send as `Origin`.
    pub public_origin: String,
    /// `None` when sign-in is not configured: `/auth/login` says so.
    pub oauth: Option<OAuthSettings>,
    /// Trusted proxies in front of the arena (`ARENA_TRUSTED_PROXY_HOPS`): where a client's
    /// address is read from (`crate::http::client`).
    pub proxy_hops: usize,
    /// Signed-in people's OAuth access tokens, in memory only, by the session's `token_ref`:
    /// never written to the database or a log.
    pub session_tokens: moka::future::Cache<String, String>,
    /// How often a session's editor role is confirmed by HF (seconds).
    pub recheck_s: i64,
    /// Where MCP clients sign their users in (`/.well-known/oauth-protected-resource`): Hugging
    /// Face's OpenID provider (`OPENID_PROVIDER_URL` on a Space, else `HF_ENDPOINT`).
    pub authorization_server: String,
    /// The arena's own accounts, refused as callers (`SERVICE_ACCOUNT`), and the SHA-256 of its
    /// own tokens, refused before HF is asked.
    pub service: domain::identity::ServiceAccounts,
    pub service_tokens: Vec<String>,
    /// The `Host` values `/mcp` answers (the public URL's and `ARENA_MCP_HOSTS`).
    pub mcp_hosts: Vec<String>,
}

/// Everything a handler may need; each takes what it uses.
#[derive(Clone)]
pub struct AppState {
    pub registry: Arc<Registry>,
    pub db: Db,
    pub build: Arc<BuildInfo>,
    pub leptos: LeptosOptions,
    pub hub: Arc<CachedHub>,
    pub auth: Arc<AuthSettings>,
    /// The hosts collections are read from.
    pub sources: Arc<Sources>,
    /// Held-out suite fingerprints the gates compare with.
    pub fingerprints: Arc<Vec<Arc<SuiteFingerprint>>>,
    /// What changed since a read was cached, and the cached reads.
    pub changes: Arc<Changes>,
    pub caches: Arc<Caches>,
    /// The outside world's adapters (jobs, dataset writes, clock).
    pub deps: Deps,
    /// This process, as the owner of the leases it takes.
    pub server_id: String,
    /// Where runs are mirrored and report to, and the arena's own public address (the jobs
    /// report back to it).
    pub runs_dataset: String,
    pub public_url: String,
    /// What a run's job is made of: its image, the job script, the secrets the arena gives it.
    pub jobs: Arc<JobSettings>,
    /// How long runs may stall or wait to start, and a relay's grace period.
    pub reconcile: crate::runs::settings::Settings,
    pub openenv: Arc<OpenEnvSettings>,
    /// The SQLite database's backups, when `ARENA_BACKUP_REPO` is set.
    pub backups: Option<Arc<crate::backup::Backups>>,
    /// The browser sessions' store, for the pass that deletes expired ones.
    pub sessions: Option<crate::identity::sessions::SqlStore>,
    /// The arena's signing key (`ARENA_BACKUP_KEY`): signs snapshots and run origins, so that a
    /// restored arena believes only what it wrote itself.
    pub signing: Option<Arc<crate::signing::SigningKey>>,
    /// The one client that calls webhooks' receivers.
    pub webhooks: Arc<crate::webhooks::client::Guarded>,
    /// What webhook secrets are sealed with at rest (`ARENA_WEBHOOK_KEY`); none: registering one
    /// is refused.
    pub webhook_key: Option<Arc<crate::webhooks::sealed::SealKey>>,
}

/// The arena's job script, as this build serves it at `/arena_job.py`.
pub const JOB_SCRIPT: &str = include_str!("../../public/arena_job.py");

/// How the arena makes a run's HF job.
pub struct JobSettings {
    pub image: String,
    pub script_url: String,
    /// SHA-256 of `JOB_SCRIPT`: the job checks it runs this version.
    pub script_sha256: String,
    pub namespace: String,
    pub leaderboard_dataset: String,
    /// Values of the secrets the arena forwards, by name (never logged; sent to HF only).
    pub secrets: std::collections::BTreeMap<String, Secret>,
    /// How often the job heartbeats over its relay (seconds).
    pub heartbeat_s: f64,
}

/// The OpenEnv track's settings.
#[derive(Clone)]
pub struct OpenEnvSettings {
    /// Submissions waiting for admission beyond which new ones get `CAPACITY_BUSY`.
    pub admission_queue: i64,
    /// How long a cluster node may be silent before it is given up (`ARENA_NODE_LOST_S`).
    pub node_lost_s: i64,
    /// SHA-256 of the credential the training cluster connects with (none: it cannot connect).
    pub cluster_secret_hash: Option<String>,
    /// How long an admission sandbox may take to answer `/health`.
    pub health_wait: std::time::Duration,
    /// Admission sandboxes at once.
    pub sandbox_limit: usize,
    /// One probe's whole time.
    pub probe_deadline: std::time::Duration,
    /// The admission lease, renewed every third of it while probes run.
    pub lease_s: i64,
    /// The HF token a probe sends to a sandbox's exposed port (`ARENA_SANDBOX_TOKEN`).
    pub sandbox_token: Option<crate::config::Secret>,
    /// The organization participants' sandboxes run in (`ARENA_SANDBOX_NAMESPACE`).
    pub sandbox_namespace: Option<String>,
    /// The admission sandboxes this server runs at once, whichever submissions they are for.
    pub sandboxes: Arc<tokio::sync::Semaphore>,
    /// Submissions (of different accounts) admitted at once.
    pub admissions_at_once: usize,
    /// What one submission's admission may spend.
    pub allowance: domain::openenv::admission::Allowance,
    /// Returned slots per account and quota window before its submissions wait.
    pub returned_slots_per_window: i64,
    /// Checks a body's schemas and actions in processes of their own.
    pub schemas: Arc<crate::openenv::schema_guard::SchemaGuard>,
    /// Every credential the arena holds that a participant's server could echo back (its own
    /// token, the sandbox reader, the cluster's secret): scrubbed from what admission stores.
    pub secrets: Vec<crate::config::Secret>,
}

impl AppState {
    /// The clock port's time, as stored (RFC 3339) and as an epoch.
    pub fn now(&self) -> domain::time::Timestamp {
        let t = self.deps.clock.now();
        domain::time::Timestamp { text: crate::clock::rfc3339(t), epoch: t.unix_timestamp() }
    }

    /// A fresh lease owner: this server and one piece of its work (two tasks of one server never
    /// share a lease).
    pub fn lease_holder(&self) -> String {
        format!("{}/{}", self.server_id, crate::identity::secrets::random_hex(4))
    }

    /// The task names of the sealed held-out suites: never shown to anyone in a run's reason or
    /// events (`domain::runs::redact_tasks`).
    pub fn sealed_task_ids(&self) -> std::collections::BTreeSet<String> {
        self.fingerprints
            .iter()
            .filter(|f| f.sealed)
            .flat_map(|f| f.tasks.iter().map(|t| t.name.clone()))
            .collect()
    }

    /// A challenge of the registry, or `CHALLENGE_NOT_FOUND`.
    pub fn challenge(&self, id: &str) -> Result<&domain::registry::Challenge, crate::http::ApiError> {
        self.registry.challenge(id).ok_or_else(|| {
            crate::http::ApiError::new(
                domain::ErrorCode::ChallengeNotFound,
                format!("no challenge `{id}`; GET /api/challenges lists them"),
            )
        })
    }

    /// Where the challenge's runs are launched (its `compute.provider`), or why nowhere.
    pub fn launcher_of(
        &self,
        challenge_id: &str,
    ) -> Result<&Arc<dyn crate::ports::jobs::JobLauncher>, crate::ports::NoLauncher> {
        let c = self
            .registry
            .challenge(challenge_id)
            .ok_or_else(|| crate::ports::NoLauncher(format!("no challenge `{challenge_id}`")))?;
        self.deps.launcher(&c.spec.compute.provider)
    }

    pub fn new(
        registry: Arc<Registry>,
        db: Db,
        config: &Config,
        fingerprints: Vec<Arc<SuiteFingerprint>>,
        deps: Deps,
        service: domain::identity::ServiceAccounts,
    ) -> anyhow::Result<AppState> {
        let leptos = LeptosOptions::builder()
            .output_name("arena")
            .site_root(config.site_root.to_string_lossy().to_string())
            .site_pkg_dir("pkg")
            .build();
        let oauth = oauth_settings(config);
        let changes = Changes::new(db.backend);
        let caches = Arc::new(Caches::new(&registry)?);
        let (hub, hf_repos, github) = (deps.hub.clone(), deps.hf_repos.clone(), deps.github.clone());
        if config.webhooks_allow_loopback {
            tracing::warn!("webhooks may call loopback addresses over plain http (ARENA_WEBHOOKS_ALLOW_LOOPBACK): a local trial only");
        }
        let webhooks = Arc::new(crate::webhooks::client::Guarded::new(
            deps.names.clone(),
            config.webhooks_allow_loopback,
        ));
        Ok(AppState {
            changes,
            caches,
            deps,
            server_id: format!("server-{}", crate::identity::secrets::random_hex(6)),
            runs_dataset: config.runs_dataset.clone(),
            public_url: config.public_url(),
            jobs: Arc::new(job_settings(config)),
            reconcile: crate::runs::settings::Settings {
                silence_limit_s: config.silence_limit_s,
                scheduling_s: config.scheduling_limit_s,
                relay_grace_s: config.relay_grace_s,
                log_read: std::time::Duration::from_millis(config.log_read_ms),
            },
            openenv: Arc::new(openenv_settings(config)),
            backups: None,
            sessions: None,
            registry,
            db,
            build: Arc::new(BuildInfo::capture(&config.site_root, config.overlay_source.clone())),
            leptos,
            hub: Arc::new(CachedHub::with_limits(
                hub,
                std::time::Duration::from_secs(config.whoami_cache_s),
                crate::identity::cache::MissLimits {
                    per_client: Window { cap: config.unseen_tokens_per_minute, window_ms: 60_000 },
                    total: Window { cap: config.unseen_tokens_total_per_minute, window_ms: 60_000 },
                    ..crate::identity::cache::MISS_LIMITS
                },
            )),
            auth: Arc::new(auth_settings(config, oauth, service)),
            sources: Arc::new(Sources::new(
                hf_repos,
                github,
                config.fetch_concurrency,
                config.validations_per_hour,
            )),
            fingerprints: Arc::new(fingerprints),
            signing: None,
            webhooks,
            webhook_key: match &config.webhook_key {
                Some(key) => Some(Arc::new(crate::webhooks::sealed::SealKey::from_hex(&key.0)?)),
                None => None,
            },
        })
    }
}

/// How runs' jobs are launched: the image, the served job script and its digest, the namespace.
fn job_settings(config: &Config) -> JobSettings {
    JobSettings {
        image: config.job_image.clone(),
        script_url: config.job_script_url(),
        script_sha256: crate::identity::secrets::sha256_hex(JOB_SCRIPT),
        namespace: config.jobs_namespace.clone(),
        leaderboard_dataset: config.leaderboard_dataset.clone(),
        secrets: config.job_secrets.clone(),
        heartbeat_s: config.relay_heartbeat_s,
    }
}

/// The OpenEnv track's admission and sandbox settings, each bounded below where zero would stall.
fn openenv_settings(config: &Config) -> OpenEnvSettings {
    OpenEnvSettings {
        admission_queue: config.openenv_admission_queue,
        node_lost_s: config.node_lost_s.max(1),
        cluster_secret_hash: config
            .cluster_secret
            .as_ref()
            .map(|s| crate::identity::secrets::sha256_hex(&s.0)),
        health_wait: std::time::Duration::from_secs(config.sandbox_health_s),
        sandbox_limit: config.sandbox_limit.max(1),
        probe_deadline: std::time::Duration::from_secs(config.probe_deadline_s.max(1)),
        lease_s: config.admission_lease_s.max(3) as i64,
        sandbox_token: config.sandbox_token.clone(),
        sandbox_namespace: config.sandbox_namespace.clone().filter(|n| !n.is_empty()),
        sandboxes: Arc::new(tokio::sync::Semaphore::new(config.sandbox_limit.max(1))),
        admissions_at_once: config.admissions_at_once.max(1),
        allowance: domain::openenv::admission::Allowance {
            sandbox_s: config.admission_allowance_s,
            platform_failures: config.admission_platform_failures.max(1),
        },
        returned_slots_per_window: config.returned_slots_per_window.max(1),
        secrets: [&config.hf_token, &config.sandbox_token, &config.cluster_secret]
            .into_iter()
            .flatten()
            .cloned()
            .chain(config.job_secrets.values().cloned())
            .collect(),
        schemas: Arc::new(crate::openenv::schema_guard::SchemaGuard::new(
            // This binary unless the settings name another (tests name the built `arena`).
            config
                .schema_checker
                .clone()
                .or_else(|| std::env::current_exe().ok())
                .unwrap_or_else(|| "arena".into()),
            crate::openenv::schema_guard::Bounds {
                deadline: std::time::Duration::from_secs(config.schema_check_s.max(1)),
                memory_mib: config.schema_check_memory_mib.max(64),
                per_minute: config.schema_checks_per_minute.max(1),
                ..Default::default()
            },
        )),
    }
}

/// HF sign-in, when both halves of the OAuth client are set.
fn oauth_settings(config: &Config) -> Option<OAuthSettings> {
    match (&config.oauth_client_id, &config.oauth_client_secret) {
        (Some(id), Some(secret)) => Some(OAuthSettings::new(
            id.clone(),
            secret.clone(),
            config.openid_provider_url.as_deref().unwrap_or(&config.hf_endpoint),
            &config.public_url(),
        )),
        _ => None,
    }
}

/// Sign-in: the editors' org, the public origin, how often a session re-checks its token.
fn auth_settings(
    config: &Config,
    oauth: Option<OAuthSettings>,
    service: domain::identity::ServiceAccounts,
) -> AuthSettings {
    let own_tokens = [&config.hf_token, &config.sandbox_token];
    let public_host = url::Url::parse(&config.public_url())
        .ok()
        .and_then(|u| u.host_str().map(|h| u.port().map_or(h.to_string(), |p| format!("{h}:{p}"))));
    AuthSettings {
        service,
        service_tokens: own_tokens
            .into_iter()
            .flatten()
            .map(|t| crate::identity::secrets::sha256_hex(&t.0))
            .collect(),
        mcp_hosts: public_host.into_iter().chain(config.mcp_hosts.iter().cloned()).collect(),
        editor_org: config.editor_org.clone(),
        public_origin: crate::identity::provider::origin_of(&config.public_url()).unwrap_or_default(),
        oauth,
        proxy_hops: config.proxy_hops(),
        session_tokens: moka::future::Cache::builder()
            .max_capacity(100_000)
            .time_to_live(std::time::Duration::from_secs(8 * 3600))
            .build(),
        recheck_s: config.whoami_cache_s as i64,
        authorization_server: config
            .openid_provider_url
            .as_deref()
            .unwrap_or(&config.hf_endpoint)
            .trim_end_matches('/')
            .to_string(),
    }
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}
