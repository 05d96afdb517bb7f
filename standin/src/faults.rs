//! Fault switches: slow answers, 429 with Retry-After, 5xx, dropped connections. Set them with
//! `PUT /_standin/faults` (JSON) or at start from `STANDIN_FAULTS`; `count` limits how many
//! requests they hit (absent: until cleared).

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// Delay before answering, in milliseconds.
    #[serde(default)]
    pub slow_ms: u64,
    /// Answer this status instead (429 or 5xx).
    #[serde(default)]
    pub status: Option<u16>,
    /// Sent as `Retry-After` with a 429 or 503.
    #[serde(default)]
    pub retry_after_s: Option<u64>,
    /// Close the connection without an answer.
    #[serde(default)]
    pub drop_connection: bool,
    /// How many requests the faults hit before they clear themselves.
    #[serde(default)]
    pub count: Option<u32>,
    /// Only requests whose path holds this text are hit (every request when absent).
    #[serde(default)]
    pub path_contains: Option<String>,
}

pub enum Outcome {
    Proceed,
    Answer(Response),
}

impl Faults {
    fn active(&self) -> bool {
        self.slow_ms > 0 || self.status.is_some() || self.drop_connection
    }

    /// Takes one hit of the faults for a request to `path`: returns what to apply to it and
    /// updates the count.
    pub fn take(&mut self, path: &str) -> Option<Faults> {
        if !self.active() || self.path_contains.as_deref().is_some_and(|p| !path.contains(p)) {
            return None;
        }
        let hit = self.clone();
        if let Some(n) = self.count.as_mut() {
            *n = n.saturating_sub(1);
            if *n == 0 {
                *self = Faults::default();
            }
        }
        Some(hit)
    }

    pub async fn apply(&self) -> Outcome {
        if self.slow_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.slow_ms)).await;
        }
        if self.drop_connection {
            // A body that fails at once makes the server close the connection mid-answer.
            let failing = futures_util::stream::once(async {
                Err::<axum::body::Bytes, std::io::Error>(std::io::Error::other(
                    "stand-in dropped the connection",
                ))
            });
            return Outcome::Answer(Response::new(Body::from_stream(failing)));
        }
        if let Some(code) = self.status {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut resp =
                (status, axum::Json(serde_json::json!({"error": format!("stand-in fault: {code}")})))
                    .into_response();
            if let Some(s) = self.retry_after_s {
                if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
                    resp.headers_mut().insert("retry-after", v);
                }
            }
            return Outcome::Answer(resp);
        }
        Outcome::Proceed
    }
}
