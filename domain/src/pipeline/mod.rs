//! The BenchFlow training pipeline as the arena launches and follows it, after
//! `reference/pipeline.md` (the pipeline's main `79218df` and its held-out branch): the loader's
//! keys, the composed config, the bundle, the secrets, the HF job that runs the arena's job
//! script, and the pipeline's step lines mapped to the guide's stages.

pub mod bundle;
pub mod config;
pub mod keys;
pub mod secrets;
pub mod steps;

#[cfg(test)]
mod tests;

/// The HF job image: the uv image `huggingface_hub.run_uv_job` uses by default. The pipeline
/// publishes no image; the job script installs it at the challenge's pinned commit.
pub const DEFAULT_JOB_IMAGE: &str = "ghcr.io/astral-sh/uv:python3.12-bookworm";

/// The Python the job runs on (`run_uv_job(python="3.12")`; the pipeline needs 3.12).
pub const JOB_PYTHON: &str = "3.12";

/// What the job script is told, as `run_hf_job.py`'s flags say it, plus the script's own hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobArgs<'a> {
    /// Where `uv run` fetches the job script (the arena serves it).
    pub script_url: &'a str,
    /// The SHA-256 of the script's bytes at launch: the script refuses to run as another version.
    pub script_sha256: &'a str,
    pub bundle_repo: &'a str,
    pub bundle_revision: &'a str,
    pub bundle_path: &'a str,
    pub pipeline_ref: &'a str,
}

/// The job's command, as `run_uv_job` builds it for a script given by URL:
/// `uv run --python 3.12 SCRIPT ARGS…`.
pub fn job_command(a: &JobArgs) -> Vec<String> {
    [
        "uv",
        "run",
        "--python",
        JOB_PYTHON,
        a.script_url,
        "--bundle-repo",
        a.bundle_repo,
        "--bundle-revision",
        a.bundle_revision,
        "--bundle-path",
        a.bundle_path,
        "--posttrainarena-ref",
        a.pipeline_ref,
        "--script-sha256",
        a.script_sha256,
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

/// What a run's job command names, read back from HF's record of the job (the inverse of
/// [`job_command`]): how a restored arena finds a run's bundle again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCommandRead {
    pub run_id: String,
    pub bundle_repo: String,
    pub bundle_revision: String,
    pub script_sha256: String,
}

/// `None` unless `command` is one [`job_command`] builds: `uv run` with every flag once and a
/// bundle path of the form [`bundle_dir`] makes.
pub fn read_job_command(command: &[String]) -> Option<JobCommandRead> {
    if command.len() != 15 || command[0] != "uv" || command[1] != "run" || command[2] != "--python" {
        return None;
    }
    let flag = |name: &str| -> Option<String> {
        let mut found = command[5..].chunks(2).filter(|pair| pair[0] == name);
        let value = found.next()?.get(1)?.clone();
        found.next().is_none().then_some(value)
    };
    let path = flag("--bundle-path")?;
    let run_id = path.strip_prefix("job-inputs/")?;
    crate::ids::RunId::parse(run_id).ok()?;
    // The arena pins a bundle by its commit: any other revision (a branch, `../…`) would let the
    // read that follows be pointed at another file or another repository.
    let bundle_revision = flag("--bundle-revision")?;
    if !is_commit(&bundle_revision) {
        return None;
    }
    Some(JobCommandRead {
        run_id: run_id.to_string(),
        bundle_repo: flag("--bundle-repo")?,
        bundle_revision,
        script_sha256: flag("--script-sha256")?,
    })
}

/// A git commit id as HF names one: 40 lower-case hex digits.
pub fn is_commit(revision: &str) -> bool {
    revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// What keeps a challenge's job from starting, in words (empty when nothing does): a held-out
/// suite without its dataset or task list, or secrets the job needs that the arena has no value
/// for (`have` names those it has).
pub fn job_problems(
    registry: &crate::registry::Registry,
    challenge: &crate::registry::Challenge,
    have: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    let placeholder =
        config::TrainDataset { repo_id: "o/n".into(), revision: "0".repeat(40), path: String::new() };
    match config::compose(registry, challenge, Some(&placeholder)) {
        Err(e) => vec![e.to_string()],
        Ok(c) => {
            let missing: Vec<&str> =
                secrets::forwarded(&c).into_iter().filter(|n| !have.contains(*n)).collect();
            if missing.is_empty() {
                Vec::new()
            } else {
                vec![format!(
                    "the arena has no value for the job secret(s) {} the pipeline needs (an organizer sets them on the Space)",
                    missing.join(", ")
                )]
            }
        }
    }
}

/// `job-inputs/{run_id}`: the bundle's folder in the runs dataset.
pub fn bundle_dir(run_id: &str) -> String {
    format!("job-inputs/{run_id}")
}

/// `runs/{run_id}`: where the pipeline publishes the run in the runs dataset.
pub fn run_dir(run_id: &str) -> String {
    format!("runs/{run_id}")
}

/// `collections/{run_id}`: the collection's files as the launch mirrored them.
pub fn mirror_dir(run_id: &str) -> String {
    format!("collections/{run_id}")
}
