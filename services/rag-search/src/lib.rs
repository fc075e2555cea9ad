//! ploke rag-search: owns the code index of one or more workspaces and answers searches and
//! context requests. The domain ([`service`]) knows nothing of gRPC; [`grpc`] adapts it.

pub mod bm25;
pub mod context;
mod error;
mod grpc;
pub mod index;
pub mod parse;
pub mod scan;
pub mod service;
pub mod tokenize;
pub mod tokens;

use std::path::PathBuf;

use ploke_proto::rag::v1::rag_search_server::RagSearchServer;
use ploke_runtime::config::{LimitsConfig, PlokeConfig};
use ploke_runtime::server::{ServeError, ServiceHost};
use ploke_runtime::workspaces::Workspaces;
use tokio::net::TcpListener;

pub use error::RagError;

/// The gRPC service name.
pub const SERVICE_NAME: &str = "ploke.rag.v1.RagSearch";

/// What rag-search needs from `ploke.toml`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Workspaces it may index; the first is the default.
    pub workspaces: Vec<PathBuf>,
    /// Where the index lives (`<data_dir>/index`).
    pub data_dir: PathBuf,
    /// Local embedding model directory, if any.
    pub embed_model: Option<PathBuf>,
    /// Server limits.
    pub limits: LimitsConfig,
}

impl From<&PlokeConfig> for Config {
    fn from(c: &PlokeConfig) -> Self {
        Self {
            workspaces: c.workspaces.clone(),
            data_dir: c.data_dir.clone(),
            embed_model: c.rag_search.embed_model.clone(),
            limits: c.limits,
        }
    }
}

/// Serves rag-search on `listener` until `shutdown` resolves.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let host = ServiceHost::new(config.limits, &[SERVICE_NAME]).await;
    let service = service::RagService::new(Workspaces::new(&config.workspaces));
    let max = config.limits.max_message_bytes;
    let server = RagSearchServer::new(grpc::RagSearchGrpc::new(service))
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    host.readiness().set_serving().await;
    host.serve(tonic::service::Routes::new(server), listener, shutdown)
        .await
}
