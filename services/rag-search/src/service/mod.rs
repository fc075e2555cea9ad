//! rag-search's domain: one [`WorkspaceIndex`] per configured workspace, opened at start-up
//! from disk; indexing runs on blocking threads and reports progress; searches, context
//! assembly, snippets, lookups ([`read`]) and refreshes run against the persisted index, and
//! through a session's overlay ([`overlay`]) when they name one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use ploke_runtime::blocking::{BlockingPool, PoolSize};
use ploke_runtime::metrics::record;
use ploke_runtime::server::Readiness;
use ploke_runtime::workspaces::Workspaces;

use crate::bm25::Boosts;
use crate::embed::Embedder;
use crate::error::RagError;
use crate::fusion::Rrf;
use crate::index::{DenseSpec, Guarded, IndexError, Summary, WorkspaceIndex, workspace_key};
use crate::rank::LengthPrior;

mod overlay;
mod paths;
mod read;
pub use read::FilePage;
mod recovery;
mod registry;
mod runs;
mod slot;
use slot::Slot;
mod types;
mod workspaces;

pub use overlay::{
    Entry as OverlayEntryState, ManifestFile, OverlayEntry, OverlayInfo, OverlayLimits, OverlayPut,
    Put, Synced, check_session_id,
};
pub use paths::check_relative;

pub use registry::GitOrigin;
pub use types::{
    IndexState, LookupTarget, Refreshed, SearchHit, SearchOutcome, SearchQuery, Snippet,
    SnippetStatus, SpanRequest, Status, Strategy,
};
pub use workspaces::{NewWorkspace, WorkspaceInfo};

/// The rag-search domain service.
#[derive(Clone)]
pub struct RagService {
    workspaces: Workspaces,
    slots: Arc<RwLock<HashMap<PathBuf, Arc<Slot>>>>,
    /// How to open the index of a workspace added at run time.
    opening: Opening,
    /// Workspaces added at run time, as persisted.
    registry: Arc<tokio::sync::Mutex<registry::Registry>>,
    /// Roots added (true) or removed (false), for the watcher.
    changes: tokio::sync::broadcast::Sender<(PathBuf, bool)>,
    embedder: Option<Arc<Embedder>>,
    rrf: Rrf,
    skip_dense_when_named: bool,
    refreshed: tokio::sync::broadcast::Sender<Refreshed>,
    pool: BlockingPool,
    readiness: Option<Readiness>,
    /// Sessions' overlays over the workspaces.
    overlays: Arc<overlay::Overlays>,
    overlay_limits: OverlayLimits,
    /// Workspaces indexed again after a storage fault.
    recovery: Arc<recovery::Recovery>,
}

/// What opening a workspace's index takes.
#[derive(Debug, Clone)]
struct Opening {
    data_dir: PathBuf,
    retrieval: Retrieval,
    /// Where git workspaces are cloned.
    repos_dir: PathBuf,
}

impl Opening {
    /// Opens (or creates) the index of `root` under `data_dir/index`.
    fn open(&self, root: &Path, embedder: Option<&Embedder>) -> Result<Slot, IndexError> {
        let index = self.open_index(root, embedder)?;
        let state = if index.last_indexed_at().is_some() {
            IndexState::Ready
        } else {
            IndexState::NotIndexed
        };
        tracing::info!(root = %root.display(), items = index.item_count(), "workspace index opened");
        Ok(Slot::new(index, state))
    }

    /// The index of `root` in its directory, opened or created.
    fn open_index(
        &self,
        root: &Path,
        embedder: Option<&Embedder>,
    ) -> Result<WorkspaceIndex, IndexError> {
        let dir = self.index_dir(root);
        let dense = embedder.map(|e| DenseSpec {
            model: e.name(),
            dims: e.dims(),
        });
        let r = &self.retrieval;
        WorkspaceIndex::open(root, &dir, (r.boosts, r.prior), dense)
    }

    /// Where the index of `root` lives.
    fn index_dir(&self, root: &Path) -> PathBuf {
        self.data_dir.join("index").join(workspace_key(root))
    }
}

/// How rag-search retrieves.
#[derive(Debug, Clone, Copy, Default)]
pub struct Retrieval {
    /// BM25 field boosts.
    pub boosts: Boosts,
    /// Length prior applied to every retriever's scores.
    pub prior: LengthPrior,
    /// Hybrid fusion.
    pub rrf: Rrf,
    /// HYBRID answers with BM25 and names alone when the query names an item in code form.
    pub skip_dense_when_named: bool,
}

/// The health fault raised while an index cannot be written: the service stays SERVING
/// (searches answer from the last committed index) and lists it as degraded.
const INDEX_STORAGE_FAULT: &str = "index_storage";

const NO_MODEL: &str =
    "no embedding model is configured (--embed-model DIR, or an [embedding] endpoint)";

impl std::fmt::Debug for RagService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RagService")
            .field("workspaces", &self.workspaces)
            .finish()
    }
}

fn lock_poisoned() -> RagError {
    RagError::Internal("an index lock was poisoned by a panic".into())
}

impl RagService {
    /// Opens the persisted index of every workspace under `data_dir/index`: the configured
    /// ones and those added at run time before (listed in `data_dir/workspaces.json`).
    pub fn open(
        workspaces: Workspaces,
        data_dir: &Path,
        embedder: Option<Arc<Embedder>>,
        retrieval: Retrieval,
    ) -> Result<Self, IndexError> {
        let registry = registry::Registry::load(data_dir).map_err(|e| IndexError::Corrupt {
            path: registry::Registry::path(data_dir),
            message: e,
        })?;
        for entry in registry.entries() {
            workspaces.add(&entry.root);
        }
        let opening = Opening {
            data_dir: data_dir.to_owned(),
            retrieval,
            repos_dir: data_dir.join("repos"),
        };
        let mut slots = HashMap::new();
        for root in workspaces.roots() {
            let slot = opening.open(&root, embedder.as_deref())?;
            slots.insert(root, Arc::new(slot));
        }
        let overlays =
            overlay::Overlays::load(data_dir, &workspaces.roots(), &opening, embedder.as_deref());
        Ok(Self {
            workspaces,
            slots: Arc::new(RwLock::new(slots)),
            opening,
            registry: Arc::new(tokio::sync::Mutex::new(registry)),
            changes: tokio::sync::broadcast::channel(64).0,
            embedder,
            rrf: retrieval.rrf,
            skip_dense_when_named: retrieval.skip_dense_when_named,
            refreshed: tokio::sync::broadcast::channel(64).0,
            pool: BlockingPool::new(PoolSize::new(0, 5000)),
            readiness: None,
            overlays: Arc::new(overlays),
            overlay_limits: OverlayLimits::default(),
            recovery: Arc::default(),
        })
    }

    /// Bounds every session's overlay by `limits` (what overlays hold already stays; a sync
    /// or put past the limits is refused).
    pub fn with_overlay_limits(mut self, limits: OverlayLimits) -> Self {
        self.overlay_limits = limits;
        self
    }

    /// Clones git workspaces under `dir` (default `<data_dir>/repos`).
    pub fn with_repos_dir(mut self, dir: PathBuf) -> Self {
        self.opening.repos_dir = dir;
        self
    }

    /// Runs searches, context assembly, snippets and refreshes on `pool` (bounded: under any
    /// load at most its size of them hold a thread; the rest wait, then are refused).
    pub fn with_pool(mut self, pool: BlockingPool) -> Self {
        self.pool = pool;
        self
    }

    /// Reports index storage faults on `readiness`: while the index cannot be written (its
    /// directory removed, the disk full) the service is degraded (still SERVING: searches answer
    /// from the last committed index; the fault is listed and `ploke_health_degraded` is 1)
    /// until a write works.
    pub fn with_readiness(mut self, readiness: Readiness) -> Self {
        self.readiness = Some(readiness);
        self
    }

    /// Raises the `index_storage` fault (degraded) when an index write failed on storage,
    /// clears it when one succeeded; write failures become [`RagError::IndexStorage`]
    /// (UNAVAILABLE).
    async fn storage_outcome<T>(&self, outcome: Result<T, RagError>) -> Result<T, RagError> {
        let outcome = match outcome {
            Err(RagError::Index(
                e @ (IndexError::Bm25(_) | IndexError::Io { .. } | IndexError::Vectors(_)),
            )) => Err(RagError::IndexStorage {
                disk: disk_full(&self.opening.data_dir, &e),
                error: e,
            }),
            other => other,
        };
        if let Some(readiness) = &self.readiness {
            match &outcome {
                Ok(_) => readiness.set_degraded(INDEX_STORAGE_FAULT, None).await,
                Err(e @ RagError::IndexStorage { .. }) => {
                    let reason = format!(
                        "the index cannot be written ({e}); searches answer from the last committed index"
                    );
                    readiness
                        .set_degraded(INDEX_STORAGE_FAULT, Some(reason))
                        .await;
                }
                Err(_) => {}
            }
        }
        outcome
    }

    /// The pool blocking work runs on.
    pub fn pool(&self) -> &BlockingPool {
        &self.pool
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, RagError> {
        self.pool.run(f).await.map_err(RagError::from)
    }

    /// Every served workspace root.
    pub fn roots(&self) -> Vec<PathBuf> {
        self.workspaces.roots()
    }

    /// Roots added (true) or removed (false) from now on.
    pub fn workspace_changes(&self) -> tokio::sync::broadcast::Receiver<(PathBuf, bool)> {
        self.changes.subscribe()
    }

    fn slot_of(&self, root: &Path) -> Option<Arc<Slot>> {
        self.slots.read().ok()?.get(root).cloned()
    }

    /// Whether `root` has been indexed (the watcher leaves unindexed workspaces alone).
    pub fn is_indexed(&self, root: &Path) -> bool {
        self.slot_of(root)
            .and_then(|s| {
                s.state
                    .lock()
                    .ok()
                    .map(|st| !matches!(*st, IndexState::NotIndexed))
            })
            .unwrap_or(false)
    }

    /// Finished refreshes, as they happen.
    pub fn subscribe_refreshes(&self) -> tokio::sync::broadcast::Receiver<Refreshed> {
        self.refreshed.subscribe()
    }

    /// Walks the workspace at `root` again because its ignore files `changed` (what is indexed
    /// may change anywhere); reported to [`Self::subscribe_refreshes`] as a refresh of them.
    pub(crate) async fn rewalk(
        &self,
        root: PathBuf,
        changed: Vec<String>,
    ) -> Result<Summary, RagError> {
        let (progress, _) = tokio::sync::mpsc::channel(1);
        let summary = self
            .index(&root.display().to_string(), false, progress)
            .await?;
        let _ = self.refreshed.send(Refreshed {
            root,
            paths: changed,
            summary: summary.clone(),
        });
        Ok(summary)
    }

    fn dense_reason(&self) -> String {
        if self.embedder.is_some() {
            String::new()
        } else {
            NO_MODEL.to_owned()
        }
    }

    fn slot(&self, requested: &str) -> Result<(PathBuf, Arc<Slot>), RagError> {
        let root = self.workspaces.resolve(requested)?;
        let slot = self
            .slot_of(&root)
            .ok_or_else(|| RagError::Internal(format!("no index slot for {}", root.display())))?;
        Ok((root, slot))
    }

    /// The slot of a workspace that has an index to answer from (a run may still be going:
    /// its last commit answers), with its state now.
    fn ready_slot(&self, requested: &str) -> Result<(PathBuf, Arc<Slot>, IndexState), RagError> {
        let (root, slot) = self.slot(requested)?;
        let state = slot.state.lock().map_err(|_| lock_poisoned())?.clone();
        match state {
            IndexState::NotIndexed => Err(RagError::NotIndexed(root.display().to_string())),
            IndexState::Indexing(_) | IndexState::Ready | IndexState::Failed(_) => {
                Ok((root, slot, state))
            }
        }
    }

    /// What the index of a workspace holds.
    pub fn status(&self, workspace_root: &str) -> Result<Status, RagError> {
        let (root, slot) = self.slot(workspace_root)?;
        let state = slot.state.lock().map_err(|_| lock_poisoned())?.clone();
        // While a run holds the write lock, the counts it last left are reported: a status
        // must not wait behind indexing, nor say the index is empty while it is being updated.
        let counts = slot.counts()?;
        Ok(Status {
            root,
            state,
            files: counts.files,
            items: counts.items,
            last_indexed_at: counts.last_indexed_at,
            index_bytes: slot.disk_bytes(),
            embedded_items: counts.embedded,
            embed_model: self
                .embedder
                .as_ref()
                .map(|e| e.name().to_owned())
                .unwrap_or_default(),
            dense_unavailable_reason: self.dense_reason(),
        })
    }

    /// Closes every index, overlays' too (releasing their locks); later writes fail.
    pub fn close(&self) {
        self.recovery.close();
        let slots: Vec<Arc<Slot>> = self
            .slots
            .read()
            .map(|s| s.values().cloned().collect())
            .unwrap_or_default();
        for slot in slots {
            match slot.index.write() {
                Ok(mut index) => index.close(),
                Err(poisoned) => poisoned.into_inner().close(),
            }
        }
        self.overlays.close();
        if let Some(embedder) = &self.embedder {
            embedder.stop();
        }
    }

    /// Re-reads files; only changed ones are re-parsed.
    pub async fn refresh(
        &self,
        workspace_root: &str,
        paths: Vec<String>,
    ) -> Result<Summary, RagError> {
        let (root, slot) = self.slot(workspace_root)?;
        let outcome = self.refresh_now(root.clone(), slot, paths).await;
        let outcome = self.storage_outcome(outcome).await;
        if let Err(RagError::IndexStorage { .. }) = &outcome {
            self.storage_failed(&root);
        }
        outcome
    }

    async fn refresh_now(
        &self,
        root: PathBuf,
        slot: Arc<Slot>,
        paths: Vec<String>,
    ) -> Result<Summary, RagError> {
        let mut rels = Vec::with_capacity(paths.len());
        for (i, p) in paths.iter().enumerate() {
            rels.push(check_relative(&format!("paths[{i}]"), p)?);
        }
        let embedder = self.embedder.clone();
        let asked = rels.clone();
        let task_slot = slot.clone();
        let summary = self
            .blocking(move || {
                let refreshed = task_slot.write(|index| index.refresh(&rels, embedder.as_deref()));
                Ok::<_, RagError>(refreshed??)
            })
            .await??;
        record::index_items(&root, summary.items_total);
        record::index_run("refresh", summary.duration);
        if summary.embed_deferred > 0 {
            self.embed_in_background(root.clone(), slot);
        }
        let _ = self.refreshed.send(Refreshed {
            root,
            paths: asked,
            summary: summary.clone(),
        });
        Ok(summary)
    }
}

/// Below this much space left, a failed index write is put down to a full file system.
const NEARLY_FULL_BYTES: u64 = 16 * 1024 * 1024;

/// "no space left on the file system of DIR (N bytes free now); " when the index write failed for
/// want of space — its error says so, or the file system holding `data_dir` is nearly full —
/// else empty. tantivy reports a full disk met by its indexing threads only as "an index
/// writer was killed".
fn disk_full(data_dir: &Path, e: &IndexError) -> String {
    let text = e.to_string();
    let said = text.contains("No space left") || text.contains("StorageFull");
    let existing = data_dir
        .ancestors()
        .find(|d| d.exists())
        .unwrap_or(data_dir);
    let free = fs4::available_space(existing).ok();
    if said || free.is_some_and(|f| f < NEARLY_FULL_BYTES) {
        let free = free
            .map(|f| format!(" ({f} bytes free now)"))
            .unwrap_or_default();
        format!(
            "no space left on the file system of {}{free}; ",
            data_dir.display()
        )
    } else {
        String::new()
    }
}

#[cfg(test)]
mod disk_tests {
    use super::*;

    #[test]
    fn a_full_file_system_is_named_in_a_storage_error() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("rag");
        let full = IndexError::Io {
            path: data.join("index/x/meta.json"),
            source: std::io::Error::from_raw_os_error(28),
        };
        let note = disk_full(&data, &full);
        assert!(
            note.starts_with(&format!(
                "no space left on the file system of {} (",
                data.display()
            )) && note.ends_with(" bytes free now); "),
            "{note}"
        );
        // Another failure on a file system with room says nothing of space (this test's
        // temporary directory has more than 16 MiB free).
        let other = IndexError::Io {
            path: data.join("index"),
            source: std::io::Error::from_raw_os_error(20),
        };
        assert_eq!(disk_full(&data, &other), "");
    }
}
