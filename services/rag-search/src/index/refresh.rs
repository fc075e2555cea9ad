//! Updating an index in place: refreshing single files and directories (resolved by the path
//! policy, never through a symlink) and keeping the last committed index when an update fails.

use std::path::Path;
use std::time::Instant;

use crate::embed::Embedder;
use crate::parse;
use crate::scan::{self, ScannedFile};

use super::{IndexError, Summary, WorkspaceIndex};

impl WorkspaceIndex {
    /// Runs `update`; when it fails before BM25 committed anything, the index is put back as
    /// it was at its last commit (the item tables in memory, BM25's pending changes dropped),
    /// so searches keep answering from the last good index instead of from tables that no
    /// longer match it. Once BM25 has committed, the tables match what searches see and stay.
    pub(super) fn atomically<T>(
        &mut self,
        update: impl FnOnce(&mut Self) -> Result<T, IndexError>,
    ) -> Result<T, IndexError> {
        let before = (
            self.files.clone(),
            self.items.clone(),
            self.next_id,
            self.last_indexed_at,
        );
        let commits = self.bm25.commits();
        let result = update(self);
        if let Err(e) = &result
            && self.bm25.commits() == commits
        {
            (self.files, self.items, self.next_id, self.last_indexed_at) = before;
            match self.bm25.rollback() {
                Ok(()) => {
                    tracing::warn!(root = %self.root.display(), error = %e, "index update failed; the last committed index stays")
                }
                Err(r) => {
                    tracing::warn!(root = %self.root.display(), error = %e, rollback = %r, "index update failed and bm25 could not roll back; searches answer from the last commit")
                }
            }
        }
        result
    }

    /// Re-reads the given files (relative paths); missing ones are removed. A refresh that
    /// fails keeps the last committed index (see [`Self::atomically`]).
    pub fn refresh(
        &mut self,
        rels: &[String],
        embedder: Option<&Embedder>,
    ) -> Result<Summary, IndexError> {
        self.atomically(|index| index.refresh_now(rels, embedder))
    }

    fn refresh_now(
        &mut self,
        rels: &[String],
        embedder: Option<&Embedder>,
    ) -> Result<Summary, IndexError> {
        let started = Instant::now();
        let mut summary = Summary::default();
        for rel in self.expand(rels) {
            let rel = &rel;
            let language = parse::language_of(Path::new(rel));
            let indexable = self.files.contains_key(rel) || scan::is_indexable(&self.root, rel);
            match (scan::own_file(&self.root, rel), language) {
                (Some(abs), Some(language)) if indexable && !scan::excluded(rel) => {
                    let file = ScannedFile {
                        rel: rel.clone(),
                        abs,
                        language,
                    };
                    self.apply(&file, false, &mut summary)?;
                }
                _ => {
                    if self.files.contains_key(rel) {
                        summary.items_removed += self.drop_file(rel);
                        summary.files_removed += 1;
                    } else {
                        summary.files_skipped += 1;
                    }
                }
            }
        }
        let embedded = self.embed_missing(embedder, &mut summary, &mut |_| {});
        self.commit()?;
        embedded?;
        summary.items_total = self.items.len() as u64;
        summary.duration = started.elapsed();
        Ok(summary)
    }

    /// Paths to refresh for `rels` (each resolved by the path policy: a symlink is never
    /// followed, in or out of the root, just as a full scan never follows one): a directory
    /// stands for the indexable files under it and
    /// the indexed files that were under it (a moved or deleted directory reports only itself).
    fn expand(&self, rels: &[String]) -> Vec<String> {
        let mut out = std::collections::BTreeSet::new();
        for rel in rels {
            let dir = scan::own_dir(&self.root, rel);
            let prefix = format!("{rel}/");
            let under: Vec<&String> = self
                .files
                .keys()
                .filter(|k| k.starts_with(&prefix))
                .collect();
            if dir.is_some() || !under.is_empty() {
                out.extend(under.into_iter().cloned());
                if let Some(dir) = dir {
                    let (found, _) = scan::scan(&dir);
                    out.extend(
                        found
                            .into_iter()
                            .map(|f| format!("{rel}/{}", f.rel))
                            .filter(|r| scan::is_indexable(&self.root, r)),
                    );
                }
            } else {
                out.insert(rel.clone());
            }
        }
        out.into_iter().collect()
    }
}
