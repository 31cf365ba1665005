//! HTTP clients for summarization models: OpenAI-compatible Chat Completions and Anthropic
//! Messages (each provider's facts in [`table`]), over reqwest (rustls), with a per-request timeout and retries (exponential backoff
//! with jitter, honouring `Retry-After`) on 429, 5xx, connection errors and bodies cut off
//! mid-transfer.
//!
//! The API key lives in a [`Secret`], which never prints; every error text that could echo a
//! request is scrubbed of the key before it leaves this module, and a base URL is only ever
//! shown through [`mask_url`] (a key written into the URL itself is masked).
//!
//! Redirects are never followed: the key goes only to the configured origin. A 3xx answer is a
//! [`ProviderError::Redirect`] naming the origin the server pointed at (docs/llm.md).

pub mod anthropic;
pub mod list_prices;
pub mod openai;
pub mod pricing;
pub mod redact;
mod retry;
pub mod table;

pub use redact::mask_url;
pub use table::{Provider, ProviderKind};

use std::time::Duration;

use serde::Serialize;

/// A secret string: `Debug` and `Display` print `[redacted]`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    /// The secret itself, for the one place that sends it (a request header).
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Remove every occurrence of the secret from `text`.
    pub fn scrub(&self, text: &str) -> String {
        if self.0.len() < 4 {
            text.to_string()
        } else {
            text.replace(&self.0, "[redacted]")
        }
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// How to reach a model.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub kind: ProviderKind,
    /// Without a trailing slash.
    pub base_url: String,
    pub api_key: Option<Secret>,
    pub model: String,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: usize,
    /// First backoff delay (doubles each retry, with jitter, capped at 60 s).
    pub initial_backoff: Duration,
}

/// One summarization request: a system prompt and one user message.
#[derive(Debug, Clone, Serialize)]
pub struct ChatRequest {
    pub system: String,
    pub user: String,
    pub max_tokens: u32,
    /// Sampling temperature; `None` sends none (the server's default).
    pub temperature: Option<f64>,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A natural end (`stop` / `end_turn` / `stop_sequence`).
    Complete,
    /// Cut at the token limit (`length` / `max_tokens`).
    Truncated,
    /// The model refused (`content_filter` / `refusal`, or a refusal field).
    Refused,
    Other(String),
}

/// A model's answer.
#[derive(Debug, Clone, Serialize)]
pub struct Completion {
    pub text: String,
    pub stop: StopReason,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The model the server says answered.
    pub model: String,
    /// How many HTTP attempts it took.
    pub attempts: usize,
}

/// A failed request. Texts are already scrubbed of the API key.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    #[error("HTTP {status} from {url}: {body}")]
    Status {
        status: u16,
        url: String,
        body: String,
        retry_after: Option<Duration>,
    },
    #[error("request to {url} timed out after {after:?}")]
    Timeout { url: String, after: Duration },
    #[error("cannot reach {url}: {detail}")]
    Connect { url: String, detail: String },
    /// No connection could be made (refused, no such host, no route): retrying in seconds
    /// cannot help, so it fails at once, with the address.
    #[error("cannot connect to {url}: {detail} (check --base-url / [llm] base_url)")]
    Unreachable { url: String, detail: String },
    /// The connection broke while the answer's body was being read.
    #[error("the response from {url} was cut off: {detail}")]
    Cut { url: String, detail: String },
    /// A 3xx answer: not followed, so the key never reaches another origin. `location` is the
    /// origin (scheme, host, port) of the `Location` the server sent, or why there is none.
    #[error("HTTP {status} from {url}: redirect to {location} not followed (agent-db sends the API key only to the configured base URL; set the base URL to the address the server redirects to)")]
    Redirect {
        status: u16,
        url: String,
        location: String,
    },
    #[error("unexpected response from {url}: {detail}")]
    Decode { url: String, detail: String },
    #[error("{0}")]
    Config(String),
}

impl ProviderError {
    /// 429, 5xx, timeouts, connections that broke and cut-off bodies are worth retrying; a
    /// connection that could not be made at all ([`ProviderError::Unreachable`]) is not.
    pub fn retryable(&self) -> bool {
        match self {
            ProviderError::Status { status, .. } => *status == 429 || *status >= 500,
            ProviderError::Timeout { .. }
            | ProviderError::Connect { .. }
            | ProviderError::Cut { .. } => true,
            _ => false,
        }
    }

    /// The server's `Retry-After`, when it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// A client for one configured model.
#[derive(Debug, Clone)]
pub struct Client {
    pub config: ClientConfig,
    http: reqwest::Client,
}

impl Client {
    pub fn new(config: ClientConfig) -> Result<Client, ProviderError> {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .user_agent(concat!("agent-db/", env!("CARGO_PKG_VERSION")))
            // Never follow a redirect: the key would go along (reqwest keeps `x-api-key` on a
            // cross-origin redirect). A 3xx becomes a `Redirect` error instead.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ProviderError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Client { config, http })
    }

    /// Send one request, retrying as documented in the module doc.
    pub async fn complete(&self, req: &ChatRequest) -> Result<Completion, ProviderError> {
        self.send(self.encode(req)).await
    }

    /// [`Client::complete`] of a request it takes: the request's strings are freed once its
    /// body is serialized, before the wait for the answer, so a batch with many requests in
    /// flight holds each prompt once.
    pub async fn complete_owned(&self, req: ChatRequest) -> Result<Completion, ProviderError> {
        let body = self.encode(&req);
        drop(req);
        self.send(body).await
    }

    fn encode(&self, req: &ChatRequest) -> bytes::Bytes {
        bytes::Bytes::from((self.config.kind.spec().encode)(&self.config, req))
    }

    /// Every attempt sends the same body (a shared buffer: no copy per attempt).
    async fn send(&self, body: bytes::Bytes) -> Result<Completion, ProviderError> {
        let send = self.config.kind.spec().send;
        retry::with_retries(&self.config, || {
            send(&self.http, &self.config, body.clone())
        })
        .await
    }
}

/// One message of a request body: `{"role", "content"}`, borrowing the request's strings.
#[derive(Serialize)]
struct Turn<'a> {
    role: &'a str,
    content: &'a str,
}

/// A request body as JSON bytes. Serializing strings and numbers cannot fail.
fn to_body(body: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(body).expect("a request body of strings and numbers serializes")
}
