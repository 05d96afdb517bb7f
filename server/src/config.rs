use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The server's settings, from flags or the environment; the defaults run locally.
#[derive(clap::Args, Debug, Clone)]
pub struct Config {
    #[arg(long, env = "ARENA_ADDR", default_value = "127.0.0.1:7860")]
    pub addr: SocketAddr,
    /// Holds the SQLite database when `DATABASE_URL` is not set.
    #[arg(long, env = "ARENA_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// `postgres://…` for a deployment with several replicas; SQLite under the data dir otherwise.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<Secret>,
    #[arg(long, env = "ARENA_CONFIGS_DIR", default_value = "configs")]
    pub configs_dir: PathBuf,
    /// The private overlay: private suites' task lists and domain maps.
    #[arg(long, env = "ARENA_PRIVATE_OVERLAY")]
    pub private_overlay: Option<PathBuf>,
    /// On a Space: the private dataset holding the private overlay, read at start with `HF_TOKEN`
    /// into `private-overlay/` in the data dir (instead of `ARENA_PRIVATE_OVERLAY`).
    #[arg(long, env = "ARENA_PRIVATE_REPO")]
    pub private_repo: Option<String>,
    /// Where the overlay in use was read from: set at start, not a setting.
    #[arg(skip)]
    pub overlay_source: Option<domain::views::OverlaySource>,
    /// The built site: `pkg/` (wasm, JS, CSS) and the public files.
    #[arg(long, env = "ARENA_SITE_ROOT", default_value = "target/site")]
    pub site_root: PathBuf,
    /// Origins allowed to frame the pages, besides the arena itself.
    #[arg(
        long,
        env = "ARENA_FRAME_ANCESTORS",
        default_value = "https://huggingface.co https://*.huggingface.co"
    )]
    pub frame_ancestors: String,
    /// Hugging Face, for whoami (as `HF_ENDPOINT` is for HF's own clients).
    #[arg(long, env = "HF_ENDPOINT", default_value = "https://huggingface.co")]
    pub hf_endpoint: String,
    /// OpenID provider for sign-in; HF sets it for a Space with `hf_oauth: true`.
    #[arg(long, env = "OPENID_PROVIDER_URL")]
    pub openid_provider_url: Option<String>,
    #[arg(long, env = "OAUTH_CLIENT_ID")]
    pub oauth_client_id: Option<String>,
    #[arg(long, env = "OAUTH_CLIENT_SECRET")]
    pub oauth_client_secret: Option<Secret>,
    /// The arena's public base URL (sign-in redirects come back to it). Default: `https://$SPACE_HOST`
    /// on a Space, else `http://ARENA_ADDR`.
    #[arg(long, env = "ARENA_PUBLIC_URL")]
    pub public_url: Option<String>,
    #[arg(long, env = "SPACE_HOST")]
    pub space_host: Option<String>,
    /// `SameSite=None; Secure; Partitioned` session cookies (needed inside the huggingface.co
    /// frame); `false` for plain-HTTP local runs.
    #[arg(long, env = "ARENA_COOKIE_SECURE", default_value_t = true, action = clap::ArgAction::Set)]
    pub cookie_secure: bool,
    /// Members of this HF organization with the write or admin role are editors.
    #[arg(long, env = "ARENA_EDITOR_ORG", default_value = "benchflow")]
    pub editor_org: String,
    /// How long a whoami answer is reused for the same token, in seconds.
    #[arg(long, env = "ARENA_WHOAMI_CACHE_S", default_value_t = 300)]
    pub whoami_cache_s: u64,
    /// HF whoami calls for tokens the arena has not seen, per client address per minute.
    #[arg(long, env = "ARENA_UNSEEN_TOKENS_PER_MINUTE", default_value_t = 10)]
    pub unseen_tokens_per_minute: usize,
    /// The same from every client together, per minute.
    #[arg(long, env = "ARENA_UNSEEN_TOKENS_TOTAL_PER_MINUTE", default_value_t = 120)]
    pub unseen_tokens_total_per_minute: usize,
    /// Validations (and submissions) per account per hour; editors are not limited.
    #[arg(long, env = "ARENA_VALIDATIONS_PER_HOUR", default_value_t = 30)]
    pub validations_per_hour: usize,
    /// GitHub's API, for collections in GitHub repositories.
    #[arg(long, env = "GITHUB_API_URL", default_value = "https://api.github.com")]
    pub github_api_url: String,
    /// GitHub's raw-file host.
    #[arg(long, env = "GITHUB_RAW_URL", default_value = "https://raw.githubusercontent.com")]
    pub github_raw_url: String,
    /// File reads in flight for one validation.
    #[arg(long, env = "ARENA_FETCH_CONCURRENCY", default_value_t = 32)]
    pub fetch_concurrency: usize,
    /// Held-out suite fingerprints (`arena fingerprint-suite`); default `fingerprints/` in the
    /// private overlay.
    #[arg(long, env = "ARENA_FINGERPRINTS_DIR")]
    pub fingerprints_dir: Option<PathBuf>,
    /// The arena's own HF token (a Space secret): it launches jobs in `ARENA_JOBS_NAMESPACE` and
    /// writes the runs dataset. Sent to HF only.
    #[arg(long, env = "HF_TOKEN", hide_env_values = true)]
    pub hf_token: Option<Secret>,
    /// The HF namespace the arena's jobs run in.
    #[arg(long, env = "ARENA_JOBS_NAMESPACE", default_value = "benchflow")]
    pub jobs_namespace: String,
    /// The private dataset runs are mirrored into and report back to.
    #[arg(long, env = "ARENA_RUNS_DATASET", default_value = "openenvarena/arena-runs")]
    pub runs_dataset: String,
    /// The dataset the pipeline's publish commands keep its leaderboard records in; the arena
    /// creates it private before the first launch (the pipeline would create it public).
    #[arg(long, env = "ARENA_LEADERBOARD_DATASET", default_value = "openenvarena/arena-leaderboard")]
    pub leaderboard_dataset: String,
    /// The image each run's job starts: the uv image `run_uv_job` uses. The job installs the
    /// pipeline at the challenge's pinned commit.
    #[arg(long, env = "ARENA_JOB_IMAGE", default_value = domain::pipeline::DEFAULT_JOB_IMAGE)]
    pub job_image: String,
    /// Where a run's job fetches the arena's job script; default `ARENA_PUBLIC_URL/arena_job.py`
    /// (this server serves it, and the job checks its SHA-256).
    #[arg(long, env = "ARENA_JOB_SCRIPT_URL")]
    pub job_script_url: Option<String>,
    /// Values of the secrets a run's job needs from the arena (`HF_TOKEN`, `DAYTONA_API_KEY`, …):
    /// `ARENA_JOB_SECRET_{NAME}`, else `{NAME}`, from the environment (the job's `HF_TOKEN` falls
    /// back to the arena's own). Read at start by `Config::read_job_secrets`.
    #[arg(skip)]
    pub job_secrets: std::collections::BTreeMap<String, Secret>,
    /// Seconds between passes of the background work (launches left unfinished, and later the
    /// reconciler).
    #[arg(long, env = "ARENA_WORKER_TICK_S", default_value_t = 5)]
    pub worker_tick_s: u64,
    /// Overrides every challenge's silence limit (seconds): a running job without a heartbeat and
    /// with no new log line (or idle GPUs) this long is stalled. Unset: each challenge's own, the
    /// longest step its recipe allows (`domain::pipeline::config::silence_limit_s`).
    #[arg(long, env = "ARENA_SILENCE_LIMIT_S")]
    pub silence_limit_s: Option<i64>,
    /// A job still in SCHEDULING after this long is canceled and its run fails (seconds).
    #[arg(long, env = "ARENA_SCHEDULING_LIMIT_S", default_value_t = 1800)]
    pub scheduling_limit_s: i64,
    /// A relay not heard from for this long is gone (seconds).
    #[arg(long, env = "ARENA_RELAY_GRACE_S", default_value_t = 120)]
    pub relay_grace_s: i64,
    /// How often a run's job sends a heartbeat over its relay (seconds; given to the job).
    #[arg(long, env = "ARENA_RELAY_HEARTBEAT_S", default_value_t = 15.0)]
    pub relay_heartbeat_s: f64,
    /// Proxies in front of the arena whose `X-Forwarded-For` entries are trusted, for limits per
    /// client address. Unset: 1 on a Space (`SPACE_HOST` set: HF's proxy), else 0 (the peer).
    #[arg(long, env = "ARENA_TRUSTED_PROXY_HOPS")]
    pub trusted_proxy_hops: Option<usize>,
    /// How long the reconciler reads a running job's log stream each pass (milliseconds).
    #[arg(long, env = "ARENA_LOG_READ_MS", default_value_t = 1500)]
    pub log_read_ms: u64,
    /// Docker Hub's registry API, for OpenEnv images (`docker.io/…`).
    #[arg(long, env = "ARENA_REGISTRY_DOCKER_URL", default_value = "https://registry-1.docker.io")]
    pub registry_docker_url: String,
    /// GHCR's registry API (`ghcr.io/…`).
    #[arg(long, env = "ARENA_REGISTRY_GHCR_URL", default_value = "https://ghcr.io")]
    pub registry_ghcr_url: String,
    /// Origins a registry's anonymous token realm may be on besides the registry's own.
    #[arg(
        long,
        env = "ARENA_REGISTRY_AUTH_ORIGINS",
        default_value = "https://auth.docker.io",
        value_delimiter = ' '
    )]
    pub registry_auth_origins: Vec<String>,
    /// The credential the OpenEnv training cluster connects with (`/api/relay/cluster`); without
    /// it the cluster cannot connect and the OpenEnv routes answer 503.
    #[arg(long, env = "ARENA_CLUSTER_SECRET", hide_env_values = true)]
    pub cluster_secret: Option<Secret>,
    /// The HF token the admission probe sends to a sandbox's exposed port (HF lets a token that
    /// may read the sandbox namespace through; `portsPublic` is not used). HF does not document
    /// whether its jobs proxy passes the header on to the participant's server, so it must be
    /// worth nothing to steal: a read token of an account whose only organization is
    /// `ARENA_SANDBOX_NAMESPACE` (checked with whoami at start; the server refuses to start
    /// otherwise). Without it admission cannot probe (a platform error).
    #[arg(long, env = "ARENA_SANDBOX_TOKEN", hide_env_values = true)]
    pub sandbox_token: Option<Secret>,
    /// The HF organization participants' sandboxes run in (admission's here, the trainer's on the
    /// cluster): one that holds nothing else, apart from the namespaces of the arena's datasets
    /// and collection jobs. `HF_TOKEN` must be able to start jobs there.
    #[arg(long, env = "ARENA_SANDBOX_NAMESPACE")]
    pub sandbox_namespace: Option<String>,
    /// Lets webhooks call loopback addresses over plain http: a local trial only (`dev/run` sets
    /// it and says so); a deployment never does.
    #[arg(long, env = "ARENA_WEBHOOKS_ALLOW_LOOPBACK", default_value_t = false, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub webhooks_allow_loopback: bool,
    /// The HF organization held-out evaluation episodes run in, apart from participants' sandboxes:
    /// the participants' reader (`ARENA_SANDBOX_TOKEN`) must not be able to read it (checked at
    /// start), and it holds none of the arena's datasets. The cluster starts them there and
    /// reaches them with a reader of its own, which participants never receive.
    #[arg(long, env = "ARENA_EVAL_NAMESPACE")]
    pub eval_namespace: Option<String>,
    /// OpenEnv submissions waiting for admission beyond which new ones are refused `CAPACITY_BUSY`.
    #[arg(long, env = "ARENA_OPENENV_ADMISSION_QUEUE", default_value_t = 20)]
    pub openenv_admission_queue: i64,
    /// How long a cluster node may be silent before the arena gives it up: no new runs, its runs
    /// that never started back in the queue, those training failed `RUN_NODE_LOST`.
    #[arg(long, env = "ARENA_NODE_LOST_S", default_value_t = domain::openenv::queue::NODE_LOST_S)]
    pub node_lost_s: i64,
    /// How long an admission sandbox may take to answer `GET /health` (the guide: 120 s).
    #[arg(long, env = "ARENA_SANDBOX_HEALTH_S", default_value_t = 120)]
    pub sandbox_health_s: u64,
    /// Admission sandboxes one server runs at once.
    #[arg(long, env = "ARENA_SANDBOX_LIMIT", default_value_t = 8)]
    pub sandbox_limit: usize,
    /// One admission probe's whole time (scheduling, health, reads and the example episode), in
    /// seconds; past it the probe fails and its sandbox is stopped.
    #[arg(long, env = "ARENA_PROBE_DEADLINE_S", default_value_t = 900)]
    pub probe_deadline_s: u64,
    /// Submissions of different accounts admitted side by side (one account's go one at a time).
    #[arg(long, env = "ARENA_ADMISSIONS_AT_ONCE", default_value_t = 3)]
    pub admissions_at_once: usize,
    /// The sandbox time one submission's admission may spend, all its probes together (seconds);
    /// past it the tasks not yet checked are not, and the slot is returned.
    #[arg(long, env = "ARENA_ADMISSION_ALLOWANCE_S", default_value_t = 5400)]
    pub admission_allowance_s: u64,
    /// Probes of one submission that may fail on the platform's side (an image that never serves
    /// fails so in every sandbox) before its other tasks are not tried.
    #[arg(long, env = "ARENA_ADMISSION_PLATFORM_FAILURES", default_value_t = 4)]
    pub admission_platform_failures: u32,
    /// Submissions of one account whose slot was returned within its quota window, past which its
    /// next submission waits (accepted, not admitted) until the oldest leaves the window.
    #[arg(long, env = "ARENA_RETURNED_SLOTS_PER_WINDOW", default_value_t = 2)]
    pub returned_slots_per_window: i64,
    /// How long a server's hold on a submission's admission lasts without renewal (seconds); a
    /// probe renews it while it runs, so no other server probes the same submission.
    #[arg(long, env = "ARENA_ADMISSION_LEASE_S", default_value_t = 600)]
    pub admission_lease_s: u64,
    /// A private HF dataset the arena's token writes: the SQLite database is backed up there and
    /// restored from it at start when the database file is missing (the `backup` module). Refused
    /// with PostgreSQL, which keeps its own backups.
    #[arg(long, env = "ARENA_BACKUP_REPO")]
    pub backup_repo: Option<String>,
    /// The key the arena signs its snapshots and its runs' origins with (HMAC-SHA-256; at least 32
    /// characters, a Space secret): a restore believes only what it signed. Required with
    /// `ARENA_BACKUP_REPO`.
    #[arg(long, env = "ARENA_BACKUP_KEY", hide_env_values = true)]
    pub backup_key: Option<Secret>,
    /// The largest database a snapshot may decompress to at a restore (MiB).
    #[arg(long, env = "ARENA_BACKUP_MAX_DB_MIB", default_value_t = 8192)]
    pub backup_max_db_mib: u64,
    /// Seconds between snapshots (taken only when the database changed).
    #[arg(long, env = "ARENA_BACKUP_EVERY_S", default_value_t = 60)]
    pub backup_every_s: u64,
    /// Snapshots kept in the backup dataset; each commit deletes the older ones.
    #[arg(long, env = "ARENA_BACKUP_KEEP", default_value_t = 24)]
    pub backup_keep: usize,
    /// The snapshot an editor restores on purpose (its path in the backup dataset, from `main` or
    /// from the dataset's history), even when a newer one the arena signed was deleted; without
    /// it, a restore that would go back past a signed snapshot stops the start.
    #[arg(long, env = "ARENA_RESTORE_SNAPSHOT")]
    pub restore_snapshot: Option<String>,
    /// Restore from the backup dataset at start even though the database file exists.
    #[arg(long, env = "ARENA_RESTORE", default_value_t = false, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub restore: bool,
    /// The program that checks an OpenEnv body's JSON Schemas in a process of its own (`arena
    /// check-schemas`, `openenv::schema_guard`): this binary unless set (tests name the built one).
    #[arg(long, env = "ARENA_SCHEMA_CHECKER")]
    pub schema_checker: Option<PathBuf>,
    /// One schema check's wall time (seconds); past it the schema is refused as too complex.
    #[arg(long, env = "ARENA_SCHEMA_CHECK_S", default_value_t = 2)]
    pub schema_check_s: u64,
    /// The address space a schema check's process may use (MiB).
    #[arg(long, env = "ARENA_SCHEMA_CHECK_MEMORY_MIB", default_value_t = 1024)]
    pub schema_check_memory_mib: u64,
    /// Schema checks an account may start in any minute (they run one at a time per account);
    /// past it, 429 `RATE_LIMITED` with `Retry-After`.
    #[arg(long, env = "ARENA_SCHEMA_CHECKS_PER_MINUTE", default_value_t = 20)]
    pub schema_checks_per_minute: usize,
    /// HF account ids that are the arena's own besides those it finds itself (`HF_TOKEN`'s and
    /// `ARENA_SANDBOX_TOKEN`'s accounts, and members of the sandbox and evaluation namespaces):
    /// refused as callers everywhere (`SERVICE_ACCOUNT`). Comma-separated.
    #[arg(long, env = "ARENA_SERVICE_ACCOUNTS", value_delimiter = ',')]
    pub service_accounts: Vec<String>,
    /// The key webhook secrets are encrypted with at rest (XChaCha20-Poly1305; 64 hex digits, a
    /// Space secret: `openssl rand -hex 32`). Required once any webhook is registered.
    #[arg(long, env = "ARENA_WEBHOOK_KEY", hide_env_values = true)]
    pub webhook_key: Option<Secret>,
    /// Hosts `/mcp` answers besides the public URL's (`Host` header values, with the port when one
    /// is used); a request naming another host is refused (DNS rebinding). Comma-separated.
    #[arg(long, env = "ARENA_MCP_HOSTS", value_delimiter = ',')]
    pub mcp_hosts: Vec<String>,
}

impl Default for Config {
    /// Every setting at its flag's default, the environment ignored: what a test or a tool starts
    /// from before it sets what it needs.
    fn default() -> Config {
        use clap::{Args, FromArgMatches};
        let command = Config::augment_args(clap::Command::new("arena")).mut_args(|a| a.env(None));
        let matches =
            command.try_get_matches_from(["arena"]).expect("every setting has a default or is optional");
        Config::from_arg_matches(&matches).expect("the defaults are settings")
    }
}

impl Config {
    /// Reads the job secrets' values from the environment (see `job_secrets`).
    pub fn read_job_secrets(&mut self) {
        for name in domain::pipeline::secrets::FORWARDABLE {
            let value = std::env::var(format!("ARENA_JOB_SECRET_{name}"))
                .or_else(|_| std::env::var(name))
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(Secret)
                .or_else(|| (*name == "HF_TOKEN").then(|| self.hf_token.clone()).flatten());
            if let Some(v) = value {
                self.job_secrets.insert(name.to_string(), v);
            }
        }
    }

    pub fn proxy_hops(&self) -> usize {
        self.trusted_proxy_hops.unwrap_or(usize::from(self.space_host.is_some()))
    }

    pub fn job_script_url(&self) -> String {
        self.job_script_url.clone().unwrap_or_else(|| format!("{}/arena_job.py", self.public_url()))
    }

    pub fn fingerprints_dir(&self) -> Option<PathBuf> {
        self.fingerprints_dir
            .clone()
            .or_else(|| self.private_overlay.as_ref().map(|o| o.join("fingerprints")))
    }

    pub fn public_url(&self) -> String {
        match (&self.public_url, &self.space_host) {
            (Some(url), _) => url.trim_end_matches('/').to_string(),
            (None, Some(host)) => format!("https://{host}"),
            (None, None) => format!("http://{}", self.addr),
        }
    }

    /// The SQLite database file, when the database is SQLite's.
    pub fn sqlite_path(&self) -> Option<PathBuf> {
        self.database_url.is_none().then(|| self.data_dir.join("arena.sqlite"))
    }

    pub fn database_url(&self) -> anyhow::Result<String> {
        match &self.database_url {
            Some(url) => Ok(url.0.clone()),
            None => {
                std::fs::create_dir_all(&self.data_dir)?;
                let path = self.data_dir.join("arena.sqlite");
                Ok(format!("sqlite://{}?mode=rwc", path.display()))
            }
        }
    }
}

/// A value that must not reach logs: `Debug` prints a placeholder.
#[derive(Clone)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_string()))
    }
}
