//! The body of every service binary's `main`: the tokio runtime, telemetry, the metrics
//! endpoint when configured, bind the listen address, serve until SIGTERM or Ctrl-C, flush
//! telemetry, and exit even when blocking work is still stuck (a read on a hung file system
//! must not keep the process alive).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::config::{PlokeConfig, ServiceKind};
use crate::telemetry::TelemetryError;

/// A service binary failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Telemetry could not start.
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
    /// The metrics endpoint could not start.
    #[error(transparent)]
    Metrics(#[from] crate::metrics::MetricsError),
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

/// Most threads tokio may start for blocking work: the services bound their own blocking work
/// with [`crate::blocking::BlockingPool`]; this is the backstop for everything else.
pub const MAX_BLOCKING_THREADS: usize = 64;

/// How long the end of `main` waits for blocking work still running before the process exits
/// without it.
pub const EXIT_GRACE: Duration = Duration::from_secs(1);

/// Runs `future` to completion on a multi-threaded tokio runtime, then shuts the runtime down
/// giving blocking work at most [`EXIT_GRACE`]: unlike `#[tokio::main]`, whose runtime waits
/// for every blocking thread, a stuck read cannot keep the process from exiting.
pub fn block_on<F: Future>(future: F) -> std::io::Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()?;
    let out = runtime.block_on(future);
    runtime.shutdown_timeout(EXIT_GRACE);
    Ok(out)
}

/// The whole `main` of a service binary: `main_async` on [`block_on`]. A failure is said once,
/// as a log line in the process's format (through its log when telemetry had started, else
/// through one made for it: JSON with `PLOKE_LOG_FORMAT=json` or `--log-format json`, so that a
/// log pipeline parses a failed start like any other line), and the process exits with 1.
pub fn main<E: AsRef<dyn std::error::Error + Send + Sync>>(
    main_async: impl Future<Output = Result<(), E>>,
) -> std::process::ExitCode {
    let error = match block_on(main_async) {
        Ok(Ok(())) => return std::process::ExitCode::SUCCESS,
        // Each cause once: a bind error's own text already ends with the OS error.
        Ok(Err(e)) => {
            let e: &(dyn std::error::Error + 'static) = e.as_ref();
            crate::text::with_causes(crate::text::chain(e))
        }
        Err(e) => format!("starting the async runtime: {e}"),
    };
    let log = || tracing::error!(%error, "service stopped");
    if tracing::dispatcher::has_been_set() {
        log();
    } else {
        let json = std::env::var("PLOKE_LOG_FORMAT").is_ok_and(|v| v == "json")
            || std::env::args()
                .collect::<Vec<_>>()
                .windows(2)
                .any(|w| w[0] == "--log-format" && w[1] == "json")
            || std::env::args().any(|a| a == "--log-format=json");
        let text = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(crate::telemetry::stderr_wants_colour())
            .with_target(false);
        match json {
            true => tracing::subscriber::with_default(text.json().finish(), log),
            false => tracing::subscriber::with_default(text.finish(), log),
        }
    }
    std::process::ExitCode::FAILURE
}

/// Runs `kind` with `config`: `serve(config, listener, shutdown)` is the service's `serve`.
/// With `[telemetry] metrics_listen` set, the process serves its metrics there first.
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
    PlokeConfig::warn_unknown_process_env();
    crate::metrics::serve_configured(config.telemetry.metrics_listen)?;
    let addr = config.listen(kind);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| RunError::Bind { addr, source })?;
    let result = serve(config, listener, Box::pin(crate::shutdown::signal())).await;
    telemetry.shutdown();
    result.map_err(|e| RunError::Serve(Box::new(e)))
}
