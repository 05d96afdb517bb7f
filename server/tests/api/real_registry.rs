//! The registry client and the OpenEnv track's at-once checks against a real registry: Debian's
//! `docker-registry` (the CNCF distribution registry, 2.8) on loopback, holding images `umoci`
//! built and `skopeo` pushed (`dev/registry/build-images.sh`), behind distribution's `auth: token`
//! with the anonymous token service of `dev/registry/token-server.py`. Docker Hub's layout (the
//! token realm on another origin, which the arena must allow) and GHCR's (the realm on the
//! registry's own origin) are both played. `dev/test` installs the three Debian packages.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use axum::http::StatusCode;
use domain::openenv::ImageRef;
use serde_json::{json, Value};
use server::ports::registry::{ImageRegistry, OciRegistries, RegistryError};

use crate::harness::{repo_root, Backend, Options, TestApp, ALICE, BOB, CLUSTER_SECRET, EVE};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// One registry and its token service, stopped when dropped; the images pushed and their digests.
struct RealRegistry {
    dir: tempfile::TempDir,
    env: BTreeMap<String, String>,
    /// `repository:tag` (and `repository:tag@linux/amd64` for an index) → digest, as pushed.
    digests: BTreeMap<String, String>,
}

fn run(script: &str, args: &[&str], envs: &[(&str, &str)]) -> String {
    let path = repo_root().join("dev/registry").join(script);
    let out = Command::new(&path).args(args).envs(envs.iter().copied()).output().unwrap_or_else(|e| {
        panic!("{} did not start ({e}); the real-registry tests need bash", path.display())
    });
    assert!(
        out.status.success(),
        "{script} failed: {}{}\n(the real-registry tests need Debian's docker-registry, skopeo and umoci: dev/test installs them)",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl RealRegistry {
    /// Starts a registry (with `start.sh`'s `flags`) and pushes the test images into it.
    fn start(flags: &[&str]) -> RealRegistry {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_str().unwrap().to_string();
        let mut args = vec![home.as_str()];
        args.extend_from_slice(flags);
        let env: BTreeMap<String, String> = run("start.sh", &args, &[])
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // Stopped when dropped, also if the images cannot be built.
        let mut registry = RealRegistry { dir, env, digests: BTreeMap::new() };
        let build = registry.dir.path().join("images");
        // Without the 129-layer image, which is most of the build's time.
        let printed = run(
            "build-images.sh",
            &[&registry.env["REGISTRY"], build.to_str().unwrap()],
            &[("REGISTRY_CREDS", &registry.env["REGISTRY_CREDS"]), ("QUICK", "1")],
        );
        registry.digests = printed
            .lines()
            .filter_map(|l| {
                let mut words = l.split_whitespace();
                Some((
                    words.next()?.to_string(),
                    words.next().filter(|d| d.starts_with("sha256:"))?.to_string(),
                ))
            })
            .collect();
        registry
    }

    fn url(&self, key: &str) -> String {
        self.env[key].clone()
    }

    /// The token service's origin (`http://127.0.0.1:PORT`).
    fn token_origin(&self) -> String {
        self.url("REGISTRY_SAME_ORIGIN_URL")
    }

    fn digest(&self, image: &str) -> &str {
        self.digests.get(image).unwrap_or_else(|| panic!("{image} was not pushed: {:?}", self.digests))
    }

    /// The client as the arena builds it: Docker Hub at the registry's own port (its realm on the
    /// token service's origin, allowed when `allow_realm`), GHCR through the token service.
    fn client(&self, allow_realm: bool) -> OciRegistries {
        let origins = if allow_realm { vec![self.token_origin()] } else { Vec::new() };
        OciRegistries::new(&self.url("REGISTRY_URL"), &self.url("REGISTRY_SAME_ORIGIN_URL"), &origins)
    }
}

impl Drop for RealRegistry {
    fn drop(&mut self) {
        let dir = self.dir.path().to_str().unwrap().to_string();
        let _ = Command::new(repo_root().join("dev/registry/stop.sh")).arg(dir).output();
    }
}

fn image(s: &str) -> ImageRef {
    ImageRef::parse(s).unwrap()
}

/// The manifest as the registry serves it: its media type and the layer sizes it declares.
fn manifest(root: &Path, digest: &str) -> Value {
    let hex = digest.strip_prefix("sha256:").unwrap();
    serde_json::from_slice(&std::fs::read(root.join("images/layout/blobs/sha256").join(hex)).unwrap())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_reads_digests_sizes_and_platforms_as_a_real_registry_serves_them() {
    let reg = RealRegistry::start(&[]);
    let client = reg.client(true);
    for host in ["docker.io", "ghcr.io"] {
        // One platform: the manifest's own digest, its layers with their declared sizes, the config.
        let single = client.read(&image(&format!("{host}/arena/single:v1"))).await.unwrap();
        assert_eq!(single.facts.digest, reg.digest("arena/single:v1"), "{host}");
        let m = manifest(reg.dir.path(), &single.facts.digest);
        assert_eq!(m["mediaType"].as_str().unwrap_or(OCI_MANIFEST), OCI_MANIFEST);
        let sizes: Vec<u64> =
            m["layers"].as_array().unwrap().iter().map(|l| l["size"].as_u64().unwrap()).collect();
        assert_eq!(single.facts.layers.iter().map(|l| l.size).collect::<Vec<_>>(), sizes);
        assert_eq!(single.facts.exposed_ports, ["8000/tcp"]);
        assert!(!single.facts.entrypoint.is_empty());
        // An index: narrowed to its linux/amd64 image, whose digest is what is pinned.
        let multi = client.read(&image(&format!("{host}/arena/multi:v1"))).await.unwrap();
        assert_eq!(multi.facts.digest, reg.digest("arena/multi:v1@linux/amd64"));
        assert_ne!(multi.facts.digest, reg.digest("arena/multi:v1"), "the index's own digest is not pinned");
        // Docker's media types: a schema 2 manifest and a manifest list.
        let docker = client.read(&image(&format!("{host}/arena/docker:v1"))).await.unwrap();
        assert_eq!(docker.facts.digest, reg.digest("arena/docker:v1"));
        let list = client.read(&image(&format!("{host}/arena/docker:list"))).await.unwrap();
        assert_eq!(list.facts.digest, reg.digest("arena/docker:list@linux/amd64"));
        // By digest: the same image, read again from what the digest names.
        let pinned = image(&format!("{host}/arena/single@{}", single.facts.digest));
        assert_eq!(client.read(&pinned).await.unwrap().facts.digest, single.facts.digest);
        // No linux/amd64 image, alone or in an index.
        for tag in ["arena/armonly:v1", "arena/armonly:index"] {
            let e = client.read(&image(&format!("{host}/{tag}"))).await.unwrap_err();
            assert!(matches!(e, RegistryError::PlatformUnsupported(_)), "{tag}: {e:?}");
        }
        // Private (its tokens carry no access), a missing tag, a missing repository.
        for missing in ["arena/private:v1", "arena/single:nope", "arena/nosuch:v1"] {
            let e = client.read(&image(&format!("{host}/{missing}"))).await.unwrap_err();
            assert!(matches!(e, RegistryError::Inaccessible(_)), "{missing}: {e:?}");
        }
    }
    // The size a manifest declares is what the arena counts (the registry checks only that blobs
    // exist), so the over-limit image is read and judged by its declared 2 GiB + 1 byte.
    let huge = client.read(&image("ghcr.io/arena/huge:v1")).await.unwrap();
    assert_eq!(huge.facts.layers.iter().map(|l| l.size).sum::<u64>(), (2 << 30) + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_realm_on_an_origin_the_arena_does_not_allow_is_never_asked() {
    let reg = RealRegistry::start(&[]);
    let e = reg.client(false).read(&image("docker.io/arena/single:v1")).await.unwrap_err();
    match e {
        RegistryError::Unavailable(m) => assert!(m.contains("token realm"), "{m}"),
        other => panic!("{other:?}"),
    }
    // The realm on the registry's own origin (GHCR's layout) needs no allowance.
    assert!(reg.client(false).read(&image("ghcr.io/arena/single:v1")).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_answer_that_names_it_access_token_is_read() {
    let reg = RealRegistry::start(&["--fields", "access_token"]);
    let read = reg.client(true).read(&image("docker.io/arena/single:v1")).await.unwrap();
    assert_eq!(read.facts.digest, reg.digest("arena/single:v1"));
}

/// The OpenEnv track with its registries at the real one: what a submission pins, and the at-once
/// refusals a real registry's answers lead to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submissions_pin_what_the_real_registry_serves_and_are_refused_with_its_codes() {
    let reg = RealRegistry::start(&[]);
    let registries = (reg.url("REGISTRY_URL"), reg.url("REGISTRY_SAME_ORIGIN_URL"), vec![reg.token_origin()]);
    let app =
        TestApp::with(Backend::Sqlite, Options { registries: Some(registries), ..Options::default() }).await;
    let cluster = standin::cluster::connect(
        &app.state.public_url,
        CLUSTER_SECRET,
        standin::cluster::Cluster {
            node_id: None,
            gpus_free: 1,
            sandboxes_free: 8,
            heartbeat: std::time::Duration::from_millis(100),
            trainer: None,
        },
    );
    let start = std::time::Instant::now();
    while app.get("/api/openenv").await.json()["connected"] != true {
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "the cluster never connected");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // One accepted submission per account a day: alice and bob each have one accepted here; eve's
    // are refused (a refusal takes no slot).
    let submit = |id: &str, img: &str, who: &'static str| {
        let body = json!({
            "submission_id": id,
            "name": "Real registry",
            "image": img,
            "schema": {"action": {"type": "object"}, "observation": {"type": "object"}},
            "tasks": [{"task_id": "t-1", "split": "train"}, {"task_id": "t-2", "split": "eval"}],
            "example_actions": [{"message": "hello"}],
            "finish_action": {"message": "done"},
        });
        let app = &app;
        async move { app.post_as("/api/openenv/submissions", &body.to_string(), who).await }
    };
    let code = |a: &crate::harness::Answer| (a.status, a.json()["code"].as_str().unwrap_or("").to_string());

    let r = submit("multi-v1", "ghcr.io/arena/multi:v1", ALICE).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let amd64 = reg.digest("arena/multi:v1@linux/amd64");
    assert_eq!(r.json()["images"][0]["resolved"], format!("ghcr.io/arena/multi@{amd64}"));
    // Sent again: the same pinned digest, nothing read anew.
    let again = submit("multi-v1", "ghcr.io/arena/multi:v1", ALICE).await;
    assert_eq!(
        (again.json()["existing"].clone(), again.json()["images"][0]["resolved"].clone()),
        (json!(true), r.json()["images"][0]["resolved"].clone())
    );
    let hub = submit("single-v1", "docker.io/arena/single:v1", BOB).await;
    assert_eq!(hub.status, StatusCode::ACCEPTED, "{}", hub.text());
    assert_eq!(
        hub.json()["images"][0]["resolved"],
        format!("docker.io/arena/single@{}", reg.digest("arena/single:v1"))
    );

    for (id, img, want) in [
        ("arm-v1", "ghcr.io/arena/armonly:v1", "IMAGE_PLATFORM_UNSUPPORTED"),
        ("arm-index", "docker.io/arena/armonly:index", "IMAGE_PLATFORM_UNSUPPORTED"),
        ("private-v1", "ghcr.io/arena/private:v1", "IMAGE_INACCESSIBLE"),
        ("nope-v1", "ghcr.io/arena/single:nope", "IMAGE_INACCESSIBLE"),
        ("huge-v1", "ghcr.io/arena/huge:v1", "IMAGE_COMPRESSED_SIZE_EXCEEDED"),
    ] {
        let r = submit(id, img, EVE).await;
        assert_eq!(code(&r), (StatusCode::UNPROCESSABLE_ENTITY, want.to_string()), "{img}: {}", r.text());
        let stored = app
            .scalar(&format!("SELECT COUNT(*) FROM openenv_submissions WHERE submission_id = '{id}'"))
            .await;
        assert_eq!(stored, 0, "{id}: a refusal stores nothing");
    }
    cluster.abort();
    app.finish().await;
}
