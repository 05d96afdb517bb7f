//! Sandboxes: an HF job whose image is one the stand-in serves with a `serve` command, created with
//! a port to `expose`, runs that command as a local process instead of the simulated pipeline
//! (`{port}` in its arguments becomes a free loopback port, also given as `PORT`). A `serve` may set
//! the process's `cwd` and `env`; `{openenv_core}` in any of them is the folder `openenv-core` is
//! installed in (`STANDIN_OPENENV_CORE`), for images built on it. The job's status carries
//! `exposeUrls` once it runs; the process is stopped when the job is canceled or times out, and with
//! the stand-in (`kill_on_drop`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::registry::Repository;
use crate::SharedHub;

/// How the stand-in runs an image as a local process.
#[derive(Debug, Clone)]
pub struct Serve {
    pub command: Vec<String>,
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
}

impl Serve {
    fn parse(serve: &Value) -> Option<Serve> {
        let command: Vec<String> =
            serve["command"].as_array()?.iter().filter_map(Value::as_str).map(String::from).collect();
        let env = serve["env"]
            .as_object()
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
            .unwrap_or_default();
        let cwd = serve["cwd"].as_str().map(String::from);
        (!command.is_empty()).then_some(Serve { command, cwd, env })
    }

    /// Fills the placeholders; an image that needs `openenv-core` where none is configured cannot
    /// start, and says why.
    fn resolve(&self, port: u16) -> Result<Serve, String> {
        let core = std::env::var("STANDIN_OPENENV_CORE").ok().filter(|c| !c.is_empty());
        let fill = |s: &str| -> Result<String, String> {
            let s = s.replace("{port}", &port.to_string());
            match (s.contains("{openenv_core}"), &core) {
                (false, _) => Ok(s),
                (true, Some(core)) => Ok(s.replace("{openenv_core}", core)),
                (true, None) => Err("this image runs on openenv-core: set STANDIN_OPENENV_CORE to the folder it is installed in (dev/test and dev/run install it)".into()),
            }
        };
        Ok(Serve {
            command: self.command.iter().map(|a| fill(a.as_str())).collect::<Result<_, _>>()?,
            cwd: self.cwd.as_deref().map(fill).transpose()?,
            env: self.env.iter().map(|(k, v)| Ok((k.clone(), fill(v)?))).collect::<Result<_, String>>()?,
        })
    }
}

/// How the stand-in serves the image a pinned reference (`host/name@sha256:…`) names, if it serves
/// that image.
pub fn serve_command(hub: &SharedHub, image: &str) -> Option<Serve> {
    serve_of(&hub.images, image)
}

pub fn serve_of(images: &BTreeMap<String, Repository>, image: &str) -> Option<Serve> {
    let (name, digest) = image.split_once('@')?;
    let repo = images.get(name)?;
    let repo_name = name.split_once('/').map(|(_, n)| n).unwrap_or(name);
    for (tag_name, tag) in &repo.tags {
        for (n, image) in tag.images.iter().enumerate() {
            if crate::registry::manifest_digest(repo_name, tag_name, tag, n) == digest {
                return Serve::parse(image.serve.as_ref()?);
            }
        }
    }
    None
}

fn free_port() -> Option<u16> {
    std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok().map(|a| a.port())
}

/// Starts the image's server as a local process on a free loopback port; it is killed when the
/// returned child is dropped.
pub fn start(serve: &Serve) -> Result<(tokio::process::Child, u16), String> {
    let port = free_port().ok_or("no free port for the sandbox")?;
    let serve = serve.resolve(port)?;
    let mut command = tokio::process::Command::new(&serve.command[0]);
    if let Some(cwd) = &serve.cwd {
        command.current_dir(cwd);
    }
    let child = command
        .args(&serve.command[1..])
        .envs(serve.env.iter().map(|(k, v)| (k, v)))
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("the sandbox did not start: {e}"))?;
    Ok((child, port))
}

/// Runs the job's sandbox to its end.
pub async fn run(hub: SharedHub, id: String, serve: Serve) {
    let Some((timeout_s, cancel)) = hub.jobs.with(&id, |j| (j.view.timeout, j.cancel.clone())) else {
        return;
    };
    let (mut child, port) = match start(&serve) {
        Ok(started) => started,
        Err(message) => {
            hub.jobs.set_stage(&id, "ERROR", Some(message));
            return;
        }
    };
    hub.jobs.set_stage(&id, "RUNNING", None);
    hub.jobs.with(&id, |j| {
        if !j.finished() {
            j.view.status["exposeUrls"] = json!([format!("http://127.0.0.1:{port}")]);
        }
    });
    hub.jobs.log(&id, format!("sandbox serving on 127.0.0.1:{port} (local stand-in)"));
    tokio::select! {
        status = child.wait() => {
            let message = status.map(|s| format!("the image's server exited ({s})")).unwrap_or_else(|e| e.to_string());
            hub.jobs.set_stage(&id, "ERROR", Some(message));
        }
        _ = cancel.notified() => {}
        _ = tokio::time::sleep(Duration::from_secs(timeout_s)) => {
            hub.jobs.set_stage(&id, "ERROR", Some("Job timeout".into()));
        }
    }
    let _ = child.kill().await;
}
