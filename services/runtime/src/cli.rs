//! Flags every service binary accepts (the operator contract of DESIGN.md).

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::config::LogFormat;

/// Flags shared by every service binary. Environment variables are applied by
/// [`crate::PlokeConfig::load`], below these flags and above the config file.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CommonArgs {
    /// Config file (`ploke.toml`) [env: PLOKE_CONFIG].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on, HOST:PORT [env: PLOKE_LISTEN].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Directory for state (SQLite, index) [env: PLOKE_DATA_DIR].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// A workspace the service may touch; repeatable, the first is the default
    /// [env: PLOKE_WORKSPACES, colon-separated].
    #[arg(long, value_name = "DIR")]
    pub workspace: Vec<PathBuf>,
    /// rag-search URL [env: PLOKE_RAG_SEARCH_URL].
    #[arg(long, value_name = "URL")]
    pub rag_search_url: Option<String>,
    /// tool-executor URL [env: PLOKE_TOOL_EXECUTOR_URL].
    #[arg(long, value_name = "URL")]
    pub tool_executor_url: Option<String>,
    /// llm-session URL [env: PLOKE_LLM_SESSION_URL].
    #[arg(long, value_name = "URL")]
    pub llm_session_url: Option<String>,
    /// Log format [env: PLOKE_LOG_FORMAT].
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormat>,
}

impl clap::ValueEnum for LogFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &[LogFormat::Text, LogFormat::Json]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(match self {
            LogFormat::Text => clap::builder::PossibleValue::new("text"),
            LogFormat::Json => clap::builder::PossibleValue::new("json"),
        })
    }
}
