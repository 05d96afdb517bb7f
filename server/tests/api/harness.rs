//! Builds a test app on a fresh database: a SQLite file in a temporary directory, or a new
//! PostgreSQL database on the server named by `ARENA_TEST_PG_URL` (default: the local `test`
//! database), dropped afterwards.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use server::config::Secret;
use server::{AppState, Config};
use sqlx::Connection;
use tower::ServiceExt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub const BACKENDS: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];

pub const ALICE: &str = "hf_test_alice_0123456789abcdef";
pub const BOB: &str = "hf_test_bob_0123456789abcdef";
pub const EVE: &str = "hf_test_eve_editor_0123456789abcdef";
/// Someone who took the name "alice" after she renamed: same name, another HF id.
pub const NEW_ALICE: &str = "hf_test_new_alice_0123456789abcdef";
/// What webhook secrets are sealed with (`ARENA_WEBHOOK_KEY`).
pub const WEBHOOK_KEY: &str = "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e";
/// The arena's own token: it launches jobs and writes the runs dataset in `benchflow`.
pub const ARENA_BOT: &str = "hf_test_arena_bot_0123456789abcdef";
pub const RUNS_DATASET: &str = "benchflow/arena-runs";
pub const LEADERBOARD_DATASET: &str = "benchflow/arena-leaderboard";

fn hub_users() -> Vec<standin::HubUser> {
    let user = |name: &str, token: &str, orgs: Vec<standin::OrgMembership>| standin::HubUser {
        id: None,
        name: name.into(),
        token: token.into(),
        fullname: name.to_uppercase(),
        email: None,
        orgs,
        token_role: None,
    };
    let member = |org: &str, role: &str| standin::OrgMembership { name: org.into(), role: role.into() };
    vec![
        user("alice", ALICE, vec![standin::OrgMembership { name: "benchflow".into(), role: "read".into() }]),
        user("bob", BOB, vec![]),
        user("eve", EVE, vec![standin::OrgMembership { name: "benchflow".into(), role: "admin".into() }]),
        standin::HubUser { id: Some("user-new-alice".into()), ..user("alice", NEW_ALICE, vec![]) },
        user("arena-bot", ARENA_BOT, vec![member("benchflow", "write"), member(SANDBOX_ORG, "write")]),
        standin::HubUser {
            token_role: Some("read".into()),
            ..user("arena-sandbox", SANDBOX_TOKEN, vec![member(SANDBOX_ORG, "read")])
        },
        // The evaluation reader: a read token whose only organization is the held-out sandboxes'.
        standin::HubUser {
            token_role: Some("read".into()),
            ..user("arena-eval", EVAL_READER, vec![member(standin::users::EVAL_ORG, "read")])
        },
        // A read token that could read the arena's own datasets: never a sandbox's.
        standin::HubUser {
            token_role: Some("read".into()),
            ..user(
                "leaky-reader",
                LEAKY_READER,
                vec![member(SANDBOX_ORG, "read"), member("benchflow", "read")],
            )
        },
    ]
}

/// The organization participants' sandboxes run in: it holds nothing else.
pub const SANDBOX_ORG: &str = standin::users::SANDBOX_ORG;
/// The token the arena's probes reach sandboxes with: a read token of an account whose only
/// organization is [`SANDBOX_ORG`].
pub const SANDBOX_TOKEN: &str = "hf_test_arena_sandbox_reader";
/// The held-out evaluation's sandbox reader (`ARENA_EVAL_TOKEN` on the cluster): a read token of
/// an account whose only organization is the evaluation namespace.
pub const EVAL_READER: &str = "hf_test_arena_eval_reader";
/// A read token of a member of the sandbox organization and of `benchflow`.
pub const LEAKY_READER: &str = "hf_test_leaky_reader_0123456789";
/// The arena's signing key in tests.
pub const SIGNING_KEY: &str = "test-signing-key-0123456789abcdef0123456789";

/// The credential the training cluster connects to test servers with.
pub const CLUSTER_SECRET: &str = "test-cluster-credential-0f0f";

/// Starts the HF stand-in on a free loopback port.
pub async fn start_hub(repos: &Path) -> (standin::SharedHub, String) {
    let hub = standin::Hub::new(
        hub_users(),
        standin::OAuthApp { client_id: "arena-test".into(), client_secret: "arena-test-secret".into() },
        standin::Faults::default(),
    )
    .with_repos(repos.to_path_buf())
    .with_images(standin::registry::load(&repo_root().join("tests/fixtures/images")).unwrap())
    .with_stage_ms(50);
    // The local demo's held-out suite, at the commit its suite file pins.
    let (hub, _) = hub
        .with_seed_dataset("arena-demo/local-heldout", &repo_root().join("dev/local-challenge/heldout"))
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(standin::serve(listener, hub.clone()));
    (hub, url)
}

pub struct TestApp {
    pub hub: standin::SharedHub,
    pub hub_url: String,
    pub router: Router,
    pub state: AppState,
    pub site_root: PathBuf,
    /// The stand-in's git repositories: `datasets/{owner}/{name}`, `github/{owner}/{repo}`.
    pub repos: PathBuf,
    /// Where this server listens (a replica has its own address).
    pub url: String,
    pg_database: Option<String>,
    config: Config,
    deps: server::ports::Deps,
    _configs: Option<std::sync::Arc<tempfile::TempDir>>,
    _dir: tempfile::TempDir,
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The app's state with another admission health wait: for the passes that probe an image which
/// never serves, so that they do not wait the whole default for it.
pub fn with_health_wait(state: &server::AppState, secs: u64) -> server::AppState {
    let mut state = state.clone();
    state.openenv = std::sync::Arc::new(server::state::OpenEnvSettings {
        health_wait: std::time::Duration::from_secs(secs),
        ..state.openenv.as_ref().clone()
    });
    state
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn pg_admin_url() -> String {
    std::env::var("ARENA_TEST_PG_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

async fn create_pg_database() -> (String, String) {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "arena_test_{}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos()
    );
    let admin = pg_admin_url();
    let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap_or_else(|e| {
        panic!("PostgreSQL at {admin} is needed for these tests (dev/test starts it): {e}")
    });
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut conn).await.unwrap();
    let base = admin.rsplit_once('/').unwrap().0;
    (name.clone(), format!("{base}/{name}"))
}

pub struct Options {
    pub configs_dir: PathBuf,
    /// The reconciler's limits: (silence, scheduling, relay grace) in seconds; a silence limit
    /// of `None` is each challenge's own.
    pub limits: (Option<i64>, i64, i64),
    /// The job secrets the arena has (name, value).
    pub job_secrets: Vec<(&'static str, &'static str)>,
    /// Keeps a copied registry alive as long as the app.
    pub keep: Option<std::sync::Arc<tempfile::TempDir>>,
    /// A clock the test moves (the system's when absent).
    pub clock: Option<std::sync::Arc<server::ports::clock::FixedClock>>,
    /// One admission probe's whole time (seconds).
    pub probe_deadline_s: u64,
    /// The admission lease (seconds).
    pub admission_lease_s: u64,
    /// Docker Hub's and GHCR's addresses and the token origins allowed besides theirs (the
    /// stand-in's when absent).
    pub registries: Option<(String, String, Vec<String>)>,
    /// Webhooks may call loopback over plain http (a local trial's setting).
    pub webhooks_allow_loopback: bool,
    /// Names resolved as the test says (the system's resolver when absent).
    pub names: Option<std::sync::Arc<dyn server::ports::names::NameLookup>>,
    /// HF account ids the arena refuses as callers besides those it finds (`ARENA_SERVICE_ACCOUNTS`).
    pub service_accounts: Vec<String>,
    /// The organization held-out sandboxes run in (`ARENA_EVAL_NAMESPACE`; unset when absent).
    pub eval_namespace: Option<&'static str>,
    /// Schema checks an account may start a minute (`ARENA_SCHEMA_CHECKS_PER_MINUTE`): lifted in
    /// the tests, whose few accounts check many bodies; the flood test sets the deployed 20.
    pub schema_checks_per_minute: usize,
}

/// The deployed defaults: each challenge's silence limit, half an hour of scheduling, two minutes
/// of grace.
pub const LIMITS: (Option<i64>, i64, i64) = (None, 1800, 120);

/// The secrets a local-demo job needs: the arena's token and a (simulated) Daytona key.
pub const JOB_SECRETS: [(&str, &str); 2] =
    [("HF_TOKEN", ARENA_BOT), ("DAYTONA_API_KEY", "local-simulated-daytona-key")];

impl Options {
    /// The registry `dev/run` serves: the shipped one plus the simulated `local-demo` challenge.
    pub fn local() -> Options {
        let dir = local_configs();
        Options {
            configs_dir: dir.path().to_path_buf(),
            keep: Some(std::sync::Arc::new(dir)),
            limits: LIMITS,
            job_secrets: JOB_SECRETS.to_vec(),
            clock: None,
            probe_deadline_s: 900,
            admission_lease_s: 600,
            registries: None,
            webhooks_allow_loopback: false,
            names: None,
            service_accounts: Vec::new(),
            eval_namespace: None,
            schema_checks_per_minute: 1_000,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            configs_dir: repo_root().join("configs"),
            keep: None,
            limits: LIMITS,
            job_secrets: JOB_SECRETS.to_vec(),
            clock: None,
            probe_deadline_s: 900,
            admission_lease_s: 600,
            registries: None,
            webhooks_allow_loopback: false,
            names: None,
            service_accounts: Vec::new(),
            eval_namespace: None,
            schema_checks_per_minute: 1_000,
        }
    }
}

impl TestApp {
    pub async fn new(backend: Backend) -> TestApp {
        TestApp::with(backend, Options::default()).await
    }

    pub async fn with(backend: Backend, options: Options) -> TestApp {
        let dir = tempfile::tempdir().unwrap();
        let site_root = dir.path().join("site");
        std::fs::create_dir_all(site_root.join("pkg")).unwrap();
        std::fs::write(site_root.join("pkg/arena.css"), "body {}").unwrap();
        let (pg_database, url) = match backend {
            Backend::Sqlite => {
                (None, format!("sqlite://{}?mode=rwc", dir.path().join("arena.sqlite").display()))
            }
            Backend::Postgres => {
                let (name, url) = create_pg_database().await;
                (Some(name), url)
            }
        };
        let repos = dir.path().join("hub-repos");
        std::fs::create_dir_all(&repos).unwrap();
        let (hub, hub_url) = start_hub(&repos).await;
        // Our own held-out suites: `openenv-heldout` (sealed, evaluated by openenv-9b) and a public benchmark.
        let fingerprints = dir.path().join("fingerprints");
        std::fs::create_dir_all(&fingerprints).unwrap();
        for (suite, src, sealed) in
            [("openenv-heldout", "sealed-suite", true), ("public-bench", "public-bench", false)]
        {
            let fp = server::local::fingerprint_dir(
                &repo_root().join("tests/fixtures/heldout").join(src),
                suite,
                sealed,
            )
            .unwrap();
            std::fs::write(fingerprints.join(format!("{suite}.json")), serde_json::to_string(&fp).unwrap())
                .unwrap();
        }
        // Served on a real port too: the stand-in's jobs report back to the arena over its relay.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let public_url = format!("http://{}", listener.local_addr().unwrap());
        let (registry_docker_url, registry_ghcr_url, registry_auth_origins) =
            options.registries.unwrap_or_else(|| {
                (format!("{hub_url}/registry/docker.io"), format!("{hub_url}/registry/ghcr.io"), Vec::new())
            });
        // The deployed defaults, with the outside world on the stand-in and the test's own data,
        // limits and timings (fast ticks, short waits).
        let config = Config {
            data_dir: dir.path().to_path_buf(),
            database_url: Some(Secret(url)),
            configs_dir: options.configs_dir,
            site_root: site_root.clone(),
            hf_endpoint: hub_url.clone(),
            github_api_url: hub_url.clone(),
            github_raw_url: format!("{hub_url}/raw"),
            registry_docker_url,
            registry_ghcr_url,
            registry_auth_origins,
            oauth_client_id: Some("arena-test".into()),
            oauth_client_secret: Some(Secret("arena-test-secret".into())),
            public_url: Some(public_url.clone()),
            hf_token: Some(Secret(ARENA_BOT.into())),
            runs_dataset: RUNS_DATASET.into(),
            leaderboard_dataset: LEADERBOARD_DATASET.into(),
            job_secrets: options
                .job_secrets
                .iter()
                .map(|(k, v)| (k.to_string(), Secret(v.to_string())))
                .collect(),
            fingerprints_dir: Some(fingerprints),
            cluster_secret: Some(Secret(CLUSTER_SECRET.into())),
            sandbox_token: Some(Secret(SANDBOX_TOKEN.into())),
            sandbox_namespace: Some(SANDBOX_ORG.into()),
            backup_key: Some(Secret(SIGNING_KEY.into())),
            trusted_proxy_hops: Some(1),
            fetch_concurrency: 16,
            worker_tick_s: 1,
            silence_limit_s: options.limits.0,
            scheduling_limit_s: options.limits.1,
            relay_grace_s: options.limits.2,
            relay_heartbeat_s: 0.5,
            log_read_ms: 200,
            // A local sandbox is a Python server starting on this machine's two cores beside the
            // other test groups: seen to take over 3 s to serve under that load, and a slower
            // machine takes twice that: a bound on a hang, not a timing. The tests whose
            // images never serve wait less (`with_health_wait`).
            sandbox_health_s: 60,
            sandbox_limit: 4,
            probe_deadline_s: options.probe_deadline_s,
            admission_lease_s: options.admission_lease_s,
            webhooks_allow_loopback: options.webhooks_allow_loopback,
            // The schema checker is the built server binary (this test binary is not one).
            schema_checker: Some(env!("CARGO_BIN_EXE_arena").into()),
            schema_checks_per_minute: options.schema_checks_per_minute,
            webhook_key: Some(Secret(WEBHOOK_KEY.into())),
            service_accounts: options.service_accounts,
            eval_namespace: options.eval_namespace.map(String::from),
            ..Config::default()
        };
        // The one set of adapters: a replica shares it, as servers behind one address share the
        // outside world.
        let mut deps = server::ports::Deps::real(&config);
        if let Some(clock) = options.clock {
            deps.clock = clock;
        }
        if let Some(names) = options.names {
            deps.names = names;
        }
        let (router, state) = server::build_with(&config, deps.clone()).await.expect("the test app builds");
        let served = router.clone();
        tokio::spawn(async move { axum::serve(listener, served).await });
        TestApp {
            hub,
            hub_url,
            router,
            state,
            site_root,
            repos,
            url: public_url,
            pg_database,
            config,
            deps,
            _configs: options.keep,
            _dir: dir,
        }
    }

    /// A second server on the same database and stand-in, as a replica behind the same address.
    pub async fn replica(&self) -> TestApp {
        self.replica_with(|_| {}).await
    }

    /// A replica whose configuration `edit` changed, as a server restarted with new settings.
    pub async fn replica_with(&self, edit: impl FnOnce(&mut Config)) -> TestApp {
        let mut config = self.config.clone();
        edit(&mut config);
        let (router, state) =
            server::build_with(&config, self.deps.clone()).await.expect("the replica builds");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let served = router.clone();
        tokio::spawn(async move { axum::serve(listener, served).await });
        TestApp {
            url,
            hub: self.hub.clone(),
            hub_url: self.hub_url.clone(),
            router,
            state,
            site_root: self.site_root.clone(),
            repos: self.repos.clone(),
            // The first server drops the database.
            pg_database: None,
            config,
            deps: self.deps.clone(),
            _configs: self._configs.clone(),
            _dir: tempfile::tempdir().unwrap(),
        }
    }

    pub async fn request(&self, method: Method, uri: &str, body: Option<&str>) -> Answer {
        self.call(method, uri, body, &[]).await
    }

    /// A request with extra headers (`authorization`, `cookie`, `x-csrf-token`, …).
    pub async fn call(
        &self,
        method: Method,
        uri: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut req = Request::builder().method(method).uri(uri);
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(body.map(|b| Body::from(b.to_string())).unwrap_or_else(Body::empty)).unwrap();
        self.send(req).await
    }

    /// Sends a request and reads the whole answer. A request that does not finish within a minute
    /// fails the test, naming the request, rather than hanging the run.
    pub async fn send(&self, req: Request<Body>) -> Answer {
        let what = format!("{} {}", req.method(), req.uri());
        let answer = async {
            let resp = self.router.clone().oneshot(req).await.unwrap();
            let status = resp.status();
            let headers = resp.headers().clone();
            let body = resp.into_body().collect().await.unwrap().to_bytes().to_vec();
            Answer { status, headers, body }
        };
        match tokio::time::timeout(std::time::Duration::from_secs(60), answer).await {
            Ok(answer) => answer,
            Err(_) => panic!("{what} did not finish within 60 s"),
        }
    }

    pub async fn get(&self, uri: &str) -> Answer {
        self.request(Method::GET, uri, None).await
    }

    pub async fn get_as(&self, uri: &str, token: &str) -> Answer {
        self.call(Method::GET, uri, None, &[("authorization", &format!("Bearer {token}"))]).await
    }

    pub async fn post_as(&self, uri: &str, body: &str, token: &str) -> Answer {
        self.call(Method::POST, uri, Some(body), &[("authorization", &format!("Bearer {token}"))]).await
    }

    pub async fn scalar(&self, sql: &str) -> i64 {
        use sqlx::Row;
        sqlx::query(sql).fetch_one(&self.state.db.pool).await.unwrap().try_get(0).unwrap()
    }

    pub async fn text(&self, sql: &str) -> String {
        use sqlx::Row;
        sqlx::query(sql).fetch_one(&self.state.db.pool).await.unwrap().try_get(0).unwrap()
    }

    /// The server's data directory (its SQLite database is `arena.sqlite` there).
    pub fn data_dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    /// Runs SQL as an organizer would by hand. On PostgreSQL the tables' triggers tell every
    /// server; this server is told at once, as after its own writes, so the next read is fresh.
    pub async fn exec(&self, sql: &str) -> Result<(), sqlx::Error> {
        let done = sqlx::query(sql).execute(&self.state.db.pool).await.map(|_| ());
        self.state.changes.bump_all();
        done
    }

    /// A dataset's tree listing on the stand-in, as the arena's own token reads it.
    pub async fn hub_tree(&self, repo: &str, rev_and_dir: &str) -> Vec<serde_json::Value> {
        reqwest::Client::new()
            .get(format!("{}/api/datasets/{repo}/tree/{rev_and_dir}", self.hub_url))
            .bearer_auth(ARENA_BOT)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Publishes a fixture collection as a git repository on the stand-in (`kind` is `datasets`
    /// or `github`); answers the commit.
    pub fn publish(&self, kind: &str, repo_id: &str, fixture: &Path) -> String {
        let dest = self.repos.join(kind).join(repo_id);
        std::fs::create_dir_all(&dest).unwrap();
        copy_tree(fixture, &dest);
        git(&dest, &["init", "-q", "-b", "main"]);
        git(&dest, &["add", "-A"]);
        git(&dest, &["-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-q", "-m", "fixture"]);
        git(&dest, &["rev-parse", "HEAD"])
    }

    pub async fn finish(self) {
        self.state.db.pool.close().await;
        self.state.db.writer.close().await;
        if let Some(name) = &self.pg_database {
            let mut conn = sqlx::PgConnection::connect(&pg_admin_url()).await.unwrap();
            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .execute(&mut conn)
                .await
                .unwrap();
        }
    }
}

/// Runs a test body once per backend, each on a fresh database. `multi_thread` runs it on the
/// runtime the server uses in production (pages rendered with streaming are tested there).
#[macro_export]
macro_rules! on_both_backends {
    (local, $name:ident, |$app:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run($app: &$crate::harness::TestApp) $body

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let app = $crate::harness::TestApp::with($crate::harness::Backend::Sqlite, $crate::harness::Options::local()).await;
                run(&app).await;
                app.finish().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let app = $crate::harness::TestApp::with($crate::harness::Backend::Postgres, $crate::harness::Options::local()).await;
                run(&app).await;
                app.finish().await;
            }
        }
    };
    (multi_thread, $name:ident, |$app:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run($app: &$crate::harness::TestApp) $body

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let app = $crate::harness::TestApp::new($crate::harness::Backend::Sqlite).await;
                run(&app).await;
                app.finish().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let app = $crate::harness::TestApp::new($crate::harness::Backend::Postgres).await;
                run(&app).await;
                app.finish().await;
            }
        }
    };
    ($name:ident, |$app:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run($app: &$crate::harness::TestApp) $body

            #[tokio::test]
            async fn sqlite() {
                let app = $crate::harness::TestApp::new($crate::harness::Backend::Sqlite).await;
                run(&app).await;
                app.finish().await;
            }

            #[tokio::test]
            async fn postgres() {
                let app = $crate::harness::TestApp::new($crate::harness::Backend::Postgres).await;
                run(&app).await;
                app.finish().await;
            }
        }
    };
}

/// The shipped registry plus `dev/local-challenge` (the open, simulated `local-demo`), as `dev/run`
/// serves it.
pub fn local_configs() -> tempfile::TempDir {
    // The OpenEnv track is evaluated on the demo's public benchmark, as `dev/lib.sh` sets it.
    let dir = copy_configs(|path, text| {
        if path == "arena.toml" {
            text.replace("benchmark = \"openenv-bench\"", "benchmark = \"local-bench\"")
        } else {
            text
        }
    });
    let src = repo_root().join("dev/local-challenge");
    for sub in ["challenges", "methods", "suites", "benchmarks", "fixture/task-lists"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        for entry in std::fs::read_dir(src.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.path().join(sub).join(path.file_name().unwrap())).unwrap();
        }
    }
    dir
}

pub fn copy_configs(edit: impl Fn(&str, String) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = repo_root().join("configs");
    let mut stack = vec![src.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(&src).unwrap();
            if path.is_dir() {
                std::fs::create_dir_all(dir.path().join(rel)).unwrap();
                stack.push(path);
            } else {
                let text = std::fs::read_to_string(&path).unwrap();
                let rel_str = rel.to_string_lossy().replace('\\', "/");
                std::fs::write(dir.path().join(rel), edit(&rel_str, text)).unwrap();
            }
        }
    }
    dir
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Copies a directory, keeping symbolic links as links.
pub fn copy_tree(src: &Path, dest: &Path) {
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dest.join(e.file_name());
        let kind = e.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), &to).unwrap();
        } else if kind.is_dir() {
            std::fs::create_dir_all(&to).unwrap();
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

pub fn fixture(case: &str) -> PathBuf {
    repo_root().join("tests/fixtures/collections").join(case)
}
