//! The server scaffold every ploke service runs on: `grpc.health.v1` (NOT_SERVING until the
//! service declares itself ready), server reflection v1 and v1alpha, the trace layer, RPC
//! metrics ([`crate::metrics::rpc`]),
//! service-to-service authentication, INVALID_ARGUMENT for undecodable requests, message and
//! concurrency limits, and graceful drain with a deadline.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::service::Routes;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::TraceLayer;
use crate::config::{InternalConfig, LimitsConfig};
use crate::decode_errors::DecodeErrorLayer;
use crate::internal::{Access, InternalAuthLayer, InternalTokens, TokenError, Unprotected};

/// The descriptors of everything a server may serve: every ploke service, health, reflection.
const DESCRIPTOR_SETS: [&[u8]; 4] = [
    ploke_proto::FILE_DESCRIPTOR_SET,
    tonic_health::pb::FILE_DESCRIPTOR_SET,
    tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
    tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
];

/// What every server serves beside its own services.
const EXTRA_SERVICES: [&str; 3] = [
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// The service of a backend's faults ([`crate::faults`]).
const FAULTS_SERVICE: &str = "ploke.runtime.v1.Faults";

/// A server could not start or failed while serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Reflection could not be built from the descriptor sets.
    #[error("building reflection: {0}")]
    Reflection(String),
    /// The transport failed.
    #[error("serving: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The listener's address could not be read.
    #[error("reading the listen address: {0}")]
    Listener(std::io::Error),
    /// The internal tokens could not be used.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// A backend without internal tokens would listen beyond loopback.
    #[error(transparent)]
    Unprotected(#[from] Unprotected),
}

/// Switches the health status of a server's services (and of the whole server, `""`): SERVING
/// while the service is ready ([`Readiness::set_serving`]) and no fault that stops it is raised
/// ([`Readiness::set_fault`]: storage gone, a wedged worker pool), NOT_SERVING otherwise. A
/// fault that only degrades it ([`Readiness::set_degraded`]: an index that cannot be written
/// while searches still answer) leaves it SERVING and is listed with the others.
#[derive(Clone)]
pub struct Readiness {
    reporter: HealthReporter,
    names: Arc<[String]>,
    state: Arc<std::sync::Mutex<ReadyState>>,
}

/// What a raised fault does to the service's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impact {
    /// NOT_SERVING while it lasts: nothing the service serves can work.
    NotServing,
    /// Still SERVING: the service answers, and what the fault stops fails with its own error.
    Degraded,
}

/// One fault raised now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaisedFault {
    /// Its name: `storage`, `index_storage`, `blocking_pool`, ...
    pub name: &'static str,
    /// Why, as the log says it.
    pub reason: String,
    /// What it does to health.
    pub impact: Impact,
}

#[derive(Debug, Default)]
struct ReadyState {
    ready: bool,
    faults: std::collections::BTreeMap<&'static str, (String, Impact)>,
}

impl ReadyState {
    fn serving(&self) -> bool {
        self.ready
            && self
                .faults
                .values()
                .all(|(_, impact)| *impact == Impact::Degraded)
    }
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness")
            .field("names", &self.names)
            .field("faults", &self.faults())
            .finish()
    }
}

impl Readiness {
    async fn set(&self, status: ServingStatus) {
        self.reporter.set_service_status("", status).await;
        for name in self.names.iter() {
            self.reporter.set_service_status(name, status).await;
        }
    }

    /// Applies `change` to the state and reports the status it leads to.
    async fn update(&self, change: impl FnOnce(&mut ReadyState)) {
        let serving = match self.state.lock() {
            Ok(mut state) => {
                change(&mut state);
                state.serving()
            }
            Err(_) => false,
        };
        self.set(if serving {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        })
        .await;
    }

    /// Reports SERVING: the service is ready for traffic (unless a fault is raised).
    pub async fn set_serving(&self) {
        self.update(|s| s.ready = true).await;
    }

    /// Reports NOT_SERVING: not ready, or draining.
    pub async fn set_not_serving(&self) {
        self.update(|s| s.ready = false).await;
    }

    /// Raises (`Some(reason)`) or clears (`None`) the fault `name`; while any such fault is
    /// raised the service reports NOT_SERVING. Transitions are logged.
    pub async fn set_fault(&self, name: &'static str, fault: Option<String>) {
        self.raise(name, Impact::NotServing, fault).await;
    }

    /// Raises (`Some(reason)`) or clears (`None`) the fault `name`, which leaves the service
    /// SERVING: it still answers, and the fault is listed (`ploke.runtime.v1.Faults`, the
    /// `ploke_health_degraded` gauge) until it clears. Transitions are logged.
    pub async fn set_degraded(&self, name: &'static str, fault: Option<String>) {
        self.raise(name, Impact::Degraded, fault).await;
    }

    async fn raise(&self, name: &'static str, impact: Impact, fault: Option<String>) {
        crate::metrics::record::health_fault(self.service_name(), name, impact, fault.is_some());
        self.update(|s| match fault {
            Some(reason) => {
                if s.faults.get(name).map(|(r, _)| r) != Some(&reason) {
                    match impact {
                        Impact::NotServing => {
                            tracing::error!(fault = name, %reason, "not serving until this recovers");
                        }
                        Impact::Degraded => {
                            tracing::error!(fault = name, %reason, "degraded until this recovers");
                        }
                    }
                }
                s.faults.insert(name, (reason, impact));
            }
            None => {
                if s.faults.remove(name).is_some() {
                    tracing::info!(fault = name, "recovered");
                }
            }
        })
        .await;
    }

    /// The first service name of the server (its own service), for metric labels.
    pub(crate) fn service_name(&self) -> &str {
        self.names.first().map_or("", String::as_str)
    }

    /// The faults raised now, by name.
    pub fn faults(&self) -> Vec<RaisedFault> {
        self.state
            .lock()
            .map(|s| {
                s.faults
                    .iter()
                    .map(|(name, (reason, impact))| RaisedFault {
                        name,
                        reason: reason.clone(),
                        impact: *impact,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// One gRPC server being assembled: its health reporter exists (NOT_SERVING) before the
/// service is built, so the service can report readiness when its own start-up is done.
pub struct ServiceHost {
    readiness: Readiness,
    health: tonic_health::pb::health_server::HealthServer<tonic_health::server::HealthService>,
    limits: LimitsConfig,
    access: Access,
}

impl std::fmt::Debug for ServiceHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceHost")
            .field("readiness", &self.readiness)
            .field("limits", &self.limits)
            .field("access", &self.access)
            .finish()
    }
}

impl ServiceHost {
    /// A host for the gRPC services named `names` (e.g. `ploke.rag.v1.RagSearch`), all
    /// NOT_SERVING until [`Readiness::set_serving`]. It serves as a backend without internal
    /// tokens (loopback only) until [`ServiceHost::require_internal`] or
    /// [`ServiceHost::public`] says otherwise.
    pub async fn new(limits: LimitsConfig, names: &[&str]) -> Self {
        let reporter = HealthReporter::new();
        let health = tonic_health::pb::health_server::HealthServer::new(
            tonic_health::server::HealthService::from_health_reporter(reporter.clone()),
        );
        let readiness = Readiness {
            reporter,
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            state: Arc::default(),
        };
        readiness.set_not_serving().await;
        Self {
            readiness,
            health,
            limits,
            access: Access::default(),
        }
    }

    /// Serves as a backend: every call but health and reflection must carry one of the
    /// internal tokens `config` gives (with none: loopback only, unless
    /// `allow_unauthenticated`). Returns the tokens, whose first the service sends upstream.
    pub fn require_internal(
        &mut self,
        config: &InternalConfig,
    ) -> Result<InternalTokens, ServeError> {
        let tokens = InternalTokens::load(config)?;
        self.access = Access::Internal {
            tokens: tokens.clone(),
            allow_unauthenticated: config.allow_unauthenticated,
        };
        Ok(tokens)
    }

    /// Serves anyone who reaches it (the gateway, which authenticates its own callers).
    pub fn public(&mut self) {
        self.access = Access::Public;
    }

    /// The handle that switches health status.
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// The limits the host enforces; services apply `max_message_bytes` to their codecs.
    pub fn limits(&self) -> &LimitsConfig {
        &self.limits
    }

    /// Serves `routes` plus health and reflection on `listener` until `shutdown` resolves, then
    /// reports NOT_SERVING, stops accepting and gives in-flight calls `drain_seconds` to end.
    pub async fn serve(
        self,
        routes: Routes,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ServeError> {
        // A backend also says why it is not serving (behind its internal token); the gateway,
        // open to its callers, does not.
        let faults = matches!(self.access, Access::Internal { .. });
        let own: Vec<&str> = self
            .readiness
            .names
            .iter()
            .map(String::as_str)
            .chain(faults.then_some(FAULTS_SERVICE))
            .collect();
        // Reflection lists exactly what this server serves (the descriptor set holds every
        // ploke service; grpcurl users should not see services of other ports).
        let reflection = || {
            let mut builder = tonic_reflection::server::Builder::configure();
            for set in DESCRIPTOR_SETS {
                builder = builder.register_encoded_file_descriptor_set(set);
            }
            for name in own.iter().copied().chain(EXTRA_SERVICES) {
                builder = builder.with_service_name(name);
            }
            builder
        };
        let reflection_v1 = reflection()
            .build_v1()
            .map_err(|e| ServeError::Reflection(e.to_string()))?;
        let reflection_v1alpha = reflection()
            .build_v1alpha()
            .map_err(|e| ServeError::Reflection(e.to_string()))?;
        let mut routes = routes
            .add_service(self.health)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha);
        if faults {
            routes =
                routes.add_service(crate::faults::FaultsService::server(self.readiness.clone()));
        }

        let bound = listener.local_addr().map_err(ServeError::Listener)?;
        let internal = crate::internal::guard(&self.access, bound)?;
        let local = bound.to_string();
        let service = self.readiness.names.first().cloned().unwrap_or_default();
        let incoming = TcpListenerStream::new(listener).map(|conn| {
            if let Ok(stream) = &conn {
                let _ = stream.set_nodelay(true);
            }
            conn
        });
        let draining = Arc::new(Notify::new());
        let readiness = self.readiness.clone();
        let signal = {
            let draining = draining.clone();
            let service_for_signal = service.clone();
            async move {
                shutdown.await;
                readiness.set_not_serving().await;
                tracing::info!(service = %service_for_signal, "shutdown requested, draining");
                draining.notify_one();
            }
        };
        let metrics = {
            let mut served = own.clone();
            served.extend(EXTRA_SERVICES);
            crate::metrics::rpc::RpcMetricsLayer::new(&served, &DESCRIPTOR_SETS)
        };
        let drain = Duration::from_secs(self.limits.drain_seconds);
        let mut builder = tonic::transport::Server::builder();
        if self.limits.max_connection_age_secs > 0 {
            builder = builder
                .max_connection_age(Duration::from_secs(self.limits.max_connection_age_secs));
        }
        let server = builder
            .layer(TraceLayer)
            .layer(metrics)
            .layer(InternalAuthLayer::new(internal))
            .layer(DecodeErrorLayer)
            .concurrency_limit_per_connection(self.limits.concurrency_per_connection)
            .max_concurrent_streams(Some(self.limits.max_concurrent_streams))
            .add_routes(routes)
            .serve_with_incoming_shutdown(incoming, signal);
        tracing::info!(
            service = %service,
            addr = %local,
            version = crate::build::VERSION,
            commit = crate::build::COMMIT,
            "serving"
        );
        tokio::select! {
            result = server => {
                tracing::info!(service = %service, "server stopped");
                result.map_err(ServeError::from)
            }
            () = async { draining.notified().await; tokio::time::sleep(drain).await } => {
                tracing::warn!(service = %service, seconds = drain.as_secs(), "drain deadline passed, closing remaining calls");
                Ok(())
            }
        }
    }
}
