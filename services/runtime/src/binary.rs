//! The body of every service binary's `main`: telemetry, bind the listen address, serve until
//! SIGTERM or Ctrl-C, flush telemetry.

use std::future::Future;
use std::net::SocketAddr;

use tokio::net::TcpListener;

use crate::config::{PlokeConfig, ServiceKind};
use crate::telemetry::TelemetryError;

/// A service binary failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Telemetry could not start.
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
    /// The listen address could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The service failed.
    #[error(transparent)]
    Serve(Box<dyn std::error::Error + Send + Sync>),
}

/// Runs `kind` with `config`: `serve(config, listener, shutdown)` is the service's `serve`.
pub async fn run<F, Fut, E>(
    kind: ServiceKind,
    config: PlokeConfig,
    serve: F,
) -> Result<(), RunError>
where
    F: FnOnce(PlokeConfig, TcpListener, crate::shutdown::SignalFuture) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    let telemetry = crate::telemetry::init(kind.binary(), &config.telemetry)?;
    let addr = config.listen(kind);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| RunError::Bind { addr, source })?;
    let result = serve(config, listener, Box::pin(crate::shutdown::signal())).await;
    telemetry.shutdown();
    result.map_err(|e| RunError::Serve(Box::new(e)))
}
