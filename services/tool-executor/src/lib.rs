//! ploke tool-executor: owns the tools a model may call and the lifecycle of edit proposals.
//! The domain ([`service`]) knows nothing of gRPC; [`grpc`] adapts it.

mod error;
mod grpc;
pub mod service;

use std::path::PathBuf;

use ploke_proto::registry::ToolRegistry;
use ploke_proto::tools::v1::tool_executor_server::ToolExecutorServer;
use ploke_runtime::config::{LimitsConfig, PlokeConfig};
use ploke_runtime::server::{ServeError, ServiceHost};
use ploke_runtime::workspaces::Workspaces;
use tokio::net::TcpListener;

pub use error::ToolError;

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
}

impl From<&PlokeConfig> for Config {
    fn from(c: &PlokeConfig) -> Self {
        Self {
            workspaces: c.workspaces.clone(),
            data_dir: c.data_dir.clone(),
            rag_search_url: c.upstreams.rag_search_url.clone(),
            limits: c.limits,
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
    /// Serving failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Serves tool-executor on `listener` until `shutdown` resolves.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), StartError> {
    let host = ServiceHost::new(config.limits, &[SERVICE_NAME]).await;
    let registry = ToolRegistry::global()?;
    let rag = ploke_runtime::client::traced_channel(&config.rag_search_url)?;
    let service = service::ToolService::new(Workspaces::new(&config.workspaces), registry, rag);
    let max = config.limits.max_message_bytes;
    let server = ToolExecutorServer::new(grpc::ToolExecutorGrpc::new(service))
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    host.readiness().set_serving().await;
    Ok(host
        .serve(tonic::service::Routes::new(server), listener, shutdown)
        .await?)
}
