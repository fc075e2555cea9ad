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
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn search_filter_persist_and_model_change() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Vectors::open(dir.path(), "m", 3).unwrap();
        v.add(1, text_hash("a"), unit(&[1.0, 0.0, 0.0])).unwrap();
        v.add(2, text_hash("b"), unit(&[0.0, 1.0, 0.0])).unwrap();
        v.add(3, text_hash("c"), unit(&[0.9, 0.1, 0.0])).unwrap();
        let q = unit(&[1.0, 0.05, 0.0]);
        let ids: Vec<u64> = v
            .search(&q, 2, |_| true)
            .unwrap()
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        assert_eq!(ids, vec![1, 3]);
        let ids: Vec<u64> = v
            .search(&q, 2, |k| k != 1)
            .unwrap()
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        assert_eq!(ids, vec![3, 2]);
        v.remove(3).unwrap();
        let live: HashSet<TextHash> = [text_hash("a"), text_hash("b"), text_hash("c")].into();
        v.save(&live).unwrap();
        drop(v);

        let v = Vectors::open(dir.path(), "m", 3).unwrap();
        assert_eq!(v.len(), 2);
        assert!(v.contains(1) && !v.contains(3));
        assert!(
            v.cached(&text_hash("c")).is_some(),
            "cache keeps removed items' vectors"
        );
        drop(v);

        let v = Vectors::open(dir.path(), "other-model", 3).unwrap();
        assert!(v.is_empty());
        assert!(v.cached(&text_hash("a")).is_none());
    }

    /// Pseudo-random unit vectors (an LCG: the same on every run).
    fn spread(n: u64, dims: usize) -> Vec<Vec<f32>> {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        (0..n)
            .map(|_| {
                let v: Vec<f32> = (0..dims)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
                    })
                    .collect();
                unit(&v)
            })
            .collect()
    }

    #[test]
    fn a_search_finds_the_true_nearest_whatever_order_the_vectors_came_in() {
        let (n, dims, k) = (2_000u64, 384, 100);
        let vectors = spread(n + 1, dims);
        let query = &vectors[n as usize];
        // What comparing every vector gives (ids 1..=n, odd ones only: the filter).
        let mut truth: Vec<(u64, f32)> = (1..=n)
            .filter(|id| id % 2 == 1)
            .map(|id| {
                let v = &vectors[id as usize - 1];
                (id, v.iter().zip(query).map(|(a, b)| a * b).sum::<f32>())
            })
            .collect();
        truth.sort_by(|a, b| b.1.total_cmp(&a.1));
        let truth: Vec<u64> = truth.iter().take(k).map(|t| t.0).collect();

        // One index gets the vectors in order; the other in reverse, with a tenth removed and
        // added again (a refresh), as two replicas of one tree might.
        let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut a = Vectors::open(a_dir.path(), "m", dims).unwrap();
        let mut b = Vectors::open(b_dir.path(), "m", dims).unwrap();
        for id in 1..=n {
            a.add(
                id,
                text_hash(&id.to_string()),
                vectors[id as usize - 1].clone(),
            )
            .unwrap();
        }
        for id in (1..=n).rev() {
            b.add(
                id,
                text_hash(&id.to_string()),
                vectors[id as usize - 1].clone(),
            )
            .unwrap();
        }
        for id in (1..=n).step_by(10) {
            b.remove(id).unwrap();
        }
        for id in (1..=n).step_by(10) {
            b.add(
                id,
                text_hash(&id.to_string()),
                vectors[id as usize - 1].clone(),
            )
            .unwrap();
        }
        let ids = |v: &Vectors| -> Vec<u64> {
            v.search(query, k, |id| id % 2 == 1)
                .unwrap()
                .into_iter()
                .map(|(id, _)| id)
                .collect()
        };
        assert_eq!(ids(&a), truth);
        assert_eq!(ids(&b), truth);
    }

    #[test]
    fn identical_vectors_at_the_cut_all_come_back_for_the_ranking_to_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Vectors::open(dir.path(), "m", 3).unwrap();
        // Six copies of one vector (the same item text in six files), one other vector.
        for id in 1..=6u64 {
            v.add(id, text_hash(&id.to_string()), unit(&[1.0, 0.2, 0.0]))
                .unwrap();
        }
        v.add(7, text_hash("7"), unit(&[0.0, 1.0, 0.0])).unwrap();
        let mut ids: Vec<u64> = v
            .search(&unit(&[1.0, 0.0, 0.0]), 2, |_| true)
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    }

    /// usearch keeps one search context per thread it reserved (the core count by default) and
    /// fails a search when none is free; more searches than that run at once here, on an index
    /// freshly built and on one loaded from disk (a restarted service). Each search holds its
    /// context a millisecond longer (its filter waits once), as a search of a large index does.
    #[test]
    fn more_concurrent_searches_than_cores_all_answer() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Vectors::open(dir.path(), "m", 3).unwrap();
        for id in 0..200u64 {
            let x = id as f32;
            v.add(id, text_hash(&id.to_string()), unit(&[1.0, x, x * x + 1.0]))
                .unwrap();
        }
        let searches = |v: &Vectors| {
            let threads = 4 * std::thread::available_parallelism().map_or(4, |n| n.get());
            let start = std::sync::Barrier::new(threads);
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let start = &start;
                        s.spawn(move || {
                            start.wait();
                            (0..20)
                                .map(|i| {
                                    let q = unit(&[1.0, (t * 20 + i) as f32, 3.0]);
                                    let first = std::cell::Cell::new(true);
                                    let slow = |_| {
                                        if first.replace(false) {
                                            std::thread::sleep(std::time::Duration::from_millis(1));
                                        }
                                        true
                                    };
                                    v.search(&q, 5, slow).map(|hits| hits.len())
                                })
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                for h in handles {
                    for found in h.join().unwrap() {
                        assert_eq!(found.unwrap(), 5);
                    }
                }
            });
        };
        searches(&v);
        v.save(&HashSet::new()).unwrap();
        drop(v);
        let v = Vectors::open(dir.path(), "m", 3).unwrap();
        assert_eq!(v.len(), 200);
        searches(&v);
    }

    #[test]
    fn kept_embeddings_survive_a_run_that_never_saved_and_a_torn_record_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Vectors::open(dir.path(), "m", 3).unwrap();
        v.add(1, text_hash("a"), unit(&[1.0, 0.0, 0.0])).unwrap();
        v.add(2, text_hash("b"), unit(&[0.0, 1.0, 0.0])).unwrap();
        v.keep(&[text_hash("a"), text_hash("b")]).unwrap();
        drop(v); // interrupted: no save
        // A crash in the middle of the next append leaves half a record.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(JOURNAL))
            .unwrap();
        f.write_all(&[7u8; 40]).unwrap();
        drop(f);

        let mut v = Vectors::open(dir.path(), "m", 3).unwrap();
        assert!(
            v.is_empty(),
            "item vectors come back from the cache, not the journal"
        );
        assert_eq!(v.cached(&text_hash("a")), Some(&unit(&[1.0, 0.0, 0.0])));
        assert_eq!(v.cached(&text_hash("b")), Some(&unit(&[0.0, 1.0, 0.0])));
        let live: HashSet<TextHash> = [text_hash("a")].into();
        v.save(&live).unwrap();
        assert!(
            !dir.path().join(JOURNAL).exists(),
            "save folds the journal in"
        );
        drop(v);
        let v = Vectors::open(dir.path(), "m", 3).unwrap();
        assert!(v.cached(&text_hash("a")).is_some());
        assert!(v.cached(&text_hash("b")).is_none());
    }
}
