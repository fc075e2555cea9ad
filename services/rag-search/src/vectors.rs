//! The dense side of the index: item vectors in a usearch HNSW index (cosine), plus a cache of
//! embeddings by content hash so that an item whose embedded text did not change is never
//! embedded again (a file edit that moves items, a rename, a re-index after a restart).

use std::collections::{HashMap, HashSet};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};

use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

/// Vector storage failed.
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    /// usearch failed.
    #[error("vector index: {0}")]
    Usearch(String),
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

fn usearch_err(e: impl std::fmt::Display) -> VectorError {
    VectorError::Usearch(e.to_string())
}

/// Content hash of an embedded text.
pub type TextHash = [u8; 32];

/// Hash of the text an item is embedded from.
pub fn text_hash(text: &str) -> TextHash {
    *blake3::hash(text.as_bytes()).as_bytes()
}

/// Item vectors and the embedding cache of one workspace.
pub struct Vectors {
    index: Index,
    contexts: Contexts,
    dims: usize,
    dir: PathBuf,
    cache: HashMap<TextHash, Vec<f32>>,
    /// Changed since the last save.
    dirty: bool,
}

impl std::fmt::Debug for Vectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vectors")
            .field("dims", &self.dims)
            .field("len", &self.index.size())
            .field("cached", &self.cache.len())
            .finish()
    }
}

/// usearch searches with one context per thread it reserved and fails a search that finds
/// none free ("Reserve capacity ahead of searches!"); its default is one per core, fewer than
/// the searches a service runs at once (two per core on its blocking pool). So each index
/// reserves [`Contexts::wanted`] of them, and a search beyond that waits for one instead of
/// failing.
#[derive(Debug)]
struct Contexts {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Contexts {
    /// Two per core, at least four: the service's blocking pool runs that many searches.
    fn wanted() -> usize {
        std::thread::available_parallelism()
            .map_or(4, |n| n.get() * 2)
            .max(4)
    }

    fn new(count: usize) -> Self {
        Self {
            free: Mutex::new(count),
            freed: Condvar::new(),
        }
    }

    /// Waits for a free context; it is given back when the guard drops.
    fn take(&self) -> ContextTaken<'_> {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free == 0 {
            free = self
                .freed
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *free -= 1;
        ContextTaken(self)
    }
}

/// A usearch context in use.
struct ContextTaken<'a>(&'a Contexts);

impl Drop for ContextTaken<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.0.freed.notify_one();
    }
}

/// Reserves room for `members` vectors and [`Contexts::wanted`] searches at once.
fn reserve(index: &Index, members: usize) -> Result<(), VectorError> {
    index
        .reserve_capacity_and_threads(members, Contexts::wanted())
        .map_err(usearch_err)
}

fn new_index(dims: usize) -> Result<Index, VectorError> {
    let index = Index::new(&IndexOptions {
        dimensions: dims,
        metric: MetricKind::Cos,
        quantization: ScalarKind::F32,
        connectivity: 0,
        expansion_add: 0,
        expansion_search: 0,
        multi: false,
    })
    .map_err(usearch_err)?;
    reserve(&index, 0)?;
    Ok(index)
}

/// Indexes of at most this many vectors are searched exactly, every vector compared; larger
/// ones through the HNSW graph. An exact search finds the true nearest and depends on the
/// vectors alone, where a search through the graph misses some and depends on the order and
/// threads the vectors were added with: two replicas of the same tree (one fresh, one
/// refreshed file by file) then differ (35 of 417 DENSE top-10 lists between two builds of
/// ../shared/eval's crates). Comparing every vector streams all of them from memory
/// (~0.28 µs per 384-d vector here): about what a graph search costs at 2k vectors, +0.3–0.5 ms
/// at 4k, +1.6 ms at 9k (+12–33 % of a HYBRID search's server CPU at tokio's 9k items), so
/// larger indexes keep the graph (docs/PERFORMANCE.md).
pub const EXACT_SEARCH_MAX: usize = 4_096;

/// Bumped when the vectors of the same model and text hash would differ: format 2 embeds the
/// item's body head, which format 1 (before 2026-11-22) missed on a first index.
const FORMAT: u32 = 2;

impl Vectors {
    /// Opens the vectors in `dir` for a model of `model` with `dims` dimensions; a different
    /// model starts from empty.
    pub fn open(dir: &Path, model: &str, dims: usize) -> Result<Self, VectorError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| VectorError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let stamp_path = dir.join("model.txt");
        let stamp = format!("{model}\n{dims}\nformat {FORMAT}\n");
        let same_model = std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp);
        let index = new_index(dims)?;
        let index_path = dir.join("index.usearch");
        let mut cache = HashMap::new();
        if same_model {
            if index_path.is_file() {
                index
                    .load(&index_path.to_string_lossy())
                    .map_err(usearch_err)?;
                // Loading resets the contexts to usearch's default.
                reserve(&index, index.capacity().max(index.size()))?;
            }
            cache = read_cache(&dir.join("cache.bin"), dims).unwrap_or_default();
            // Embeddings kept while an index run was going (see `keep`), up to its last whole
            // record: an interrupted run loses none of them.
            if let Some(kept) = read_cache(&dir.join(JOURNAL), dims) {
                cache.extend(kept);
            }
        } else {
            let _ = std::fs::remove_file(dir.join(JOURNAL));
            std::fs::write(&stamp_path, stamp).map_err(io(&stamp_path))?;
        }
        Ok(Self {
            index,
            contexts: Contexts::new(Contexts::wanted()),
            dims,
            dir: dir.to_owned(),
            cache,
            dirty: false,
        })
    }

    /// Drops every item vector (the content-hash cache stays, so nothing is re-embedded that
    /// was embedded before). Used when item ids are reassigned.
    pub fn reset(&mut self) -> Result<(), VectorError> {
        self.index = new_index(self.dims)?;
        self.dirty = true;
        Ok(())
    }

    /// Vector length.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Items with a vector.
    pub fn len(&self) -> usize {
        self.index.size()
    }

    /// Whether no item has a vector.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether item `id` has a vector.
    pub fn contains(&self, id: u64) -> bool {
        self.index.contains(id)
    }

    /// The cached embedding of a text, if any.
    pub fn cached(&self, hash: &TextHash) -> Option<&Vec<f32>> {
        self.cache.get(hash)
    }

    /// Stores item `id`'s vector (and caches it under `hash`).
    pub fn add(&mut self, id: u64, hash: TextHash, vector: Vec<f32>) -> Result<(), VectorError> {
        if self.index.contains(id) {
            self.index.remove(id).map_err(usearch_err)?;
        }
        if self.index.size() + 1 > self.index.capacity() {
            let grow = (self.index.capacity() * 2).max(1024);
            self.index.reserve(grow).map_err(usearch_err)?;
        }
        self.index.add(id, &vector).map_err(usearch_err)?;
        self.cache.insert(hash, vector);
        self.dirty = true;
        Ok(())
    }

    /// Forgets item `id`'s vector (its cache entry stays for reuse).
    pub fn remove(&mut self, id: u64) -> Result<(), VectorError> {
        if self.index.contains(id) {
            self.index.remove(id).map_err(usearch_err)?;
            self.dirty = true;
        }
        Ok(())
    }

    /// Whether anything changed since the last save (a save of nothing new is skipped).
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// The `k` nearest items accepted by `keep`, as (id, cosine similarity), best first:
    /// exactly (every vector compared) up to [`EXACT_SEARCH_MAX`] vectors, through the HNSW
    /// graph beyond.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        keep: impl Fn(u64) -> bool,
    ) -> Result<Vec<(u64, f32)>, VectorError> {
        let size = self.index.size();
        if size == 0 || k == 0 {
            return Ok(Vec::new());
        }
        let taken = self.contexts.take();
        let found = if size <= EXACT_SEARCH_MAX {
            self.exact_search(query, k, &keep)?
        } else {
            let matches = self
                .index
                .filtered_search(query, k, keep)
                .map_err(usearch_err)?;
            matches.keys.into_iter().zip(matches.distances).collect()
        };
        drop(taken);
        Ok(found.into_iter().map(|(id, d)| (id, 1.0 - d)).collect())
    }

    /// The `k` nearest accepted by `keep`, every vector compared, as (id, distance), and any
    /// more at the k-th's distance (identical vectors: usearch orders them by where each sits,
    /// so the caller's ranking makes that cut, by each item's key). usearch's exact search
    /// takes no filter: it is asked for twice `k`, and when too few of those pass, for every
    /// vector (one scan costs the same however many it keeps).
    fn exact_search(
        &self,
        query: &[f32],
        k: usize,
        keep: &impl Fn(u64) -> bool,
    ) -> Result<Vec<(u64, f32)>, VectorError> {
        let size = self.index.size();
        let mut asked = k.saturating_mul(2).min(size);
        loop {
            let matches = self.index.exact_search(query, asked).map_err(usearch_err)?;
            let mut kept: Vec<(u64, f32)> = Vec::with_capacity(k);
            let mut whole = false;
            for (id, distance) in matches.keys.into_iter().zip(matches.distances) {
                if !keep(id) {
                    continue;
                }
                if kept.len() >= k && kept.last().is_some_and(|last| last.1 != distance) {
                    whole = true;
                    break;
                }
                kept.push((id, distance));
            }
            if whole || asked >= size {
                return Ok(kept);
            }
            asked = size;
        }
    }

    /// Writes the index and the cache, keeping only cache entries in `live`; the journal of
    /// [`Self::keep`] is folded in and removed.
    pub fn save(&mut self, live: &HashSet<TextHash>) -> Result<(), VectorError> {
        self.cache.retain(|h, _| live.contains(h));
        let index_path = self.dir.join("index.usearch");
        self.index
            .save(&index_path.to_string_lossy())
            .map_err(usearch_err)?;
        write_cache(&self.dir.join("cache.bin"), &self.cache)?;
        self.dirty = false;
        let journal = self.dir.join(JOURNAL);
        match std::fs::remove_file(&journal) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(VectorError::Io {
                path: journal,
                source,
            }),
        }
    }

    /// Makes the cached embeddings of `hashes` durable now, cheaply (appended to a journal and
    /// synced), so that a run interrupted before [`Self::save`] re-embeds none of them.
    pub fn keep(&self, hashes: &[TextHash]) -> Result<(), VectorError> {
        let path = self.dir.join(JOURNAL);
        let io = |source| VectorError::Io {
            path: path.clone(),
            source,
        };
        let mut bytes = Vec::with_capacity(hashes.len() * (32 + self.dims * 4));
        for hash in hashes {
            if let Some(vector) = self.cache.get(hash) {
                bytes.extend_from_slice(hash);
                for x in vector {
                    bytes.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        file.write_all(&bytes).map_err(io)?;
        file.sync_data().map_err(io)
    }
}

/// Embeddings kept during an index run, appended record by record.
const JOURNAL: &str = "cache.journal";

/// Reads a cache file of whole records; a trailing partial record (a write cut short) is
/// ignored.
fn read_cache(path: &Path, dims: usize) -> Option<HashMap<TextHash, Vec<f32>>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .read_to_end(&mut bytes)
        .ok()?;
    let record = 32 + dims * 4;
    let mut out = HashMap::with_capacity(bytes.len() / record);
    for chunk in bytes.chunks_exact(record) {
        let mut hash = [0u8; 32];
        hash.copy_from_slice(&chunk[..32]);
        let vector = chunk[32..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        out.insert(hash, vector);
    }
    Some(out)
}

fn write_cache(path: &Path, cache: &HashMap<TextHash, Vec<f32>>) -> Result<(), VectorError> {
    let tmp = path.with_extension("bin.tmp");
    let io = |p: &Path| {
        let p = p.to_owned();
        move |source| VectorError::Io { path: p, source }
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io(&tmp))?);
    for (hash, vector) in cache {
        out.write_all(hash).map_err(io(&tmp))?;
        for x in vector {
            out.write_all(&x.to_le_bytes()).map_err(io(&tmp))?;
        }
    }
    out.flush().map_err(io(&tmp))?;
    drop(out);
    std::fs::rename(&tmp, path).map_err(io(path))
}

#[cfg(test)]
mod tests;
