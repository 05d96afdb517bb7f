//! HF Jobs that run a command: a job of the uv image (`ghcr.io/astral-sh/uv:…`, the image
//! `huggingface_hub.run_uv_job` uses) runs its `command` as a local process, as a container would,
//! with the simulated pipeline (`standin/sim`: `uv`, `posttrainarena-train`,
//! `posttrainarena-vllm-serve`, `bench`) first on `PATH` in place of the image's pip install.
//!
//! The process gets what a job's container gets: the job's `environment` and `secrets`, `JOB_ID`
//! (HF sets it), a working directory and home of its own; and this machine's view of the world:
//! `HF_ENDPOINT` is the stand-in, and a port in `expose` is reachable at `http://127.0.0.1:{port}`
//! (`status.exposeUrls`; the job shares this machine's network). Its output, stdout and stderr
//! merged, is the job's log, line by line.
//! Exit 0 completes the job; another exit starts the command again while `attempts` remain, then
//! errs. Cancel and timeout stop the whole process group.
//!
//! Fault switches that play the world around the container (`PUT /_standin/jobs`): `crash_at`
//! kills the first attempt's processes (SIGKILL, a lost node) when its log reaches that stage and
//! the run's newest checkpoint has landed (`lose_node`);
//! `relay_off` makes the arena unreachable from the job; `relay_drop_at` cuts the job's
//! connections to the arena once when its log reaches that stage. The others are handed to the
//! simulated programs in `STANDIN_JOB_FAULTS`.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use crate::job_record::{JobFaults, JobView};
use crate::SharedHub;

/// Images whose jobs run their command here.
pub fn runs_command(image: &str) -> bool {
    image.starts_with("ghcr.io/astral-sh/uv:")
}

/// Where the simulated programs live.
fn sim_dir() -> PathBuf {
    std::env::var_os("STANDIN_SIM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/sim")))
}

/// This machine's Python, as the job's `python3` (its packages are what the simulated image has).
fn python_dir() -> Option<PathBuf> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let exe = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    exe.parent().map(PathBuf::from)
}

enum End {
    Exited(Option<i32>, Option<i32>),
    Canceled,
    TimedOut,
}

/// How long `crash_at` waits for the run's checkpoint before it kills the attempt anyway.
const CHECKPOINT_WAIT: Duration = Duration::from_secs(30);

/// `crash_at`: the node is lost mid-stage, once the run's newest checkpoint (a dataset commit
/// whose summary starts `Checkpoint` and names the job's `arena-run` label) has landed, as a node
/// lost minutes into training would be: a kill that raced the checkpoint's upload would test a
/// crash before any checkpoint, another case. It waits at most CHECKPOINT_WAIT.
async fn lose_node(hub: SharedHub, id: String, pid: Option<u32>, run: Option<String>) {
    let until = Instant::now() + CHECKPOINT_WAIT;
    while let Some(run) = &run {
        if hub.jobs.checkpointed(run) || Instant::now() >= until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if hub.jobs.with(&id, |j| j.pid == pid).unwrap_or(false) {
        hub.jobs.log(&id, "===== the node was lost (local stand-in fault: crash_at) =====");
        stop_group(pid);
    }
}

fn stop_group(pid: Option<u32>) {
    if let Some(pid) = pid {
        crate::groups::stop(pid as i32);
    }
}

/// Runs one job to its end.
pub async fn run(hub: SharedHub, id: String) {
    let Some((view, faults, cancel, secrets)) =
        hub.jobs.with(&id, |j| (j.view.clone(), j.faults.clone(), j.cancel.clone(), j.secrets.clone()))
    else {
        return;
    };
    let stage_ms = hub.jobs.stage_ms.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(view.timeout);
    let scheduling = Duration::from_millis(faults.scheduling_ms.unwrap_or(stage_ms / 2));
    tokio::select! {
        _ = cancel.notified() => return,
        _ = tokio::time::sleep(scheduling.min(deadline.saturating_duration_since(Instant::now()))) => {}
    }
    if Instant::now() >= deadline {
        hub.jobs.set_stage(&id, "ERROR", Some("Job timeout".into()));
        return;
    }
    hub.jobs.set_stage(&id, "RUNNING", None);
    // The port itself on loopback, since the job shares this machine's network.
    let urls: Vec<String> = view.expose_ports().iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
    hub.jobs.with(&id, |j| {
        if !j.finished() && !urls.is_empty() {
            j.view.status["exposeUrls"] = serde_json::json!(urls);
        }
    });
    hub.jobs.log(&id, format!("===== Job started at {} =====", crate::job_record::now_rfc3339()));
    let attempts = view.attempts;
    let proxy = RelayProxy::start(&view, &faults).await;
    // The container's filesystem: the same paths for every attempt, emptied before each; apart
    // from every other job's, of this stand-in or another one on the machine.
    let root = std::env::temp_dir()
        .join(format!("standin-job-{id}-{}", crate::random_token(6).replace(['-', '_'], "x")));
    for attempt in 1..=attempts {
        let end = attempt_once(
            &hub, &id, &view, &secrets, &faults, &cancel, deadline, stage_ms, attempt, &proxy, &root,
        )
        .await;
        match end {
            End::Canceled => return,
            End::TimedOut => {
                hub.jobs.set_stage(&id, "ERROR", Some("Job timeout".into()));
                return;
            }
            End::Exited(Some(0), _) => {
                hub.jobs.set_stage(&id, "COMPLETED", None);
                return;
            }
            End::Exited(code, signal) => {
                let how = match (code, signal) {
                    (Some(c), _) => format!("exit code {c}"),
                    (None, Some(s)) => format!("signal {s}"),
                    _ => "an unknown status".to_string(),
                };
                if attempt < attempts {
                    hub.jobs.log(
                        &id,
                        format!(
                            "===== attempt {attempt} ended with {how}; starting attempt {} =====",
                            attempt + 1
                        ),
                    );
                    continue;
                }
                hub.jobs.set_stage(&id, "ERROR", Some(format!("Job failed with {how}")));
                return;
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn attempt_once(
    hub: &SharedHub,
    id: &str,
    view: &JobView,
    secrets: &std::collections::BTreeMap<String, String>,
    faults: &JobFaults,
    cancel: &Arc<Notify>,
    deadline: Instant,
    stage_ms: u64,
    attempt: u32,
    proxy: &Option<RelayProxy>,
    root: &std::path::Path,
) -> End {
    if fresh_dirs(root).is_err() {
        hub.jobs.log(id, "the stand-in could not make the job's working directory");
        return End::Exited(Some(125), None);
    }
    let mut command = job_command(hub, view, secrets, faults, stage_ms, root);
    if let Some(p) = proxy {
        command.env("ARENA_URL", &p.url);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            hub.jobs.log(id, format!("the job's command did not start: {e}"));
            return End::Exited(Some(127), None);
        }
    };
    let pid = child.id();
    if let Some(p) = pid {
        crate::groups::started(p as i32);
    }
    hub.jobs.with(id, |j| j.pid = pid);
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let crashed = Arc::new(AtomicBool::new(false));
    let run_label = view.labels.get("arena-run").cloned();
    let follow = |stream: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>| {
        let (hub, id, crash_at, drop_at, proxy) = (
            hub.clone(),
            id.to_string(),
            faults.crash_at.clone().filter(|_| attempt == 1),
            faults.relay_drop_at.clone(),
            proxy.as_ref().map(|p| p.drop_now.clone()),
        );
        let (crashed, run_label) = (crashed.clone(), run_label.clone());
        tokio::spawn(async move {
            let Some(stream) = stream else { return };
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let stage = domain::pipeline::steps::parse_line(&line).map(|s| s.stage.as_str());
                hub.jobs.log(&id, line);
                if stage.is_some() && stage == crash_at.as_deref() && !crashed.swap(true, Ordering::SeqCst) {
                    tokio::spawn(lose_node(hub.clone(), id.clone(), pid, run_label.clone()));
                }
                if let (Some(drop), true) = (&proxy, stage.is_some() && stage == drop_at.as_deref()) {
                    drop.notify_waiters();
                }
            }
        })
    };
    let readers = [
        follow(out.map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>)),
        follow(err.map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>)),
    ];
    let end = tokio::select! {
        status = child.wait() => match status {
            Ok(s) => {
                use std::os::unix::process::ExitStatusExt;
                End::Exited(s.code(), s.signal())
            }
            Err(_) => End::Exited(None, None),
        },
        _ = cancel.notified() => End::Canceled,
        _ = tokio::time::sleep(deadline.saturating_duration_since(Instant::now())) => End::TimedOut,
    };
    // The container is gone: nothing of it outlives the attempt.
    stop_group(pid);
    let _ = child.wait().await;
    for r in readers {
        let _ = tokio::time::timeout(Duration::from_secs(2), r).await;
    }
    hub.jobs.with(id, |j| j.pid = None);
    let _ = std::fs::remove_dir_all(root);
    end
}

/// The job's command as HF's container would run it: its own environment and secrets only, the
/// stand-in's tools first on the path, its own home and temporary folders under `root`.
fn job_command(
    hub: &SharedHub,
    view: &JobView,
    secrets: &std::collections::BTreeMap<String, String>,
    faults: &JobFaults,
    stage_ms: u64,
    root: &std::path::Path,
) -> tokio::process::Command {
    let sim = sim_dir();
    let mut path = vec![sim.join("bin")];
    path.extend(python_dir());
    path.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(PathBuf::from));
    let hub_url = hub.public_url.lock().unwrap().clone();
    let job_faults = serde_json::to_string(faults).unwrap_or_default();
    let mut command = tokio::process::Command::new(&view.command[0]);
    command
        .args(&view.command[1..])
        .args(&view.arguments)
        .env_clear()
        .envs(&view.environment)
        .envs(secrets)
        .env("JOB_ID", &view.id)
        .env("ACCELERATOR", if view.flavor.starts_with("cpu") { "none" } else { "gpu" })
        .env("PATH", std::env::join_paths(&path).unwrap_or_default())
        .env("HOME", root.join("home"))
        .env("TMPDIR", root.join("tmp"))
        .env("HF_HOME", root.join("hf"))
        .env("HF_ENDPOINT", &hub_url)
        .env("HF_HUB_DISABLE_TELEMETRY", "1")
        // The stand-in speaks the Hub's git-LFS path, not Xet: its jobs' clients take that path,
        // as they do against a Hub without Xet.
        .env("HF_HUB_DISABLE_XET", "1")
        .env("LANG", "C.UTF-8")
        .env("STANDIN_STEP_MS", stage_ms.to_string())
        .env("STANDIN_JOB_FAULTS", job_faults)
        .current_dir(root.join("work"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    command
}

fn fresh_dirs(root: &std::path::Path) -> std::io::Result<()> {
    let _ = std::fs::remove_dir_all(root);
    for sub in ["home", "hf", "work", "tmp"] {
        std::fs::create_dir_all(root.join(sub))?;
    }
    Ok(())
}

/// The job's network path to the arena, when a fault plays with it: `ARENA_URL` points here and
/// the proxy forwards to the arena, refusing every connection (`relay_off`) or cutting the live
/// ones once (`relay_drop_at`).
pub struct RelayProxy {
    url: String,
    drop_now: Arc<Notify>,
}

impl RelayProxy {
    async fn start(view: &JobView, faults: &JobFaults) -> Option<RelayProxy> {
        if !faults.relay_off && faults.relay_drop_at.is_none() {
            return None;
        }
        let target = view
            .environment
            .get("ARENA_URL")?
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.ok()?;
        let url = format!("http://{}", listener.local_addr().ok()?);
        let drop_now = Arc::new(Notify::new());
        let off = faults.relay_off;
        let drops = drop_now.clone();
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                if off {
                    drop(inbound);
                    continue;
                }
                let (target, drops) = (target.clone(), drops.clone());
                tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(&target).await else { return };
                    let (mut a, mut b) = (inbound, outbound);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut a, &mut b) => {}
                        _ = drops.notified() => {}
                    }
                });
            }
        });
        Some(RelayProxy { url, drop_now })
    }
}
