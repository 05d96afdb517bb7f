//! The server's own helpers (parsers, guards, codecs), tested here in the API test binary rather
//! than in a unit-test build of the server crate: that build compiled the whole crate a second time
//! (240 s of the debug build's 913 on this machine, 2026-12-06) for 21 tests. Each module is named
//! for the one it tests.

mod identity_provider {
    use server::identity::provider::*;

    #[test]
    fn origins_compare_scheme_host_and_port() {
        assert_eq!(
            origin_of("https://huggingface.co/oauth/token").as_deref(),
            Some("https://huggingface.co")
        );
        assert_ne!(origin_of("https://huggingface.co/x"), origin_of("https://evil.example/x"));
        assert_ne!(origin_of("http://127.0.0.1:1/x"), origin_of("http://127.0.0.1:2/x"));
        assert_eq!(origin_of("not a url"), None);
    }
}

mod identity_oauth {
    use server::identity::oauth::*;

    #[test]
    fn return_paths_stay_on_this_site() {
        for ok in ["/", "/arena", "/arena/challenges/openenv-9b?x=1#top"] {
            assert_eq!(safe_return(Some(ok)), ok);
        }
        for hostile in [
            "https://evil.example/",
            "//evil.example",
            "/\\evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/ /evil.example",
            "/caf\u{e9}",
            "evil",
            "",
        ] {
            assert_eq!(safe_return(Some(hostile)), "/", "{hostile:?}");
        }
        assert_eq!(safe_return(None), "/");
    }
}

mod changes {
    use server::changes::*;
    use server::db::Backend;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[tokio::test]
    async fn a_cached_read_is_made_again_after_a_bump() {
        let changes = Changes::new(Backend::Sqlite);
        let cache: Cache<(), u32> = Cache::new(Topic::Board);
        let calls = AtomicU64::new(0);
        let fill = || async { Ok::<_, serde_json::Error>(calls.fetch_add(1, Ordering::SeqCst) as u32) };
        assert_eq!(*cache.get(&changes, (), fill()).await.unwrap().value, 0);
        assert_eq!(*cache.get(&changes, (), fill()).await.unwrap().value, 0);
        changes.bump(Topic::Ledger);
        assert_eq!(*cache.get(&changes, (), fill()).await.unwrap().value, 0, "another topic");
        changes.bump(Topic::Board);
        let again = cache.get(&changes, (), fill()).await.unwrap();
        assert_eq!(*again.value, 1);
        assert_eq!(&again.json[..], b"1");
    }

    #[tokio::test]
    async fn nothing_is_cached_while_changes_may_go_unseen() {
        let changes = Changes::new(Backend::Postgres);
        let cache: Cache<(), u32> = Cache::new(Topic::Board);
        let calls = AtomicU64::new(0);
        let fill = || async { Ok::<_, serde_json::Error>(calls.fetch_add(1, Ordering::SeqCst) as u32) };
        assert_eq!(*cache.get(&changes, (), fill()).await.unwrap().value, 0);
        assert_eq!(*cache.get(&changes, (), fill()).await.unwrap().value, 1);
    }
}

mod openenv_schema_guard {
    use domain::invalid::Invalid;
    use domain::openenv::schema::SchemaCheck;
    use server::openenv::schema_guard::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;
    use std::time::Duration;

    /// A checker program that runs `body` (sh) whatever it is asked: the guard must hold whatever
    /// the child does.
    fn checker(dir: &tempfile::TempDir, name: &str, body: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn check() -> SchemaCheck {
        SchemaCheck { schema: serde_json::json!({}), actions: vec![] }
    }

    #[tokio::test]
    async fn a_child_that_hangs_dies_or_answers_nonsense_is_too_complex_never_a_verdict() {
        let dir = tempfile::tempdir().unwrap();
        // Half a second for the child that hangs; ten for the others, which must answer or die
        // on their own however slowly a loaded machine starts a shell.
        let hang = Bounds { deadline: Duration::from_millis(500), ..Bounds::default() };
        let bounds = Bounds { deadline: Duration::from_secs(10), ..Bounds::default() };
        let cases = [
            ("hangs", "exec /bin/sleep 30", "longer than 0.5 s"),
            ("overflows", "kill -SEGV $$", "deeper stack"),
            ("aborts", "kill -ABRT $$", "deeper stack"),
            ("babbles", "cat >/dev/null; echo not-a-verdict", "deeper stack"),
            ("fails", "cat >/dev/null; echo '{\"refused\":null}'; exit 3", "deeper stack"),
        ];
        for (name, body, says) in cases {
            let bounds = if name == "hangs" { hang.clone() } else { bounds.clone() };
            let guard = SchemaGuard::new(checker(&dir, name, body), bounds);
            match guard.check("alice", &check()).await {
                Err(Unchecked::TooComplex(why)) => assert!(why.contains(says), "{name}: {why}"),
                other => panic!("{name}: {other:?}"),
            }
        }
        let agrees = checker(&dir, "agrees", "cat >/dev/null; echo '{\"refused\":null}'");
        assert!(matches!(
            SchemaGuard::new(agrees, bounds.clone()).check("alice", &check()).await,
            Ok(Ok(()))
        ));
        let refuses = checker(&dir, "refuses", "cat >/dev/null; echo '{\"refused\":\"a rule\"}'");
        match SchemaGuard::new(refuses, bounds.clone()).check("alice", &check()).await {
            Ok(Err(Invalid(why))) => assert_eq!(why, "a rule"),
            other => panic!("{other:?}"),
        }
        let missing = SchemaGuard::new(dir.path().join("absent"), bounds);
        assert!(matches!(missing.check("alice", &check()).await, Err(Unchecked::Broken(_))));
    }
}

/// Fair shares of the schema checkers (issue 69): an account's flood of slow checks holds one
/// checker, waits in a short line of its own and is refused past it, while another account's
/// check is answered at once.
mod openenv_schema_guard_shares {
    use domain::openenv::schema::SchemaCheck;
    use server::openenv::schema_guard::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// A checker that agrees after `secs` seconds.
    fn slow_checker(dir: &tempfile::TempDir, secs: &str) -> std::path::PathBuf {
        let path = dir.path().join(format!("slow-{secs}"));
        let body = format!("#!/bin/sh\ncat >/dev/null; sleep {secs}; echo '{{\"refused\":null}}'\n");
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn check() -> SchemaCheck {
        SchemaCheck { schema: serde_json::json!({}), actions: vec![] }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_accounts_flood_holds_one_checker_and_another_account_is_answered() {
        let dir = tempfile::tempdir().unwrap();
        let bounds = Bounds { deadline: Duration::from_secs(20), per_minute: 1_000, ..Bounds::default() };
        let guard = Arc::new(SchemaGuard::new(slow_checker(&dir, "3"), bounds));
        // Twelve at once from one account: a few wait their turn, the rest are refused at once.
        let flood: Vec<_> = (0..12)
            .map(|_| {
                let g = guard.clone();
                tokio::spawn(async move { g.check("mallory", &check()).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let asked = Instant::now();
        let mine = guard.check("alice", &check()).await;
        let took = asked.elapsed();
        assert!(matches!(mine, Ok(Ok(()))), "{mine:?}");
        let (mut checked, mut throttled) = (0, 0);
        for f in flood {
            match f.await.unwrap() {
                Ok(Ok(())) => checked += 1,
                Err(Unchecked::Throttled { retry_after_s, .. }) => {
                    assert!(retry_after_s >= 1);
                    throttled += 1
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!((checked, throttled), (4, 8), "one at a time, four in line at most");
        // Alice waited for no one of mallory's line: one check's time, not five (printed, not
        // asserted: a loaded machine's seconds are no measure).
        eprintln!("alice's check beside a flood of 12: answered in {took:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_accounts_share_a_minute_and_the_wait_list_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let rate = Bounds { deadline: Duration::from_secs(20), per_minute: 3, ..Bounds::default() };
        let guard = SchemaGuard::new(slow_checker(&dir, "0.5"), rate);
        for _ in 0..3 {
            assert!(matches!(guard.check("bob", &check()).await, Ok(Ok(()))));
        }
        match guard.check("bob", &check()).await {
            Err(Unchecked::Throttled { why, retry_after_s }) => {
                assert!(why.contains("3 schema checks in the last minute"), "{why}");
                assert!((1..=60).contains(&retry_after_s), "{retry_after_s}");
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(guard.check("carol", &check()).await, Ok(Ok(()))),
            "another account's share is its own"
        );
        // One checker and one place on the wait list: a third account, while one is checked and
        // another waits, is answered busy at once, nothing started for it.
        let narrow = Bounds {
            deadline: Duration::from_secs(20),
            at_once: 1,
            waiting: 1,
            per_minute: 100,
            ..Bounds::default()
        };
        // The first check lasts five seconds: the second waits behind it, the third finds the
        // wait list full.
        let guard = Arc::new(SchemaGuard::new(slow_checker(&dir, "5"), narrow));
        let mut first_two = Vec::new();
        for who in ["a", "b"] {
            let g = guard.clone();
            first_two.push(tokio::spawn(async move { g.check(who, &check()).await }));
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let third = guard.check("c", &check()).await;
        assert!(matches!(third, Err(Unchecked::Busy)), "{third:?}");
        for t in first_two {
            let answer = t.await.unwrap();
            assert!(matches!(answer, Ok(Ok(()))), "{answer:?}");
        }
    }
}

mod openenv_admission_probe {
    use server::openenv::admission::probe::*;

    #[test]
    fn an_exit_quotes_the_last_lines_it_printed_and_no_credential() {
        let log = [
            "===== Job started at 2026-12-04T10:00:00Z =====",
            "starting",
            "",
            "token hf_sandbox_secret_x",
            "downloading words from huggingface.co",
            "failed: no network",
            "Traceback (most recent call last):",
            &"x".repeat(900),
        ];
        // An exception's own line is quoted with what follows it, not the lines after the
        // window (NLTK's search paths after its LookupError).
        let nltk = [
            "starting",
            "Traceback (most recent call last):",
            "  File \"/app/server/app.py\", line 3, in <module>",
            "LookupError:",
            "**********",
            "Resource words not found.",
            "Please use the NLTK Downloader to obtain the resource:",
            ">>> nltk.download('words')",
            "Searched in:",
            "- '/root/nltk_data'",
            "- '/usr/share/nltk_data'",
            "**********",
        ];
        let quoted = last_lines(nltk.into_iter(), &[]);
        assert_eq!(quoted[0], "LookupError:", "{quoted:?}");
        assert!(quoted.iter().any(|l| l == "Resource words not found."), "{quoted:?}");
        let lines = last_lines(log.into_iter(), &["hf_sandbox_secret_x"]);
        assert!(
            lines.len() <= EXIT_LINES && lines.iter().map(|l| l.chars().count()).sum::<usize>() <= EXIT_CHARS
        );
        assert!(lines.last().unwrap().ends_with('…'));
        assert!(!lines.join(" ").contains("hf_sandbox_secret_x") && !lines.join(" ").contains("====="));
    }
}

mod signing {
    use server::config::Secret;
    use server::signing::*;

    #[test]
    fn a_signature_verifies_with_its_key_and_parts_only() {
        let key = SigningKey::new(&Secret("k".repeat(40))).unwrap();
        let other = SigningKey::new(&Secret("j".repeat(40))).unwrap();
        let sig = key.sign(&[b"name", b"\n", b"bytes"]);
        assert_eq!(sig.len(), 64);
        assert!(key.verify(&[b"name", b"\n", b"bytes"], &sig));
        assert!(key.verify(&[b"name\nbytes"], &sig), "the parts are one message");
        assert!(!key.verify(&[b"name", b"\n", b"bytez"], &sig));
        assert!(!other.verify(&[b"name", b"\n", b"bytes"], &sig));
        assert!(!key.verify(&[b"name", b"\n", b"bytes"], "not hex"));
        assert!(SigningKey::new(&Secret("short".into())).is_err());
    }
}

mod overlay {
    use server::overlay::*;

    #[test]
    fn only_plain_relative_paths_are_written() {
        assert!(safe_relative("suites/openenv-heldout/tasks.txt").is_some());
        for bad in ["", "../x", "a/../../x", "/etc/passwd", "a\\b", "./a/./b/.."] {
            assert!(safe_relative(bad).is_none(), "{bad}");
        }
    }
}

mod http_client {
    use axum::extract::ConnectInfo;
    use axum::http::request::Parts;
    use server::http::client::*;
    use std::net::{IpAddr, SocketAddr};

    fn parts(xff: &[&str]) -> Parts {
        let mut req = axum::http::Request::builder();
        for v in xff {
            req = req.header("x-forwarded-for", *v);
        }
        let mut parts = req.body(()).unwrap().into_parts().0;
        parts.extensions.insert(ConnectInfo("10.0.0.9:4000".parse::<SocketAddr>().unwrap()));
        parts
    }

    #[test]
    fn the_trusted_proxys_entry_counts_and_what_a_client_wrote_does_not() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(address(&parts(&["203.0.113.7"]), 1), ip("203.0.113.7"));
        // A client that sends its own header gets its forgery to the left of the proxy's entry.
        assert_eq!(address(&parts(&["1.2.3.4, 203.0.113.7"]), 1), ip("203.0.113.7"));
        assert_eq!(address(&parts(&["1.2.3.4", "203.0.113.7"]), 1), ip("203.0.113.7"));
        assert_eq!(address(&parts(&["198.51.100.1, 203.0.113.7"]), 2), ip("198.51.100.1"));
        assert_eq!(address(&parts(&[]), 1), None, "behind a proxy that added nothing");
        assert_eq!(address(&parts(&["junk"]), 1), None);
        assert_eq!(address(&parts(&["1.2.3.4"]), 0), ip("10.0.0.9"), "no trusted proxy: the peer");
    }
}

mod http_json {
    use axum::http::header::CONTENT_TYPE;
    use axum::http::HeaderMap;
    use server::http::json::*;

    #[test]
    fn integral_floats_are_read_as_integers_and_nothing_else_changes() {
        let fixed =
            with_integral_floats(br#"{"a": 3300.0, "b": [1.0, 2.5, "x"], "c": {"d": -0.0}}"#).unwrap();
        assert_eq!(fixed, serde_json::json!({"a": 3300, "b": [1, 2.5, "x"], "c": {"d": 0}}));
        assert!(with_integral_floats(br#"{"a": 1, "b": 2.5}"#).is_none());
        assert!(with_integral_floats(b"not json").is_none());
        assert!(with_integral_floats(b"1e300").is_none());
    }

    #[test]
    fn json_content_types() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(CONTENT_TYPE, v.parse().unwrap());
            declared_json(&h)
        };
        assert!(with("application/json") && with("application/json; charset=utf-8"));
        assert!(with("application/problem+json") && with("Application/JSON"));
        assert!(!with("text/plain") && !with("application/x-www-form-urlencoded") && !with("text/json"));
        assert!(!declared_json(&HeaderMap::new()));
    }
}

mod webhooks_sealed {
    use server::webhooks::sealed::*;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn a_secret_opens_only_with_its_key_and_for_its_webhook() {
        let key = SealKey::from_hex(KEY).unwrap();
        let sealed = key.seal("wh-1", "whsec_abc");
        assert!(is_sealed(&sealed) && !sealed.contains("whsec_abc"));
        assert_ne!(sealed, key.seal("wh-1", "whsec_abc"), "a fresh nonce each time");
        assert_eq!(key.open("wh-1", &sealed).as_deref(), Some("whsec_abc"));
        assert_eq!(key.open("wh-2", &sealed), None);
        let other = SealKey::from_hex(&"ab".repeat(32)).unwrap();
        assert_eq!(other.open("wh-1", &sealed), None);
        assert_eq!(key.open("wh-1", "whsec_abc"), None);
        assert_eq!(key.open("wh-1", "v1:AAAA"), None);
        assert!(SealKey::from_hex("short").is_err() && SealKey::from_hex(&"zz".repeat(32)).is_err());
    }
}

mod ports_jobs {
    use server::ports::jobs::*;

    #[test]
    fn nulls_read_as_missing_keys_do() {
        // Every optional key explicitly null, as `huggingface_hub`'s `.get()` reads them.
        let job: Job = serde_json::from_value(serde_json::json!({
            "id": "6a0b", "owner": {"id": "o", "name": "benchflow", "type": "org"},
            "status": {"stage": "UPDATING", "message": null, "exposeUrls": null, "sshUrl": null},
            "command": null, "arguments": null, "labels": null, "flavor": null, "durations": null,
            "createdAt": null, "startedAt": null, "finishedAt": null, "expose": null, "retry": null,
        }))
        .unwrap();
        assert!(job.labels.is_empty() && job.command.is_empty() && job.status.expose_urls.is_empty());
        assert!(job.status.stage.is_active() && !job.exposes_ports());
        let durations: Job = serde_json::from_value(serde_json::json!({
            "id": "6a0c", "status": {"stage": "RUNNING"},
            "durations": {"schedulingSecs": null, "runningSecs": 12.5, "totalSecs": null},
            "expose": {"ports": [8000], "portsPublic": null},
        }))
        .unwrap();
        assert_eq!(durations.durations.running_secs, Some(12.5));
        assert!(durations.exposes_ports());
        // A page with such a job reads whole.
        let page: Vec<Job> =
            serde_json::from_str(r#"[{"id":"a","status":{"stage":"RUNNING"},"labels":null},{"id":"b","status":{"stage":"ERROR","message":null}}]"#)
                .unwrap();
        assert_eq!(page.len(), 2);
    }

    #[test]
    fn metrics_tolerate_nulls() {
        let m = first_metric("event: metric\ndata: {\"gpus\": null, \"cpu_usage_pct\": null}\n\n").unwrap();
        assert!(m.gpus.is_empty());
        let m =
            first_metric("data: {\"gpus\": {\"0\": {\"utilization\": null, \"memory_used_bytes\": 5}}}\n")
                .unwrap();
        assert_eq!(m.gpus["0"], GpuMetrics { utilization: 0.0, memory_used_bytes: 5.0 });
    }
}

mod ports_lfs {
    use server::ports::lfs::*;

    #[test]
    fn text_goes_inline_and_anything_else_to_lfs() {
        assert!(is_text(b"name,total\nlunch,12.50\n"));
        assert!(is_text("résumé".as_bytes()));
        assert!(!is_text(b"PK\x03\x04\x14\x00"), "a zip (an .xlsx)");
        assert!(!is_text(b"text with a \0 in it"));
        assert!(!is_text(&[0xff, 0xfe, 0x41]));
    }
}

mod ports_registry {
    use axum::extract::Path;
    use axum::response::IntoResponse;
    use domain::openenv::ImageRef;
    use reqwest::header;
    use server::ports::registry::*;

    /// A registry on loopback that serves what a hostile one might, by repository name.
    async fn hostile() -> (String, tokio::task::JoinHandle<()>, std::sync::Arc<std::sync::Mutex<Vec<String>>>)
    {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let log = seen.clone();
        let config = serde_json::json!({"os": "linux", "architecture": "amd64", "config": {}}).to_string();
        let config_digest = sha256_digest(config.as_bytes());
        let manifest = move |config: &str| {
            serde_json::json!({"schemaVersion": 2, "mediaType": IMAGE_TYPES[0],
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 10},
                "layers": []})
            .to_string()
        };
        let app = axum::Router::new()
            .route("/v2/", axum::routing::get(|| async { "{}" }))
            .route(
                "/v2/{owner}/{name}/{kind}/{reference}",
                axum::routing::get(move |Path((owner, name, kind, reference)): Path<(String, String, String, String)>| {
                    let (manifest, config, config_digest) = (manifest, config.clone(), config_digest.clone());
                    log.lock().unwrap().push(format!("{owner}/{name}/{kind}/{reference}"));
                    async move {
                        let typed = |media: &str, body: String| {
                            ([(header::CONTENT_TYPE, media.to_string())], body).into_response()
                        };
                        match (name.as_str(), kind.as_str()) {
                            ("traversal", "manifests") => typed(IMAGE_TYPES[0], manifest("sha256:../../../../etc/passwd")),
                            ("wrong-config", "manifests") => typed(IMAGE_TYPES[0], manifest(&format!("sha256:{}", "0".repeat(64)))),
                            ("wrong-config", "blobs") => typed("application/json", config),
                            ("huge", "manifests") => {
                                // Streamed without a length: the reader must stop on its own.
                                let chunks = futures_util::stream::iter((0..600).map(|_| Ok::<_, std::io::Error>(vec![b' '; 8192])));
                                ([(header::CONTENT_TYPE, IMAGE_TYPES[0])], axum::body::Body::from_stream(chunks)).into_response()
                            }
                            ("bad-index", "manifests") => typed(
                                INDEX_TYPES[0],
                                serde_json::json!({"manifests": [{"digest": "sha256:x/../../y", "mediaType": IMAGE_TYPES[0],
                                    "platform": {"os": "linux", "architecture": "amd64"}}]})
                                .to_string(),
                            ),
                            ("good", "manifests") => typed(IMAGE_TYPES[0], manifest(&config_digest)),
                            ("good", "blobs") => typed("application/json", config),
                            _ => axum::http::StatusCode::NOT_FOUND.into_response(),
                        }
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (url, server, seen)
    }

    #[tokio::test]
    async fn a_hostile_registry_costs_a_refusal_not_a_fetch_or_memory() {
        let (url, server, seen) = hostile().await;
        let registries = OciRegistries::new(&url, &url, &[]);
        let read = |name: &str| {
            let image = ImageRef::parse(&format!("docker.io/evil/{name}:v1")).unwrap();
            let registries = &registries;
            async move { registries.read(&image).await }
        };
        assert!(read("good").await.is_ok());
        let refused = |r: Result<ImageRead, RegistryError>, says: &str| match r {
            Err(RegistryError::ManifestUnsupported(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("{other:?}"),
        };
        refused(read("traversal").await, "is not a sha256 digest");
        refused(read("bad-index").await, "is not a sha256 digest");
        refused(read("wrong-config").await, "the image config does not match its digest");
        refused(read("huge").await, "larger than 4096 KiB");
        let paths = seen.lock().unwrap().clone();
        assert!(!paths.iter().any(|p| p.contains("..") || p.contains("passwd")), "{paths:?}");
        server.abort();
    }

    #[test]
    fn challenges_of_both_registries_are_read() {
        let hub = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io""#;
        assert_eq!(
            bearer_challenge(hub),
            Some(("https://auth.docker.io/token".into(), Some("registry.docker.io".into())))
        );
        let ghcr =
            r#"Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull,push""#;
        assert_eq!(bearer_challenge(ghcr), Some(("https://ghcr.io/token".into(), Some("ghcr.io".into()))));
        assert_eq!(bearer_challenge("Basic realm=x"), None);
    }
}

mod mcp_catalogue {
    use serde_json::{json, Value};
    use server::mcp::catalogue::*;

    fn document() -> Value {
        let (_, mut openapi) = server::api::router().split_for_parts();
        server::api::document_extractor_errors(&mut openapi);
        server::api::document_unique_refs(&mut openapi);
        serde_json::to_value(&openapi).unwrap()
    }

    /// Every `$ref` in `schema` points into its own `$defs`.
    fn refs_resolve(schema: &Value, root: &Value) -> Result<(), String> {
        match schema {
            Value::Object(fields) => {
                fields.iter().try_for_each(|(key, value)| match (key.as_str(), value.as_str()) {
                    ("$ref", Some(target)) => {
                        let pointer = target.strip_prefix('#').ok_or(target.to_string())?;
                        root.pointer(pointer).map(|_| ()).ok_or(format!("{target} does not resolve"))
                    }
                    _ => refs_resolve(value, root),
                })
            }
            Value::Array(items) => items.iter().try_for_each(|v| refs_resolve(v, root)),
            _ => Ok(()),
        }
    }

    #[test]
    fn every_tool_stands_alone_on_the_apis_own_schemas() {
        let catalogue = Catalogue::from_openapi(&document()).unwrap();
        assert_eq!(catalogue.tools.len(), SPECS.len());
        let mut names: Vec<&str> = SPECS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SPECS.len(), "tool names are unique");
        for tool in &catalogue.tools {
            let input = Value::Object(tool.input_schema.as_ref().clone());
            let output = Value::Object(tool.output_schema.as_deref().cloned().unwrap());
            for schema in [&input, &output] {
                assert_eq!(schema["type"], "object", "{}: {schema:#}", tool.name);
                refs_resolve(schema, schema).unwrap_or_else(|e| panic!("{}: {e}", tool.name));
            }
            let route = catalogue.route(&tool.name).unwrap();
            for param in route.path_params.iter() {
                assert!(
                    input["required"].as_array().unwrap().contains(&json!(param)),
                    "{}: {param}",
                    tool.name
                );
            }
        }
        // Answers that are not objects are wrapped: a list under `items`, anything else under `answer`.
        let wrapped: Vec<(&str, Output)> = SPECS
            .iter()
            .map(|s| (s.name, catalogue.route(s.name).unwrap().output))
            .filter(|(_, o)| *o != Output::Object)
            .collect();
        assert_eq!(wrapped, [("openenv_leaderboard", Output::Wrapped("answer"))], "{wrapped:?}");
        let post = catalogue.tools.iter().find(|t| t.name == "board_post").unwrap();
        assert!(post.input_schema["required"].as_array().unwrap().contains(&json!("body")));
        assert!(post.description.as_deref().unwrap().contains("Only when your human asked"));
    }

    #[test]
    fn a_tool_without_its_route_stops_the_start() {
        let mut doc = document();
        doc["paths"].as_object_mut().unwrap().remove("/api/whoami");
        let error = Catalogue::from_openapi(&doc).err().unwrap();
        assert!(format!("{error:#}").contains("whoami"), "{error:#}");
    }
}

mod mcp_schema {
    use serde_json::json;
    use server::mcp::schema::*;

    #[test]
    fn components_come_along_once_and_recursion_ends() {
        let components = json!({
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/Node"}, "leaf": {"$ref": "#/components/schemas/Leaf"}}},
            "Leaf": {"type": "string"},
            "Unused": {"type": "integer"},
        });
        let components = components.as_object().unwrap();
        let mut bundle = Bundle::new(components);
        let root = bundle.take_inlined(&json!({"$ref": "#/components/schemas/Node"})).unwrap();
        assert!(is_object(&root));
        let root = bundle.attach(root);
        assert_eq!(root["properties"]["next"]["$ref"], "#/$defs/Node");
        assert_eq!(root["$defs"]["Leaf"], json!({"type": "string"}));
        assert!(root["$defs"].get("Unused").is_none());
        // A reference to nothing, or outside the components, is an error, not a dangling schema.
        let mut bundle = Bundle::new(components);
        assert!(bundle.take(&json!({"$ref": "#/components/schemas/Gone"})).is_err());
        assert!(bundle.take(&json!({"$ref": "https://example.com/schema"})).is_err());
    }
}

mod mcp_handler {
    use server::mcp::handler::*;

    #[test]
    fn a_value_stays_one_segment() {
        assert_eq!(encode_segment("run-1_a.b~"), "run-1_a.b~");
        assert_eq!(encode_segment("../admin?x=1"), "..%2Fadmin%3Fx%3D1");
        // `..` alone stays, but as a whole segment axum's router matches it literally, never as a parent.
        assert_eq!(encode_segment("a b/é"), "a%20b%2F%C3%A9");
    }
}

mod background_passes {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// A pass that panics is logged and runs again at its next tick; the task running it lives on.
    #[tokio::test]
    async fn a_pass_that_panics_runs_again_at_its_next_tick() {
        let calls = Arc::new(AtomicU32::new(0));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let counted = calls.clone();
        let task = tokio::spawn(async move {
            server::workers::every("flaky", Duration::from_millis(20), None, stopped, move || {
                let counted = counted.clone();
                async move {
                    if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                        panic!("a row the pass cannot read");
                    }
                }
            })
            .await
        });
        let start = Instant::now();
        while calls.load(Ordering::SeqCst) < 3 {
            assert!(start.elapsed() < Duration::from_secs(60), "the pass never ran again");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.send(true).unwrap();
        task.await.expect("the pass's task ended without a panic");
    }
}
