//! One workspace's index: files with their content hashes, items with their spans, and the
//! BM25 index; persisted under `<data_dir>/index/<workspace key>/` and updated per file, so that
//! unchanged files cost a hash and nothing more.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::bm25::{Bm25, Bm25Error, Boosts};
use crate::embed::EmbedError;
use crate::parse::{Kind, Layout, Reexport};
use crate::rank::LengthPrior;
pub use crate::record::ItemRecord;
use crate::scan::ScannedFile;
use crate::vectors::{TextHash, VectorError, Vectors};
use items::Items;

const META_FILE: &str = "meta.json";
/// Bumped whenever parsing, tokenization or item ids change meaning: an index of another
/// version is rebuilt from scratch (embeddings are still reused by content hash).
const META_VERSION: u32 = 9;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct FileRecord {
    hash: String,
    language: String,
    item_ids: Vec<u64>,
    /// A Rust file's crate and module ([`crate::parse::ModuleLoc::key`]); a new place re-parses
    /// it even when its content is the same.
    #[serde(default)]
    module: String,
    /// Its re-exports (Rust's `pub use`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    reexports: Vec<Reexport>,
}

impl FileRecord {
    fn known(&self) -> update::Known<'_> {
        update::Known {
            hash: &self.hash,
            module: &self.module,
        }
    }
}

/// [`Meta`] borrowed from the index, to serialise without copying it.
#[derive(serde::Serialize)]
struct MetaRef<'a> {
    version: u32,
    next_id: u64,
    last_indexed_at_ms: Option<u64>,
    files: &'a BTreeMap<String, FileRecord>,
    items: Vec<&'a ItemRecord>,
}

/// Serialised metadata, to be written with no lock held. Writes are ordered by generation: an
/// older snapshot that reaches the disk after a newer one is dropped.
pub(super) struct MetaBytes {
    generation: u64,
    bytes: Vec<u8>,
    dir: PathBuf,
    written: Arc<Mutex<u64>>,
}

impl MetaBytes {
    /// Writes the metadata (temp file + rename) unless a newer snapshot is already written.
    pub(super) fn persist(self) -> Result<(), IndexError> {
        let mut written = self
            .written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *written >= self.generation {
            return Ok(());
        }
        let path = self.dir.join(META_FILE);
        let tmp = self.dir.join(format!("{META_FILE}.tmp"));
        std::fs::write(&tmp, &self.bytes).map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        *written = self.generation;
        Ok(())
    }
}

#[derive(Debug, Default, serde::Deserialize)]
struct Meta {
    version: u32,
    next_id: u64,
    last_indexed_at_ms: Option<u64>,
    files: BTreeMap<String, FileRecord>,
    items: Vec<ItemRecord>,
}

/// Why the index failed.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// BM25 failed.
    #[error(transparent)]
    Bm25(#[from] Bm25Error),
    /// Reading or writing index files failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The vector index failed.
    #[error(transparent)]
    Vectors(#[from] VectorError),
    /// The embedding model failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// The index was closed (the service is stopping); a run stops at its next step.
    #[error("the index was closed")]
    Closed,
    /// A thread panicked while holding the index.
    #[error("the index lock was poisoned by a panic")]
    Poisoned,
    /// The metadata file is corrupt.
    #[error("{path}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> IndexError + '_ {
    move |source| IndexError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Phases of an indexing run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// Walking and hashing.
    #[default]
    Scanning,
    /// Parsing changed files.
    Parsing,
    /// Embedding new items.
    Embedding,
    /// Persisting.
    Committing,
    /// Finished.
    Done,
}

/// Progress of an indexing run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Progress {
    /// Phase.
    pub phase: Phase,
    /// Files processed in this phase.
    pub files_done: u64,
    /// Files to process.
    pub files_total: u64,
    /// Items written so far.
    pub items_done: u64,
    /// Items with a vector so far.
    pub embedded_done: u64,
    /// Items this run gives to the model (while embedding).
    pub embed_total: u64,
    /// Of those, done.
    pub embed_done: u64,
    /// Human-readable step.
    pub message: String,
    /// Time left in this phase at the rate so far, once there is a rate.
    pub eta: Option<Duration>,
    /// Time since the run started.
    pub elapsed: Duration,
}

/// Result of an indexing run or a refresh.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Files parsed.
    pub files_indexed: u64,
    /// Files whose hash had not changed.
    pub files_unchanged: u64,
    /// Files skipped (binary, too large, unreadable).
    pub files_skipped: u64,
    /// Files removed from the index.
    pub files_removed: u64,
    /// Items added.
    pub items_added: u64,
    /// Items removed.
    pub items_removed: u64,
    /// Items in the index afterwards.
    pub items_total: u64,
    /// Items embedded by the model in this run.
    pub items_embedded: u64,
    /// Item vectors taken from the content-hash cache.
    pub embeddings_reused: u64,
    /// Items a refresh left for the background to embed (too many to embed under its lock).
    pub embed_deferred: u64,
    /// Wall time.
    pub duration: Duration,
}

impl Summary {
    /// This run followed by `later` (which found this run's files unchanged), as one.
    pub fn then(self, later: Summary) -> Summary {
        Summary {
            files_indexed: self.files_indexed + later.files_indexed,
            files_unchanged: later.files_unchanged.saturating_sub(self.files_indexed),
            files_skipped: later.files_skipped,
            files_removed: self.files_removed + later.files_removed,
            items_added: self.items_added + later.items_added,
            items_removed: self.items_removed + later.items_removed,
            items_total: later.items_total,
            items_embedded: self.items_embedded + later.items_embedded,
            embeddings_reused: self.embeddings_reused + later.embeddings_reused,
            embed_deferred: later.embed_deferred,
            duration: self.duration + later.duration,
        }
    }
}

fn record(summary: &mut Summary, outcome: FileOutcome) {
    match outcome {
        FileOutcome::Unchanged => summary.files_unchanged += 1,
        FileOutcome::Indexed { added, removed } => {
            summary.files_indexed += 1;
            summary.items_added += added;
            summary.items_removed += removed;
        }
        FileOutcome::Removed { removed } => {
            summary.files_removed += 1;
            summary.items_removed += removed;
        }
        FileOutcome::Skipped { removed } => {
            summary.files_skipped += 1;
            summary.items_removed += removed;
        }
    }
}

/// What happened to one file.
enum FileOutcome {
    Unchanged,
    Indexed { added: u64, removed: u64 },
    Removed { removed: u64 },
    Skipped { removed: u64 },
}

/// One workspace's index.
#[derive(Debug)]
pub struct WorkspaceIndex {
    root: PathBuf,
    dir: PathBuf,
    bm25: Bm25,
    files: BTreeMap<String, FileRecord>,
    items: Items,
    next_id: u64,
    last_indexed_at: Option<SystemTime>,
    vectors: Option<Vectors>,
    prior: LengthPrior,
    /// The module systems of the workspace, from its manifests and Python packages (rebuilt
    /// by each run and by a refresh that adds, removes or changes a manifest, a package
    /// marker or a Rust file).
    layout: Layout,
    closed: bool,
    /// Generation of the last metadata snapshot taken, and of the last one written.
    meta_generation: AtomicU64,
    meta_written: Arc<Mutex<u64>>,
}

/// The model a workspace's vectors come from.
#[derive(Debug, Clone, Copy)]
pub struct DenseSpec<'a> {
    /// Model name.
    pub model: &'a str,
    /// Vector length.
    pub dims: usize,
}

/// A directory name for `root` under the index dir: readable and unique.
pub fn workspace_key(root: &Path) -> String {
    let hash = blake3::hash(root.to_string_lossy().as_bytes()).to_hex();
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into())
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(KEY_NAME_MAX)
        .collect();
    format!("{name}-{}", &hash[..12])
}

/// Most characters of a root's name kept in its key: the key names a directory, and a name of
/// 255 bytes (a git branch may be that long) plus the hash would not fit in one.
const KEY_NAME_MAX: usize = 64;

impl WorkspaceIndex {
    /// Opens (or creates) the index of `root` in `dir`; with `dense`, also its vectors. An
    /// index whose files are damaged is moved aside and built again ([`damage`]).
    pub fn open(
        root: &Path,
        dir: &Path,
        ranking: (Boosts, LengthPrior),
        dense: Option<DenseSpec<'_>>,
    ) -> Result<Self, IndexError> {
        match Self::open_as_is(root, dir, ranking, dense) {
            Err(e) if damage::damaged(&e) && dir.exists() => {
                let aside = damage::move_aside(dir).map_err(io(dir))?;
                tracing::error!(
                    root = %root.display(),
                    moved_to = %aside.display(),
                    error = %e,
                    "index files damaged; moved aside, indexing the workspace again"
                );
                Self::open_as_is(root, dir, ranking, dense)
            }
            opened => opened,
        }
    }

    /// [`Self::open`] of what `dir` holds, damaged or not.
    fn open_as_is(
        root: &Path,
        dir: &Path,
        (boosts, prior): (Boosts, LengthPrior),
        dense: Option<DenseSpec<'_>>,
    ) -> Result<Self, IndexError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let bm25 = Bm25::open(&dir.join("bm25"), boosts)?;
        let vectors = match dense {
            Some(spec) => Some(Vectors::open(&dir.join("dense"), spec.model, spec.dims)?),
            None => None,
        };
        let meta_path = dir.join(META_FILE);
        let meta = match std::fs::read(&meta_path) {
            Ok(bytes) => {
                let meta: Meta =
                    serde_json::from_slice(&bytes).map_err(|e| IndexError::Corrupt {
                        path: meta_path.clone(),
                        message: e.to_string(),
                    })?;
                if meta.version == META_VERSION {
                    meta
                } else {
                    Meta::default()
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Meta::default(),
            Err(e) => return Err(io(&meta_path)(e)),
        };
        let mut index = Self {
            // As the path policy resolves every path against it: canonical, or through the
            // link it is, as the link points now.
            root: ploke_runtime::workspaces::root_path(root),
            dir: dir.to_owned(),
            bm25,
            files: meta.files,
            items: meta.items.into_iter().map(|i| (i.id, i)).collect(),
            next_id: meta.next_id.max(1),
            last_indexed_at: meta
                .last_indexed_at_ms
                .map(|ms| SystemTime::UNIX_EPOCH + Duration::from_millis(ms)),
            vectors,
            prior,
            layout: Layout::default(),
            closed: false,
            meta_generation: AtomicU64::new(0),
            meta_written: Arc::default(),
        };
        for (rel, file) in &index.files {
            if !file.reexports.is_empty() {
                index.items.set_reexports(rel, &file.reexports);
            }
        }
        // A crash between the BM25 commit and the metadata write leaves them out of step:
        // start over rather than serve items that do not exist.
        if index.bm25.num_docs() != index.items.len() as u64 || index.items.is_empty() {
            if index.bm25.num_docs() != index.items.len() as u64 {
                tracing::warn!(root = %root.display(), "index metadata out of step with bm25; rebuilding");
            }
            index.bm25.clear()?;
            index.files.clear();
            index.items.clear();
            index.last_indexed_at = None;
            if let Some(v) = index.vectors.as_mut() {
                v.reset()?;
            }
        }
        // Vectors of items that no longer exist (a crash between saves) are dropped.
        if let Some(v) = index.vectors.as_mut() {
            let stale: Vec<u64> = (1..index.next_id)
                .filter(|id| v.contains(*id) && !index.items.contains_key(id))
                .collect();
            for id in stale {
                v.remove(id)?;
            }
        }
        Ok(index)
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Files in the index.
    pub fn file_count(&self) -> u64 {
        self.files.len() as u64
    }

    /// Items in the index.
    pub fn item_count(&self) -> u64 {
        self.items.len() as u64
    }

    /// Ids of every item, ascending.
    pub fn item_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.items.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Items that have a vector.
    pub fn embedded_count(&self) -> u64 {
        self.vectors.as_ref().map_or(0, |v| v.len() as u64)
    }

    /// Whether this index keeps vectors.
    pub fn has_vectors(&self) -> bool {
        self.vectors.is_some()
    }

    /// Up to `limit` indexed files after the path `after` (empty = from the first), in path
    /// order: (path, language, content hash, items).
    pub fn files_after(&self, after: &str, limit: usize) -> Vec<(String, String, String, u32)> {
        use std::ops::Bound::{Excluded, Unbounded};
        let from = if after.is_empty() {
            Unbounded
        } else {
            Excluded(after.to_owned())
        };
        self.files
            .range((from, Unbounded))
            .take(limit)
            .map(|(path, f)| {
                (
                    path.clone(),
                    f.language.clone(),
                    f.hash.clone(),
                    u32::try_from(f.item_ids.len()).unwrap_or(u32::MAX),
                )
            })
            .collect()
    }

    /// Items indexed for one file.
    pub fn items_of_file(&self, rel: &str) -> u32 {
        self.files
            .get(rel)
            .map_or(0, |f| u32::try_from(f.item_ids.len()).unwrap_or(u32::MAX))
    }

    /// An index of `ws` in `data` with the default ranking and no vectors, for tests.
    #[cfg(test)]
    pub(crate) fn open_plain(ws: &Path, data: &Path) -> Self {
        let ranking = (
            crate::bm25::Boosts::default(),
            crate::rank::LengthPrior::default(),
        );
        Self::open(ws, data, ranking, None).expect("a test index opens")
    }

    /// Where the index's files are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// When the last full run finished.
    pub fn last_indexed_at(&self) -> Option<SystemTime> {
        self.last_indexed_at
    }

    /// Bytes the index's files take on disk: its records, BM25 and dense vectors alike (the
    /// vectors were left out, a third of it or more: an operator sizing a volume by it ran out).
    pub fn disk_bytes(&self) -> u64 {
        dir_bytes(&self.dir)
    }

    /// The module systems of the workspace.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// One item by id.
    pub fn item(&self, id: u64) -> Option<&ItemRecord> {
        self.items.get(&id)
    }

    fn apply(
        &mut self,
        file: &ScannedFile,
        force: bool,
        summary: &mut Summary,
    ) -> Result<(), IndexError> {
        let known = self.files.get(&file.rel).map(FileRecord::known);
        let prepared = update::prepare(file, &self.layout, force, known);
        let outcome = self.commit_prepared(&file.into(), prepared)?;
        record(summary, outcome);
        Ok(())
    }
    /// Forgets a file and its items; returns how many items went.
    fn drop_file(&mut self, rel: &str) -> u64 {
        let Some(record) = self.files.remove(rel) else {
            return 0;
        };
        self.bm25.remove_file(rel);
        if !record.reexports.is_empty() {
            self.items.remove_reexports(rel);
        }
        for id in &record.item_ids {
            self.items.remove(id);
            if let Some(v) = self.vectors.as_mut() {
                // Removing a key usearch holds cannot fail for a valid id; log if it does.
                if let Err(e) = v.remove(*id) {
                    tracing::warn!(id, error = %e, "removing a vector failed");
                }
            }
        }
        record.item_ids.len() as u64
    }

    /// Commits BM25 and the vectors, then writes the metadata (temp file + rename).
    fn commit(&mut self) -> Result<(), IndexError> {
        self.bm25.commit()?;
        self.save_vectors()?;
        self.meta_bytes()?.persist()
    }

    /// Saves the vectors and the embedding cache when they changed since the last save.
    pub(super) fn save_vectors(&mut self) -> Result<(), IndexError> {
        if let Some(v) = self.vectors.as_mut()
            && v.is_dirty()
        {
            let live: std::collections::HashSet<TextHash> = self
                .items
                .values()
                .map(|r| hex_hash(&r.embed_hash))
                .collect();
            v.save(&live)?;
        }
        Ok(())
    }

    /// The metadata as it is now, serialised (under a read lock at most; writing it to disk
    /// needs no lock: [`MetaBytes::persist`]).
    pub(super) fn meta_bytes(&self) -> Result<MetaBytes, IndexError> {
        let mut items: Vec<&ItemRecord> = self.items.values().collect();
        items.sort_by_key(|i| i.id);
        let meta = MetaRef {
            version: META_VERSION,
            next_id: self.next_id,
            last_indexed_at_ms: self.last_indexed_at.and_then(|t| {
                t.duration_since(SystemTime::UNIX_EPOCH)
                    .ok()
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            }),
            files: &self.files,
            items,
        };
        let path = self.dir.join(META_FILE);
        let bytes = serde_json::to_vec(&meta).map_err(|e| IndexError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?;
        Ok(MetaBytes {
            generation: self.meta_generation.fetch_add(1, Ordering::SeqCst) + 1,
            bytes,
            dir: self.dir.clone(),
            written: self.meta_written.clone(),
        })
    }

    /// Releases the index's writer and lock; a run going stops at its next step.
    pub fn close(&mut self) {
        self.closed = true;
        self.bm25.close();
    }
}

pub(crate) fn hex_hash(hex: &str) -> TextHash {
    let mut out = [0u8; 32];
    if let Ok(h) = blake3::Hash::from_hex(hex) {
        out = *h.as_bytes();
    }
    out
}

mod build;
mod contents;
mod damage;
mod dense;
mod items;
mod layers;
mod layout;
mod lookup;
pub(crate) use lookup::by_place;
mod refresh;
mod search;

pub use build::{COMMIT_EVERY, Guarded, build, embed_pending, eta};
pub use contents::Contents;
pub use layers::{Layer, LayeredFound, rank_bm25_layers, rank_dense_layers, search_layers};
pub use search::{DENSE_FUSION_DEPTH, FUSION_DEPTH, Found, Hit, Hybrid, Query, Ranked};
/// Bytes of every file under `dir` (links not followed).
pub(crate) fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod layout_tests;
#[cfg(test)]
mod order_tests;
#[cfg(test)]
mod tests;
mod update;
