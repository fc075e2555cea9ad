//! Layered configuration: defaults in code → optional `ploke.toml` → `PLOKE_*` environment →
//! command-line flags. Unknown keys (in the file or among `PLOKE_*` variables) are errors;
//! secrets are redacted in `Debug`.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// The four services of ploke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceKind {
    /// ploke-rag-search.
    RagSearch,
    /// ploke-tool-executor.
    ToolExecutor,
    /// ploke-llm-session.
    LlmSession,
    /// ploke-gateway.
    Gateway,
}

impl ServiceKind {
    /// Binary and telemetry name (`ploke-rag-search`).
    pub fn binary(self) -> &'static str {
        match self {
            ServiceKind::RagSearch => "ploke-rag-search",
            ServiceKind::ToolExecutor => "ploke-tool-executor",
            ServiceKind::LlmSession => "ploke-llm-session",
            ServiceKind::Gateway => "ploke-gateway",
        }
    }

    /// Default listen port.
    pub fn default_port(self) -> u16 {
        match self {
            ServiceKind::Gateway => 50051,
            ServiceKind::LlmSession => 50052,
            ServiceKind::ToolExecutor => 50053,
            ServiceKind::RagSearch => 50054,
        }
    }

    fn default_listen(self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.default_port()))
    }
}

/// A secret string: shown as `***` in `Debug` and when serialized (`ploke config`), never
/// logged.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

thread_local! {
    /// While set, a secret serializes as `***` and a digest of itself, so that
    /// [`Layers::explain`] can tell which layer gave it without ever holding its value.
    static FINGERPRINTS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with secrets serialized as `***<digest>` (see [`FINGERPRINTS`]).
pub(crate) fn with_secret_fingerprints<T>(f: impl FnOnce() -> T) -> T {
    FINGERPRINTS.with(|c| c.set(true));
    let out = f();
    FINGERPRINTS.with(|c| c.set(false));
    out
}

impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if FINGERPRINTS.with(std::cell::Cell::get) {
            use std::hash::{Hash as _, Hasher as _};
            let mut h = std::hash::DefaultHasher::new();
            self.0.hash(&mut h);
            return s.serialize_str(&format!("***{:016x}", h.finish()));
        }
        s.serialize_str("***")
    }
}

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself; call only where it is used.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The whole `ploke.toml`, after every layer is applied.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlokeConfig {
    /// Where services keep state (SQLite, index); relative paths are relative to the cwd.
    pub data_dir: PathBuf,
    /// Workspaces the services may touch; the first is the default.
    pub workspaces: Vec<PathBuf>,
    /// Logs and traces.
    pub telemetry: TelemetryConfig,
    /// Message-size and concurrency limits of every server.
    pub limits: LimitsConfig,
    /// Where services find each other.
    pub upstreams: UpstreamsConfig,
    /// rag-search settings.
    pub rag_search: RagSearchConfig,
    /// Remote embeddings endpoint (OpenAI-compatible `/v1/embeddings`).
    pub embedding: Option<EmbeddingConfig>,
    /// tool-executor settings.
    pub tool_executor: ToolExecutorConfig,
    /// llm-session settings.
    pub llm_session: LlmSessionConfig,
    /// Behaviour of sessions.
    pub session: SessionConfig,
    /// gateway settings.
    pub gateway: GatewayConfig,
    /// Service-to-service authentication.
    pub internal: InternalConfig,
    /// Where shared state lives (SQLite by default, PostgreSQL for replicas).
    pub storage: StorageConfig,
    /// Model providers by name.
    pub providers: BTreeMap<String, ProviderConfig>,
}

impl Default for PlokeConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from(".ploke"),
            workspaces: Vec::new(),
            telemetry: TelemetryConfig::default(),
            limits: LimitsConfig::default(),
            upstreams: UpstreamsConfig::default(),
            rag_search: RagSearchConfig::default(),
            embedding: None,
            tool_executor: ToolExecutorConfig::default(),
            llm_session: LlmSessionConfig::default(),
            session: SessionConfig::default(),
            gateway: GatewayConfig::default(),
            internal: InternalConfig::default(),
            storage: StorageConfig::default(),
            providers: BTreeMap::new(),
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// `[telemetry]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// `text` or `json`.
    pub log_format: LogFormat,
    /// `tracing` filter directives (overridden by `RUST_LOG`).
    pub log_filter: String,
    /// Put prompts and code into spans (off by default).
    pub capture_content: bool,
    /// Serve Prometheus text at `http://ADDR/metrics` (env `PLOKE_METRICS_LISTEN`; off when
    /// unset).
    pub metrics_listen: Option<SocketAddr>,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            log_format: LogFormat::Text,
            log_filter: "info".into(),
            capture_content: false,
            metrics_listen: None,
        }
    }
}

/// `[limits]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest request or response message in bytes.
    pub max_message_bytes: usize,
    /// Concurrent HTTP/2 streams per connection.
    pub max_concurrent_streams: u32,
    /// Requests processed at once per connection.
    pub concurrency_per_connection: usize,
    /// Seconds in-flight calls get to finish after a shutdown signal.
    pub drain_seconds: u64,
    /// Blocking tasks (file reads, index searches) run at once; 0 = two per core, at least 4.
    pub blocking_threads: usize,
    /// Longest wait in milliseconds for a blocking slot before a call is refused with
    /// `RESOURCE_EXHAUSTED`.
    pub blocking_queue_ms: u64,
    /// Seconds after which a server closes a client connection gracefully (HTTP/2 GOAWAY:
    /// in-flight calls finish, new calls reconnect), so long-lived gRPC connections spread over
    /// replicas behind a load balancer or Kubernetes Service; 0 = never.
    pub max_connection_age_secs: u64,
}

impl LimitsConfig {
    /// The bounded pool for blocking work these limits describe.
    pub fn blocking_pool(&self) -> crate::blocking::BlockingPool {
        crate::blocking::BlockingPool::new(crate::blocking::PoolSize::new(
            self.blocking_threads,
            self.blocking_queue_ms,
        ))
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: 16 * 1024 * 1024,
            max_concurrent_streams: 512,
            concurrency_per_connection: 256,
            drain_seconds: 10,
            blocking_threads: 0,
            blocking_queue_ms: 5000,
            max_connection_age_secs: 0,
        }
    }
}

/// `[upstreams]`: URLs of the services others call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamsConfig {
    /// rag-search URL (tool-executor, gateway).
    pub rag_search_url: String,
    /// tool-executor URL (llm-session, gateway).
    pub tool_executor_url: String,
    /// llm-session URL (gateway).
    pub llm_session_url: String,
}

impl Default for UpstreamsConfig {
    fn default() -> Self {
        let url = |k: ServiceKind| format!("http://127.0.0.1:{}", k.default_port());
        Self {
            rag_search_url: url(ServiceKind::RagSearch),
            tool_executor_url: url(ServiceKind::ToolExecutor),
            llm_session_url: url(ServiceKind::LlmSession),
        }
    }
}

/// `[tool_executor]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolExecutorConfig {
    /// Listen address.
    pub listen: SocketAddr,
    /// Apply edits without waiting for a decision (off by default).
    pub auto_approve: bool,
    /// Seconds an edit proposal waits for a decision before it expires.
    pub approval_timeout_secs: u64,
    /// Default token budget of `request_code_context`.
    pub default_token_budget: u32,
    /// Largest file the tools read whole or edit, in bytes.
    pub max_file_bytes: u64,
    /// Most bytes one `read_file` returns.
    pub read_max_bytes: usize,
    /// Where approved edits land: `workspace` (the served files; `ploke up`, where the
    /// developer's tree is the workspace) or `overlay` (a shared deployment: the session's
    /// overlay, delivered to the developer's client, never the served tree).
    pub apply_to: ApplyTo,
}

/// `[tool_executor] apply_to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApplyTo {
    /// The workspace's files.
    #[default]
    Workspace,
    /// The session's overlay.
    Overlay,
}

impl Default for ToolExecutorConfig {
    fn default() -> Self {
        Self {
            listen: ServiceKind::ToolExecutor.default_listen(),
            auto_approve: false,
            approval_timeout_secs: 600,
            default_token_budget: 4000,
            max_file_bytes: 4 * 1024 * 1024,
            read_max_bytes: 64 * 1024,
            apply_to: ApplyTo::Workspace,
        }
    }
}

/// `[llm_session]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmSessionConfig {
    /// Listen address.
    pub listen: SocketAddr,
}

impl Default for LlmSessionConfig {
    fn default() -> Self {
        Self {
            listen: ServiceKind::LlmSession.default_listen(),
        }
    }
}

/// `[session]`: behaviour of turns.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// Provider used when a session names none.
    pub default_provider: Option<String>,
    /// Tool rounds allowed per turn.
    pub max_tool_rounds: u32,
    /// Milliseconds a tool call may run (the approval wait of edits has its own limit).
    pub tool_timeout_ms: u64,
    /// Tokens kept free for the reply when the history is fitted into the context window.
    pub reply_reserve_tokens: u32,
    /// Context window assumed for models the provider's `models` list does not describe.
    pub default_context_window: u32,
    /// Automatic context before the first model call of a turn.
    pub auto_context: AutoContext,
    /// Tries of one provider request (429, 5xx and transport errors are retried).
    pub provider_tries: u32,
    /// First retry delay in milliseconds; doubled per try, with jitter.
    pub retry_base_ms: u64,
    /// Longest wait between tries in milliseconds (Retry-After included).
    pub retry_max_ms: u64,
    /// Seconds without a byte from the provider before a request counts as failed.
    pub provider_idle_timeout_secs: u64,
    /// Longest wall time of one turn in seconds (tool calls and approval waits included);
    /// then it ends with `turn_failed{time_limit}` and the provider request is dropped.
    pub max_turn_secs: u64,
    /// Most bytes the model may stream in one turn (text and tool-call arguments, retried
    /// attempts included); then it ends with `turn_failed{output_limit}`.
    pub max_turn_output_bytes: u64,
    /// How the model reads tool results: `json` (the typed result's fields that help it) or
    /// `text` (a compact rendering, code unescaped).
    pub tool_results: ToolResults,
    /// Days a session may stay idle (no turn ended, or created, that long ago) before it is
    /// deleted with its events and history; 0 keeps sessions until someone deletes them.
    pub retention_days: u32,
}

/// How the model reads tool results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolResults {
    /// The typed result as JSON, without what only confuses a model (`(model_omits)` fields).
    #[default]
    Json,
    /// The compact text rendering.
    Text,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            default_provider: None,
            max_tool_rounds: 25,
            tool_timeout_ms: 30_000,
            reply_reserve_tokens: 4096,
            default_context_window: 32_768,
            auto_context: AutoContext::Off,
            provider_tries: 3,
            retry_base_ms: 500,
            retry_max_ms: 30_000,
            provider_idle_timeout_secs: 120,
            max_turn_secs: 30 * 60,
            max_turn_output_bytes: 4 * 1024 * 1024,
            retention_days: 0,
            tool_results: ToolResults::Json,
        }
    }
}

/// Automatic context for a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoContext {
    /// None: the model asks for context with tools.
    #[default]
    Off,
    /// One `request_code_context` for the user's message before the first model call.
    Light,
}

/// `[gateway]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayConfig {
    /// Listen address.
    pub listen: SocketAddr,
    /// File with one accepted bearer token per line.
    pub tokens_file: Option<PathBuf>,
    /// Accepted bearer tokens (from `PLOKE_GATEWAY_TOKENS`; not read from the file).
    #[serde(skip)]
    pub tokens: Vec<Secret>,
    /// Bearer tokens that may also administer (add and remove workspaces), from
    /// `PLOKE_GATEWAY_ADMIN_TOKENS` (comma-separated; never read from the file).
    #[serde(skip)]
    pub admin_tokens: Vec<Secret>,
    /// Serve without authentication (only `ploke up` on loopback sets this).
    #[serde(skip)]
    pub allow_unauthenticated: bool,
    /// Who may call, what each may touch: a TOML file of `[[principal]]` entries (env
    /// `PLOKE_GATEWAY_PRINCIPALS`; docs/SECURITY.md). Re-read when it changes.
    pub principals_file: Option<PathBuf>,
    /// Accept JWTs from an identity provider (`[gateway.jwt]`).
    pub jwt: Option<JwtConfig>,
    /// Events buffered per StreamEvents subscriber; a subscriber that falls this far behind
    /// is cut off with RESOURCE_EXHAUSTED and resumes from its last seq.
    pub subscriber_buffer: usize,
    /// Milliseconds a full subscriber buffer may take to drain (a burst is not a slow reader).
    pub subscriber_grace_ms: u64,
    /// Where MCP clients reach the tools over Streamable HTTP at `/mcp` (`PLOKE_MCP_LISTEN`);
    /// unset = no MCP endpoint (docs/MCP.md).
    pub mcp_listen: Option<SocketAddr>,
    /// Largest tool result sent to an MCP client, in tokens (about 4 characters each); larger
    /// ones are cut and say so. 25,000 is Claude Code's default cap.
    pub mcp_max_result_tokens: u32,
    /// `Host` names the MCP endpoint answers to when it serves without authentication (DNS
    /// rebinding guard; loopback names by default). With credentials any host is accepted:
    /// a request needs a token anyway.
    pub mcp_allowed_hosts: Vec<String>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            listen: ServiceKind::Gateway.default_listen(),
            tokens_file: None,
            tokens: Vec::new(),
            admin_tokens: Vec::new(),
            allow_unauthenticated: false,
            principals_file: None,
            jwt: None,
            subscriber_buffer: 1024,
            subscriber_grace_ms: 1000,
            mcp_listen: None,
            mcp_max_result_tokens: 25_000,
            mcp_allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
        }
    }
}

impl GatewayConfig {
    /// The smallest `mcp_max_result_tokens`: below it not even one file's head fits.
    pub const MIN_MCP_RESULT_TOKENS: u32 = 1_000;

    /// Settings that cannot work.
    pub fn validate(&self) -> Result<(), String> {
        if self.mcp_max_result_tokens < Self::MIN_MCP_RESULT_TOKENS {
            return Err(format!(
                "[gateway] mcp_max_result_tokens = {} is below {}: an MCP client could not get a useful result",
                self.mcp_max_result_tokens,
                Self::MIN_MCP_RESULT_TOKENS
            ));
        }
        // A token that guards a port others reach is guessed as easily as it is short.
        let reachable = !self.listen.ip().is_loopback()
            || self.mcp_listen.is_some_and(|a| !a.ip().is_loopback());
        let min = crate::internal::MIN_TOKEN_BYTES;
        for (what, tokens) in [
            ("PLOKE_GATEWAY_TOKENS / tokens_file", &self.tokens),
            ("PLOKE_GATEWAY_ADMIN_TOKENS", &self.admin_tokens),
        ] {
            if reachable && let Some(at) = tokens.iter().position(|t| t.expose().len() < min) {
                return Err(format!(
                    "{what}: token {} has fewer than {min} characters, and the gateway listens \
                     beyond loopback ({}); use long random tokens (e.g. `openssl rand -hex 16`)",
                    at + 1,
                    self.listen
                ));
            }
        }
        Ok(())
    }
}

/// `[gateway.jwt]`: bearer tokens that are JWTs signed by an identity provider, verified
/// offline against a JWKS file (no network call at run time).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// The identity provider's public keys (a JWKS document; RSA, EC or Ed25519 keys). Re-read
    /// when it changes, so keys rotate without a restart.
    pub jwks_file: PathBuf,
    /// Required `iss`.
    pub issuer: String,
    /// Required `aud` (one of the token's audiences).
    pub audience: String,
    /// The claim naming the principal.
    #[serde(default = "default_principal_claim")]
    pub principal_claim: String,
    /// A claim whose value (a string, or an array of strings) containing `admin` makes the
    /// principal an admin; unset = role from the principals file only.
    pub role_claim: Option<String>,
    /// A claim listing the workspaces the principal may use (an array of names or roots).
    pub workspaces_claim: Option<String>,
    /// Workspaces of a JWT principal that neither the principals file nor a claim lists.
    #[serde(default)]
    pub default_workspaces: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    #[serde(default = "default_leeway")]
    pub leeway_secs: u64,
}

fn default_principal_claim() -> String {
    "sub".to_owned()
}

fn default_leeway() -> u64 {
    60
}

/// `[providers.NAME]`: an OpenAI-compatible chat-completions provider.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Base URL ending before `/chat/completions`.
    pub base_url: String,
    /// Name of the environment variable that holds the API key (the key is never in a file).
    pub api_key_env: Option<String>,
    /// Model used when a session names none.
    pub default_model: Option<String>,
    /// Extra HTTP headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Known models.
    #[serde(default)]
    pub models: Vec<ModelConfig>,
    /// OpenRouter provider routing preferences, sent as the request's `provider` object.
    pub preferences: Option<ProviderPreferences>,
}

/// OpenRouter's provider routing preferences (`[providers.NAME.preferences]`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderPreferences {
    /// Providers to try, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<String>,
    /// Only these providers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
    /// Never these providers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<String>,
    /// Whether other providers may serve when the listed ones fail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_fallbacks: Option<bool>,
    /// Only providers that support every request parameter (tools included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_parameters: Option<bool>,
    /// `allow` or `deny` providers that store prompts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_collection: Option<String>,
    /// `price`, `throughput` or `latency`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort: Option<String>,
}

/// One model of a provider.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Model id.
    pub id: String,
    /// Context window in tokens.
    pub context_window: Option<u32>,
    /// Whether the model supports tool calls.
    pub supports_tools: Option<bool>,
}

mod embedding;
mod internal;
mod load;
mod rag_search;
mod shared;
#[cfg(test)]
mod tests;

pub use embedding::EmbeddingConfig;
pub use internal::InternalConfig;
pub use load::{ConfigError, Explained, KNOWN_ENV, Layers};
pub use rag_search::RagSearchConfig;
pub use shared::StorageConfig;
