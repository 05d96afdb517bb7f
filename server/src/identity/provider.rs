//! The OAuth app and its provider, as the server holds them: what `AppState` keeps of sign-in,
//! apart from the sign-in routes (`super::oauth`) that read the state.

use domain::ErrorCode;
use serde::Deserialize;

use crate::config::Secret;
use crate::http::ApiError;

/// The OAuth app and provider, from `OAUTH_CLIENT_ID`, `OAUTH_CLIENT_SECRET` and
/// `OPENID_PROVIDER_URL` (as HF gives a Space with `hf_oauth: true`).
pub struct OAuthSettings {
    pub client_id: String,
    pub client_secret: Secret,
    pub provider_url: String,
    pub redirect_url: String,
    pub http: reqwest::Client,
    endpoints: tokio::sync::OnceCell<Endpoints>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Endpoints {
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub userinfo_endpoint: String,
}

impl OAuthSettings {
    pub fn new(
        client_id: String,
        client_secret: Secret,
        provider_url: &str,
        public_url: &str,
    ) -> OAuthSettings {
        OAuthSettings {
            client_id,
            client_secret,
            provider_url: provider_url.trim_end_matches('/').to_string(),
            redirect_url: format!("{}/login/callback", public_url.trim_end_matches('/')),
            http: crate::ports::identity::http_client(),
            endpoints: tokio::sync::OnceCell::new(),
        }
    }

    /// OpenID discovery, read once from the configured provider (never from a request).
    pub(super) async fn endpoints(&self) -> Result<&Endpoints, ApiError> {
        self.endpoints
            .get_or_try_init(|| async {
                let url = format!("{}/.well-known/openid-configuration", self.provider_url);
                let resp = self.http.get(&url).send().await.map_err(|e| unavailable(e.without_url()))?;
                if !resp.status().is_success() {
                    return Err(unavailable(format!("discovery answered {}", resp.status())));
                }
                let endpoints = resp.json::<Endpoints>().await.map_err(|e| unavailable(e.without_url()))?;
                // The client secret and access tokens go only to the configured provider's origin.
                let origin = origin_of(&self.provider_url);
                for url in [
                    &endpoints.authorization_endpoint,
                    &endpoints.token_endpoint,
                    &endpoints.userinfo_endpoint,
                ] {
                    if origin_of(url) != origin {
                        return Err(unavailable(format!(
                            "discovery names an endpoint off the provider's origin: {url}"
                        )));
                    }
                }
                Ok(endpoints)
            })
            .await
    }
}

/// `scheme://host[:port]` of a URL, or `None` when it does not parse.
pub fn origin_of(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    Some(u.origin().ascii_serialization()).filter(|o| o != "null")
}

pub(super) fn unavailable(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::HubUnavailable, format!("Hugging Face sign-in is unavailable ({e}); try again"))
        .retry_after(30)
}
