//! Prometheus metrics, one endpoint per process: [`serve`] installs the process's one
//! recorder (the `metrics` facade with `metrics-exporter-prometheus`) and serves its text
//! exposition at `GET /metrics` on the address `[telemetry] metrics_listen` names. Until then
//! every recording call goes to the facade's no-op recorder and nothing is bound.
//!
//! The endpoint belongs to the process, not to a service: when `ploke up` runs four services
//! that are all told the same address, the first [`serve`] binds it and the others find it
//! served already; a different second address is refused ([`MetricsError::Elsewhere`]). The
//! endpoint runs on a thread of its own, so it outlives whichever runtime started it and keeps
//! answering while the services' runtimes are busy.
//!
//! What is recorded: [`rpc`] (every RPC, by the shared server stack) and [`record`] (the
//! domain metrics the services report). `docs/runtime.md` lists every metric.

pub mod record;
pub mod rpc;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Histogram buckets, in seconds, for every `*_seconds` histogram: RPC latencies from a
/// millisecond up, and the minutes an index of a large workspace or a long event stream takes.
pub const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 1800.0,
];

/// How often histograms are folded and idle data dropped, besides at every scrape.
const UPKEEP_PERIOD: Duration = Duration::from_secs(5);

/// The content type of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address could not be bound.
    #[error("binding the metrics endpoint {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// This process already serves its metrics at another address.
    #[error(
        "this process already serves metrics at {serving}; one endpoint per process, not also at {requested}"
    )]
    Elsewhere {
        /// Where the endpoint is.
        serving: SocketAddr,
        /// What was asked for.
        requested: SocketAddr,
    },
    /// Another metrics recorder was installed in this process first.
    #[error("installing the metrics recorder: {0}")]
    Recorder(String),
    /// The endpoint's thread could not start.
    #[error("starting the metrics endpoint: {0}")]
    Thread(std::io::Error),
}

/// The running endpoint: the address it was asked for and the one it is bound to.
#[derive(Debug, Clone, Copy)]
struct Endpoint {
    requested: SocketAddr,
    bound: SocketAddr,
}

impl Endpoint {
    /// Whether a request for `addr` is this endpoint (port 0 asks for any port).
    fn answers(&self, addr: SocketAddr) -> bool {
        addr == self.requested
            || addr == self.bound
            || (addr.port() == 0 && addr.ip() == self.requested.ip())
    }
}

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
static ENDPOINT: Mutex<Option<Endpoint>> = Mutex::new(None);

/// The process's recorder, installed on first use.
fn handle() -> Result<&'static PrometheusHandle, MetricsError> {
    if let Some(handle) = HANDLE.get() {
        return Ok(handle);
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets(SECONDS_BUCKETS)
        .map_err(|e| MetricsError::Recorder(e.to_string()))?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|e| MetricsError::Recorder(e.to_string()))?;
    record::describe();
    Ok(HANDLE.get_or_init(|| handle))
}

/// Whether this process records metrics (its endpoint was started): recording sites return at
/// once when it does not, without building labels.
pub fn enabled() -> bool {
    HANDLE.get().is_some()
}

/// The process's metrics in the Prometheus text format; `None` until [`serve`] installed the
/// recorder.
pub fn render() -> Option<String> {
    HANDLE.get().map(PrometheusHandle::render)
}

/// Where this process serves its metrics, if it does.
pub fn serving() -> Option<SocketAddr> {
    ENDPOINT.lock().ok().and_then(|e| e.map(|e| e.bound))
}

/// Serves this process's metrics at `GET /metrics` on `addr` (port 0 = any free port) for
/// the rest of the process, and returns the bound address. Asking again for the address
/// already served (or for port 0 on its IP) returns it without binding anything; asking for
/// another is [`MetricsError::Elsewhere`].
pub fn serve(addr: SocketAddr) -> Result<SocketAddr, MetricsError> {
    let mut endpoint = ENDPOINT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(running) = *endpoint {
        return if running.answers(addr) {
            Ok(running.bound)
        } else {
            Err(MetricsError::Elsewhere {
                serving: running.bound,
                requested: addr,
            })
        };
    }
    let handle = handle()?;
    let listener =
        std::net::TcpListener::bind(addr).map_err(|source| MetricsError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .and_then(|bound| listener.set_nonblocking(true).map(|()| bound))
        .map_err(|source| MetricsError::Bind { addr, source })?;
    std::thread::Builder::new()
        .name("ploke-metrics".to_owned())
        .spawn(move || run(listener, handle))
        .map_err(MetricsError::Thread)?;
    tracing::info!(addr = %bound, "serving metrics");
    record::build_info(crate::build::VERSION, crate::build::COMMIT);
    *endpoint = Some(Endpoint {
        requested: addr,
        bound,
    });
    Ok(bound)
}

/// [`serve`] when `addr` is set: what every binary and `ploke up` call with
/// `[telemetry] metrics_listen`.
pub fn serve_configured(addr: Option<SocketAddr>) -> Result<Option<SocketAddr>, MetricsError> {
    addr.map(serve).transpose()
}

/// The endpoint's thread: a runtime of its own answering scrapes and running upkeep.
fn run(listener: std::net::TcpListener, handle: &'static PrometheusHandle) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "metrics endpoint runtime did not start");
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(listener) => listener,
            Err(e) => {
                tracing::error!(error = %e, "metrics endpoint listener unusable");
                return;
            }
        };
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(UPKEEP_PERIOD);
            loop {
                ticks.tick().await;
                handle.run_upkeep();
            }
        });
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics endpoint accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| async move {
                    Ok::<_, Infallible>(respond(&req, handle))
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await
                {
                    tracing::debug!(error = %e, "metrics connection ended");
                }
            });
        }
    });
}

/// `GET /metrics` (or `HEAD`): the exposition; anything else: 404 or 405.
fn respond<B>(req: &http::Request<B>, handle: &PrometheusHandle) -> http::Response<Full<Bytes>> {
    let plain = |status: http::StatusCode, text: &'static str| {
        let mut response = http::Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *response.status_mut() = status;
        response
    };
    if req.uri().path() != "/metrics" {
        return plain(
            http::StatusCode::NOT_FOUND,
            "not found; metrics are at /metrics\n",
        );
    }
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return plain(http::StatusCode::METHOD_NOT_ALLOWED, "use GET\n");
    }
    let mut response = http::Response::new(Full::new(Bytes::from(handle.render())));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(CONTENT_TYPE),
    );
    response
}
