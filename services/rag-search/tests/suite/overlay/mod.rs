//! Session overlays through the real gRPC server: a developer's changes seen by their session
//! only ([`reads`]), the sync and put rules, bounds, validation, restart and expiry
//! ([`writes`]), a manifest that is not a checkout of the workspace ([`misaligned`]), and who
//! may do what ([`access`]). Principals travel as the gateway sends them
//! (`x-ploke-principal-bin`); the test server has no internal token, so loopback callers are
//! accepted and the header is read.

mod access;
mod misaligned;
mod reads;
mod writes;

use std::path::{Path, PathBuf};

use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::rag::v1::*;
use ploke_runtime::config::PlokeConfig;
use ploke_runtime::principal::{Principal, Role};
use ploke_runtime::shutdown::Shutdown;
use tokio_stream::StreamExt as _;
use tonic::transport::Channel;

pub(super) struct Server {
    pub(super) client: RagSearchClient<Channel>,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<Result<(), ploke_rag_search::StartError>>,
    /// The workspace root as the server sees it (canonical).
    pub(super) root: PathBuf,
}

/// Options of a test server.
#[derive(Default, Clone)]
pub(super) struct Options {
    pub(super) model: bool,
    pub(super) max_bytes: Option<u64>,
    pub(super) max_files: Option<u64>,
}

/// A server over the fixture workspace, indexed: the workspace, the data dir, the server.
pub(super) async fn base(o: Options) -> (tempfile::TempDir, tempfile::TempDir, Server) {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    fixture(ws.path());
    let mut s = start(ws.path(), data.path(), o).await;
    s.index().await;
    (ws, data, s)
}

pub(super) async fn start(workspace: &Path, data: &Path, o: Options) -> Server {
    let mut config = PlokeConfig {
        workspaces: vec![workspace.to_owned()],
        data_dir: data.to_owned(),
        ..PlokeConfig::default()
    };
    config.rag_search.embed_model = o.model.then(model_dir);
    config.rag_search.watch = false;
    config.rag_search.index_on_start = false;
    if let Some(b) = o.max_bytes {
        config.rag_search.overlay_max_bytes = b;
    }
    if let Some(f) = o.max_files {
        config.rag_search.overlay_max_files = f;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = Shutdown::new();
    let task = tokio::spawn(ploke_rag_search::serve(
        ploke_rag_search::Config::from(&config),
        listener,
        shutdown.wait(),
    ));
    Server {
        client: RagSearchClient::connect(url).await.unwrap(),
        shutdown,
        task,
        root: std::fs::canonicalize(workspace).unwrap(),
    }
}

impl Server {
    pub(super) async fn stop(self) {
        drop(self.client);
        self.shutdown.trigger();
        self.task.await.unwrap().unwrap();
    }

    /// Indexes the workspace (as a trusted caller) to the end.
    pub(super) async fn index(&mut self) -> IndexSummary {
        let mut stream = self
            .client
            .index_workspace(IndexWorkspaceRequest::default())
            .await
            .unwrap()
            .into_inner();
        let mut last = None;
        while let Some(p) = stream.next().await {
            last = p.unwrap().summary;
        }
        last.unwrap()
    }

    pub(super) async fn sync(
        &mut self,
        who: &Principal,
        session: &str,
        files: &[(&str, &str)],
    ) -> Result<SyncOverlayResponse, tonic::Status> {
        let request = SyncOverlayRequest {
            session_id: session.into(),
            workspace_root: String::new(),
            files: files
                .iter()
                .map(|(path, text)| ManifestEntry {
                    path: (*path).into(),
                    hash: hash(text),
                })
                .collect(),
        };
        self.client
            .sync_overlay(as_(who, request))
            .await
            .map(|r| r.into_inner())
    }

    pub(super) async fn put(
        &mut self,
        who: &Principal,
        session: &str,
        files: &[(&str, &str, &str)],
    ) -> Result<PutOverlayFilesResponse, tonic::Status> {
        let request = PutOverlayFilesRequest {
            session_id: session.into(),
            workspace_root: String::new(),
            files: files
                .iter()
                .map(|(path, text, expected)| OverlayFile {
                    path: (*path).into(),
                    content: text.as_bytes().to_vec(),
                    expected_hash: (*expected).into(),
                })
                .collect(),
        };
        self.client
            .put_overlay_files(as_(who, request))
            .await
            .map(|r| r.into_inner())
    }

    pub(super) async fn overlay(&mut self, who: &Principal, session: &str) -> Overlay {
        self.client
            .get_overlay(as_(
                who,
                GetOverlayRequest {
                    session_id: session.into(),
                    paths: vec![],
                    all_contents: true,
                },
            ))
            .await
            .unwrap()
            .into_inner()
    }

    /// Canonical paths of a search's hits, best first.
    pub(super) async fn search(
        &mut self,
        who: &Principal,
        session: &str,
        query: &str,
        strategy: Strategy,
    ) -> SearchResponse {
        self.client
            .search(as_(
                who,
                SearchRequest {
                    query: query.into(),
                    strategy: strategy as i32,
                    top_k: 10,
                    session_id: session.into(),
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner()
    }
}

/// `message` as a request from `who`, with the principal header the gateway would send.
pub(super) fn as_<T>(who: &Principal, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    who.write_headers(request.metadata_mut().as_mut());
    request
}

pub(super) fn user(name: &str) -> Principal {
    Principal::everywhere(name, Role::User)
}

pub(super) fn hash(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

/// Canonical paths of hits, best first.
pub(super) fn names(r: &SearchResponse) -> Vec<String> {
    r.hits
        .iter()
        .map(|h| h.part.as_ref().unwrap().canon_path.clone())
        .collect()
}

/// Files of hits.
pub(super) fn files(r: &SearchResponse) -> Vec<String> {
    r.hits
        .iter()
        .map(|h| h.part.as_ref().unwrap().file_path.clone())
        .collect()
}

pub(super) fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

pub(super) const LIB_RS: &str = "pub mod config;\npub mod net;\npub mod old;\npub mod pending;\n\n/// Starts the demo.\npub fn start() {}\n";
pub(super) const CONFIG_RS: &str = "/// Loaded settings.\npub struct Settings {\n    pub retries: u32,\n}\n\nimpl Settings {\n    /// Reads settings from a TOML file.\n    pub fn load_from_file(path: &str) -> Settings {\n        let _ = path;\n        Settings { retries: 3 }\n    }\n}\n";
/// The developer's version of config.rs: `load_from_file` is gone, a new function is there.
pub(super) const CONFIG_RS_DEV: &str = "/// Loaded settings.\npub struct Settings {\n    pub retries: u32,\n}\n\nimpl Settings {\n    /// Warms the widget cache before the first request is served.\n    pub fn frobnicate_widget_cache(&self) -> u32 {\n        self.retries * 2\n    }\n}\n";
pub(super) const NET_RS: &str = "/// Exponential backoff between retries.\npub fn backoff(attempt: u32) -> u64 {\n    100u64 << attempt.min(10)\n}\n";
pub(super) const OLD_RS: &str = "/// Legacy tokenizer kept for old clients.\npub fn legacy_tokenizer_shim() -> u8 {\n    7\n}\n";
pub(super) const PENDING_RS: &str = "/// Computes the parity of a checksum.\npub fn checksum_parity(x: u64) -> bool {\n    x.count_ones() % 2 == 0\n}\n";
pub(super) const PENDING_RS_DEV: &str = "/// Computes the parity of a checksum, quickly.\npub fn checksum_parity(x: u64) -> bool {\n    x & 1 == 0\n}\n";
pub(super) const EXTRA_RS: &str = "/// Charges the quantum flux capacitor to the given level.\npub fn charge_quantum_flux_capacitor(level: u8) -> u8 {\n    level.saturating_add(1)\n}\n";

/// The base: five files.
pub(super) fn fixture(root: &Path) {
    write(root, "src/lib.rs", LIB_RS);
    write(root, "src/config.rs", CONFIG_RS);
    write(root, "src/net.rs", NET_RS);
    write(root, "src/old.rs", OLD_RS);
    write(root, "src/pending.rs", PENDING_RS);
}

/// The developer's checkout: lib.rs and net.rs as the base has them, config.rs changed,
/// old.rs deleted, pending.rs changed (its content never sent), extra.rs new.
pub(super) fn dev_manifest() -> Vec<(&'static str, &'static str)> {
    vec![
        ("src/lib.rs", LIB_RS),
        ("src/config.rs", CONFIG_RS_DEV),
        ("src/net.rs", NET_RS),
        ("src/pending.rs", PENDING_RS_DEV),
        ("src/extra.rs", EXTRA_RS),
    ]
}

/// The real model (scripts/test fetches it and sets PLOKE_EMBED_MODEL).
pub(super) fn model_dir() -> PathBuf {
    std::env::var("PLOKE_EMBED_MODEL")
        .expect("PLOKE_EMBED_MODEL must name the model directory: run ./scripts/test")
        .into()
}
