//! Updating an index in place: refreshing single files and directories (resolved by the path
//! policy, never through a symlink) and keeping the last committed index when an update fails.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use ploke_runtime::path_policy::ignores::IgnoreRules;

use crate::embed::Embedder;
use crate::parse;
use crate::scan::{self, ScannedFile};

use super::{IndexError, Summary, WorkspaceIndex};

impl WorkspaceIndex {
    /// Runs `update`; when it fails before BM25 committed anything, the index is put back as
    /// it was at its last commit (see [`Self::restore`]).
    pub(super) fn atomically<T>(
        &mut self,
        update: impl FnOnce(&mut Self) -> Result<T, IndexError>,
    ) -> Result<T, IndexError> {
        let checkpoint = self.checkpoint();
        let result = update(self);
        if let Err(e) = &result {
            self.restore(checkpoint, e);
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
        // Only what this refresh adds is embedded here (ids only grow): items an index run is
        // still embedding are left to it, not embedded under this write lock.
        let first_new = self.next_id;
        let mut relayout = false;
        // One reading of the ignore files for the whole refresh.
        let rules = Arc::new(IgnoreRules::new(&self.root));
        let expanded = self.expand(rels, &rules);
        for rel in &expanded {
            let language = parse::language_of(Path::new(rel));
            let known = self.files.contains_key(rel);
            let indexable = known || scan::indexable_by(&rules, rel);
            match (scan::own_file(&self.root, rel), language) {
                (Some(abs), Some(language)) if indexable && !scan::excluded(rel) => {
                    let file = ScannedFile {
                        rel: rel.clone(),
                        abs,
                        language,
                    };
                    self.apply(&file, false, &mut summary)?;
                    // A new crate root, module, package marker or manifest can move other
                    // files; so can a Rust file's `#[path]` declarations, old or new.
                    relayout |= parse::shapes_layout(rel)
                        || (language == "rust"
                            && (!known
                                || self.layout.crates.path_declarations().contains_key(rel)
                                || super::layout::declares_path_modules(&self.root, rel)));
                }
                _ => {
                    relayout |= known && (language == Some("rust") || parse::shapes_layout(rel));
                    if self.files.contains_key(rel) {
                        summary.items_removed += self.drop_file(rel);
                        summary.files_removed += 1;
                    } else {
                        summary.files_skipped += 1;
                    }
                }
            }
        }
        if relayout {
            self.relayout(&expanded, &mut summary)?;
        }
        let embedded = self.embed_missing(embedder, &mut summary, first_new);
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
    fn expand(&self, rels: &[String], rules: &Arc<IgnoreRules>) -> Vec<String> {
        let mut out = std::collections::BTreeSet::new();
        let asked: std::collections::HashSet<&str> = rels.iter().map(String::as_str).collect();
        for rel in rels {
            // Under another path of the same batch: that one's expansion holds it.
            let mut above = rel.as_str();
            let mut covered = false;
            while let Some((parent, _)) = above.rsplit_once('/') {
                covered |= asked.contains(parent);
                above = parent;
            }
            if covered {
                continue;
            }
            let dir = scan::own_dir(&self.root, rel);
            let prefix = format!("{rel}/");
            let under: Vec<&String> = self
                .files
                .keys()
                .filter(|k| k.starts_with(&prefix))
                .collect();
            if dir.is_some() || !under.is_empty() {
                out.extend(under.into_iter().cloned());
                // A file that became a directory (or the reverse) in one batch: the path itself
                // is refreshed too (dropped, or read).
                if self.files.contains_key(rel) || scan::own_file(&self.root, rel).is_some() {
                    out.insert(rel.clone());
                }
                // A directory a walk of the root would not enter (hidden, ignored, ploke's or
                // git's own) is not walked; below one that it would, the walk judges alike.
                let walked = rel.split('/').all(|p| !p.starts_with('.'))
                    && !scan::excluded(rel)
                    && !rules.is_ignored(rel, true);
                if let Some(dir) = dir.filter(|_| walked) {
                    let (found, _) = scan::scan_by(rules, &self.root, &dir);
                    out.extend(found.into_iter().map(|f| f.rel));
                }
            } else {
                out.insert(rel.clone());
            }
        }
        out.into_iter().collect()
    }
}
