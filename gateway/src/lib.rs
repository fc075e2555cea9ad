//! ploke gateway: the only door for clients. Authenticates with bearer tokens, forwards
//! commands to llm-session, tool-executor and rag-search with deadlines and the caller's trace
//! and correlation, relays server streams, and reports the health of the system. Stateless.

mod audit;
pub mod auth;
mod forward;
mod grpc;
pub mod mcp;
mod relay;
mod status;
pub mod tools;
mod upstreams;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ploke_proto::gateway::v1::gateway_server::GatewayServer;
use ploke_runtime::config::{
    InternalConfig, JwtConfig, LimitsConfig, PlokeConfig, Secret, UpstreamsConfig,
};
use ploke_runtime::internal::{InternalTokens, TokenError};
use ploke_runtime::server::{ServeError, ServiceHost};
use tokio::net::TcpListener;

pub use audit::TARGET as AUDIT_TARGET;
pub use upstreams::Upstreams;

/// The gRPC service name.
pub const SERVICE_NAME: &str = "ploke.gateway.v1.Gateway";

/// What the gateway needs from `ploke.toml`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the services are.
    pub upstreams: UpstreamsConfig,
    /// Accepted bearer tokens (`PLOKE_GATEWAY_TOKENS`): the principal `default`.
    pub tokens: Vec<Secret>,
    /// Tokens of the admin principal `admin` (`PLOKE_GATEWAY_ADMIN_TOKENS`).
    pub admin_tokens: Vec<Secret>,
    /// File with one more token of `default` per line.
    pub tokens_file: Option<PathBuf>,
    /// The principals file (`[gateway] principals_file`).
    pub principals_file: Option<PathBuf>,
    /// JWTs from an identity provider (`[gateway.jwt]`).
    pub jwt: Option<JwtConfig>,
    /// How often the principals and JWKS files are checked for changes.
    pub credentials_poll: Duration,
    /// Serve without authentication (`ploke up` on loopback only).
    pub allow_unauthenticated: bool,
    /// Deadline of forwarded unary calls.
    pub forward_timeout: Duration,
    /// Events buffered per StreamEvents subscriber before a slow one is cut off.
    pub subscriber_buffer: usize,
    /// How long a full subscriber buffer may take to drain before the cut.
    pub subscriber_grace: Duration,
    /// Server limits.
    pub limits: LimitsConfig,
    /// The internal token sent to the backends.
    pub internal: InternalConfig,
    /// Where MCP clients connect (`[gateway] mcp_listen`); `None` = no MCP endpoint.
    pub mcp_listen: Option<SocketAddr>,
    /// Largest MCP result, in tokens.
    pub mcp_max_result_tokens: u32,
    /// Host names the MCP endpoint answers to without authentication.
    pub mcp_allowed_hosts: Vec<String>,
}

impl From<&PlokeConfig> for Config {
    fn from(c: &PlokeConfig) -> Self {
        Self {
            upstreams: c.upstreams.clone(),
            tokens: c.gateway.tokens.clone(),
            admin_tokens: c.gateway.admin_tokens.clone(),
            tokens_file: c.gateway.tokens_file.clone(),
            principals_file: c.gateway.principals_file.clone(),
            jwt: c.gateway.jwt.clone(),
            credentials_poll: Duration::from_secs(2),
            allow_unauthenticated: c.gateway.allow_unauthenticated,
            forward_timeout: Duration::from_secs(30),
            subscriber_buffer: c.gateway.subscriber_buffer,
            subscriber_grace: Duration::from_millis(c.gateway.subscriber_grace_ms),
            limits: c.limits,
            internal: c.internal.clone(),
            mcp_listen: c.gateway.mcp_listen,
            mcp_max_result_tokens: c.gateway.mcp_max_result_tokens,
            mcp_allowed_hosts: c.gateway.mcp_allowed_hosts.clone(),
        }
    }
}

/// The gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// An upstream URL is invalid.
    #[error(transparent)]
    Upstream(#[from] ploke_runtime::client::ChannelError),
    /// The tokens file could not be read.
    #[error("reading tokens file {path}: {source}")]
    TokensFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The internal token could not be used.
    #[error(transparent)]
    Internal(#[from] TokenError),
    /// The principals or JWKS file could not be used.
    #[error(transparent)]
    Credentials(#[from] auth::CredentialsError),
    /// The MCP listener could not be bound.
    #[error("binding the MCP endpoint on {addr}: {source}")]
    McpBind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Serving failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

fn tokens(config: &Config) -> Result<Vec<Secret>, StartError> {
    let mut tokens = config.tokens.clone();
    if let Some(path) = &config.tokens_file {
        let text = std::fs::read_to_string(path).map_err(|source| StartError::TokensFile {
            path: path.clone(),
            source,
        })?;
        tokens.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(Secret::new),
        );
    }
    Ok(tokens)
}

/// Serves the gateway on `listener` until `shutdown` resolves, and MCP on
/// `config.mcp_listen` when set.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), StartError> {
    let mcp = match config.mcp_listen {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|source| StartError::McpBind { addr, source })?,
        ),
        None => None,
    };
    serve_with(config, listener, mcp, shutdown).await
}

/// Serves the gateway on `listener`, and MCP on `mcp` when given, until `shutdown` resolves.
pub async fn serve_with(
    config: Config,
    listener: TcpListener,
    mcp: Option<TcpListener>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), StartError> {
    let mut host = ServiceHost::new(config.limits, &[SERVICE_NAME]).await;
    // The gateway is the door: its callers are authenticated by bearer token, not the
    // internal one, which it sends to the backends.
    host.public();
    let internal = InternalTokens::load(&config.internal)?;
    if internal.is_empty() {
        tracing::info!("no internal token configured; backends must be on loopback");
    }
    let max = config.limits.max_message_bytes;
    let upstreams = Upstreams::connect(&config.upstreams, &internal, max)?;
    let grpc = grpc::GatewayGrpc::new(
        upstreams,
        config.forward_timeout,
        config.subscriber_buffer,
        config.subscriber_grace,
        !config.allow_unauthenticated,
    );
    let server = GatewayServer::new(grpc.clone())
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    let authenticator = if config.allow_unauthenticated {
        // Only `ploke up` sets this, on loopback: its one user's expected state (it would
        // otherwise reach that user as a warning in the TUI), said in the log all the same.
        tracing::info!(
            "gateway serves without authentication: every caller is the admin principal `local`"
        );
        auth::Authenticator::open()
    } else {
        auth::Authenticator::load(auth::Credentials {
            principals_file: config.principals_file.clone(),
            tokens: tokens(&config)?,
            admin_tokens: config.admin_tokens.clone(),
            jwt: config.jwt.clone(),
        })?
    };
    let watch = authenticator.watch(config.credentials_poll);
    let stop = tokio_util::sync::CancellationToken::new();
    let mcp_task = mcp.map(|listener| {
        let endpoint = mcp::http::Endpoint {
            options: mcp::Options {
                max_result_tokens: config.mcp_max_result_tokens,
                workspace: None,
                authenticated: !config.allow_unauthenticated,
            },
            allowed_hosts: config.mcp_allowed_hosts.clone(),
            max_body_bytes: max,
        };
        let backend: Arc<dyn mcp::Backend> = Arc::new(mcp::InProcess::new(grpc.clone()));
        tokio::spawn(mcp::http::serve(
            listener,
            backend,
            authenticator.clone(),
            endpoint,
            stop.clone(),
        ))
    });
    let routes = tonic::service::Routes::new(tower_layer::Layer::layer(
        &auth::AuthLayer::new(authenticator),
        server,
    ));
    host.readiness().set_serving().await;
    let stopping = stop.clone();
    let served = host
        .serve(routes, listener, async move {
            shutdown.await;
            stopping.cancel();
        })
        .await;
    stop.cancel();
    if let Some(task) = mcp_task {
        let _ = task.await;
    }
    if let Some(w) = watch {
        w.abort();
    }
    Ok(served?)
}
