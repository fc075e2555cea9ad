//! OpenAI-compatible chat completions over reqwest with `stream: true`: one request, its SSE
//! stream turned into text deltas and a [`Completion`], and failures classified for the retry
//! policy (429 / 5xx / transport → retry, 404 with tools → retry without tools, else fatal).
//! The API key is read from the environment variable the provider names and never appears in
//! a log, an error or an event.

mod reply;
pub mod stream;
pub mod wire;

use std::time::Duration;

use futures::StreamExt;
use ploke_runtime::config::{ProviderConfig, Secret};
use reqwest::StatusCode;

pub use stream::{AssembledCall, Completion};
use stream::{Assembler, SseDecoder};
use wire::{ChatRequest, Chunk};

/// Why a provider request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The provider answered with an error status.
    #[error("provider {url} answered HTTP {status}: {body}")]
    Status {
        /// The provider's base URL, without credentials or query.
        url: String,
        /// HTTP status.
        status: u16,
        /// Retry-After, when sent.
        retry_after: Option<Duration>,
        /// The start of the body.
        body: String,
    },
    /// The request or the stream failed in transport.
    #[error("provider connection failed: {0}")]
    Transport(String),
    /// Nothing arrived for too long.
    #[error("provider sent nothing for {0} s")]
    Idle(u64),
    /// The stream ended before the completion did.
    #[error("provider stream ended before the reply was complete")]
    Truncated,
    /// A chunk was not valid JSON.
    #[error("provider sent an invalid chunk: {0}")]
    Protocol(String),
    /// The provider reported an error inside the stream: the reply stopped there.
    #[error("provider {url} reported an error in the middle of its reply: {message}")]
    InStream {
        /// The provider's base URL, without credentials or query.
        url: String,
        /// What it said.
        message: String,
        /// Whether it may pass (not a 4xx code other than 429).
        retryable: bool,
    },
    /// The key's environment variable is not set.
    #[error("environment variable {0} (the provider's api_key_env) is not set")]
    MissingKey(String),
    /// The reply went past what the turn may still receive.
    #[error("provider streamed more than the {0} bytes the turn had left")]
    OutputLimit(u64),
}

impl ProviderError {
    /// Whether trying again may succeed.
    pub fn retryable(&self) -> bool {
        match self {
            ProviderError::Status { status, .. } => *status == 429 || *status >= 500,
            ProviderError::Transport(_) | ProviderError::Idle(_) | ProviderError::Truncated => true,
            ProviderError::InStream { retryable, .. } => *retryable,
            ProviderError::Protocol(_)
            | ProviderError::MissingKey(_)
            | ProviderError::OutputLimit(_) => false,
        }
    }

    /// Whether the provider refused because the model cannot call tools (OpenRouter answers
    /// 404 "No endpoints found that support tool use"; Ollama 400 "does not support tools").
    pub fn no_tool_support(&self) -> bool {
        match self {
            ProviderError::Status { status: 404, .. } => true,
            ProviderError::Status {
                status: 400, body, ..
            } => {
                let b = body.to_ascii_lowercase();
                b.contains("tool") && b.contains("support")
            }
            _ => false,
        }
    }

    /// Retry-After the provider asked for.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// One configured provider.
#[derive(Clone)]
pub struct Provider {
    /// Its name in `[providers.*]`.
    pub name: String,
    config: ProviderConfig,
    http: reqwest::Client,
    idle: Duration,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("base_url", &self.config.base_url)
            .finish_non_exhaustive()
    }
}

/// Something a streaming request produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamItem {
    /// A text fragment.
    Delta(String),
    /// The finished completion (last item).
    Done(Completion),
}

/// A response being streamed.
pub struct ChatStream {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    decoder: SseDecoder,
    assembler: Option<Assembler>,
    pending: std::collections::VecDeque<String>,
    idle: Duration,
    done: bool,
    budget: u64,
    spent: u64,
    /// The provider's public URL and key, to name it and redact the key in its errors.
    url: String,
    key: Option<Secret>,
}

impl std::fmt::Debug for ChatStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStream").finish_non_exhaustive()
    }
}

impl Provider {
    /// A provider named `name`; `idle` bounds the wait for each byte.
    pub fn new(name: &str, config: ProviderConfig, idle: Duration) -> Result<Self, ProviderError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ProviderError::Transport(e.to_string()))?;
        Ok(Self {
            name: name.to_owned(),
            config,
            http,
            idle,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The API key, from the environment.
    fn key(&self) -> Result<Option<Secret>, ProviderError> {
        match &self.config.api_key_env {
            None => Ok(None),
            Some(var) => match std::env::var(var) {
                Ok(v) if !v.is_empty() => Ok(Some(Secret::new(v))),
                _ => Err(ProviderError::MissingKey(var.clone())),
            },
        }
    }

    /// Checks that the key is available.
    pub fn check_key(&self) -> Result<(), ProviderError> {
        self.key().map(|_| ())
    }

    /// Sends `request`; an error status is an error, a 2xx starts the stream.
    pub async fn start(&self, request: &ChatRequest<'_>) -> Result<ChatStream, ProviderError> {
        let url = format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        );
        let mut builder = self.http.post(url).json(request);
        let key = self.key()?;
        if let Some(key) = &key {
            builder = builder.bearer_auth(key.expose());
        }
        for (k, v) in &self.config.headers {
            builder = builder.header(k, v);
        }
        let response = tokio::time::timeout(self.idle, builder.send())
            .await
            .map_err(|_| ProviderError::Idle(self.idle.as_secs()))?
            .map_err(|e| ProviderError::Transport(transport(&self.config.base_url, e)))?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = ploke_runtime::retry::retry_after(response.headers());
            let body = reply::error_body(response, self.idle).await;
            return Err(ProviderError::Status {
                url: public_url(&self.config.base_url),
                status: status.as_u16(),
                retry_after,
                body: reply::shown(&body, key.as_ref().map(Secret::expose)),
            });
        }
        debug_assert!(status == StatusCode::OK || status.is_success());
        Ok(ChatStream {
            body: response.bytes_stream().boxed(),
            decoder: SseDecoder::default(),
            assembler: Some(Assembler::default()),
            pending: std::collections::VecDeque::new(),
            idle: self.idle,
            done: false,
            budget: u64::MAX,
            spent: 0,
            url: public_url(&self.config.base_url),
            key,
        })
    }
}

/// A failed request to `base_url`, said so a user can act on it: the provider's address
/// (credentials and query left out) and every cause (`error sending request` alone names
/// neither the URL nor why).
fn transport(base_url: &str, e: reqwest::Error) -> String {
    format!("{}: {}", public_url(base_url), describe_error(e))
}

/// `err` and its causes, joined with `: `, with any URL left out.
fn describe_error(e: reqwest::Error) -> String {
    let e = e.without_url();
    ploke_runtime::text::with_causes(ploke_runtime::text::chain(&e))
}

/// `url` without user, password, query or fragment.
fn public_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string().trim_end_matches('/').to_owned()
        }
        Err(_) => "the provider's base_url (not a URL)".to_owned(),
    }
}

/// Bytes of SSE framing and JSON allowed around the output itself in one undecoded event.
const EVENT_OVERHEAD: u64 = 64 * 1024;

impl ChatStream {
    /// Ends the stream with [`ProviderError::OutputLimit`] once the reply's text and tool-call
    /// arguments pass `bytes` (and bounds what an unfinished SSE event may buffer).
    pub fn limit_output(&mut self, bytes: u64) {
        self.budget = bytes;
    }

    /// Bytes of text and tool calls received so far.
    pub fn output_bytes(&self) -> u64 {
        self.spent
    }

    /// The next delta, then the completion, then `None`.
    pub async fn next(&mut self) -> Result<Option<StreamItem>, ProviderError> {
        loop {
            if let Some(payload) = self.pending.pop_front() {
                if payload.trim() == "[DONE]" {
                    self.done = true;
                    self.pending.clear();
                    return Ok(self.complete());
                }
                let chunk: Chunk = serde_json::from_str(&payload)
                    .map_err(|e| ProviderError::Protocol(format!("{e}: {}", truncate(&payload))))?;
                self.reported(&chunk)?;
                if let Some(a) = self.assembler.as_mut() {
                    let text = a.push(chunk);
                    self.spent = a.output_bytes() as u64;
                    if self.spent > self.budget {
                        return Err(ProviderError::OutputLimit(self.budget));
                    }
                    if let Some(text) = text {
                        return Ok(Some(StreamItem::Delta(text)));
                    }
                }
                continue;
            }
            if self.done {
                return Ok(self.complete());
            }
            let next = tokio::time::timeout(self.idle, self.body.next())
                .await
                .map_err(|_| ProviderError::Idle(self.idle.as_secs()))?;
            match next {
                Some(Ok(bytes)) => {
                    self.pending.extend(self.decoder.feed(&bytes));
                    // An event that never ends must not grow without bound either.
                    let buffered = self.decoder.buffered() as u64;
                    if buffered
                        > self
                            .budget
                            .saturating_sub(self.output_bytes())
                            .saturating_add(EVENT_OVERHEAD)
                    {
                        return Err(ProviderError::OutputLimit(self.budget));
                    }
                }
                Some(Err(e)) => return Err(ProviderError::Transport(describe_error(e))),
                None => {
                    self.done = true;
                    if let Some(rest) = self.decoder.finish() {
                        self.pending.push_back(rest);
                        continue;
                    }
                    // No [DONE]: complete only if the model said it was finished.
                    if !self.assembler.as_ref().is_some_and(Assembler::finished) {
                        if self.assembler.is_some() {
                            return Err(ProviderError::Truncated);
                        }
                        return Ok(None);
                    }
                    return Ok(self.complete());
                }
            }
        }
    }

    /// An error the provider reports in `chunk` (`error`, or a choice that finished with
    /// `error`): the reply is not complete.
    fn reported(&self, chunk: &Chunk) -> Result<(), ProviderError> {
        let choice_error = chunk.choices.iter().find_map(|c| {
            c.error.clone().or_else(|| {
                (c.finish_reason.as_deref() == Some("error"))
                    .then(|| serde_json::json!({"message": "the reply finished with \"error\""}))
            })
        });
        let Some(error) = chunk.error.clone().or(choice_error) else {
            return Ok(());
        };
        let (message, retryable) = reply::in_stream(&error, self.key.as_ref().map(Secret::expose));
        Err(ProviderError::InStream {
            url: self.url.clone(),
            message,
            retryable,
        })
    }

    fn complete(&mut self) -> Option<StreamItem> {
        self.assembler.take().map(|a| StreamItem::Done(a.finish()))
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_refused_connection_names_the_provider_and_the_cause() {
        // Nothing listens on port 9 (discard); a port bound and dropped could be another test's.
        let port = 9;
        let base = format!("http://user:pw@127.0.0.1:{port}/v1?key=secret");
        let err = reqwest::Client::new()
            .post(format!("http://127.0.0.1:{port}/v1/chat/completions"))
            .send()
            .await
            .unwrap_err();
        let text = super::transport(&base, err);
        assert!(
            text.starts_with(&format!(
                "http://127.0.0.1:{port}/v1: error sending request"
            )),
            "{text}"
        );
        assert!(text.contains("Connection refused"), "{text}");
        assert!(!text.contains("secret") && !text.contains("pw"), "{text}");
    }

    #[test]
    fn a_base_url_that_is_not_a_url_is_not_echoed() {
        assert_eq!(
            super::public_url("not a url sk-123"),
            "the provider's base_url (not a URL)"
        );
    }
}
