//! Loading the layers: the file named by `--config` / `PLOKE_CONFIG`, the `PLOKE_*`
//! environment (unknown names are reported), then the flags; the errors they can give.

use std::path::{Path, PathBuf};

use super::*;
use crate::cli::CommonArgs;

/// Configuration could not be loaded (unknown keys in the file are errors).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The config file is not valid (unknown key, wrong type, bad TOML).
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (names the key and line).
        message: String,
    },
    /// An environment variable is unknown or has a bad value.
    #[error("environment variable {name}: {message}")]
    Env {
        /// The variable.
        name: String,
        /// Why.
        message: String,
    },
    /// The layers combined into settings that cannot work.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// Every `PLOKE_*` variable ploke reads (services and the client).
pub const KNOWN_ENV: &[&str] = &[
    "PLOKE_CONFIG",
    "PLOKE_LISTEN",
    "PLOKE_DATA_DIR",
    "PLOKE_WORKSPACES",
    "PLOKE_RAG_SEARCH_URL",
    "PLOKE_TOOL_EXECUTOR_URL",
    "PLOKE_LLM_SESSION_URL",
    "PLOKE_EMBED_MODEL",
    "PLOKE_GATEWAY_TOKENS",
    "PLOKE_GATEWAY_ADMIN_TOKENS",
    "PLOKE_GATEWAY_PRINCIPALS",
    "PLOKE_INTERNAL_TOKEN",
    "PLOKE_LOG",
    "PLOKE_LOG_FORMAT",
    "PLOKE_GATEWAY",
    "PLOKE_TOKEN",
    "PLOKE_STORAGE_URL",
    "PLOKE_METRICS_LISTEN",
    "PLOKE_MCP_LISTEN",
];

/// A parse error of `text` as `line L, column C: what`, without the parser's quote of the
/// line: the line may hold a secret (`api_key = "sk-…"` is an unknown key, and its error would
/// print the key into terminals and logs).
fn parse_message(e: &toml::de::Error, text: &str) -> String {
    let Some(span) = e.span() else {
        return e.message().to_owned();
    };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    format!("line {line}, column {column}: {}", e.message().trim_end())
}

impl PlokeConfig {
    /// Parses a `ploke.toml` text (unknown keys are errors).
    pub fn from_toml(text: &str, path: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: parse_message(&e, text),
        })
    }

    /// Every `api_key_env` names an environment variable. A key pasted there instead would
    /// be printed by every error that names the variable, so the value is not repeated.
    fn check_key_names(&self) -> Result<(), String> {
        let names = self
            .providers
            .iter()
            .map(|(name, p)| (format!("providers.{name}.api_key_env"), &p.api_key_env))
            .chain(
                self.embedding
                    .iter()
                    .map(|e| ("embedding.api_key_env".to_owned(), &e.api_key_env)),
            );
        for (key, value) in names {
            let Some(var) = value else { continue };
            let is_name = var.len() <= 128
                && var.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !is_name {
                return Err(format!(
                    "{key} must be the name of an environment variable (letters, digits and _, \
                     at most 128), such as OPENAI_API_KEY, not the key itself; the value is \
                     not shown"
                ));
            }
        }
        Ok(())
    }

    /// `PLOKE_*` variables among `env_names` that ploke does not read (likely typos).
    pub fn unknown_env(env_names: &[String]) -> Vec<String> {
        env_names
            .iter()
            .filter(|n| n.starts_with("PLOKE_") && !KNOWN_ENV.contains(&n.as_str()))
            .cloned()
            .collect()
    }

    /// Loads every layer for `service`: defaults, the file named by `--config` /
    /// `PLOKE_CONFIG` (if any), the `PLOKE_*` variables from `env`, then the flags.
    pub fn load(
        service: ServiceKind,
        args: &CommonArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let files: Vec<PathBuf> = args
            .config
            .clone()
            .or_else(|| env("PLOKE_CONFIG").map(PathBuf::from))
            .into_iter()
            .collect();
        Ok(Self::load_layers(service, &files, args, env)?.config)
    }

    /// Loads defaults, then `files` in order (each later one overriding keys of the earlier:
    /// a user's `~/.config/ploke/config.toml`, then a workspace's `ploke.toml`), the `PLOKE_*`
    /// variables from `env`, then the flags; keeps what each layer gave for
    /// [`Layers::explain`]. Each file alone must be valid (unknown keys are errors naming it).
    pub fn load_layers(
        service: ServiceKind,
        files: &[PathBuf],
        args: &CommonArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Layers, ConfigError> {
        let mut tables = Vec::new();
        let mut merged = toml::Table::new();
        for path in files {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.clone(),
                source,
            })?;
            Self::from_toml(&text, path)?;
            let table: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Parse {
                path: path.clone(),
                message: parse_message(&e, &text),
            })?;
            merge(&mut merged, table.clone());
            tables.push((path.clone(), table));
        }
        let files_only: Self =
            toml::Value::Table(merged)
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::Parse {
                    path: files.last().cloned().unwrap_or_default(),
                    message: format!("the files together: {}", e.message()),
                })?;
        let mut with_env = files_only.clone();
        with_env.apply_env(service, env)?;
        let mut config = with_env.clone();
        config.apply_flags(service, args);
        config.storage.validate().map_err(ConfigError::Invalid)?;
        config.gateway.validate().map_err(ConfigError::Invalid)?;
        config.rag_search.validate().map_err(ConfigError::Invalid)?;
        config.check_key_names().map_err(ConfigError::Invalid)?;
        Ok(Layers {
            files: tables,
            files_only,
            with_env,
            config,
        })
    }

    /// Loads from the process environment and the given flags. Unknown `PLOKE_*` variables
    /// are ignored here; [`PlokeConfig::warn_unknown_process_env`] says so once the log is up.
    pub fn load_from_process(service: ServiceKind, args: &CommonArgs) -> Result<Self, ConfigError> {
        Self::load(service, args, &|k| std::env::var(k).ok())
    }

    /// Logs a warning for each `PLOKE_*` variable of this process that ploke does not read:
    /// other tools may share the prefix, but a typo should not pass silently. Called once
    /// telemetry is up, so that the warning is a log line in the process's format.
    pub fn warn_unknown_process_env() {
        let names: Vec<String> = std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .collect();
        for variable in Self::unknown_env(&names) {
            tracing::warn!(
                %variable,
                known = %KNOWN_ENV.join(", "),
                "ignoring unknown environment variable"
            );
        }
    }

    /// The listen address of `service`.
    pub fn listen(&self, service: ServiceKind) -> SocketAddr {
        match service {
            ServiceKind::RagSearch => self.rag_search.listen,
            ServiceKind::ToolExecutor => self.tool_executor.listen,
            ServiceKind::LlmSession => self.llm_session.listen,
            ServiceKind::Gateway => self.gateway.listen,
        }
    }

    /// Sets the listen address of `service`.
    pub fn set_listen(&mut self, service: ServiceKind, addr: SocketAddr) {
        match service {
            ServiceKind::RagSearch => self.rag_search.listen = addr,
            ServiceKind::ToolExecutor => self.tool_executor.listen = addr,
            ServiceKind::LlmSession => self.llm_session.listen = addr,
            ServiceKind::Gateway => self.gateway.listen = addr,
        }
    }

    fn apply_env(
        &mut self,
        service: ServiceKind,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let bad = |name: &str, message: String| ConfigError::Env {
            name: name.to_owned(),
            message,
        };
        if let Some(v) = env("PLOKE_LISTEN") {
            let addr = v
                .parse()
                .map_err(|e| bad("PLOKE_LISTEN", format!("`{v}` is not HOST:PORT: {e}")))?;
            self.set_listen(service, addr);
        }
        if let Some(v) = env("PLOKE_DATA_DIR") {
            self.data_dir = PathBuf::from(v);
        }
        if let Some(v) = env("PLOKE_WORKSPACES") {
            self.workspaces = v
                .split(':')
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .collect();
        }
        if let Some(v) = env("PLOKE_RAG_SEARCH_URL") {
            self.upstreams.rag_search_url = v;
        }
        if let Some(v) = env("PLOKE_TOOL_EXECUTOR_URL") {
            self.upstreams.tool_executor_url = v;
        }
        if let Some(v) = env("PLOKE_LLM_SESSION_URL") {
            self.upstreams.llm_session_url = v;
        }
        // Empty = none (as `PLOKE_EMBED_MODEL= cmd` is written to turn a variable off).
        if let Some(v) = env("PLOKE_EMBED_MODEL") {
            self.rag_search.embed_model = (!v.is_empty()).then(|| PathBuf::from(v));
        }
        if let Some(v) = env("PLOKE_GATEWAY_ADMIN_TOKENS") {
            self.gateway.admin_tokens = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(Secret::new)
                .collect();
        }
        if let Some(v) = env("PLOKE_GATEWAY_TOKENS") {
            self.gateway.tokens = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(Secret::new)
                .collect();
        }
        if let Some(v) = env("PLOKE_GATEWAY_PRINCIPALS") {
            self.gateway.principals_file = (!v.is_empty()).then(|| PathBuf::from(v));
        }
        if let Some(v) = env("PLOKE_INTERNAL_TOKEN") {
            self.internal.tokens = InternalConfig::parse_env(&v);
        }
        if let Some(v) = env("PLOKE_STORAGE_URL") {
            self.storage.url = (!v.is_empty()).then(|| Secret::new(v));
        }
        if let Some(v) = env("PLOKE_METRICS_LISTEN") {
            self.telemetry.metrics_listen = if v.is_empty() {
                None
            } else {
                Some(v.parse().map_err(|e| {
                    bad(
                        "PLOKE_METRICS_LISTEN",
                        format!("`{v}` is not HOST:PORT: {e}"),
                    )
                })?)
            };
        }
        if let Some(v) = env("PLOKE_MCP_LISTEN") {
            self.gateway.mcp_listen =
                if v.is_empty() {
                    None
                } else {
                    Some(v.parse().map_err(|e| {
                        bad("PLOKE_MCP_LISTEN", format!("`{v}` is not HOST:PORT: {e}"))
                    })?)
                };
        }
        if let Some(v) = env("PLOKE_LOG") {
            self.telemetry.log_filter = v;
        }
        if let Some(v) = env("PLOKE_LOG_FORMAT") {
            self.telemetry.log_format = match v.as_str() {
                "text" => LogFormat::Text,
                "json" => LogFormat::Json,
                other => {
                    return Err(bad(
                        "PLOKE_LOG_FORMAT",
                        format!("`{other}` is not `text` or `json`"),
                    ));
                }
            };
        }
        Ok(())
    }

    fn apply_flags(&mut self, service: ServiceKind, args: &CommonArgs) {
        if let Some(addr) = args.listen {
            self.set_listen(service, addr);
        }
        if let Some(dir) = &args.data_dir {
            self.data_dir = dir.clone();
        }
        if !args.workspace.is_empty() {
            self.workspaces = args.workspace.clone();
        }
        if let Some(url) = &args.rag_search_url {
            self.upstreams.rag_search_url = url.clone();
        }
        if let Some(url) = &args.tool_executor_url {
            self.upstreams.tool_executor_url = url.clone();
        }
        if let Some(url) = &args.llm_session_url {
            self.upstreams.llm_session_url = url.clone();
        }
        if let Some(format) = args.log_format {
            self.telemetry.log_format = format;
        }
    }
}

/// Merges `over` into `base`: tables key by key, any other value replaced whole.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// The configuration with what each layer gave, to say where a value came from.
#[derive(Debug, Clone)]
pub struct Layers {
    files: Vec<(PathBuf, toml::Table)>,
    files_only: PlokeConfig,
    with_env: PlokeConfig,
    /// The result: defaults, files, environment, flags.
    pub config: PlokeConfig,
}

/// One effective setting and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    /// Dotted key (`gateway.listen`, `providers.openai.base_url`).
    pub key: String,
    /// The value, as JSON (secrets as `"***"`).
    pub value: String,
    /// `default`, a file's path, `environment`, `flag`, or `derived` (set by the program
    /// itself after loading, e.g. the workspace's data directory).
    pub source: String,
}

impl Layers {
    /// Every leaf setting of `effective` (this configuration after the program's own
    /// adjustments), with its source.
    pub fn explain(&self, effective: &PlokeConfig) -> Vec<Explained> {
        // Secrets as digests of themselves: `***` alone is equal in every layer, which would
        // credit a file with what the environment set.
        let leaves = |c: &PlokeConfig| {
            let mut out = std::collections::BTreeMap::new();
            let value = super::with_secret_fingerprints(|| serde_json::to_value(c));
            flatten("", &value.unwrap_or_default(), &mut out);
            out
        };
        let defaults = leaves(&PlokeConfig::default());
        let files_only = leaves(&self.files_only);
        let with_env = leaves(&self.with_env);
        let loaded = leaves(&self.config);
        leaves(effective)
            .into_iter()
            .map(|(key, value)| {
                let source = if loaded.get(&key) != Some(&value) {
                    "derived".to_owned()
                } else if with_env.get(&key) != Some(&value) {
                    "flag".to_owned()
                } else if files_only.get(&key) != Some(&value) {
                    "environment".to_owned()
                } else if let Some((path, _)) = self.files.iter().rev().find(|(_, t)| sets(t, &key))
                {
                    path.display().to_string()
                } else if defaults.get(&key) == Some(&value) || self.within_a_file_table(&key) {
                    // Unset fields of an entry a file adds (`[providers.NAME]`) take defaults.
                    "default".to_owned()
                } else {
                    "derived".to_owned()
                };
                let secret =
                    value.as_str().is_some_and(|v| v.starts_with("***")) || credential_header(&key);
                Explained {
                    key,
                    value: if secret {
                        "\"***\"".to_owned()
                    } else {
                        shown(&value)
                    },
                    source,
                }
            })
            .collect()
    }
}

/// Whether `key` is a provider header that carries a credential (`Authorization`, `X-Api-Key`,
/// a token, a secret, a cookie): a way to keep a key in a file, so never printed.
fn credential_header(key: &str) -> bool {
    let Some((table, name)) = key.rsplit_once(".headers.") else {
        return false;
    };
    let name = name.to_ascii_lowercase();
    table.starts_with("providers.")
        && ["auth", "key", "token", "secret", "cookie", "password"]
            .iter()
            .any(|w| name.contains(w))
}

impl Layers {
    fn within_a_file_table(&self, key: &str) -> bool {
        let Some((parent, _)) = key.rsplit_once('.') else {
            return false;
        };
        self.files.iter().any(|(_, t)| sets(t, parent))
    }
}

/// Whether `table` sets the dotted `key` (or a table or array above it).
fn sets(table: &toml::Table, key: &str) -> bool {
    let mut current = table;
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        match current.get(part) {
            None => return false,
            Some(toml::Value::Table(t)) if parts.peek().is_some() => current = t,
            Some(_) => return true,
        }
    }
    true
}

/// A value as JSON, a fraction that came from an `f32` setting (`dense_weight = 0.2`) as it
/// was written, not as its widening to `f64` prints (`0.20000000298023224`).
fn shown(value: &serde_json::Value) -> String {
    if let Some(f) = value.as_f64().filter(|_| value.is_f64()) {
        // Narrowed, then checked to be exact.
        let narrow = f as f32;
        if f.fract() != 0.0 && f64::from(narrow) == f {
            return narrow.to_string();
        }
    }
    value.to_string()
}

fn flatten(
    prefix: &str,
    value: &serde_json::Value,
    out: &mut std::collections::BTreeMap<String, serde_json::Value>,
) {
    match value {
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        serde_json::Value::Null => {}
        other => {
            out.insert(prefix.to_owned(), other.clone());
        }
    }
}
