//! ploke gateway: the only door for clients. Authenticates with bearer tokens, forwards
//! commands to llm-session, tool-executor and rag-search with deadlines and the caller's trace
//! and correlation, relays server streams, and reports the health of the system. Stateless.

mod forward;
mod grpc;
mod relay;
mod upstreams;

use std::path::PathBuf;
use std::time::Duration;

use ploke_proto::gateway::v1::gateway_server::GatewayServer;
use ploke_runtime::auth::BearerAuth;
use ploke_runtime::config::{InternalConfig, LimitsConfig, PlokeConfig, Secret, UpstreamsConfig};
use ploke_runtime::internal::{InternalTokens, TokenError};
use ploke_runtime::server::{ServeError, ServiceHost};
use tokio::net::TcpListener;

pub use upstreams::Upstreams;

/// The gRPC service name.
pub const SERVICE_NAME: &str = "ploke.gateway.v1.Gateway";

/// What the gateway needs from `ploke.toml`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the services are.
    pub upstreams: UpstreamsConfig,
    /// Accepted bearer tokens (`PLOKE_GATEWAY_TOKENS`).
    pub tokens: Vec<Secret>,
    /// Tokens that may also administer (`PLOKE_GATEWAY_ADMIN_TOKENS`).
    pub admin_tokens: Vec<Secret>,
    /// File with one more token per line.
    pub tokens_file: Option<PathBuf>,
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
}

impl From<&PlokeConfig> for Config {
    fn from(c: &PlokeConfig) -> Self {
        Self {
            upstreams: c.upstreams.clone(),
            tokens: c.gateway.tokens.clone(),
            admin_tokens: c.gateway.admin_tokens.clone(),
            tokens_file: c.gateway.tokens_file.clone(),
            allow_unauthenticated: c.gateway.allow_unauthenticated,
            forward_timeout: Duration::from_secs(30),
            subscriber_buffer: c.gateway.subscriber_buffer,
            subscriber_grace: Duration::from_millis(c.gateway.subscriber_grace_ms),
            limits: c.limits,
            internal: c.internal.clone(),
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

/// Serves the gateway on `listener` until `shutdown` resolves.
pub async fn serve(
    config: Config,
    listener: TcpListener,
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
    let upstreams = Upstreams::connect(&config.upstreams, &internal)?;
    let max = config.limits.max_message_bytes;
    let server = GatewayServer::new(grpc::GatewayGrpc::new(
        upstreams,
        config.forward_timeout,
        config.subscriber_buffer,
        config.subscriber_grace,
    ))
    .max_decoding_message_size(max)
    .max_encoding_message_size(max);
    let routes = if config.allow_unauthenticated {
        tracing::warn!("gateway serves without authentication");
        // The one user of an unauthenticated (loopback) gateway administers it too.
        tonic::service::Routes::new(tonic::service::interceptor::InterceptedService::new(
            server,
            |mut request: tonic::Request<()>| {
                request
                    .extensions_mut()
                    .insert(ploke_runtime::auth::Caller { admin: true });
                Ok(request)
            },
        ))
    } else {
        let tokens = tokens(&config)?;
        if tokens.is_empty() && config.admin_tokens.is_empty() {
            tracing::warn!("no gateway tokens configured: every call will be refused");
        }
        tonic::service::Routes::new(tonic::service::interceptor::InterceptedService::new(
            server,
            BearerAuth::new(tokens).with_admins(config.admin_tokens.clone()),
        ))
    };
    host.readiness().set_serving().await;
    Ok(host.serve(routes, listener, shutdown).await?)
}
