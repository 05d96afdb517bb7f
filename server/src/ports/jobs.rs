//! The job launcher: HF Jobs (`POST /api/jobs/{namespace}` to create, `GET …/{id}` to inspect,
//! `GET /api/jobs/{namespace}?label=k=v` to find by label, `POST …/{id}/cancel`), authenticated
//! with the arena's own HF token.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};

use super::http::{client, retry_after};
use crate::config::Secret;

/// What a run's job is: HF's job create body.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    pub docker_image: String,
    pub command: Vec<String>,
    pub arguments: Vec<String>,
    pub environment: BTreeMap<String, String>,
    /// Values HF keeps secret; left out when empty, as `huggingface_hub` leaves it out.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, String>,
    pub flavor: String,
    pub timeout_seconds: u64,
    pub labels: BTreeMap<String, String>,
    /// How many times HF starts the command (again, in the same job, after a crash).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// Ports the job's servers listen on, reachable at the status's `exposeUrls`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expose: Option<Expose>,
}

/// HF's `expose`: the ports reachable from outside the job; `portsPublic` (a subset) without an
/// HF token (sandboxes reach a run's model bridge with the bridge's own key, not an HF token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Expose {
    pub ports: Vec<u16>,
    pub ports_public: Vec<u16>,
}

impl Expose {
    pub fn public(port: u16) -> Expose {
        Expose { ports: vec![port], ports_public: vec![port] }
    }

    /// Reachable with an HF token of the namespace only.
    pub fn private(port: u16) -> Expose {
        Expose { ports: vec![port], ports_public: Vec::new() }
    }
}

/// `huggingface_hub` reads every optional key of a job with `.get()`, so an explicit `null` and a
/// missing key mean the same to it; these fields read the same way here.
fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// One sample of HF's job metrics: each GPU's utilisation (0–100) and memory.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct Metrics {
    #[serde(default, deserialize_with = "or_default")]
    pub gpus: BTreeMap<String, GpuMetrics>,
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
pub struct GpuMetrics {
    #[serde(default, deserialize_with = "or_default")]
    pub utilization: f64,
    #[serde(default, deserialize_with = "or_default")]
    pub memory_used_bytes: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    pub stage: domain::runs::JobStage,
    #[serde(default)]
    pub message: Option<String>,
    /// Where an exposed port is reached once the job runs.
    #[serde(default, deserialize_with = "or_default", skip_serializing_if = "Vec::is_empty")]
    pub expose_urls: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobDurations {
    #[serde(default)]
    pub scheduling_secs: Option<f64>,
    #[serde(default)]
    pub running_secs: Option<f64>,
    #[serde(default)]
    pub total_secs: Option<f64>,
}

/// A job as HF describes it (the fields the arena reads).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub id: domain::ids::JobId,
    pub status: JobStatus,
    #[serde(default, deserialize_with = "or_default")]
    pub command: Vec<String>,
    #[serde(default)]
    pub flavor: Option<String>,
    #[serde(default, deserialize_with = "or_default")]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub started_at: Option<String>,
    #[serde(default)]
    pub finished_at: Option<String>,
    #[serde(default, deserialize_with = "or_default")]
    pub durations: JobDurations,
    /// The ports it exposes (each costs HF's surcharge while the job runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expose: Option<ExposeRead>,
}

/// A job's `expose` as HF answers it (either list may be missing or `null`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExposeRead {
    #[serde(default, deserialize_with = "or_default")]
    pub ports: Vec<u16>,
    #[serde(default, deserialize_with = "or_default")]
    pub ports_public: Vec<u16>,
}

impl Job {
    pub fn exposes_ports(&self) -> bool {
        self.expose.as_ref().is_some_and(|e| !e.ports.is_empty())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub timestamp: String,
    pub line: String,
}

/// The lines of a server-sent event stream's `data: {"data": line, "timestamp": …}` events.
pub fn parse_log_events(text: &str) -> Vec<LogLine> {
    #[derive(Deserialize)]
    struct Data {
        data: String,
        #[serde(default)]
        timestamp: String,
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Data>(d.trim()).ok())
        .map(|d| LogLine { timestamp: d.timestamp, line: d.data })
        .collect()
}

/// The first complete `data:` line of a metrics event stream.
pub fn first_metric(text: &str) -> Option<Metrics> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find_map(|d| serde_json::from_str::<Metrics>(d.trim()).ok())
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobError {
    /// HF refused for lack of prepaid credit (402): definite, nothing was created.
    #[error("HF Jobs refused: no prepaid credit in the arena's namespace ({0})")]
    PaymentRequired(String),
    /// Any other definite refusal (4xx): nothing was created.
    #[error("HF Jobs refused the request ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("no such job")]
    NotFound,
    /// A 5xx, a timeout or no answer: the outcome of a create is unknown.
    #[error("HF Jobs did not answer ({reason})")]
    Unavailable { reason: String, retry_after_s: Option<u64> },
}

#[async_trait]
pub trait JobLauncher: Send + Sync {
    async fn create(&self, spec: &JobSpec) -> Result<Job, JobError>;
    async fn inspect(&self, id: &str) -> Result<Job, JobError>;
    /// Jobs carrying the label `key=value`, every page.
    async fn find_by_label(&self, key: &str, value: &str) -> Result<Vec<Job>, JobError>;
    async fn cancel(&self, id: &str) -> Result<(), JobError>;
    /// The job's log: the newest `tail` lines, then what follows within `wait` (a running job's
    /// stream does not end), as (timestamp, line); at most `max_bytes` are read.
    async fn logs(
        &self,
        id: &str,
        tail: Option<usize>,
        wait: Duration,
        max_bytes: usize,
    ) -> Result<Vec<LogLine>, JobError>;
    /// The job's current metrics sample (HF streams one a second; the first is read). `None`
    /// when none came within `wait`; HF answers 406 for a job that has ended.
    async fn metrics(&self, id: &str, wait: Duration) -> Result<Option<Metrics>, JobError>;
    /// Every job in the namespace, every page.
    async fn list(&self) -> Result<Vec<Job>, JobError>;
    /// HF's hardware list: each flavor's price per hour (USD).
    async fn prices(&self) -> Result<BTreeMap<String, f64>, JobError>;
    /// The job page a person opens (private to the namespace's members).
    fn job_url(&self, id: &str) -> String;
}

pub struct HfJobs {
    client: reqwest::Client,
    endpoint: String,
    namespace: String,
    token: Option<Secret>,
}

/// At most this many pages when listing by label.
const MAX_PAGES: usize = 20;

impl HfJobs {
    pub fn new(endpoint: &str, namespace: &str, token: Option<Secret>) -> HfJobs {
        HfJobs {
            client: client(Duration::from_secs(30)),
            endpoint: endpoint.trim_end_matches('/').to_string(),
            namespace: namespace.to_string(),
            token,
        }
    }

    fn request(&self, method: reqwest::Method, url: &str) -> Result<reqwest::RequestBuilder, JobError> {
        let token = self.token.as_ref().ok_or_else(|| JobError::Refused {
            status: 401,
            message: "the arena has no HF token to launch jobs with (HF_TOKEN)".into(),
        })?;
        Ok(self.client.request(method, url).bearer_auth(&token.0))
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response, JobError> {
        Self::check(Self::answer(req).await?).await
    }

    async fn answer(req: reqwest::RequestBuilder) -> Result<reqwest::Response, JobError> {
        req.send().await.map_err(|e| JobError::Unavailable {
            reason: format!("no answer ({})", e.without_url()),
            retry_after_s: None,
        })
    }

    /// A success as it is; anything else as the error it means.
    async fn check(resp: reqwest::Response) -> Result<reqwest::Response, JobError> {
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let retry = retry_after(resp.headers());
        let message = resp.text().await.unwrap_or_default().chars().take(500).collect::<String>();
        Err(match status {
            StatusCode::PAYMENT_REQUIRED => JobError::PaymentRequired(message),
            StatusCode::NOT_FOUND => JobError::NotFound,
            s if s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS => {
                JobError::Unavailable { reason: format!("HF Jobs answered {s}"), retry_after_s: retry }
            }
            s => JobError::Refused { status: s.as_u16(), message },
        })
    }

    async fn json<T: serde::de::DeserializeOwned>(resp: reqwest::Response) -> Result<T, JobError> {
        resp.json().await.map_err(|e| JobError::Unavailable {
            reason: format!("an unreadable answer ({})", e.without_url()),
            retry_after_s: None,
        })
    }
}

/// The `rel="next"` address of a `Link` header, kept only when it is on the same host.
fn next_page(headers: &reqwest::header::HeaderMap, endpoint: &str) -> Option<String> {
    let link = headers.get(reqwest::header::LINK)?.to_str().ok()?;
    link.split(',')
        .find_map(|part| {
            let (url, params) = part.split_once(';')?;
            params
                .contains("rel=\"next\"")
                .then(|| url.trim().trim_start_matches('<').trim_end_matches('>').to_string())
        })
        .filter(|url| url.starts_with(&format!("{endpoint}/")))
}

#[async_trait]
impl JobLauncher for HfJobs {
    async fn create(&self, spec: &JobSpec) -> Result<Job, JobError> {
        let url = format!("{}/api/jobs/{}", self.endpoint, self.namespace);
        let resp = self.send(self.request(reqwest::Method::POST, &url)?.json(spec)).await?;
        Self::json(resp).await
    }

    async fn inspect(&self, id: &str) -> Result<Job, JobError> {
        let url =
            format!("{}/api/jobs/{}/{}", self.endpoint, self.namespace, crate::sources::encode_path(id));
        Self::json(self.send(self.request(reqwest::Method::GET, &url)?).await?).await
    }

    async fn find_by_label(&self, key: &str, value: &str) -> Result<Vec<Job>, JobError> {
        let mut url = reqwest::Url::parse(&format!("{}/api/jobs/{}", self.endpoint, self.namespace))
            .map_err(|e| JobError::Unavailable { reason: e.to_string(), retry_after_s: None })?;
        url.query_pairs_mut().append_pair("label", &format!("{key}={value}"));
        let mut next = Some(url.to_string());
        let mut jobs = Vec::new();
        for _ in 0..MAX_PAGES {
            let Some(url) = next.take() else { break };
            let resp = self.send(self.request(reqwest::Method::GET, &url)?).await?;
            next = next_page(resp.headers(), &self.endpoint);
            let page: Vec<Job> = Self::json(resp).await?;
            jobs.extend(page.into_iter().filter(|j| j.labels.get(key).is_some_and(|v| v == value)));
        }
        Ok(jobs)
    }

    async fn cancel(&self, id: &str) -> Result<(), JobError> {
        let url = format!(
            "{}/api/jobs/{}/{}/cancel",
            self.endpoint,
            self.namespace,
            crate::sources::encode_path(id)
        );
        self.send(self.request(reqwest::Method::POST, &url)?).await.map(|_| ())
    }

    async fn logs(
        &self,
        id: &str,
        tail: Option<usize>,
        wait: Duration,
        max_bytes: usize,
    ) -> Result<Vec<LogLine>, JobError> {
        let mut url =
            format!("{}/api/jobs/{}/{}/logs", self.endpoint, self.namespace, crate::sources::encode_path(id));
        if let Some(n) = tail {
            url.push_str(&format!("?tail={n}"));
        }
        let mut resp = self.send(self.request(reqwest::Method::GET, &url)?).await?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut body = Vec::new();
        while body.len() < max_bytes {
            match tokio::time::timeout_at(deadline, resp.chunk()).await {
                Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
                Ok(Ok(None)) | Err(_) => break,
                Ok(Err(e)) => {
                    return Err(JobError::Unavailable {
                        reason: format!("reading the log: {}", e.without_url()),
                        retry_after_s: None,
                    })
                }
            }
        }
        Ok(parse_log_events(&String::from_utf8_lossy(&body)))
    }

    async fn metrics(&self, id: &str, wait: Duration) -> Result<Option<Metrics>, JobError> {
        let url = format!(
            "{}/api/jobs/{}/{}/metrics",
            self.endpoint,
            self.namespace,
            crate::sources::encode_path(id)
        );
        // 406 once the job has ended; earlier HF answered 500 there, which `huggingface_hub`
        // tolerates the same way (no sample).
        let resp = Self::answer(self.request(reqwest::Method::GET, &url)?).await?;
        if matches!(resp.status().as_u16(), 406 | 500) {
            return Ok(None);
        }
        let mut resp = Self::check(resp).await?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut body = Vec::new();
        // One sample is enough; a sample is a few hundred bytes.
        while body.len() < 64 << 10 {
            match tokio::time::timeout_at(deadline, resp.chunk()).await {
                Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
                _ => break,
            }
            if let Some(sample) = first_metric(&String::from_utf8_lossy(&body)) {
                return Ok(Some(sample));
            }
        }
        Ok(first_metric(&String::from_utf8_lossy(&body)))
    }

    async fn list(&self) -> Result<Vec<Job>, JobError> {
        let mut next = Some(format!("{}/api/jobs/{}", self.endpoint, self.namespace));
        let mut jobs = Vec::new();
        for _ in 0..MAX_PAGES {
            let Some(url) = next.take() else { break };
            let resp = self.send(self.request(reqwest::Method::GET, &url)?).await?;
            next = next_page(resp.headers(), &self.endpoint);
            let page: Vec<Job> = Self::json(resp).await?;
            jobs.extend(page);
        }
        Ok(jobs)
    }

    async fn prices(&self) -> Result<BTreeMap<String, f64>, JobError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Hardware {
            name: String,
            /// Exact: whole millionths of a dollar per unit.
            #[serde(default, rename = "unitCostMicroUSD")]
            unit_cost_micro_usd: Option<u64>,
            #[serde(default, rename = "unitCostUSD")]
            unit_cost_usd: Option<f64>,
            #[serde(default)]
            unit_label: Option<String>,
        }
        let url = format!("{}/api/jobs/hardware", self.endpoint);
        let list: Vec<Hardware> =
            Self::json(self.send(self.request(reqwest::Method::GET, &url)?).await?).await?;
        Ok(list
            .into_iter()
            .filter_map(|h| {
                let per_unit = match (h.unit_cost_micro_usd, h.unit_cost_usd) {
                    (Some(micro), _) => micro as f64 / 1e6,
                    (None, Some(usd)) => usd,
                    (None, None) => return None,
                };
                // Only "minute" is documented; a unit the arena does not know gets no price
                // rather than a guessed one.
                let units_per_hour = match h.unit_label.as_deref().unwrap_or("minute") {
                    "minute" => 60.0,
                    "hour" => 1.0,
                    "second" => 3600.0,
                    _ => return None,
                };
                // A per-minute price in whole micro-dollars is rounded ($10/h is 166,667 a
                // minute): the hourly figure keeps a hundredth of a cent.
                Some((h.name, (per_unit * units_per_hour * 1e4).round() / 1e4))
            })
            .collect())
    }

    fn job_url(&self, id: &str) -> String {
        format!("{}/jobs/{}/{}", self.endpoint, self.namespace, id)
    }
}
