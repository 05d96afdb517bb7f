//! Tokens never reach the logs: every log line of authenticated requests is captured at the most
//! verbose level and searched for the tokens. Its own test binary: the capture is the process's
//! global subscriber, so no other test's threads decide which callsites are heard, and the
//! server's own tasks (on any thread) are captured too.

// The shared harness; this binary uses a part of it.
#[allow(dead_code)]
#[path = "api/harness.rs"]
mod harness;

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::http::Method;

use harness::{Backend, TestApp, ALICE};

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn no_token_appears_in_the_logs() {
    let capture = Capture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber of this binary");

    let app = TestApp::new(Backend::Sqlite).await;
    let bad = "hf_bad_token_that_must_not_be_logged";
    app.get_as("/api/whoami", ALICE).await;
    app.get_as("/api/whoami", bad).await;
    app.post_as("/api/agents", r#"{"agent_id":"log-agent","description":"d"}"#, ALICE).await;
    app.post_as("/api/board/messages", r#"{"request_id":"log-test-1","body":"hi"}"#, ALICE).await;
    app.call(Method::GET, "/api/whoami", None, &[("authorization", "Basic hf_basic_secret_value")]).await;
    app.hub.set_faults(standin::Faults { status: Some(500), ..Default::default() });
    app.get_as("/api/whoami", "hf_fresh_token_during_outage").await;
    app.finish().await;

    let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    assert!(logs.len() > 200, "the capture saw the requests:\n{logs}");
    for secret in [ALICE, bad, "hf_basic_secret_value", "hf_fresh_token_during_outage", "arena-test-secret"] {
        assert!(!logs.contains(secret), "{secret} found in the logs");
    }
}
