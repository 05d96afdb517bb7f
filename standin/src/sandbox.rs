//! Sandboxes: an HF job whose image is one the stand-in serves with a `serve` command, created with
//! a port to `expose`, runs that command as a local process instead of the simulated pipeline
//! (`{port}` in its arguments becomes a free loopback port, also given as `PORT`). The job's status
//! carries `exposeUrls` once it runs; the process is stopped when the job is canceled or times out,
//! and with the stand-in (`kill_on_drop`).

use std::time::Duration;

use serde_json::{json, Value};

use crate::SharedHub;

/// The `serve` command of the image a pinned reference (`host/name@sha256:…`) names, if the
/// stand-in serves that image with one.
pub fn serve_command(hub: &SharedHub, image: &str) -> Option<Vec<String>> {
    let (name, digest) = image.split_once('@')?;
    let repo = hub.images.get(name)?;
    let repo_name = name.split_once('/').map(|(_, n)| n).unwrap_or(name);
    for (tag_name, tag) in &repo.tags {
        for (n, image) in tag.images.iter().enumerate() {
            if crate::registry::manifest_digest(repo_name, tag_name, tag, n) == digest {
                let serve = image.serve.as_ref()?;
                let command: Vec<String> =
                    serve["command"].as_array()?.iter().filter_map(Value::as_str).map(String::from).collect();
                return (!command.is_empty()).then_some(command);
            }
        }
    }
    None
}

fn free_port() -> Option<u16> {
    std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok().map(|a| a.port())
}

/// Runs the job's sandbox to its end.
pub async fn run(hub: SharedHub, id: String, command: Vec<String>) {
    let Some((timeout_s, cancel)) = hub.jobs.with(&id, |j| (j.view.timeout, j.cancel.clone())) else {
        return;
    };
    let Some(port) = free_port() else {
        hub.jobs.set_stage(&id, "ERROR", Some("no free port for the sandbox".into()));
        return;
    };
    let args: Vec<String> = command.iter().map(|a| a.replace("{port}", &port.to_string())).collect();
    let mut child = match tokio::process::Command::new(&args[0])
        .args(&args[1..])
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            hub.jobs.set_stage(&id, "ERROR", Some(format!("the sandbox did not start: {e}")));
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
