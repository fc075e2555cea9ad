//! All four services in one process: binds their listeners first, wires each service's
//! upstream URLs to the addresses actually bound, then serves them until stopped. `ploke up`
//! and the end-to-end Sandbox run exactly this. Without a configured internal token the
//! services share a random one made for this process, so that other users of the machine
//! cannot call the loopback backends directly.

use std::net::SocketAddr;

use ploke_runtime::ServiceKind;
use ploke_runtime::config::{PlokeConfig, Secret};
use ploke_runtime::shutdown::Shutdown;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A service of the embedded deployment failed.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// A listener could not be bound.
    #[error("binding {service} on {addr}: {source}")]
    Bind {
        /// Which service.
        service: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The metrics endpoint (`[telemetry] metrics_listen`) could not start.
    #[error(transparent)]
    Metrics(#[from] ploke_runtime::metrics::MetricsError),
    /// A service stopped with an error.
    #[error("{service}: {message}")]
    Service {
        /// Which service.
        service: &'static str,
        /// What it said.
        message: String,
    },
}

/// The addresses the embedded services listen on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addrs {
    /// gateway.
    pub gateway: SocketAddr,
    /// llm-session.
    pub llm_session: SocketAddr,
    /// tool-executor.
    pub tool_executor: SocketAddr,
    /// rag-search.
    pub rag_search: SocketAddr,
}

impl Addrs {
    /// `http://ADDR` of a service.
    pub fn url(&self, service: ServiceKind) -> String {
        let addr = match service {
            ServiceKind::Gateway => self.gateway,
            ServiceKind::LlmSession => self.llm_session,
            ServiceKind::ToolExecutor => self.tool_executor,
            ServiceKind::RagSearch => self.rag_search,
        };
        format!("http://{addr}")
    }
}

/// The running deployment.
#[derive(Debug)]
pub struct Embedded {
    /// Where each service listens.
    pub addrs: Addrs,
    /// The config every service was started with (upstreams rewritten to `addrs`).
    pub config: PlokeConfig,
    /// Where the process serves its metrics (`[telemetry] metrics_listen`; one endpoint for
    /// all four services), if it does.
    pub metrics: Option<SocketAddr>,
    /// Where the gateway serves MCP (`[gateway] mcp_listen`, path `/mcp`), if it does.
    pub mcp: Option<SocketAddr>,
    shutdown: Shutdown,
    tasks: Vec<ServiceTask>,
}

async fn bind(kind: ServiceKind, addr: SocketAddr) -> Result<TcpListener, EmbeddedError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| EmbeddedError::Bind {
            service: kind.binary(),
            addr,
            source,
        })
}

type ServiceTask = (&'static str, JoinHandle<Result<(), String>>);

/// 244 random bits from the OS (two v4 UUIDs), as 64 hex characters.
fn random_token() -> Secret {
    Secret::new(format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    ))
}

/// Spawns one service; if it fails, every other service is stopped too.
fn spawn_service<E: std::fmt::Display>(
    kind: ServiceKind,
    shutdown: &Shutdown,
    serve: impl std::future::Future<Output = Result<(), E>> + Send + 'static,
) -> ServiceTask {
    let shutdown = shutdown.clone();
    let task = tokio::spawn(async move {
        let outcome = serve.await.map_err(|e| e.to_string());
        if outcome.is_err() {
            shutdown.trigger();
        }
        outcome
    });
    (kind.binary(), task)
}

impl Embedded {
    /// Binds every service at the listen address `config` gives it (port 0 = any free port)
    /// and starts them; with no internal token configured, they share a random one.
    pub async fn start(mut config: PlokeConfig) -> Result<Self, EmbeddedError> {
        if config.internal.is_unset() {
            config.internal.tokens = vec![random_token()];
        }
        // One endpoint for the four services of this process, and none unless configured.
        let metrics = ploke_runtime::metrics::serve_configured(config.telemetry.metrics_listen)?;
        let rag_l = bind(ServiceKind::RagSearch, config.rag_search.listen).await?;
        let tools_l = bind(ServiceKind::ToolExecutor, config.tool_executor.listen).await?;
        let session_l = bind(ServiceKind::LlmSession, config.llm_session.listen).await?;
        let gateway_l = bind(ServiceKind::Gateway, config.gateway.listen).await?;
        let mcp_l = match config.gateway.mcp_listen {
            Some(addr) => {
                Some(
                    TcpListener::bind(addr)
                        .await
                        .map_err(|source| EmbeddedError::Bind {
                            service: "the MCP endpoint",
                            addr,
                            source,
                        })?,
                )
            }
            None => None,
        };
        let mcp = mcp_l.as_ref().and_then(|l| l.local_addr().ok());
        config.gateway.mcp_listen = mcp;
        let local = |l: &TcpListener, kind: ServiceKind| {
            l.local_addr().map_err(|source| EmbeddedError::Bind {
                service: kind.binary(),
                addr: config.listen(kind),
                source,
            })
        };
        let addrs = Addrs {
            rag_search: local(&rag_l, ServiceKind::RagSearch)?,
            tool_executor: local(&tools_l, ServiceKind::ToolExecutor)?,
            llm_session: local(&session_l, ServiceKind::LlmSession)?,
            gateway: local(&gateway_l, ServiceKind::Gateway)?,
        };
        for kind in [
            ServiceKind::RagSearch,
            ServiceKind::ToolExecutor,
            ServiceKind::LlmSession,
            ServiceKind::Gateway,
        ] {
            let addr = match kind {
                ServiceKind::RagSearch => addrs.rag_search,
                ServiceKind::ToolExecutor => addrs.tool_executor,
                ServiceKind::LlmSession => addrs.llm_session,
                ServiceKind::Gateway => addrs.gateway,
            };
            config.set_listen(kind, addr);
        }
        config.upstreams.rag_search_url = addrs.url(ServiceKind::RagSearch);
        config.upstreams.tool_executor_url = addrs.url(ServiceKind::ToolExecutor);
        config.upstreams.llm_session_url = addrs.url(ServiceKind::LlmSession);

        let shutdown = Shutdown::new();
        let rag = ploke_rag_search::serve((&config).into(), rag_l, shutdown.wait());
        let tools = ploke_tool_executor::serve((&config).into(), tools_l, shutdown.wait());
        let session = ploke_llm_session::serve((&config).into(), session_l, shutdown.wait());
        let gateway =
            ploke_gateway::serve_with((&config).into(), gateway_l, mcp_l, shutdown.wait());
        let tasks = vec![
            spawn_service(ServiceKind::RagSearch, &shutdown, rag),
            spawn_service(ServiceKind::ToolExecutor, &shutdown, tools),
            spawn_service(ServiceKind::LlmSession, &shutdown, session),
            spawn_service(ServiceKind::Gateway, &shutdown, gateway),
        ];
        Ok(Self {
            addrs,
            config,
            metrics,
            mcp,
            shutdown,
            tasks,
        })
    }

    /// A handle that stops every service when triggered.
    pub fn shutdown_handle(&self) -> Shutdown {
        self.shutdown.clone()
    }

    /// Stops every service, waits for them to drain and reports the first failure.
    pub async fn stop(self) -> Result<(), EmbeddedError> {
        self.shutdown.trigger();
        self.wait().await
    }

    /// Waits until every service has stopped (after [`Embedded::shutdown_handle`] fired, or a
    /// failure); reports the first failure.
    pub async fn wait(self) -> Result<(), EmbeddedError> {
        let mut first = None;
        for (service, task) in self.tasks {
            let outcome = match task.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(message)) => Err(message),
                Err(join) => Err(format!("task failed: {join}")),
            };
            if let Err(message) = outcome {
                tracing::error!(service, %message, "service stopped with an error");
                first.get_or_insert(EmbeddedError::Service { service, message });
            }
        }
        first.map_or(Ok(()), Err)
    }
}
