//! ploke tool-executor: owns the tools a model may call and the lifecycle of edit proposals.
//! The domain ([`service`]) knows nothing of gRPC; [`grpc`] adapts it.

pub mod edits;
mod error;
pub mod failure;
mod grpc;
pub mod overlay;
pub mod paths;
pub mod rag;
pub mod service;
pub mod tools;

use std::path::PathBuf;

use ploke_proto::registry::ToolRegistry;
use ploke_proto::tools::v1::tool_executor_server::ToolExecutorServer;
use ploke_runtime::config::{InternalConfig, LimitsConfig, PlokeConfig};
use ploke_runtime::server::{ServeError, ServiceHost};
use ploke_runtime::workspaces::{FOLLOW_PERIOD, RagSearchSource, Workspaces};
use tokio::net::TcpListener;

pub use error::ExecutorError;

/// The gRPC service name.
pub const SERVICE_NAME: &str = "ploke.tools.v1.ToolExecutor";

/// What tool-executor needs from `ploke.toml`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Workspaces tools may touch; the first is the default.
    pub workspaces: Vec<PathBuf>,
    /// Where proposals are stored.
    pub data_dir: PathBuf,
    /// rag-search URL.
    pub rag_search_url: String,
    /// Server limits.
    pub limits: LimitsConfig,
    /// Tool size limits and defaults.
    pub tools: tools::Limits,
    /// How edits are decided.
    pub policy: edits::Policy,
    /// Injected before each file rename while applying (tests only; `None` in production).
    pub fault: Option<edits::FaultHook>,
    /// The internal tokens callers must present (the first is sent to rag-search).
    pub internal: InternalConfig,
    /// `[storage] url`: proposals in this shared PostgreSQL database instead of SQLite under
    /// the data dir.
    pub storage_url: Option<String>,
}

impl From<&PlokeConfig> for Config {
    fn from(c: &PlokeConfig) -> Self {
        Self {
            workspaces: c.workspaces.clone(),
            data_dir: c.data_dir.clone(),
            rag_search_url: c.upstreams.rag_search_url.clone(),
            limits: c.limits,
            tools: tools::Limits {
                max_file_bytes: c.tool_executor.max_file_bytes,
                read_max_bytes: c.tool_executor.read_max_bytes,
                default_token_budget: c.tool_executor.default_token_budget,
            },
            policy: edits::Policy {
                auto_approve: c.tool_executor.auto_approve,
                approval_timeout: std::time::Duration::from_secs(
                    c.tool_executor.approval_timeout_secs,
                ),
                apply_to: match c.tool_executor.apply_to {
                    ploke_runtime::config::ApplyTo::Workspace => edits::ApplyTo::Workspace,
                    ploke_runtime::config::ApplyTo::Overlay => edits::ApplyTo::Overlay,
                },
            },
            fault: None,
            internal: c.internal.clone(),
            storage_url: c.storage.postgres_url().map(str::to_owned),
        }
    }
}

/// tool-executor could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The tool registry is broken (a build defect).
    #[error(transparent)]
    Registry(#[from] ploke_proto::registry::RegistryError),
    /// An upstream URL is invalid.
    #[error(transparent)]
    Upstream(#[from] ploke_runtime::client::ChannelError),
    /// The proposal store could not be opened.
    #[error(transparent)]
    Store(#[from] edits::StoreError),
    /// Serving failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// A configured workspace cannot be served.
    #[error(
        "workspace {root}: {reason} (configured by --workspace, by PLOKE_WORKSPACES with `:` between roots, or by `workspaces` in ploke.toml)"
    )]
    Workspace {
        /// The root as configured.
        root: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Serves tool-executor on `listener` until `shutdown` resolves.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), StartError> {
    let mut host = ServiceHost::new(config.limits, &[SERVICE_NAME]).await;
    let tokens = host.require_internal(&config.internal)?;
    if let Err((root, reason)) = ploke_runtime::workspaces::check_roots(&config.workspaces) {
        return Err(StartError::Workspace {
            root: root.display().to_string(),
            reason,
        });
    }
    let registry = ToolRegistry::global()?;
    let rag_channel = ploke_runtime::client::internal_channel(&config.rag_search_url, &tokens)?;
    let rag = rag::Rag::new(rag_channel.clone(), config.limits.max_message_bytes);
    // Workspaces added on rag-search at run time are served here too.
    let workspaces = Workspaces::new(&config.workspaces)
        .with_source(std::sync::Arc::new(RagSearchSource::new(rag_channel)));
    let following = workspaces.follow(FOLLOW_PERIOD);
    let stopping = tokio_util::sync::CancellationToken::new();
    let edits = edits::Edits::open(
        &config.data_dir,
        config.storage_url.as_deref(),
        rag.clone(),
        config.tools,
        config.policy,
        config.fault.clone(),
        stopping.clone(),
    )
    .await?;
    let database = edits.database().clone();
    let service = service::ToolService::new(
        workspaces,
        registry,
        rag,
        config.tools,
        edits,
        config.limits.blocking_pool(),
    )
    .with_session_overlays(config.policy.apply_to == edits::ApplyTo::Overlay);
    let _pool_watch = service
        .pool()
        .watch(host.readiness(), ploke_runtime::blocking::WATCH_PERIOD);
    service::count_tool_calls_from_zero(registry);
    let max = config.limits.max_message_bytes;
    let server = ToolExecutorServer::new(grpc::ToolExecutorGrpc::new(service, max))
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    host.readiness().set_serving().await;
    // Health follows the proposal store (NOT_SERVING while it cannot take writes).
    let monitor = database.monitor(host.readiness(), STORAGE_PROBE_PERIOD);
    let served = host
        .serve(tonic::service::Routes::new(server), listener, async move {
            shutdown.await;
            // No more probing: the server drains.
            drop(monitor);
            // Calls waiting for a decision end now instead of holding the drain open.
            stopping.cancel();
            if let Some(task) = following {
                task.abort();
            }
        })
        .await;
    // Releases the database's lock for whoever opens it next (a restart in this process).
    database.close().await;
    Ok(served?)
}

/// How often the proposal store's file is checked (and, while broken, probed with a write).
const STORAGE_PROBE_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);
