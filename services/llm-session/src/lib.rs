//! ploke llm-session: owns sessions, the request loop against the model provider, parallel
//! tool execution and the durable per-session event log. The domain ([`service`]) knows
//! nothing of gRPC; [`grpc`] adapts it.

pub mod bounds;
mod error;
pub mod events;
mod grpc;
pub mod provider;
pub mod service;
pub mod store;
pub mod turn;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use ploke_proto::session::v1::llm_session_server::LlmSessionServer;
use ploke_runtime::config::{
    InternalConfig, LimitsConfig, PlokeConfig, ProviderConfig, SessionConfig,
};
use ploke_runtime::server::{ServeError, ServiceHost};
use ploke_runtime::storage_health::StorageState;
use ploke_runtime::workspaces::{FOLLOW_PERIOD, RagSearchSource, Workspaces};
use tokio::net::TcpListener;

pub use error::SessionError;

/// The gRPC service name.
pub const SERVICE_NAME: &str = "ploke.session.v1.LlmSession";

/// What llm-session needs from `ploke.toml`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Workspaces sessions may use; the first is the default.
    pub workspaces: Vec<PathBuf>,
    /// Where sessions and events are stored.
    pub data_dir: PathBuf,
    /// tool-executor URL.
    pub tool_executor_url: String,
    /// rag-search URL (where workspaces added at run time are listed).
    pub rag_search_url: String,
    /// Providers by name.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Turn behaviour.
    pub session: SessionConfig,
    /// Server limits.
    pub limits: LimitsConfig,
    /// The internal tokens callers must present (the first is sent to tool-executor).
    pub internal: InternalConfig,
    /// `[storage] url`: sessions in this shared PostgreSQL database instead of SQLite under
    /// the data dir.
    pub storage_url: Option<String>,
    /// Turn leases in the shared database.
    pub lease: store::postgres::Lease,
}

impl From<&PlokeConfig> for Config {
    fn from(c: &PlokeConfig) -> Self {
        Self {
            workspaces: c.workspaces.clone(),
            data_dir: c.data_dir.clone(),
            tool_executor_url: c.upstreams.tool_executor_url.clone(),
            rag_search_url: c.upstreams.rag_search_url.clone(),
            providers: c.providers.clone(),
            session: c.session.clone(),
            limits: c.limits,
            internal: c.internal.clone(),
            storage_url: c.storage.postgres_url().map(str::to_owned),
            lease: store::postgres::Lease::default(),
        }
    }
}

/// llm-session could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// An upstream URL is invalid.
    #[error(transparent)]
    Upstream(#[from] ploke_runtime::client::ChannelError),
    /// The tool registry is broken (a build defect).
    #[error(transparent)]
    Registry(#[from] ploke_proto::registry::RegistryError),
    /// The session store could not be opened.
    #[error(transparent)]
    Open(#[from] ploke_runtime::sqlite::OpenError),
    /// The shared session database could not be opened.
    #[error(transparent)]
    OpenShared(#[from] ploke_runtime::postgres::PgOpenError),
    /// The session store could not be recovered.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// Recovering interrupted turns failed.
    #[error(transparent)]
    Recover(#[from] SessionError),
    /// Serving failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Serves llm-session on `listener` until `shutdown` resolves.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), StartError> {
    let mut host = ServiceHost::new(config.limits, &[SERVICE_NAME]).await;
    let tokens = host.require_internal(&config.internal)?;
    let channel = ploke_runtime::client::internal_channel(&config.tool_executor_url, &tokens)?;
    let registry = ploke_proto::registry::ToolRegistry::global()?;
    let (store, database) = store::open(&config).await?;
    let max = config.limits.max_message_bytes;
    let deps = turn::TurnDeps {
        log: events::EventLog::new(store.clone(), bounds::EventBounds::for_transport(max)),
        store: store.clone(),
        tools: turn::tools::ToolRunner::new(
            channel,
            registry,
            (
                Duration::from_millis(config.session.tool_timeout_ms),
                config.session.tool_results,
            ),
            max,
        ),
        settings: config.session.clone(),
    };
    // Workspaces added on rag-search at run time can have sessions too.
    let rag_channel = ploke_runtime::client::internal_channel(&config.rag_search_url, &tokens)?;
    let workspaces = Workspaces::new(&config.workspaces)
        .with_source(std::sync::Arc::new(RagSearchSource::new(rag_channel)));
    let following = workspaces.follow(FOLLOW_PERIOD);
    let service = service::SessionService::new(
        workspaces,
        config.providers.clone(),
        config.session.clone(),
        store,
        deps,
    );
    service.recover().await?;
    turn::count_from_zero(config.providers.keys().map(String::as_str));
    // With replicas, turns of a replica that died are ended by the others once their lease
    // expires, and cancels for this replica's turns arrive through the store.
    let replicas = database.shared().then(|| {
        let reaper = service.clone();
        let period = config.lease.ttl;
        let cancels = service.clone();
        (
            tokio::spawn(async move {
                let mut ticks = tokio::time::interval(period);
                ticks.tick().await;
                loop {
                    ticks.tick().await;
                    if let Err(e) = reaper.recover().await {
                        tracing::warn!(error = %e, "ending turns of replicas that are gone failed");
                    }
                }
            }),
            tokio::spawn(async move { cancels.follow_remote_cancels().await }),
        )
    });
    // Idle sessions go after `[session] retention_days`: at start, then every hour (every
    // replica does it; each session is deleted by one).
    let expiring = (config.session.retention_days > 0).then(|| {
        let expirer = service.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(EXPIRE_PERIOD);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(e) = expirer.expire(std::time::SystemTime::now()).await {
                    tracing::warn!(error = %e, "deleting idle sessions failed");
                }
            }
        })
    });
    let stopping = service.clone();
    let recovered = service.clone();
    let server = LlmSessionServer::new(grpc::LlmSessionGrpc::new(service))
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    host.readiness().set_serving().await;
    // Health follows storage; turn ends held while it was broken are written when it recovers.
    let monitor = database.monitor(host.readiness(), STORAGE_PROBE_PERIOD);
    let mut storage = database.health().subscribe();
    let flusher = tokio::spawn(async move {
        while storage.changed().await.is_ok() {
            let healthy = *storage.borrow_and_update() == StorageState::Healthy;
            if healthy {
                recovered.flush_pending().await;
            }
        }
    });
    let served = host
        .serve(tonic::service::Routes::new(server), listener, async move {
            shutdown.await;
            // No more probing: the server drains.
            drop(monitor);
            flusher.abort();
            if let Some(task) = following {
                task.abort();
            }
            if let Some(task) = expiring {
                task.abort();
            }
            if let Some((reaper, cancels)) = replicas {
                reaper.abort();
                cancels.abort();
            }
            stopping.shutdown().await;
        })
        .await;
    // Releases the database's lock for whoever opens it next (a restart in this process).
    database.close().await;
    Ok(served?)
}

/// How often idle sessions are looked for (with `[session] retention_days`).
const EXPIRE_PERIOD: Duration = Duration::from_secs(3600);

/// How often the session store's file is checked (and, while broken, probed with a write).
const STORAGE_PROBE_PERIOD: Duration = Duration::from_secs(1);
