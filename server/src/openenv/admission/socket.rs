//! One episode session with a sandbox's server over OpenEnv's WebSocket (`/ws`): a reset, then
//! steps, each exchange kept for the transcript a refusal shows (`domain::openenv::evidence`).
//! Messages are bounded (1 MiB), each answer waited for 60 s at most, and everything the server
//! sends is scrubbed of the arena's credentials as it is read.

use std::time::Duration;

use domain::openenv::admission::Step;
use domain::openenv::evidence::{self, Exchange};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::config::Secret;

/// An answer or message of the image's server read during a probe: a schema or an observation
/// is a few KB; larger is refused, not buffered.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;
/// How long the server may take to open its socket, and to answer one message.
const OPEN: Duration = Duration::from_secs(5);
const ANSWER: Duration = Duration::from_secs(60);

/// Why an episode could not go on, in the words its submitter reads.
#[derive(Debug, thiserror::Error)]
pub enum EpisodeError {
    #[error("the server did not open a WebSocket on /ws")]
    SocketTimeout,
    #[error("the server did not open a WebSocket on /ws: {0:#}")]
    NoSocket(anyhow::Error),
    #[error("the episode's connection failed: {0}")]
    Connection(#[source] tokio_tungstenite::tungstenite::Error),
    #[error("the server did not answer within 60 s")]
    Silent,
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("an observation the arena cannot read: {0}")]
    Unreadable(#[source] serde_json::Error),
    #[error("the server answered {0}")]
    Unexpected(String),
    #[error("the server sent a message over {} KiB", MAX_ANSWER_BYTES >> 10)]
    TooLarge,
    #[error("the server closed the episode")]
    Closed,
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// An open episode: its socket, what was exchanged so far, and the credentials its answers are
/// scrubbed of.
pub struct Session<'a> {
    socket: Socket,
    pub exchanges: Vec<Exchange>,
    secrets: &'a [&'a str],
}

/// What one message came back with.
pub struct Observed {
    pub observation: Value,
    pub step: Step,
}

impl<'a> Session<'a> {
    /// `/ws` of the sandbox at `url`, with the HF token its exposed port asks for.
    pub async fn open(
        url: &str,
        token: &Secret,
        secrets: &'a [&'a str],
    ) -> Result<Session<'a>, EpisodeError> {
        let socket = tokio::time::timeout(OPEN, open_socket(url, token))
            .await
            .map_err(|_| EpisodeError::SocketTimeout)?
            .map_err(EpisodeError::NoSocket)?;
        Ok(Session { socket, exchanges: Vec::new(), secrets })
    }

    pub async fn reset(&mut self, data: &Value) -> Result<Observed, EpisodeError> {
        self.send(data, domain::openenv::episode::ws_reset(data)).await
    }

    pub async fn step(&mut self, action: &Value) -> Result<Observed, EpisodeError> {
        self.send(action, json!({"type": "step", "data": action})).await
    }

    /// Sends one message and reads the server's observation; the exchange joins the transcript.
    async fn send(&mut self, sent: &Value, message: Value) -> Result<Observed, EpisodeError> {
        self.socket
            .send(Message::Text(message.to_string().into()))
            .await
            .map_err(EpisodeError::Connection)?;
        let observed = self.answer().await?;
        self.exchanges.push(Exchange::new(
            sent,
            &observed.observation,
            observed.step.reward,
            observed.step.done,
        ));
        Ok(observed)
    }

    async fn answer(&mut self) -> Result<Observed, EpisodeError> {
        loop {
            let next =
                tokio::time::timeout(ANSWER, self.socket.next()).await.map_err(|_| EpisodeError::Silent)?;
            match next {
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).map_err(EpisodeError::NotJson)?;
                    let v = evidence::scrubbed_value(&v, self.secrets);
                    if v["type"].as_str() != Some("observation") {
                        return Err(EpisodeError::Unexpected(evidence::cut(&v.to_string(), 200)));
                    }
                    let step: Step =
                        serde_json::from_value(v["data"].clone()).map_err(EpisodeError::Unreadable)?;
                    return Ok(Observed { observation: v["data"]["observation"].clone(), step });
                }
                Some(Ok(_)) => continue,
                Some(Err(tokio_tungstenite::tungstenite::Error::Capacity(_))) => {
                    return Err(EpisodeError::TooLarge)
                }
                _ => return Err(EpisodeError::Closed),
            }
        }
    }
}

/// The socket, the address resolved as the HTTP reads resolve it (`crate::ports::http::resolve`).
async fn open_socket(url: &str, token: &Secret) -> anyhow::Result<Socket> {
    use anyhow::Context;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let ws = url.replacen("http://", "ws://", 1).replacen("https://", "wss://", 1);
    let mut request = format!("{ws}/ws").into_client_request()?;
    let bearer: reqwest::header::HeaderValue =
        format!("Bearer {}", token.0).parse().context("the sandbox token is not a header value")?;
    request.headers_mut().insert(reqwest::header::AUTHORIZATION, bearer);
    let host = request.uri().host().context("the sandbox URL has no host")?.to_string();
    let port = request.uri().port_u16().unwrap_or(if ws.starts_with("wss://") { 443 } else { 80 });
    let addrs = crate::ports::http::resolve(&host, port).await?;
    let tcp = tokio::net::TcpStream::connect(addrs.as_slice()).await?;
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_ANSWER_BYTES))
        .max_frame_size(Some(MAX_ANSWER_BYTES));
    let (socket, _) =
        tokio_tungstenite::client_async_tls_with_config(request, tcp, Some(config), None).await?;
    Ok(socket)
}
