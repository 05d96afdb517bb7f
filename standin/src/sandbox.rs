//! Sandboxes: an HF job of an image the stand-in's registry holds, created with ports to `expose`,
//! runs the job's own `command` as HF would run it in that image's container, not a command the
//! stand-in chooses. The container is played on this machine with Linux namespaces (`unshare`, as
//! root): a network namespace of its own, so the server binds its port (`0.0.0.0:8000` or any)
//! as in a container and no other sandbox or process sees it, and a mount namespace whose root is
//! this machine's with the image's layers played by the local folders its description names
//! (`local.mounts`, e.g. `/app` → the folder of `echo_server.py`; `{openenv_core}` is
//! `STANDIN_OPENENV_CORE`, openenv-core 0.3.0, and `{openenv}` is `STANDIN_OPENENV`, openenv
//! 0.10.0). The command starts from the image's `WORKDIR` with the image's `ENV`,
//! then the job's `environment`, then `JOB_ID` and `ACCELERATOR`, as HF sets them. (`USER` is not
//! played: the stand-in runs as root.)
//!
//! Each exposed port is reached as HF's jobs proxy reaches it: a loopback port of its own, listed in
//! `status.exposeUrls` as `http://127.0.0.1:{proxy}` (HF lists `https://{job}--{port}.hf.jobs`; a
//! loopback address is one every process resolves, with no resolver of ours loaded), behind a
//! proxy of the stand-in that lets through a request bearing the token of a user who may read the
//! job's namespace (any request, for a port in `portsPublic`) and answers 401 otherwise, then
//! carries the connection (HTTP or WebSocket) into the namespace through a unix socket (`socat`,
//! started in the namespace). A sandbox exposes one port, so its one URL is that port's. The process group is stopped when the job is
//! canceled or times out, and with the stand-in.

use anyhow::Context;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::registry::{Image, Repository};
use crate::SharedHub;

/// The image a pinned reference (`host/name@sha256:…`) names, if the stand-in's registry holds it.
pub fn image_of(images: &BTreeMap<String, Repository>, reference: &str) -> Option<Image> {
    let (name, digest) = reference.split_once('@')?;
    let repo = images.get(name)?;
    let repo_name = name.split_once('/').map(|(_, n)| n).unwrap_or(name);
    for (tag_name, tag) in &repo.tags {
        for (n, image) in tag.images.iter().enumerate() {
            if crate::registry::manifest_digest(repo_name, tag_name, tag, n) == digest {
                return Some(image.clone());
            }
        }
    }
    None
}

/// The OpenEnv releases an image's layers may be played by: its placeholder in `local.mounts`,
/// the variable naming the folder it is installed in, and the release.
const OPENENV_RELEASES: [(&str, &str, &str); 2] = [
    ("{openenv_core}", "STANDIN_OPENENV_CORE", "openenv-core 0.3.0"),
    ("{openenv}", "STANDIN_OPENENV", "openenv 0.10.0"),
];

/// The image's `local.mounts`, placeholders filled: (path in the image, local folder).
fn mounts(image: &Image) -> anyhow::Result<Vec<(String, String)>> {
    let Some(list) = image.local.as_ref().and_then(|l| l["mounts"].as_object()) else {
        return Ok(Vec::new());
    };
    list.iter()
        .map(|(at, from)| {
            let mut from =
                from.as_str().ok_or_else(|| anyhow::anyhow!("a mount's folder is not a string"))?.to_string();
            for (placeholder, var, release) in OPENENV_RELEASES {
                if from.contains(placeholder) {
                    let dir = std::env::var(var).ok().filter(|d| !d.is_empty()).ok_or_else(|| {
                        anyhow::anyhow!("this image runs on {release}: set {var} to the folder it is installed in (dev/test and dev/run install it)")
                    })?;
                    from = from.replace(placeholder, &dir);
                }
            }
            Ok((at.clone(), from))
        })
        .collect()
}

/// Sets up the container in the new namespaces, then runs the command. Arguments: the root's
/// folder, the sockets' folder, the workdir, the number of mounts, the ports, then `at from` per
/// mount, then the environment (`K=V` each) and the command, as `env` takes them.
const CONTAINER: &str = r#"set -e
root=$1; socks=$2; workdir=$3; nmounts=$4; ports=$5; shift 5
ip link set lo up
mount -t tmpfs tmpfs "$root"
for d in /*; do
  n=${d#/}
  case $n in proc|sys|dev|tmp) continue;; esac
  if [ -L "$d" ]; then ln -s "$(readlink "$d")" "$root/$n"
  elif [ -d "$d" ]; then mkdir "$root/$n"; mount --rbind "$d" "$root/$n"; fi
done
for n in proc sys dev tmp; do mkdir "$root/$n"; mount --rbind "/$n" "$root/$n"; done
i=0
while [ "$i" -lt "$nmounts" ]; do
  mkdir -p "$root$1"; mount --bind "$2" "$root$1"; shift 2; i=$((i+1))
done
for p in $ports; do
  socat "UNIX-LISTEN:$socks/$p.sock,fork,unlink-early" "TCP:127.0.0.1:$p" 2>/dev/null &
done
exec chroot "$root" /usr/bin/env -i -C "${workdir:-/}" -- "$@"
"#;

/// The job's processes, in a process group of their own.
struct Container {
    child: tokio::process::Child,
    pgid: Option<i32>,
    dir: PathBuf,
}

impl Drop for Container {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid {
            crate::groups::stop(pgid);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What starts a container: the job's id, command, environment and exposed ports.
struct Spec<'a> {
    id: &'a str,
    command: &'a [String],
    environment: &'a BTreeMap<String, String>,
    ports: Vec<u16>,
}

fn start(image: &Image, spec: &Spec) -> anyhow::Result<Container> {
    let id = spec.id;
    // Unique on the machine: stand-ins in one process number their jobs alike.
    let dir =
        std::env::temp_dir().join(format!("standin-sandbox-{}-{:x}-{id}", std::process::id(), rand_id()));
    let root = dir.join("root");
    let socks = dir.join("socks");
    std::fs::create_dir_all(&root)
        .and_then(|_| std::fs::create_dir_all(&socks))
        .with_context(|| format!("creating the sandbox's folders under {}", dir.display()))?;
    let mounts = mounts(image)?;
    // The image's ENV, then the job's environment, then what HF sets in every job.
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for entry in &image.env {
        let (k, v) = entry.split_once('=').unwrap_or((entry, ""));
        env.insert(k.to_string(), v.to_string());
    }
    env.extend(spec.environment.clone());
    env.insert("JOB_ID".into(), id.to_string());
    env.insert("ACCELERATOR".into(), "none".into());
    let ports: Vec<String> = spec.ports.iter().map(u16::to_string).collect();
    let mut args: Vec<String> = vec![
        "--net".into(),
        "--mount".into(),
        "--fork".into(),
        "--propagation".into(),
        "private".into(),
        "sh".into(),
        "-c".into(),
        CONTAINER.into(),
        "container".into(),
        root.to_string_lossy().into_owned(),
        socks.to_string_lossy().into_owned(),
        image.workdir.clone(),
        mounts.len().to_string(),
        ports.join(" "),
    ];
    for (at, from) in &mounts {
        args.push(at.clone());
        args.push(from.clone());
    }
    args.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    args.extend(spec.command.iter().cloned());
    let child = tokio::process::Command::new("unshare")
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .context("the sandbox did not start (unshare)")?;
    let pgid = child.id().map(|p| p as i32);
    if let Some(g) = pgid {
        crate::groups::started(g);
    }
    Ok(Container { child, pgid, dir })
}

/// The head of an HTTP request (up to its blank line), at most 64 KiB.
async fn read_head(conn: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > 64 << 10 {
            return None;
        }
        let n = conn.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Some(head)
}

fn bearer_of(head: &[u8]) -> Option<String> {
    String::from_utf8_lossy(head).lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        let value = value.trim();
        (name.eq_ignore_ascii_case("authorization"))
            .then(|| {
                value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")).map(str::to_string)
            })
            .flatten()
    })
}

/// Whether a request bearing this token (or none) gets through.
type Allow = std::sync::Arc<dyn Fn(Option<&str>) -> bool + Send + Sync>;

/// HF's jobs proxy for one exposed port: the token check, then the connection carried to the
/// namespace's socket.
async fn proxy(listener: tokio::net::TcpListener, allow: Allow, sock: PathBuf) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else { return };
        let allow = allow.clone();
        let sock = sock.clone();
        tokio::spawn(async move {
            let Some(head) = read_head(&mut conn).await else { return };
            let allowed = allow(bearer_of(&head).as_deref());
            if !allowed {
                let body = json!({"error": "Invalid credentials in Authorization header"}).to_string();
                let answer = format!(
                    "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
                return;
            }
            let Ok(mut inner) = tokio::net::UnixStream::connect(&sock).await else {
                let _ = conn
                    .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
                return;
            };
            if inner.write_all(&head).await.is_ok() {
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut inner).await;
            }
        });
    }
}

/// Runs the job's sandbox to its end, after the start delay HF's scheduling and image pull would
/// take (`Jobs::sandbox_start_ms`; one of `Jobs::never_serve` never starts). The job stays
/// `SCHEDULING`, with no address, meanwhile; a cancel ends the wait.
pub async fn run(hub: SharedHub, id: String, image: Image) {
    use std::sync::atomic::Ordering;
    let never =
        hub.jobs.never_serve.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok();
    let delay = Duration::from_millis(hub.jobs.sandbox_start_ms.load(Ordering::Relaxed));
    let scheduled = std::time::Instant::now();
    while never || scheduled.elapsed() < delay {
        if hub.jobs.with(&id, |j| j.finished()).unwrap_or(true) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some((view, namespace, cancel)) =
        hub.jobs.with(&id, |j| (j.view.clone(), j.namespace.clone(), j.cancel.clone()))
    else {
        return;
    };
    let spec =
        Spec { id: &id, command: &view.command, environment: &view.environment, ports: view.expose_ports() };
    let mut container = match start(&image, &spec) {
        Ok(c) => c,
        Err(error) => {
            let message = format!("{error:#}");
            hub.jobs.log(&id, message.clone());
            hub.jobs.set_stage(&id, "ERROR", Some(message));
            return;
        }
    };
    let public: Vec<u16> = view.expose.as_ref().map(|e| e.ports_public.clone()).unwrap_or_default();
    let mut urls = Vec::new();
    let mut proxies = Vec::new();
    for port in view.expose_ports() {
        let Ok(listener) = tokio::net::TcpListener::bind("127.0.0.1:0").await else { continue };
        let Ok(addr) = listener.local_addr() else { continue };
        urls.push(format!("http://127.0.0.1:{}", addr.port()));
        let sock = container.dir.join("socks").join(format!("{port}.sock"));
        let (hub, namespace, public) = (hub.clone(), namespace.clone(), public.contains(&port));
        let allow: Allow = std::sync::Arc::new(move |token| {
            public || token.and_then(|t| hub.user_by_token(t)).is_some_and(|u| u.may_read(&namespace))
        });
        proxies.push(tokio::spawn(proxy(listener, allow, sock)));
    }
    hub.jobs.set_stage(&id, "RUNNING", None);
    hub.jobs.with(&id, |j| {
        if !j.finished() {
            j.view.status["exposeUrls"] = Value::from(urls.clone());
        }
    });
    hub.jobs.log(&id, format!("===== Job started at {} =====", crate::job_record::now_rfc3339()));
    // The container's output is the job's log, read to its end before the job is said to have
    // ended (as HF's log has a process's last lines once its job ended).
    let mut readers = Vec::new();
    for out in [
        container.child.stdout.take().map(|o| Box::new(o) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        container.child.stderr.take().map(|o| Box::new(o) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
    ]
    .into_iter()
    .flatten()
    {
        let hub = hub.clone();
        let id = id.clone();
        readers.push(tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                hub.jobs.log(&id, line);
            }
        }));
    }
    tokio::select! {
        status = container.child.wait() => {
            for reader in readers {
                let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
            }
            let message = status.map(|s| format!("the command exited ({s})")).unwrap_or_else(|e| e.to_string());
            let stage = if message.contains("exit status: 0") { "COMPLETED" } else { "ERROR" };
            hub.jobs.set_stage(&id, stage, Some(message));
        }
        _ = cancel.notified() => {}
        _ = tokio::time::sleep(Duration::from_secs(view.timeout)) => {
            hub.jobs.set_stage(&id, "ERROR", Some("Job timeout".into()));
        }
    }
    for p in proxies {
        p.abort();
    }
    drop(container);
}

/// A sandbox the stand-in's simulated trainer starts itself (it plays the arena's cluster, not an
/// HF client): the image's own `ENTRYPOINT` + `CMD` in its played container, its one exposed port
/// reached at `127.0.0.1:{port}` with no token. Stopped when dropped.
pub struct LocalSandbox {
    _container: Container,
    proxy: tokio::task::JoinHandle<()>,
    pub port: u16,
}

impl Drop for LocalSandbox {
    fn drop(&mut self) {
        self.proxy.abort();
    }
}

impl LocalSandbox {
    pub async fn start(image: &Image) -> anyhow::Result<LocalSandbox> {
        let port = image
            .exposed_ports
            .iter()
            .find_map(|p| p.split('/').next()?.parse::<u16>().ok())
            .context("the image exposes no port")?;
        let command: Vec<String> = image.entrypoint.iter().chain(&image.cmd).cloned().collect();
        let id = format!("local-{:016x}", rand_id());
        let environment = BTreeMap::new();
        let container =
            start(image, &Spec { id: &id, command: &command, environment: &environment, ports: vec![port] })?;
        let listener =
            tokio::net::TcpListener::bind("127.0.0.1:0").await.context("binding the sandbox's port")?;
        let local = listener.local_addr()?.port();
        let sock = container.dir.join("socks").join(format!("{port}.sock"));
        let proxy = tokio::spawn(proxy(listener, std::sync::Arc::new(|_| true), sock));
        Ok(LocalSandbox { _container: container, proxy, port: local })
    }
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed) ^ ((std::process::id() as u64) << 32)
}
