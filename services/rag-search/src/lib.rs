//! ploke rag-search: owns the code index of one or more workspaces and answers searches and
//! context requests. The domain ([`service`]) knows nothing of gRPC; [`grpc`] adapts it.

pub mod bm25;
pub mod context;
pub mod embed;
mod error;
pub mod fusion;
pub mod git;
mod grpc;
pub mod index;
pub mod names;
pub mod parse;
pub mod quotes;
pub mod rank;
pub mod record;
pub mod scan;
pub mod service;
pub mod tokenize;
pub mod tokens;
pub mod vectors;
pub mod watch;

use std::path::PathBuf;

use ploke_proto::rag::v1::rag_search_server::RagSearchServer;
use ploke_runtime::config::{EmbeddingConfig, InternalConfig, LimitsConfig, PlokeConfig};
use ploke_runtime::server::{ServeError, ServiceHost};
use ploke_runtime::workspaces::Workspaces;
use tokio::net::TcpListener;

pub use error::RagError;

/// The gRPC service name.
pub const SERVICE_NAME: &str = "ploke.rag.v1.RagSearch";

/// Longest time between two sweeps for idle overlays.
const OVERLAY_SWEEP_MAX: std::time::Duration = std::time::Duration::from_secs(60);

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
    /// BM25 boosts and hybrid fusion.
    pub retrieval: service::Retrieval,
    /// Watch workspaces and refresh changed files.
    pub watch: bool,
    /// Index every workspace in the background at start.
    pub index_on_start: bool,
    /// Fetch git workspaces this often (None = never on its own).
    pub git_poll: Option<std::time::Duration>,
    /// Where git workspaces are cloned.
    pub repos_dir: PathBuf,
    /// A remote embeddings endpoint (`[embedding]`), instead of a local model.
    pub embedding: Option<EmbeddingConfig>,
    /// The internal tokens callers must present.
    pub internal: InternalConfig,
    /// Bounds on sessions' overlays.
    pub overlays: service::OverlayLimits,
    /// Tokens of a query the local model embeds.
    pub query_max_tokens: usize,
}

impl From<&PlokeConfig> for Config {
    fn from(c: &PlokeConfig) -> Self {
        Self {
            workspaces: c.workspaces.clone(),
            data_dir: c.data_dir.clone(),
            embed_model: c.rag_search.embed_model.clone(),
            limits: c.limits,
            retrieval: service::Retrieval {
                boosts: bm25::Boosts::default(),
                prior: rank::LengthPrior::default(),
                rrf: fusion::Rrf {
                    k: c.rag_search.rrf_k,
                    bm25_weight: c.rag_search.bm25_weight,
                    dense_weight: c.rag_search.dense_weight,
                    name_weight: c.rag_search.name_weight,
                    lexical_top: c.rag_search.lexical_top,
                },
                skip_dense_when_named: c.rag_search.skip_dense_when_named,
            },
            watch: c.rag_search.watch,
            index_on_start: c.rag_search.index_on_start,
            repos_dir: c
                .rag_search
                .repos_dir
                .clone()
                .unwrap_or_else(|| c.data_dir.join("repos")),
            git_poll: (c.rag_search.git_poll_secs > 0)
                .then(|| std::time::Duration::from_secs(c.rag_search.git_poll_secs)),
            embedding: c.embedding.clone(),
            internal: c.internal.clone(),
            query_max_tokens: c.rag_search.query_max_tokens as usize,
            overlays: service::OverlayLimits {
                max_bytes: c.rag_search.overlay_max_bytes,
                max_files: c.rag_search.overlay_max_files,
                max_per_principal: c.rag_search.overlay_max_per_principal,
                idle: (c.rag_search.overlay_idle_secs > 0)
                    .then(|| std::time::Duration::from_secs(c.rag_search.overlay_idle_secs)),
            },
        }
    }
}

/// rag-search could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration contradicts itself.
    #[error("{0}")]
    Config(&'static str),
    /// A configured workspace is not a directory that can be read.
    #[error(
        "workspace {root}: {reason} (configured by --workspace, by PLOKE_WORKSPACES with `:` between roots, or by `workspaces` in ploke.toml)"
    )]
    Workspace {
        /// The root as configured.
        root: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The embedding model could not be loaded.
    #[error(transparent)]
    Embed(#[from] embed::EmbedError),
    /// A persisted index could not be opened.
    #[error(transparent)]
    Index(#[from] index::IndexError),
    /// The start-up task failed.
    #[error("opening the indexes: {0}")]
    Task(String),
    /// Serving failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Serves rag-search on `listener` until `shutdown` resolves. Health is NOT_SERVING until every
/// workspace's persisted index is open.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), StartError> {
    if config.embed_model.is_some() && config.embedding.is_some() {
        return Err(StartError::Config(
            "both a local model (--embed-model) and an [embedding] endpoint are configured; \
             keep one",
        ));
    }
    let remote = match &config.embedding {
        Some(c) => {
            let e = embed::Embedder::remote(c).await?;
            tracing::info!(model = e.name(), dims = e.dims(), url = %c.base_url, "embedding endpoint connected");
            Some(std::sync::Arc::new(e))
        }
        None => None,
    };
    let mut host = ServiceHost::new(config.limits, &[SERVICE_NAME]).await;
    host.require_internal(&config.internal)?;
    if let Err((root, reason)) = ploke_runtime::workspaces::check_roots(&config.workspaces) {
        return Err(StartError::Workspace {
            root: root.display().to_string(),
            reason,
        });
    }
    let workspaces = Workspaces::new(&config.workspaces);
    let data_dir = config.data_dir.clone();
    let embed_model = config.embed_model.clone();
    let query_tokens = config.query_max_tokens;
    let retrieval = config.retrieval;
    let service = tokio::task::spawn_blocking(move || {
        let embedder = match &embed_model {
            Some(dir) => {
                let e = embed::Embedder::load(dir)?.with_query_tokens(query_tokens);
                tracing::info!(model = e.name(), dims = e.dims(), "embedding model loaded");
                Some(std::sync::Arc::new(e))
            }
            None => remote,
        };
        Ok::<_, StartError>(service::RagService::open(
            workspaces, &data_dir, embedder, retrieval,
        )?)
    })
    .await
    .map_err(|e| StartError::Task(e.to_string()))??
    .with_repos_dir(config.repos_dir.clone())
    .with_overlay_limits(config.overlays)
    .with_pool(config.limits.blocking_pool())
    .with_readiness(host.readiness());
    let _watcher = if config.watch {
        match watch::spawn(service.clone(), service.roots(), watch::DEBOUNCE) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(error = %e, "file watcher unavailable; use RefreshFiles");
                None
            }
        }
    } else {
        None
    };
    let max = config.limits.max_message_bytes;
    let _pool_watch = service
        .pool()
        .watch(host.readiness(), ploke_runtime::blocking::WATCH_PERIOD);
    let closing = service.clone();
    let server = RagSearchServer::new(grpc::RagSearchGrpc::new(service, max))
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    // Ready at once: searches answer from each persisted index while the runs bring them up
    // to date (and from an empty one, saying `indexing`, on a first start).
    let background = if config.index_on_start {
        closing.index_in_background()
    } else {
        Vec::new()
    };
    let clones = config.git_poll.map(|period| closing.follow_clones(period));
    // Idle overlays are swept a few times per idle period (at least every minute).
    let sweep = config.overlays.idle.map(|idle| {
        let period = (idle / 4).clamp(std::time::Duration::from_secs(1), OVERLAY_SWEEP_MAX);
        closing.expire_overlays_every(period)
    });
    host.readiness().set_serving().await;
    let served = host
        .serve(tonic::service::Routes::new(server), listener, shutdown)
        .await;
    drop(_watcher);
    for task in background.into_iter().chain(clones).chain(sweep) {
        task.abort();
    }
    // Release the index locks now, not when the last clone of the service goes away, so
    // that a new instance in this process can open the same indexes at once.
    closing.close();
    Ok(served?)
}
