//! The remote embedding backend: an OpenAI-compatible `POST {base_url}/embeddings` endpoint
//! (OpenAI, OpenRouter, Ollama, vLLM, text-embeddings-inference, ...). Requests carry
//! `{"model", "input": [texts]}`; answers are put back in input order by their `index` and
//! L2-normalised. 429, 5xx and transport errors are retried with backoff (Retry-After
//! honoured); other refusals are reported at once. The API key is read from the environment
//! variable `[embedding] api_key_env` names and never printed.

use std::time::Duration;

use futures::StreamExt as _;
use ploke_runtime::config::EmbeddingConfig;
use ploke_runtime::retry;
use serde::Deserialize;

use super::{EmbedError, normalise};

/// Characters of one text sent at most: about 500 tokens, inside the 512-token window of the
/// small models servers like text-embeddings-inference and Ollama host (items are embedded from
/// a compact text, so this cuts only very long doc comments).
const MAX_INPUT_CHARS: usize = 2_000;
/// First backoff step and the longest wait between tries.
const RETRY_BASE_MS: u64 = 500;
const RETRY_MAX_MS: u64 = 20_000;
/// What the start-up probe embeds to learn the vector length.
const PROBE_TEXT: &str = "fn probe() {}";
/// Tries and per-request timeout for a search query (and the start-up probe).
const QUERY_TRIES: u32 = 2;
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// A connected endpoint.
pub struct Remote {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
    batch: usize,
    concurrency: usize,
    tries: u32,
    dims: usize,
    runtime: tokio::runtime::Handle,
    /// Cancelled when the service stops: a blocking call waiting on the endpoint returns at
    /// once instead of outliving the runtime (whose timers panic once it shuts down).
    stopping: tokio_util::sync::CancellationToken,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("dims", &self.dims)
            .finish()
    }
}

#[derive(Debug, Deserialize)]
struct Response {
    data: Vec<Datum>,
}

#[derive(Debug, Deserialize)]
struct Datum {
    index: usize,
    embedding: Vec<f32>,
}

/// One failed try: whether another try may succeed, and why it failed.
struct Failure {
    retry: bool,
    retry_after: Option<Duration>,
    message: String,
}

impl Remote {
    /// Checks the settings, reads the key and embeds one probe text to learn the vector length
    /// (so a wrong URL, model or key is reported at start, not at the first search).
    pub async fn connect(c: &EmbeddingConfig) -> Result<Self, EmbedError> {
        let bad = |m: String| Err(EmbedError::Config(m));
        let base = c.base_url.trim_end_matches('/');
        match reqwest::Url::parse(base) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {}
            Ok(u) => {
                return bad(format!(
                    "base_url `{base}`: scheme `{}` is not http(s)",
                    u.scheme()
                ));
            }
            Err(e) => return bad(format!("base_url `{base}`: {e}")),
        }
        if c.model.trim().is_empty() {
            return bad("model is empty".into());
        }
        for (name, value) in [
            ("batch_size", c.batch_size),
            ("concurrency", c.concurrency),
            ("tries", c.tries as usize),
            (
                "timeout_secs",
                usize::try_from(c.timeout_secs).unwrap_or(usize::MAX),
            ),
        ] {
            if value == 0 {
                return bad(format!("{name} must be at least 1"));
            }
        }
        let api_key = match &c.api_key_env {
            Some(var) => match std::env::var(var) {
                Ok(k) if !k.trim().is_empty() => Some(k.trim().to_owned()),
                _ => return bad(format!("api_key_env names `{var}`, which is not set")),
            },
            None => None,
        };
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(c.timeout_secs))
            .build()
            .map_err(|e| EmbedError::Config(format!("http client: {e}")))?;
        let mut remote = Self {
            client,
            url: format!("{base}/embeddings"),
            model: c.model.clone(),
            api_key,
            batch: c.batch_size,
            concurrency: c.concurrency,
            tries: c.tries,
            dims: 0,
            runtime: tokio::runtime::Handle::current(),
            stopping: tokio_util::sync::CancellationToken::new(),
        };
        let tries = remote.tries.min(QUERY_TRIES);
        let probe = remote
            .embed_with(&[PROBE_TEXT], tries, Some(QUERY_TIMEOUT))
            .await?;
        remote.dims = probe.first().map_or(0, Vec::len);
        if remote.dims == 0 {
            return Err(EmbedError::Model(format!(
                "{} answered an empty vector for model `{}`",
                remote.url, remote.model
            )));
        }
        Ok(remote)
    }

    /// Vector length.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The model id.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Embeds `texts` in one request, with the configured tries and timeout.
    pub async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_with(texts, self.tries, None).await
    }

    /// Embeds a search query: a user is waiting, so at most [`QUERY_TRIES`] tries of at most
    /// [`QUERY_TIMEOUT`] each (HYBRID then answers from BM25 alone).
    pub fn embed_query_blocking(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        let tries = self.tries.min(QUERY_TRIES);
        let mut v = self.block_on(self.embed_with(&[query], tries, Some(QUERY_TIMEOUT)))?;
        v.pop()
            .ok_or_else(|| EmbedError::Model("no vector for the query".into()))
    }

    async fn embed_with(
        &self,
        texts: &[&str],
        tries: u32,
        timeout: Option<Duration>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let input: Vec<&str> = texts.iter().map(|t| clip(t)).collect();
        let body = serde_json::json!({ "model": self.model, "input": input });
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.try_once(&body, texts.len(), timeout).await {
                Ok(v) => return Ok(v),
                Err(Ok(f)) if f.retry && attempt < tries => {
                    let wait = retry::backoff(RETRY_BASE_MS, RETRY_MAX_MS, attempt, f.retry_after);
                    tracing::warn!(attempt, wait_ms = wait.as_millis() as u64, reason = %f.message, "embedding request failed; retrying");
                    tokio::time::sleep(wait).await;
                }
                Err(Ok(f)) if f.retry => {
                    return Err(EmbedError::Unavailable(format!(
                        "{} after {attempt} tries: {}",
                        self.url, f.message
                    )));
                }
                Err(Ok(f)) => {
                    return Err(EmbedError::Refused(format!("{}: {}", self.url, f.message)));
                }
                Err(Err(e)) => return Err(e),
            }
        }
    }

    /// One request: the vectors, or a failure (`Ok`: may be retried or refused; `Err`: the
    /// answer is not a list of vectors).
    async fn try_once(
        &self,
        body: &serde_json::Value,
        expected: usize,
        timeout: Option<Duration>,
    ) -> Result<Vec<Vec<f32>>, Result<Failure, EmbedError>> {
        let mut request = self.client.post(&self.url).json(body);
        if let Some(t) = timeout {
            request = request.timeout(t);
        }
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(transport_failure)?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry::retry_after(response.headers());
            let text = response.text().await.unwrap_or_default();
            let text: String = text.chars().take(300).collect();
            return Err(Ok(Failure {
                retry: status.as_u16() == 429 || status.as_u16() == 408 || status.is_server_error(),
                retry_after,
                message: format!("{status}: {}", text.trim()),
            }));
        }
        let bytes = response.bytes().await.map_err(transport_failure)?;
        vectors_in_order(&bytes, expected, self.dims).map_err(Err)
    }

    /// [`Remote::embed`] from a blocking thread.
    pub fn embed_blocking(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.block_on(self.embed(texts))
    }

    /// Stops: calls waiting on the endpoint return `Unavailable`, and later ones at once.
    pub fn stop(&self) {
        self.stopping.cancel();
    }

    /// Runs `work` from a blocking thread on the service's runtime, unless the service stops.
    fn block_on<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, EmbedError>>,
    ) -> Result<T, EmbedError> {
        let stopped = || EmbedError::Unavailable("the service is stopping".into());
        if self.stopping.is_cancelled() {
            return Err(stopped());
        }
        self.runtime.block_on(async {
            tokio::select! {
                biased;
                () = self.stopping.cancelled() => Err(stopped()),
                out = work => out,
            }
        })
    }

    /// Embeds any number of texts from a blocking thread: batches of `batch_size`, up to
    /// `concurrency` requests at once; `progress(done)` after each batch, in input order. A
    /// batch the endpoint refuses (400, 413, ...) is sent again one text at a time, and a text
    /// refused on its own gets an empty vector (the caller leaves that item without one) so that
    /// one bad input does not stop the rest.
    pub fn embed_all_blocking(
        &self,
        texts: &[String],
        progress: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.block_on(async {
            let batches: Vec<Vec<&str>> = texts
                .chunks(self.batch)
                .map(|c| c.iter().map(String::as_str).collect())
                .collect();
            let mut results = futures::stream::iter(batches.iter())
                .map(|b| self.embed_tolerant(b))
                .buffered(self.concurrency);
            let mut out = Vec::with_capacity(texts.len());
            while let Some(vectors) = results.next().await {
                out.extend(vectors?);
                progress(out.len());
            }
            Ok(out)
        })
    }

    /// [`Remote::embed`], retrying a refused batch text by text (see `embed_all_blocking`).
    async fn embed_tolerant(&self, batch: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self.embed(batch).await {
            Err(EmbedError::Refused(reason)) if batch.len() > 1 => {
                tracing::warn!(texts = batch.len(), %reason, "embedding batch refused; sending its texts one by one");
                let mut out = Vec::with_capacity(batch.len());
                for text in batch {
                    out.push(self.embed_one_or_skip(text).await?);
                }
                Ok(out)
            }
            Err(EmbedError::Refused(reason)) => {
                tracing::warn!(%reason, "embedding input refused; the item stays without a vector");
                Ok(vec![Vec::new()])
            }
            other => other,
        }
    }

    async fn embed_one_or_skip(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        match self.embed(&[text]).await {
            Ok(mut v) => Ok(v.pop().unwrap_or_default()),
            Err(EmbedError::Refused(reason)) => {
                tracing::warn!(%reason, "embedding input refused; the item stays without a vector");
                Ok(Vec::new())
            }
            Err(e) => Err(e),
        }
    }
}

/// At most [`MAX_INPUT_CHARS`] characters, never empty (endpoints refuse empty inputs).
fn clip(text: &str) -> &str {
    let end = text
        .char_indices()
        .nth(MAX_INPUT_CHARS)
        .map_or(text.len(), |(i, _)| i);
    let clipped = &text[..end];
    if clipped.trim().is_empty() {
        "(empty)"
    } else {
        clipped
    }
}

fn transport_reason(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "transport error"
    };
    format!(
        "{kind}: {}",
        ploke_runtime::text::with_causes(ploke_runtime::text::chain(e))
    )
}

/// A request that failed in transport (connect, timeout, reading the body): worth retrying.
fn transport_failure(e: reqwest::Error) -> Result<Failure, EmbedError> {
    Ok(Failure {
        retry: true,
        retry_after: None,
        message: transport_reason(&e),
    })
}

/// The vectors of an embeddings answer, in input order, normalised; checked for count, indexes
/// and length (`dims` 0: any length, the same for all).
fn vectors_in_order(
    bytes: &[u8],
    expected: usize,
    dims: usize,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let bad = |m: String| EmbedError::Model(format!("unexpected embeddings answer: {m}"));
    let response: Response = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    if response.data.len() != expected {
        return Err(bad(format!(
            "{} vectors for {expected} inputs",
            response.data.len()
        )));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; expected];
    let want = if dims == 0 {
        response.data.first().map_or(0, |d| d.embedding.len())
    } else {
        dims
    };
    for d in response.data {
        if d.embedding.len() != want {
            return Err(bad(format!(
                "a vector of {} dimensions, expected {want}",
                d.embedding.len()
            )));
        }
        if d.embedding.iter().any(|x| !x.is_finite()) {
            return Err(bad(format!("vector {} holds a non-finite number", d.index)));
        }
        match out.get_mut(d.index) {
            Some(slot @ None) => *slot = Some(normalise(d.embedding)),
            Some(Some(_)) => return Err(bad(format!("index {} twice", d.index))),
            None => return Err(bad(format!("index {} out of range", d.index))),
        }
    }
    Ok(out.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_put_in_input_order_and_normalised() {
        let body = br#"{"object":"list","model":"m","data":[
            {"object":"embedding","index":1,"embedding":[0.0,2.0]},
            {"object":"embedding","index":0,"embedding":[3.0,4.0]}],
            "usage":{"prompt_tokens":4,"total_tokens":4}}"#;
        assert_eq!(
            vectors_in_order(body, 2, 0).unwrap(),
            vec![vec![0.6, 0.8], vec![0.0, 1.0]]
        );
    }

    #[test]
    fn malformed_answers_are_model_errors() {
        let cases: [(&[u8], usize, usize, &str); 6] = [
            (b"not json", 1, 0, "expected ident"),
            (br#"{"data":[]}"#, 1, 0, "0 vectors for 1 inputs"),
            (
                br#"{"data":[{"index":0,"embedding":[1.0]},{"index":0,"embedding":[1.0]}]}"#,
                2,
                0,
                "index 0 twice",
            ),
            (
                br#"{"data":[{"index":3,"embedding":[1.0]}]}"#,
                1,
                0,
                "index 3 out of range",
            ),
            (
                br#"{"data":[{"index":0,"embedding":[1.0,2.0]}]}"#,
                1,
                3,
                "a vector of 2 dimensions, expected 3",
            ),
            (
                br#"{"data":[{"index":0,"embedding":[1.0]},{"index":1,"embedding":[1.0,1.0]}]}"#,
                2,
                0,
                "a vector of 2 dimensions, expected 1",
            ),
        ];
        for (body, expected, dims, want) in cases {
            match vectors_in_order(body, expected, dims) {
                Err(EmbedError::Model(m)) => assert!(m.contains(want), "{m} / {want}"),
                other => panic!("{other:?} / {want}"),
            }
        }
    }

    #[test]
    fn inputs_are_clipped_and_never_empty() {
        assert_eq!(clip("fn a() {}"), "fn a() {}");
        assert_eq!(clip("   "), "(empty)");
        let long = "é".repeat(MAX_INPUT_CHARS + 10);
        assert_eq!(clip(&long).chars().count(), MAX_INPUT_CHARS);
    }

    #[tokio::test]
    async fn bad_settings_are_reported_before_any_request() {
        let cases = [
            (
                EmbeddingConfig::new("ftp://x/v1", "m"),
                "scheme `ftp` is not http(s)",
            ),
            (
                EmbeddingConfig::new("not a url", "m"),
                "base_url `not a url`",
            ),
            (
                EmbeddingConfig::new("http://127.0.0.1:9/v1", " "),
                "model is empty",
            ),
            (
                EmbeddingConfig {
                    batch_size: 0,
                    ..EmbeddingConfig::new("http://127.0.0.1:9/v1", "m")
                },
                "batch_size must be at least 1",
            ),
            (
                EmbeddingConfig {
                    api_key_env: Some("PLOKE_TEST_SURELY_UNSET_KEY".into()),
                    ..EmbeddingConfig::new("http://127.0.0.1:9/v1", "m")
                },
                "api_key_env names `PLOKE_TEST_SURELY_UNSET_KEY`, which is not set",
            ),
        ];
        for (config, want) in cases {
            match Remote::connect(&config).await {
                Err(EmbedError::Config(m)) => assert!(m.contains(want), "{m} / {want}"),
                other => panic!("{other:?} / {want}"),
            }
        }
    }
}
