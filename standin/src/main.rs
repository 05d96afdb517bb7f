use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use standin::{users, Faults, Hub, OAuthApp};

/// A local stand-in for the Hugging Face Hub (whoami, OAuth, OpenID discovery, datasets) and for
/// GitHub's repository reads, serving local git repositories.
#[derive(Parser)]
#[command(name = "arena-standin")]
struct Args {
    #[arg(long, env = "STANDIN_ADDR", default_value = "127.0.0.1:7861")]
    addr: SocketAddr,
    /// JSON list of users: [{"name","token","fullname","orgs":[{"name","role"}]}]. Without it, a
    /// demo set of two participants and one editor.
    #[arg(long, env = "ARENA_HUB_USERS")]
    users: Option<PathBuf>,
    #[arg(long, env = "STANDIN_CLIENT_ID", default_value = "arena-local")]
    client_id: String,
    #[arg(long, env = "STANDIN_CLIENT_SECRET", default_value = "arena-local-secret")]
    client_secret: String,
    /// Faults to start with, as JSON (see `PUT /_standin/faults`).
    #[arg(long, env = "STANDIN_FAULTS")]
    faults: Option<String>,
    /// A directory of git repositories to serve: `datasets/{owner}/{name}` as HF datasets,
    /// `github/{owner}/{repo}` as GitHub repositories.
    #[arg(long, env = "ARENA_HUB_REPOS")]
    repos: Option<PathBuf>,
    /// Entries per page of a dataset tree listing when the request gives no `limit`.
    #[arg(long, env = "STANDIN_TREE_PAGE_SIZE", default_value_t = 1000)]
    tree_page_size: usize,
    /// GitHub API calls allowed per hourly window (change it at runtime with `PUT /_standin/github`).
    #[arg(long, env = "STANDIN_GITHUB_RATE_LIMIT", default_value_t = 60)]
    github_rate_limit: u32,
    /// How long each stage of a simulated pipeline job takes, in milliseconds.
    #[arg(long, env = "STANDIN_STAGE_MS", default_value_t = 2000)]
    stage_ms: u64,
    /// How long a sandbox takes to start (seconds) before its server can answer, as HF's
    /// scheduling and image pull take (0: at once; `PUT /_standin/sandboxes` changes it).
    #[arg(long, env = "STANDIN_SANDBOX_START_S", default_value_t = 0.0)]
    sandbox_start_s: f64,
    /// Answer explicit `null` for every optional job field that holds nothing, as a client must
    /// read the same as a missing key (`huggingface_hub` reads them with `.get()`).
    #[arg(long, env = "STANDIN_JOB_NULLS", default_value_t = false, value_parser = clap::builder::BoolishValueParser::new())]
    job_nulls: bool,
    /// A directory of container image descriptions to serve as Docker Hub and GHCR (`/registry/…`).
    /// Datasets made from folders, `OWNER/NAME=DIR[,…]`, each committed with a fixed author and
    /// date so its commit is the same everywhere (the local demo's held-out suite).
    #[arg(long, env = "STANDIN_SEED_DATASETS")]
    seed_datasets: Option<String>,
    #[arg(long, env = "STANDIN_IMAGES")]
    images: Option<PathBuf>,
    /// Connect a simulated OpenEnv training cluster to the arena at this URL
    /// (with `STANDIN_CLUSTER_SECRET`, the arena's `ARENA_CLUSTER_SECRET`).
    #[arg(long, env = "STANDIN_CLUSTER_URL")]
    cluster_url: Option<String>,
    #[arg(long, env = "STANDIN_CLUSTER_SECRET", hide_env_values = true)]
    cluster_secret: Option<String>,
    /// How often the simulated cluster sends a heartbeat (and the arena its assignments).
    #[arg(long, env = "STANDIN_CLUSTER_HEARTBEAT_MS", default_value_t = 2000)]
    cluster_heartbeat_ms: u64,
    /// The simulated cluster's nodes, each its own connection (`standin-node-1`, …).
    #[arg(long, env = "STANDIN_CLUSTER_NODES", default_value_t = 1)]
    cluster_nodes: u32,
    /// Each simulated node's GPUs.
    #[arg(long, env = "STANDIN_CLUSTER_GPUS", default_value_t = 1)]
    cluster_gpus: u32,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let args = Args::parse();
    let users = match &args.users {
        Some(path) => users::parse(&std::fs::read_to_string(path)?)?,
        None => {
            let demo = users::demo();
            eprintln!("local demo users (tokens work only against this stand-in):");
            for u in &demo {
                let orgs: Vec<String> = u.orgs.iter().map(|o| format!("{}:{}", o.name, o.role)).collect();
                eprintln!("  {:<12} HF_TOKEN={}  {}", u.name, u.token, orgs.join(" "));
            }
            demo
        }
    };
    let faults: Faults = match &args.faults {
        Some(json) => serde_json::from_str(json)?,
        None => Faults::default(),
    };
    let mut hub =
        Hub::new(users, OAuthApp { client_id: args.client_id, client_secret: args.client_secret }, faults)
            .with_tree_page_size(args.tree_page_size)
            .with_github_rate_limit(args.github_rate_limit)
            .with_stage_ms(args.stage_ms);
    hub.jobs.nulls_always.store(args.job_nulls, std::sync::atomic::Ordering::Relaxed);
    hub.jobs
        .sandbox_start_ms
        .store((args.sandbox_start_s.max(0.0) * 1000.0) as u64, std::sync::atomic::Ordering::Relaxed);
    if let Some(dir) = args.repos {
        anyhow::ensure!(dir.is_dir(), "ARENA_HUB_REPOS {} is not a directory", dir.display());
        tracing::info!("serving the git repositories under {}", dir.display());
        hub = hub.with_repos(dir);
    }
    for seed in args.seed_datasets.iter().flat_map(|s| s.split(',')).filter(|s| !s.is_empty()) {
        let (id, dir) = seed
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("STANDIN_SEED_DATASETS: `{seed}` is not OWNER/NAME=DIR"))?;
        let (h, commit) = hub.with_seed_dataset(id, std::path::Path::new(dir))?;
        hub = h;
        tracing::info!("serving the dataset {id} made from {dir} at {commit}");
    }
    if let Some(dir) = args.images {
        let images = standin::registry::load(&dir)?;
        tracing::info!("serving {} container image repositories from {}", images.len(), dir.display());
        hub = hub.with_images(images);
    }
    if let (Some(url), Some(secret)) = (&args.cluster_url, &args.cluster_secret) {
        tracing::info!(
            "a simulated OpenEnv training cluster of {} node(s) of {} GPU(s) connects to {url}",
            args.cluster_nodes,
            args.cluster_gpus
        );
        let trainer = standin::trainer::Trainer {
            images: std::sync::Arc::new(hub.images.clone()),
            stage: std::time::Duration::from_millis(args.stage_ms),
        };
        for n in 1..=args.cluster_nodes.max(1) {
            let cluster = standin::cluster::Cluster {
                node_id: Some(format!("standin-node-{n}")),
                gpus_free: args.cluster_gpus.max(1),
                // Five sandboxes a run's step, and room for admission beside it.
                sandboxes_free: 16.max(args.cluster_gpus.max(1) * 8),
                heartbeat: std::time::Duration::from_millis(args.cluster_heartbeat_ms),
                trainer: Some(trainer.clone()),
            };
            standin::cluster::connect(url, secret, cluster);
        }
    }
    let listener = tokio::net::TcpListener::bind(args.addr).await?;
    tracing::info!("Hugging Face stand-in on http://{}", listener.local_addr()?);
    tokio::select! {
        served = standin::serve(listener, hub) => served?,
        _ = standin::groups::until_told_to_stop() => {
            let stopped = standin::groups::stop_all();
            tracing::info!("stopping: {stopped} sandboxes and jobs still running were stopped");
        }
    }
    Ok(())
}
