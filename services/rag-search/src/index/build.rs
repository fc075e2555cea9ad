//! A full index run that never holds the index for long: scanning, reading, parsing and
//! embedding run with no lock; only applying a batch of parsed files, giving a chunk of items
//! their vectors and committing take the write lock, each for a moment. Searches, context,
//! lookups and refreshes go on meanwhile and see the last commit (BM25 is committed every
//! [`COMMIT_EVERY`] while parsing, so it answers long before the run ends). Embeddings are kept
//! durably chunk by chunk ([`crate::vectors::Vectors::keep`]): an interrupted run re-embeds
//! none of them. A failure puts the index back to its last commit. The run ends by merging
//! BM25 into one segment, waited for with no lock held.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::sync::RwLock;
use std::time::{Duration, Instant, SystemTime};

use crate::embed::{self, Embedder};
use crate::scan;
use crate::vectors::TextHash;

use super::update::{self, BATCH_FILES};
use super::{FileRecord, IndexError, Phase, Progress, Summary, WorkspaceIndex, hex_hash, record};

/// How often BM25 is committed while files are being parsed.
pub const COMMIT_EVERY: Duration = Duration::from_secs(2);

/// Items given vectors per step.
pub(super) const EMBED_CHUNK: usize = 64;

/// Access to an index that others may be using: short read and write sections.
pub trait Guarded {
    /// Runs `f` with the index for reading.
    fn read<R>(&self, f: impl FnOnce(&WorkspaceIndex) -> R) -> Result<R, IndexError>;
    /// Runs `f` with the index for writing.
    fn write<R>(&self, f: impl FnOnce(&mut WorkspaceIndex) -> R) -> Result<R, IndexError>;
}

impl Guarded for RwLock<WorkspaceIndex> {
    fn read<R>(&self, f: impl FnOnce(&WorkspaceIndex) -> R) -> Result<R, IndexError> {
        let guard = RwLock::read(self).map_err(|_| IndexError::Poisoned)?;
        Ok(f(&guard))
    }

    fn write<R>(&self, f: impl FnOnce(&mut WorkspaceIndex) -> R) -> Result<R, IndexError> {
        let mut guard = RwLock::write(self).map_err(|_| IndexError::Poisoned)?;
        Ok(f(&mut guard))
    }
}

/// An index nobody else uses (tests, benchmarks, [`WorkspaceIndex::index_all`]).
impl Guarded for RefCell<&mut WorkspaceIndex> {
    fn read<R>(&self, f: impl FnOnce(&WorkspaceIndex) -> R) -> Result<R, IndexError> {
        let guard = self.try_borrow().map_err(|_| IndexError::Poisoned)?;
        Ok(f(&guard))
    }

    fn write<R>(&self, f: impl FnOnce(&mut WorkspaceIndex) -> R) -> Result<R, IndexError> {
        let mut guard = self.try_borrow_mut().map_err(|_| IndexError::Poisoned)?;
        Ok(f(&mut guard))
    }
}

/// The index's tables as of its last commit, to go back to when a run fails before the next.
pub(super) struct Checkpoint {
    files: BTreeMap<String, FileRecord>,
    items: super::items::Items,
    next_id: u64,
    last_indexed_at: Option<SystemTime>,
    commits: u64,
}

impl WorkspaceIndex {
    pub(super) fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            files: self.files.clone(),
            items: self.items.clone(),
            next_id: self.next_id,
            last_indexed_at: self.last_indexed_at,
            commits: self.bm25.commits(),
        }
    }

    /// After a failed update: when BM25 has not committed since `checkpoint`, the tables go
    /// back to it and BM25's pending changes are dropped, so searches keep answering from the
    /// last good index. Once BM25 has committed, the tables match what searches see and stay.
    pub(super) fn restore(&mut self, checkpoint: Checkpoint, error: &IndexError) {
        if self.bm25.commits() != checkpoint.commits {
            return;
        }
        self.files = checkpoint.files;
        self.items = checkpoint.items;
        self.next_id = checkpoint.next_id;
        self.last_indexed_at = checkpoint.last_indexed_at;
        match self.bm25.rollback() {
            Ok(()) => {
                tracing::warn!(root = %self.root.display(), error = %error, "index update failed; the last committed index stays")
            }
            Err(r) => {
                tracing::warn!(root = %self.root.display(), error = %error, rollback = %r, "index update failed and bm25 could not roll back; searches answer from the last commit")
            }
        }
    }
}

/// A run's position: changes since the last commit and what to put back if they fail.
struct Run<'a, G: Guarded> {
    index: &'a G,
    pending: Option<Checkpoint>,
    last_commit: Instant,
    /// How long the last commit took: it rewrites the whole metadata, ~900 MB at 1.5 M items,
    /// so commits are spaced to take at most a fifth of the run.
    commit_cost: Duration,
    /// Whether anything changed since the last commit.
    changed: bool,
}

impl<G: Guarded> Run<'_, G> {
    fn new(index: &G) -> Run<'_, G> {
        Run {
            index,
            pending: None,
            last_commit: Instant::now(),
            commit_cost: Duration::ZERO,
            changed: false,
        }
    }

    /// Whether an intermediate commit is due: something changed, [`COMMIT_EVERY`] has passed,
    /// and four times the last commit's cost (a 30 s commit every 32 s left 2 s for parsing,
    /// and wrote 80 GB over one run of a 50k-file repository).
    fn commit_due(&self) -> bool {
        self.changed && self.last_commit.elapsed() >= COMMIT_EVERY.max(self.commit_cost * 4)
    }
}

impl<G: Guarded> Run<'_, G> {
    /// Changes the index under the write lock; a failure restores the last commit.
    fn step<R>(
        &mut self,
        f: impl FnOnce(&mut WorkspaceIndex) -> Result<R, IndexError>,
    ) -> Result<R, IndexError> {
        let pending = &mut self.pending;
        self.index.write(|index| {
            if index.closed {
                return Err(IndexError::Closed);
            }
            let checkpoint = pending.take().unwrap_or_else(|| index.checkpoint());
            match f(index) {
                Ok(r) => {
                    *pending = Some(checkpoint);
                    Ok(r)
                }
                Err(e) => {
                    index.restore(checkpoint, &e);
                    Err(e)
                }
            }
        })?
    }

    /// Commits what the run changed; `finished` stamps the index as fully indexed. The slow
    /// parts run beside searches: BM25's commit under the read lock, serialising the metadata
    /// under the read lock, writing it with no lock; only stamping and saving changed vectors
    /// take the write lock.
    fn commit(&mut self, finished: bool) -> Result<(), IndexError> {
        let started = Instant::now();
        if finished {
            self.step(|index| {
                index.last_indexed_at = Some(SystemTime::now());
                Ok(())
            })?;
        }
        let committed = self.index.read(|index| {
            if index.closed {
                return Err(IndexError::Closed);
            }
            index.bm25.commit().map_err(IndexError::from)
        })?;
        if let Err(e) = committed {
            let pending = self.pending.take();
            self.index.write(|index| {
                if let Some(checkpoint) = pending {
                    index.restore(checkpoint, &e);
                }
            })?;
            return Err(e);
        }
        // BM25 has committed: the tables match what searches see and stay.
        self.pending = None;
        self.index.write(WorkspaceIndex::save_vectors)??;
        let meta = self.index.read(WorkspaceIndex::meta_bytes)??;
        meta.persist()?;
        self.last_commit = Instant::now();
        self.commit_cost = started.elapsed();
        self.changed = false;
        Ok(())
    }
}

/// Time left for `done` of `total` after `elapsed`, at the rate so far.
pub fn eta(done: u64, total: u64, elapsed: Duration) -> Option<Duration> {
    if done == 0 || total < done {
        return None;
    }
    let per = elapsed.as_secs_f64() / done as f64;
    Some(Duration::from_secs_f64(per * (total - done) as f64))
}

/// Indexes every file of the workspace behind `index`, taking its write lock only in short
/// steps; only changed files are parsed unless `force`.
pub fn build(
    index: &impl Guarded,
    force: bool,
    embedder: Option<&Embedder>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, IndexError> {
    let started = Instant::now();
    let (root, items_before, embedded_before) =
        index.read(|i| (i.root.clone(), i.item_count(), i.embedded_count()))?;
    progress(Progress {
        phase: Phase::Scanning,
        items_done: items_before,
        embedded_done: embedded_before,
        message: format!("scanning {}", root.display()),
        ..Progress::default()
    });
    let (files, skipped) = scan::scan(&root);
    let total = files.len() as u64;
    let rels = files.iter().map(|f| f.rel.clone()).collect();
    let layout = super::layout::discover(&root, &rels, None);
    index.write(|i| i.set_layout(layout.clone()))?;
    let mut summary = Summary {
        files_skipped: skipped,
        ..Summary::default()
    };
    let mut run = Run::new(index);
    // What each file was when this run looked; a file a refresh changed since is its business.
    let known = index.read(|i| i.files.clone())?;
    let present: HashSet<&str> = files.iter().map(|f| f.rel.as_str()).collect();
    run.step(|i| {
        let gone: Vec<String> = i
            .files
            .keys()
            .filter(|k| !present.contains(k.as_str()))
            .cloned()
            .collect();
        for rel in gone {
            summary.items_removed += i.drop_file(&rel);
            summary.files_removed += 1;
        }
        Ok(())
    })?;
    let changes = |s: &Summary| (s.files_indexed, s.files_removed, s.items_removed);
    run.changed = changes(&summary) != (0, 0, 0);
    let parse_started = Instant::now();
    let mut done = 0u64;
    for batch in files.chunks(BATCH_FILES) {
        let prepared = update::prepare_batch(batch, (&layout, force), &known);
        let before = changes(&summary);
        let counts = run.step(|i| {
            for (file, p) in batch.iter().zip(prepared) {
                let now = i.files.get(&file.rel).map(|r| r.hash.as_str());
                if now != known.get(&file.rel).map(|r| r.hash.as_str()) {
                    summary.files_unchanged += 1;
                    continue;
                }
                let outcome = i.commit_prepared(&file.into(), p)?;
                record(&mut summary, outcome);
            }
            Ok((i.item_count(), i.embedded_count()))
        })?;
        done += batch.len() as u64;
        run.changed |= changes(&summary) != before;
        if run.commit_due() {
            run.commit(false)?;
        }
        progress(Progress {
            phase: Phase::Parsing,
            files_done: done,
            files_total: total,
            items_done: counts.0,
            embedded_done: counts.1,
            message: batch.last().map(|f| f.rel.clone()).unwrap_or_default(),
            eta: eta(done, total, parse_started.elapsed()),
            ..Progress::default()
        });
    }
    // BM25 answers for every file from here on; vectors come next.
    run.commit(false)?;
    let embedded = embed_all(&mut run, embedder, &mut summary, progress, total);
    let (items, embedded_now) = index.read(|i| (i.item_count(), i.embedded_count()))?;
    progress(Progress {
        phase: Phase::Committing,
        files_done: total,
        files_total: total,
        items_done: items,
        embedded_done: embedded_now,
        message: "committing".into(),
        ..Progress::default()
    });
    // Whatever happened to embedding, what was parsed and embedded is committed.
    run.commit(true)?;
    merge_bm25(index);
    embedded?;
    summary.items_total = items;
    summary.duration = started.elapsed();
    progress(Progress {
        phase: Phase::Done,
        files_done: total,
        files_total: total,
        items_done: items,
        embedded_done: embedded_now,
        message: format!(
            "{} files indexed, {} unchanged, {} items",
            summary.files_indexed, summary.files_unchanged, summary.items_total
        ),
        ..Progress::default()
    });
    Ok(summary)
}

/// Gives every item without a vector one, taking the write lock only to take and keep each
/// chunk (the model runs with no lock): what a refresh left for the background
/// ([`super::dense::EMBED_UNDER_LOCK_MAX`]).
pub fn embed_pending(
    index: &impl Guarded,
    embedder: Option<&Embedder>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, IndexError> {
    let started = Instant::now();
    let mut summary = Summary::default();
    let mut run = Run::new(index);
    let files = index.read(|i| i.files.len() as u64)?;
    let embedded = embed_all(&mut run, embedder, &mut summary, progress, files);
    // What was embedded is kept whatever happened after.
    run.commit(false)?;
    embedded?;
    summary.items_total = index.read(WorkspaceIndex::item_count)?;
    summary.duration = started.elapsed();
    Ok(summary)
}

/// Merges BM25's segments into one (a search then costs least: docs/PERFORMANCE.md), waiting
/// with no lock held. Best effort: a merge tantivy started by itself may hold some of the
/// segments, and the index may have closed; the run has committed either way, and the next
/// run merges again.
fn merge_bm25<G: Guarded>(index: &G) {
    let started = index.read(|i| {
        if i.closed {
            Ok(None)
        } else {
            i.bm25.merge_segments()
        }
    });
    let merged = match started {
        Ok(Ok(Some(merging))) => merging
            .wait()
            .and_then(|_| index.read(|i| i.bm25.reload()).unwrap_or(Ok(()))),
        Ok(Ok(None)) | Err(_) => Ok(()),
        Ok(Err(e)) => Err(e),
    };
    if let Err(e) = merged {
        tracing::warn!(error = %e, "merging the bm25 segments failed; searches go on over several");
    }
}

/// An item waiting for the model: id, text hash, and the text.
type Pending = (u64, TextHash, String);

/// Gives every item without a vector one, a chunk at a time: cached vectors under the lock,
/// the model with no lock, then the vectors under the lock again (kept durably at once).
fn embed_all<G: Guarded>(
    run: &mut Run<'_, G>,
    embedder: Option<&Embedder>,
    summary: &mut Summary,
    progress: &mut dyn FnMut(Progress),
    files: u64,
) -> Result<(), IndexError> {
    let Some(embedder) = embedder else {
        return Ok(());
    };
    if !run.index.read(WorkspaceIndex::has_vectors)? {
        return Ok(());
    }
    let started = Instant::now();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Items the model gave nothing for (an endpoint refusing an input) are not asked again.
    let mut tried: HashSet<u64> = HashSet::new();
    let mut done = 0u64;
    loop {
        let (reused, waiting) = run.step(|i| i.reuse_cached(&tried))?;
        summary.embeddings_reused += reused;
        let chunk: Vec<Pending> = run.index.read(|i| i.pending_texts(&tried, EMBED_CHUNK))??;
        if chunk.is_empty() {
            return Ok(());
        }
        let total = done + waiting;
        let (items, base) = run.index.read(|i| (i.item_count(), i.embedded_count()))?;
        let inputs: Vec<String> = chunk.iter().map(|(_, _, t)| t.clone()).collect();
        let mut report = |within: usize| {
            let now = done + within as u64;
            progress(Progress {
                phase: Phase::Embedding,
                files_done: files,
                files_total: files,
                items_done: items,
                embedded_done: base + within as u64,
                embed_total: total,
                embed_done: now,
                message: format!("embedded {now} of {total} items"),
                eta: eta(now, total, started.elapsed()),
                ..Progress::default()
            });
        };
        report(0);
        let vectors = embed::embed_with_progress(embedder, &inputs, threads, &mut report)?;
        tried.extend(chunk.iter().map(|(id, _, _)| *id));
        done += chunk.len() as u64;
        summary.items_embedded += run.step(|i| i.put_vectors(&chunk, vectors))?;
    }
}

impl WorkspaceIndex {
    /// Gives items without a vector their cached one; returns (reused, still waiting).
    fn reuse_cached(&mut self, tried: &HashSet<u64>) -> Result<(u64, u64), IndexError> {
        let Some(vectors) = self.vectors.as_mut() else {
            return Ok((0, 0));
        };
        let (mut reused, mut waiting) = (0, 0);
        for (id, record) in self.items.iter() {
            if vectors.contains(*id) || tried.contains(id) {
                continue;
            }
            let hash = hex_hash(&record.embed_hash);
            match vectors.cached(&hash).cloned() {
                Some(v) => {
                    vectors.add(*id, hash, v)?;
                    reused += 1;
                }
                None => waiting += 1,
            }
        }
        Ok((reused, waiting))
    }

    /// Up to `limit` items (lowest ids first) with no vector and no cached one, with the text
    /// to embed (read back from committed BM25).
    fn pending_texts(
        &self,
        tried: &HashSet<u64>,
        limit: usize,
    ) -> Result<Vec<Pending>, IndexError> {
        let Some(vectors) = self.vectors.as_ref() else {
            return Ok(Vec::new());
        };
        let mut ids: Vec<u64> = self
            .items
            .keys()
            .copied()
            .filter(|id| !vectors.contains(*id) && !tried.contains(id))
            .collect();
        ids.sort_unstable();
        ids.truncate(limit);
        let texts = self.bm25.texts(&ids)?;
        Ok(ids
            .into_iter()
            .filter_map(|id| {
                let r = self.items.get(&id)?;
                let body = texts.get(&id).map_or("", String::as_str);
                let text =
                    embed::item_text(&r.item.canon_path, &r.item.signature, &r.item.doc, body);
                Some((id, hex_hash(&r.embed_hash), text))
            })
            .collect())
    }

    /// Stores vectors computed with no lock held, for items that still exist with the same
    /// text, and keeps them durably; returns how many were stored.
    fn put_vectors(
        &mut self,
        chunk: &[Pending],
        vectors: Vec<Vec<f32>>,
    ) -> Result<u64, IndexError> {
        let Some(store) = self.vectors.as_mut() else {
            return Ok(0);
        };
        let mut kept = Vec::with_capacity(chunk.len());
        for ((id, hash, _), vector) in chunk.iter().zip(vectors) {
            // An input the endpoint refused on its own comes back empty: no vector.
            if vector.is_empty() {
                continue;
            }
            let current = self.items.get(id).map(|r| hex_hash(&r.embed_hash));
            if current == Some(*hash) {
                store.add(*id, *hash, vector)?;
                kept.push(*hash);
            }
        }
        if !kept.is_empty() {
            store.keep(&kept)?;
        }
        Ok(kept.len() as u64)
    }

    /// Indexes every file of the workspace; only changed files are parsed unless `force`. A
    /// run that fails keeps the last committed index. (The service runs [`build`] on the
    /// shared index instead, so that searches go on meanwhile.)
    pub fn index_all(
        &mut self,
        force: bool,
        embedder: Option<&Embedder>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, IndexError> {
        build(&RefCell::new(self), force, embedder, progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_wait_for_a_change_and_for_four_times_their_own_cost() {
        let (ws, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut index = WorkspaceIndex::open_plain(ws.path(), data.path());
        let cell = RefCell::new(&mut index);
        let mut run = Run::new(&cell);
        let ago = |secs| {
            Instant::now()
                .checked_sub(Duration::from_secs(secs))
                .unwrap()
        };
        run.last_commit = ago(3);
        // Nothing changed: nothing to write, however long ago the last commit was.
        assert!(!run.commit_due());
        run.changed = true;
        assert!(run.commit_due());
        // A commit that took 5 s waits 20 s for the next.
        run.commit_cost = Duration::from_secs(5);
        assert!(!run.commit_due());
        run.last_commit = ago(21);
        assert!(run.commit_due());
        // A commit measures itself and clears the change.
        run.commit(false).unwrap();
        assert!(!run.changed && run.commit_cost < Duration::from_secs(5));
    }
}
