//! `[embedding]`: the settings of a remote embeddings endpoint.

use serde::Deserialize;

/// `[embedding]`: a remote OpenAI-compatible embeddings endpoint (`POST {base_url}/embeddings`),
/// used by rag-search instead of a local model.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingConfig {
    /// Base URL, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    /// Model id.
    pub model: String,
    /// Name of the environment variable that holds the API key (none: no Authorization).
    pub api_key_env: Option<String>,
    /// Texts per request.
    #[serde(default = "EmbeddingConfig::default_batch_size")]
    pub batch_size: usize,
    /// Requests in flight at once while indexing.
    #[serde(default = "EmbeddingConfig::default_concurrency")]
    pub concurrency: usize,
    /// Seconds one request may take.
    #[serde(default = "EmbeddingConfig::default_timeout_secs")]
    pub timeout_secs: u64,
    /// Tries per request on 429, 5xx and transport errors.
    #[serde(default = "EmbeddingConfig::default_tries")]
    pub tries: u32,
}

impl EmbeddingConfig {
    fn default_batch_size() -> usize {
        64
    }
    fn default_concurrency() -> usize {
        4
    }
    fn default_timeout_secs() -> u64 {
        60
    }
    fn default_tries() -> u32 {
        4
    }

    /// An endpoint with the default batch size, concurrency, timeout and tries.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            batch_size: Self::default_batch_size(),
            concurrency: Self::default_concurrency(),
            timeout_secs: Self::default_timeout_secs(),
            tries: Self::default_tries(),
        }
    }
}
