//! HF's identity endpoint (`GET {HF_ENDPOINT}/api/whoami-v2`): the port, and its HTTP adapter.
//! Redirects are refused, so a token never follows one to another host.

use std::time::Duration;

use async_trait::async_trait;
use domain::identity::{HubAccount, HubError, OrgRole};
use reqwest::StatusCode;
use serde::Deserialize;

/// Who a token belongs to, as HF says.
#[async_trait]
pub trait HubIdentity: Send + Sync {
    async fn whoami(&self, token: &str) -> Result<HubAccount, HubError>;
}

#[derive(Clone)]
pub struct HfHub {
    client: reqwest::Client,
    endpoint: String,
}

/// An HTTP client for HF: no redirects, bounded time.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(15))
        .user_agent("open-env-arena")
        .build()
        .expect("a TLS backend is compiled in")
}

impl HfHub {
    pub fn new(endpoint: &str) -> HfHub {
        HfHub { client: http_client(), endpoint: endpoint.trim_end_matches('/').to_string() }
    }
}

#[derive(Deserialize)]
struct WhoamiAnswer {
    id: String,
    name: String,
    #[serde(default)]
    fullname: Option<String>,
    #[serde(default)]
    orgs: Vec<WhoamiOrg>,
    #[serde(default)]
    auth: Option<WhoamiAuth>,
}

#[derive(Deserialize)]
struct WhoamiAuth {
    #[serde(default, rename = "accessToken")]
    access_token: Option<WhoamiToken>,
}

#[derive(Deserialize)]
struct WhoamiToken {
    #[serde(default)]
    role: Option<String>,
}

#[derive(Deserialize)]
struct WhoamiOrg {
    name: String,
    #[serde(default, rename = "roleInOrg")]
    role_in_org: Option<String>,
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()
}

#[async_trait]
impl HubIdentity for HfHub {
    async fn whoami(&self, token: &str) -> Result<HubAccount, HubError> {
        let resp = self
            .client
            .get(format!("{}/api/whoami-v2", self.endpoint))
            .bearer_auth(token)
            .send()
            .await
            // The error's text names the URL, never the token.
            .map_err(|e| HubError::Unavailable {
                reason: format!("no answer ({})", e.without_url()),
                retry_after_s: None,
            })?;
        match resp.status() {
            StatusCode::OK => {
                let answer: WhoamiAnswer = resp.json().await.map_err(|e| HubError::Unavailable {
                    reason: format!("an unreadable whoami answer ({})", e.without_url()),
                    retry_after_s: None,
                })?;
                Ok(HubAccount {
                    id: answer.id,
                    fullname: answer.fullname.unwrap_or_else(|| answer.name.clone()),
                    name: answer.name,
                    orgs: answer
                        .orgs
                        .into_iter()
                        .map(|o| OrgRole { org: o.name, role: o.role_in_org })
                        .collect(),
                    token_role: answer.auth.and_then(|a| a.access_token).and_then(|t| t.role),
                })
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(HubError::InvalidToken),
            StatusCode::TOO_MANY_REQUESTS => Err(HubError::Unavailable {
                reason: "HF is rate-limiting identity checks".into(),
                retry_after_s: retry_after(resp.headers()).or(Some(30)),
            }),
            status if status.is_redirection() => Err(HubError::Unavailable {
                reason: format!("HF answered a redirect ({status}), which the arena does not follow"),
                retry_after_s: None,
            }),
            status => Err(HubError::Unavailable {
                reason: format!("HF answered {status}"),
                retry_after_s: retry_after(resp.headers()),
            }),
        }
    }
}
