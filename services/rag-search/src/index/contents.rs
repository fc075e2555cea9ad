//! Feeding an index contents rather than files: an overlay's index (a session's changed files
//! over a workspace's base) is given the developer's files as bytes from the overlay's content
//! store, never read from a directory. Parsing ([`Contents::parse`]) and embedding (by the
//! caller, with [`Contents::embed_inputs`]) need no lock; applying them
//! ([`WorkspaceIndex::apply_contents`]) is one short write section that also drops the files the
//! overlay no longer holds, and commits.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Instant;

use rayon::prelude::*;

use crate::embed;
use crate::parse::Layout;
use crate::scan;
use crate::vectors::TextHash;

use super::update::{self, FileName, Prepared};
use super::{IndexError, Summary, WorkspaceIndex, hex_hash, record};

/// Files given as contents, parsed, not yet applied.
pub struct Contents {
    files: Vec<(String, &'static str, Prepared)>,
}

impl std::fmt::Debug for Contents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Contents")
            .field("files", &self.files.len())
            .finish()
    }
}

impl Contents {
    /// Parses `files` (path relative to the root, content) on every core. Files that would
    /// not be indexed by name ([`scan::indexable_name`]: hidden, unknown language) are left
    /// out; content that is not text is skipped, as a walk skips it. A file whose parser
    /// panics is skipped, never taking the others with it.
    pub fn parse(files: Vec<(String, Vec<u8>)>, layout: &Layout) -> Self {
        let files = files
            .into_par_iter()
            .filter(|(rel, _)| scan::indexable_name(rel))
            .filter_map(|(rel, bytes)| {
                let language = crate::parse::language_of(Path::new(&rel))?;
                let prepared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    update::prepare_bytes(&rel, language, bytes, (layout, true), None)
                }))
                .unwrap_or_else(|_| {
                    tracing::error!(file = %rel, "the parser panicked; skipping the file");
                    Prepared::Skipped
                });
                Some((rel, language, prepared))
            })
            .collect();
        Self { files }
    }

    /// Files to apply.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Items parsed.
    pub fn item_count(&self) -> usize {
        self.files
            .iter()
            .map(|(_, _, p)| match p {
                Prepared::Parsed { items, .. } => items.len(),
                Prepared::Missing | Prepared::Skipped | Prepared::Unchanged => 0,
            })
            .sum()
    }

    /// Every distinct hash of an item's embedded text.
    pub fn embed_hashes(&self) -> Vec<TextHash> {
        let mut seen = HashSet::new();
        self.items()
            .map(|(_, _, hash)| hex_hash(hash))
            .filter(|h| seen.insert(*h))
            .collect()
    }

    /// The texts to embed, once per distinct text, of the items whose embedded text is not
    /// `known`: (hash, text).
    pub fn embed_inputs(&self, known: impl Fn(&TextHash) -> bool) -> Vec<(TextHash, String)> {
        let mut seen = HashSet::new();
        self.items()
            .filter_map(|(text, item, hash)| {
                let hash = hex_hash(hash);
                if known(&hash) || !seen.insert(hash) {
                    return None;
                }
                let body = text.get(item.byte_start..item.byte_end).unwrap_or("");
                Some((
                    hash,
                    embed::item_text(&item.canon_path, &item.signature, &item.doc, body),
                ))
            })
            .collect()
    }

    fn items(&self) -> impl Iterator<Item = (&str, &crate::parse::ParsedItem, &str)> {
        self.files.iter().flat_map(|(_, _, p)| match p {
            Prepared::Parsed { text, items, .. } => items
                .iter()
                .map(|(item, hash)| (text.as_str(), item, hash.as_str()))
                .collect::<Vec<_>>(),
            Prepared::Missing | Prepared::Skipped | Prepared::Unchanged => Vec::new(),
        })
    }
}

impl WorkspaceIndex {
    /// The hash a file had when it was indexed, if it is.
    pub fn file_hash(&self, rel: &str) -> Option<&str> {
        self.files.get(rel).map(|f| f.hash.as_str())
    }

    /// Every indexed file with its hash, in path order.
    pub fn files(&self) -> impl Iterator<Item = (&str, &str)> {
        self.files
            .iter()
            .map(|(k, f)| (k.as_str(), f.hash.as_str()))
    }

    /// Files with an item that has no vector (its embedding failed): empty for an index
    /// without vectors.
    pub fn files_without_vectors(&self) -> HashSet<&str> {
        let Some(vectors) = self.vectors.as_ref() else {
            return HashSet::new();
        };
        self.items
            .values()
            .filter(|r| !vectors.contains(r.id))
            .map(|r| r.file.as_str())
            .collect()
    }

    /// The cached embeddings of these texts that this index has (its content-hash cache).
    pub fn cached_vectors(&self, hashes: &[TextHash]) -> HashMap<TextHash, Vec<f32>> {
        let Some(vectors) = self.vectors.as_ref() else {
            return HashMap::new();
        };
        hashes
            .iter()
            .filter_map(|h| Some((*h, vectors.cached(h)?.clone())))
            .collect()
    }

    /// Releases BM25's writer (threads, memory) until the next write: see
    /// [`crate::bm25::Bm25::release_writer`].
    pub fn release_writer(&mut self) {
        self.bm25.release_writer();
    }

    /// Drops the files `removed`, adds (or replaces) the files of `contents` and gives their
    /// items the vectors in `vectors` (by embedded-text hash; an item without one has no
    /// vector), then commits and releases the writer. A failure keeps the last committed
    /// index. The summary counts files and items; what was embedded is the caller's to count.
    pub fn apply_contents(
        &mut self,
        contents: Contents,
        removed: &[String],
        vectors: &HashMap<TextHash, Vec<f32>>,
    ) -> Result<Summary, IndexError> {
        let started = Instant::now();
        let mut summary = self.atomically(|index| {
            let mut summary = Summary::default();
            for rel in removed {
                if index.files.contains_key(rel) {
                    summary.items_removed += index.drop_file(rel);
                    summary.files_removed += 1;
                }
            }
            let first = index.next_id;
            for (rel, language, prepared) in contents.files {
                let name = FileName {
                    rel: &rel,
                    language,
                };
                let outcome = index.commit_prepared(&name, prepared)?;
                record(&mut summary, outcome);
            }
            if let Some(v) = index.vectors.as_mut() {
                for id in first..index.next_id {
                    let Some(r) = index.items.get(&id) else {
                        continue;
                    };
                    let hash = hex_hash(&r.embed_hash);
                    if let Some(vector) = vectors.get(&hash) {
                        v.add(id, hash, vector.clone())?;
                    }
                }
            }
            index.commit()?;
            Ok(summary)
        })?;
        self.bm25.release_writer();
        summary.items_total = self.items.len() as u64;
        summary.duration = started.elapsed();
        Ok(summary)
    }
}
