use std::path::PathBuf;

use clap::{Parser, Subcommand};
use server::Config;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(name = "arena", about = "Open Env Arena")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    config: Config,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the arena (the default).
    Serve,
    /// Load every config, check every layout, and print each challenge's composed run config.
    CheckConfigs {
        #[arg(long, env = "ARENA_CONFIGS_DIR", default_value = "configs")]
        configs_dir: PathBuf,
        #[arg(long, env = "ARENA_PRIVATE_OVERLAY")]
        private_overlay: Option<PathBuf>,
    },
    /// Run the structure check and static gates on a local collection directory (no network, no
    /// database) and print the report; `--fingerprints` compares with the suites in that directory
    /// (`--evaluated` names the one counted as evaluated). The time the checks took goes to stderr.
    CheckDir {
        dir: PathBuf,
        #[arg(long)]
        fingerprints: Option<PathBuf>,
        #[arg(long)]
        evaluated: Option<String>,
        /// Run the checks this many times (for timing).
        #[arg(long, default_value_t = 1)]
        repeat: u32,
    },
    /// Re-verify a run offline: DIR holds a local copy of the runs dataset with `job-inputs/RUN_ID/`
    /// and `runs/RUN_ID/` (what `hf download REPO --repo-type dataset --include …` gives). Makes
    /// `result collect`'s checks without a server or a network and prints the recomputed result
    /// as JSON (exit 0), or the first difference (exit 1).
    VerifyRun { dir: PathBuf, run_id: String },
    /// Fingerprint a held-out suite (prompt 13-gram hashes and file blob ids, template text set
    /// apart) from a local directory holding `envs/` or `tasks/`; prints the JSON.
    FingerprintSuite {
        /// The suite's directory.
        dir: PathBuf,
        /// The suite id (as in `configs/suites/`).
        #[arg(long)]
        suite: String,
        /// The suite is sealed (its tasks are not published).
        #[arg(long)]
        sealed: bool,
    },
    /// The schema checker the server starts for each OpenEnv body (`openenv::schema_guard`): one
    /// check as JSON on stdin, its verdict on stdout, within the limits its environment sets.
    #[command(hide = true)]
    CheckSchemas,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Serve);
    // The schema checker logs nothing (its stdout is its verdict) and starts no runtime.
    if !matches!(command, Command::CheckSchemas) {
        tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
            .init();
    }
    match command {
        Command::Serve => tokio::runtime::Runtime::new()?.block_on(serve(cli.config)),
        Command::CheckSchemas => server::openenv::schema_guard::child_main(),
        Command::CheckDir { dir, fingerprints, evaluated, repeat } => {
            check_dir(&dir, fingerprints, evaluated, repeat)
        }
        Command::VerifyRun { dir, run_id } => verify_run(&dir, &run_id),
        Command::FingerprintSuite { dir, suite, sealed } => fingerprint_suite(&dir, &suite, sealed),
        Command::CheckConfigs { configs_dir, private_overlay } => {
            check_configs(&configs_dir, private_overlay)
        }
    }
}

/// `arena check-dir`: the validation's checks on a local folder, timed; exits 1 when not valid.
fn check_dir(
    dir: &std::path::Path,
    fingerprints: Option<PathBuf>,
    evaluated: Option<String>,
    repeat: u32,
) -> anyhow::Result<()> {
    let (listing, contents) = server::local::read_dir(dir)?;
    let suites = server::heldout::load(fingerprints.as_deref())?;
    let held = domain::gates::fingerprint::HeldOut {
        suites: suites
            .into_iter()
            .map(|s| {
                let e = evaluated.as_deref() == Some(s.suite.as_str());
                (s, e)
            })
            .collect(),
    };
    let started = std::time::Instant::now();
    let mut report = domain::collection::check(&listing, &contents, &held);
    for _ in 1..repeat.max(1) {
        report = domain::collection::check(&listing, &contents, &held);
    }
    let per_run = started.elapsed() / repeat.max(1);
    eprintln!(
        "checked {} task(s), {} file(s) in {:.2} ms per run ({} run(s)); valid: {}, eligible: {}",
        report.tasks,
        listing.len(),
        per_run.as_secs_f64() * 1000.0,
        repeat.max(1),
        report.valid,
        report.eligible_tasks
    );
    println!("{}", serde_json::to_string_pretty(&report)?);
    std::process::exit(if report.valid { 0 } else { 1 });
}

/// `arena verify-run DIR RUN_ID`: collect's checks on a local copy of a run; exits 1 on the first
/// difference.
fn verify_run(dir: &std::path::Path, run_id: &str) -> anyhow::Result<()> {
    match server::local::verify_run(dir, run_id) {
        Ok(answer) => {
            println!("{}", serde_json::to_string_pretty(&answer)?);
            Ok(())
        }
        Err(e) => {
            eprintln!("{run_id}: {e}");
            std::process::exit(1);
        }
    }
}

/// `arena fingerprint-suite`: a held-out suite's fingerprint, for the private overlay.
fn fingerprint_suite(dir: &std::path::Path, suite: &str, sealed: bool) -> anyhow::Result<()> {
    let fp = server::local::fingerprint_dir(dir, suite, sealed)?;
    eprintln!(
        "{}: {} task(s), {} template phrase(s) and {} template file(s) set apart",
        fp.suite,
        fp.tasks.len(),
        fp.template_shingles.len(),
        fp.template_blobs.len()
    );
    println!("{}", serde_json::to_string_pretty(&fp)?);
    Ok(())
}

/// `arena check-configs`: loads the registry and prints each challenge's composed pipeline config.
fn check_configs(configs_dir: &std::path::Path, private_overlay: Option<PathBuf>) -> anyhow::Result<()> {
    let registry = match server::registry_files::load(configs_dir, private_overlay.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e:#}");
            std::process::exit(1);
        }
    };
    // A placeholder stands for the collection a launch mirrors.
    let train = domain::pipeline::config::TrainDataset {
        repo_id: "ARENA_RUNS_DATASET/placeholder".into(),
        revision: "0".repeat(40),
        path: "collections/RUN_ID/envs".into(),
    };
    for challenge in &registry.challenges {
        let pin = &challenge.spec.pipeline.commit;
        match domain::pipeline::config::compose(&registry, challenge, Some(&train)) {
            Ok(config) => {
                let suites = domain::pipeline::config::eval_suites(&registry, challenge)
                    .map(|s| s.into_iter().map(|(t, ids)| (t.task_list, ids)).collect::<Vec<_>>())
                    .unwrap_or_default();
                let lists = serde_json::to_string(&suites)?;
                println!(
                    "# {} ({}) pipeline {pin} task-lists {lists}\n{}",
                    challenge.id(),
                    challenge.file_path,
                    config.to_toml()
                )
            }
            // A challenge whose private suite's overlay is not here cannot be composed
            // on this machine; it is no problem of the registry's.
            Err(e) => {
                println!("# {} ({}) pipeline {pin} not composed: {e}", challenge.id(), challenge.file_path)
            }
        }
    }
    eprintln!(
        "ok: {} challenge(s), {} model(s), {} method(s), {} suite(s)",
        registry.challenges.len(),
        registry.models.len(),
        registry.methods.len(),
        registry.suites.len()
    );
    Ok(())
}

async fn serve(mut config: Config) -> anyhow::Result<()> {
    config.read_job_secrets();
    if let Some(repo) = config.private_repo.clone() {
        if config.private_overlay.is_some() {
            anyhow::bail!(
                "set ARENA_PRIVATE_REPO (a Space) or ARENA_PRIVATE_OVERLAY (a directory), not both"
            );
        }
        std::fs::create_dir_all(&config.data_dir)?;
        let dest = config.data_dir.join("private-overlay");
        let source =
            server::overlay::fetch(&config.hf_endpoint, config.hf_token.as_ref(), &repo, &dest).await?;
        config.private_overlay = Some(dest);
        config.overlay_source = Some(source);
    }
    let (app, state) = server::build(&config).await?;
    let listener = tokio::net::TcpListener::bind(config.addr).await?;
    tracing::info!("Open Env Arena listening on http://{}", listener.local_addr()?);
    let workers =
        server::workers::Workers::start(state, std::time::Duration::from_secs(config.worker_tick_s.max(1)));
    // Told to stop, the server lets requests in flight finish, but no longer than GRACE: a
    // stream (the cluster's WebSocket, a relay, a page's events) would hold it open for good.
    let stopping = std::sync::Arc::new(tokio::sync::Notify::new());
    let told = stopping.clone();
    let serve = axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown(async move {
            shutdown().await;
            told.notify_one();
        });
    tokio::select! {
        served = serve => served?,
        _ = async { stopping.notified().await; tokio::time::sleep(GRACE).await } => {
            tracing::warn!("connections still open {} s after the stop signal were closed", GRACE.as_secs());
        }
    }
    workers.stop().await;
    Ok(())
}

const GRACE: std::time::Duration = std::time::Duration::from_secs(10);

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
