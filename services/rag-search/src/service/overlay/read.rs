//! Reads through an overlay: which overlay a read naming a session sees (none for an unknown
//! session, another principal's, or one over another workspace: the base alone answers, so
//! session ids cannot be probed), and answering searches, lookups, context and snippets from
//! the base minus every path the overlay shadows plus the overlay's own items and contents.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use ploke_runtime::principal;

use super::{Entry, Inner, Overlay, check_session_id};
use crate::bm25::Filters;
use crate::embed::Embedder;
use crate::error::RagError;
use crate::fusion::Rrf;
use crate::index::{ItemRecord, Layer, Query, WorkspaceIndex, search_layers};
use crate::parse::Kind;
use crate::service::{
    LookupTarget, RagService, SearchHit, SearchQuery, Slot, Strategy, lock_poisoned,
};

/// How a read through an overlay sees one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::service) enum FileView {
    /// As the base has it (the overlay does not shadow it).
    Base,
    /// Deleted, or changed with its content not here: it does not exist for the session.
    Hidden,
    /// The developer's content and its hash.
    Content {
        /// The bytes.
        bytes: Vec<u8>,
        /// Their blake3 (hex).
        hash: String,
    },
}

impl Overlay {
    /// How the session sees `path`.
    pub(in crate::service) fn file(&self, path: &str) -> Result<FileView, RagError> {
        let inner = self.inner.read().map_err(|_| lock_poisoned())?;
        Ok(match inner.entries.get(path) {
            None => FileView::Base,
            Some(Entry::Changed { hash, .. }) => match self.store.blob_content(hash) {
                Some(bytes) => FileView::Content {
                    bytes,
                    hash: hash.clone(),
                },
                None => FileView::Hidden,
            },
            Some(Entry::Deleted | Entry::Pending { .. }) => FileView::Hidden,
        })
    }
}

impl RagService {
    /// The overlay a read naming `session_id` sees over `root`: none for an empty id, a
    /// session without one, one the caller may not act on, or one over another workspace.
    /// Runs in the request's task (the principal is a task-local).
    pub(in crate::service) fn overlay_view(
        &self,
        session_id: &str,
        root: &Path,
    ) -> Result<Option<Arc<Overlay>>, RagError> {
        check_session_id("session_id", session_id, true)?;
        if session_id.is_empty() {
            return Ok(None);
        }
        let Some(overlay) = self.overlays.get(session_id) else {
            return Ok(None);
        };
        if overlay.root != root || !principal::may_act_on(&overlay.owner) {
            return Ok(None);
        }
        overlay.touch();
        Ok(Some(overlay))
    }
}

/// A search of base and overlay with `strategy` (already checked against what the indexes
/// hold): the query vector is computed first, with no lock held; a HYBRID search whose query
/// cannot be embedded answers with BM25 alone and says why. The strategy used, the hits and
/// why dense retrieval did not contribute.
pub(in crate::service) fn search(
    slot: &Slot,
    overlay: &Overlay,
    query: &SearchQuery,
    (strategy, reason): (Strategy, String),
    embedder: Option<&Embedder>,
    rrf: Rrf,
) -> Result<(Strategy, Vec<SearchHit>, String), RagError> {
    let text = query.query.as_str();
    let (strategy, vector, reason) = match (strategy, embedder) {
        (Strategy::Dense, Some(e)) => (
            Strategy::Dense,
            Some(e.embed_query(text).map_err(RagError::Embedding)?),
            reason,
        ),
        (Strategy::Hybrid, Some(e)) => match e.embed_query(text) {
            Ok(v) => (Strategy::Hybrid, Some(v), reason),
            Err(e) => {
                tracing::warn!(error = %e, "query embedding failed; answering with bm25");
                (Strategy::Bm25, None, e.to_string())
            }
        },
        _ => (Strategy::Bm25, None, reason),
    };
    let q = match (strategy, vector.as_deref()) {
        (Strategy::Dense, Some(v)) => Query::Dense(v),
        (Strategy::Hybrid, Some(v)) => Query::Hybrid {
            text,
            vector: v,
            rrf,
        },
        _ => Query::Bm25 { text, rrf },
    };
    let base = slot.index.read().map_err(|_| lock_poisoned())?;
    let hits = ranked(&base, overlay, q, &query.filters, query.top_k)?;
    Ok((strategy, hits, reason))
}

/// The best `top_k` items of the base (minus what the overlay shadows) and the overlay, as
/// owned hits (they outlive both read locks).
fn ranked(
    base: &WorkspaceIndex,
    overlay: &Overlay,
    query: Query<'_>,
    filters: &Filters,
    top_k: usize,
) -> Result<Vec<SearchHit>, RagError> {
    let inner = overlay.inner.read().map_err(|_| lock_poisoned())?;
    let hidden = inner.hidden();
    let nothing = HashSet::new();
    let layers = [
        Layer {
            index: base,
            hidden: &hidden,
        },
        Layer {
            index: &inner.index,
            hidden: &nothing,
        },
    ];
    Ok(search_layers(&layers, query, filters, top_k)?
        .into_iter()
        .map(|l| SearchHit {
            record: l.found.hit.record.clone(),
            text: l.found.hit.text,
            score: l.found.hit.score,
            bm25_rank: l.found.bm25_rank,
            dense_rank: l.found.dense_rank,
        })
        .collect())
}

/// Items of base and overlay matching a lookup, at most `limit`, with the number that
/// matched: a file the overlay shadows answers from the overlay alone (nothing when deleted or
/// pending); canonical paths and names merge both, base items of shadowed files left out, in
/// the order one index gives (canonical path, file, position).
pub(in crate::service) fn lookup(
    base: &WorkspaceIndex,
    overlay: &Overlay,
    target: &LookupTarget,
    kind: Option<Kind>,
    limit: usize,
) -> Result<(Vec<ItemRecord>, usize), RagError> {
    let inner = overlay.inner.read().map_err(|_| lock_poisoned())?;
    let over = &inner.index;
    let found: Vec<&ItemRecord> = match target {
        LookupTarget::File(f) if inner.entries.contains_key(f) => over.lookup_file(f, kind),
        LookupTarget::File(f) => base.lookup_file(f, kind),
        LookupTarget::CanonPath(p) => merged(
            base.lookup_canon(p, kind),
            over.lookup_canon(p, kind),
            &inner,
        ),
        LookupTarget::Name(n) => {
            merged(base.lookup_name(n, kind), over.lookup_name(n, kind), &inner)
        }
    };
    let total = found.len();
    Ok((found.into_iter().take(limit).cloned().collect(), total))
}

fn merged<'a>(
    base: Vec<&'a ItemRecord>,
    over: Vec<&'a ItemRecord>,
    inner: &Inner,
) -> Vec<&'a ItemRecord> {
    let mut all: Vec<&ItemRecord> = base
        .into_iter()
        .filter(|r| !inner.entries.contains_key(&r.file))
        .chain(over)
        .collect();
    all.sort_by(|a, b| crate::index::by_place(a, b));
    all
}

/// Items of one file as the session sees it.
pub(in crate::service) fn items_of_file(
    base: &WorkspaceIndex,
    overlay: &Overlay,
    rel: &str,
) -> Result<u32, RagError> {
    let inner = overlay.inner.read().map_err(|_| lock_poisoned())?;
    Ok(if inner.entries.contains_key(rel) {
        inner.index.items_of_file(rel)
    } else {
        base.items_of_file(rel)
    })
}
