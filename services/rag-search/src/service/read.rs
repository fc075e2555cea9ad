//! The reads of rag-search: ranked search, context assembly, snippets, lookups. Each resolves
//! its workspace (and the session's overlay, when it names one) in the request's task, then
//! works on the blocking pool — except a BM25 search of a small base whose lock is free, which
//! costs less than the hand-off and runs in place. Without an overlay the base answers alone;
//! with one, the base minus the paths it shadows plus its own items and contents
//! ([`super::overlay`]).

use std::collections::HashMap;

use ploke_runtime::blocking::BlockingError;
use ploke_runtime::path_policy;

use super::overlay::{self, FileView};
use super::paths::read_span;
use super::{
    IndexState, LookupTarget, NO_MODEL, RagService, SearchHit, SearchOutcome, SearchQuery, Slot,
    Snippet, SpanRequest, Strategy, check_relative, lock_poisoned,
};
use crate::context::{self, Assembled, Budget, Candidate};
use crate::embed::{EmbedError, Embedder};
use crate::error::RagError;
use crate::fusion::Rrf;
use crate::index::{Found, Hybrid, ItemRecord, Query, WorkspaceIndex};
use crate::parse::Kind;
use crate::scan;

/// Why a HYBRID search that names an item ran without its dense side.
const NAMED: &str = "the query names an item: BM25 and names decide, the dense side was skipped";
/// Why a HYBRID query that quotes text was answered without its dense side.
const QUOTED: &str = "the query quotes text: BM25 finds it as written, the dense side was skipped";

/// The strategy, hits and dense-unavailable reason a HYBRID search ended with.
fn hybrid_outcome<'a>(outcome: Hybrid<'a>, reason: &str) -> (Strategy, Vec<Found<'a>>, String) {
    match outcome {
        Hybrid::Fused(found) => (Strategy::Hybrid, found, reason.to_owned()),
        Hybrid::Bm25Only(found, e) => {
            tracing::warn!(error = %e, "query embedding failed; answering with bm25");
            (Strategy::Bm25, found, e.to_string())
        }
    }
}

fn phase_name(phase: crate::index::Phase) -> &'static str {
    use crate::index::Phase;
    match phase {
        Phase::Scanning => "scanning",
        Phase::Parsing => "parsing",
        Phase::Embedding => "embedding",
        Phase::Committing => "committing",
        Phase::Done => "done",
    }
}

/// The strategy a search can use now and why dense retrieval does not contribute: while the
/// first run is still embedding, no item may have a vector yet — HYBRID answers with BM25
/// alone and says so; DENSE cannot answer.
fn usable(
    strategy: Strategy,
    no_vectors: bool,
    index_state: &IndexState,
    reason: String,
) -> Result<(Strategy, String), RagError> {
    match strategy {
        Strategy::Dense | Strategy::Hybrid if no_vectors => {
            let why = match index_state {
                IndexState::Indexing(p) => format!(
                    "no item has a vector yet: the index run is at {} ({} of {} items embedded)",
                    phase_name(p.phase),
                    p.embed_done,
                    p.embed_total
                ),
                _ => "no item has a vector (the index has no items, or the embedding model failed on all of them)".to_owned(),
            };
            if strategy == Strategy::Dense {
                return Err(RagError::DenseUnavailable(why));
            }
            Ok((Strategy::Bm25, why))
        }
        other => Ok((other, reason)),
    }
}

/// A search of the base alone.
fn search_base(
    slot: &Slot,
    query: &SearchQuery,
    (strategy, reason): (Strategy, String),
    embedder: Option<&Embedder>,
    rrf: Rrf,
) -> Result<(Strategy, Vec<SearchHit>, String), RagError> {
    let text = query.query.as_str();
    // A remote endpoint may take seconds: its query vector is fetched before the index lock
    // is taken, so refreshes (and other searches behind them) never wait on it. A local model
    // (milliseconds) embeds while BM25 ranks under the lock.
    let early = match embedder {
        Some(e) if e.is_remote() && strategy != Strategy::Bm25 => Some(e.embed_query(text)),
        _ => None,
    };
    let index = slot.index.read().map_err(|_| lock_poisoned())?;
    search_index(&index, query, (strategy, reason), embedder, early, rrf)
}

/// A search of the base under its read lock (`early`: the query vector when it was fetched
/// before the lock).
fn search_index(
    index: &WorkspaceIndex,
    query: &SearchQuery,
    (strategy, reason): (Strategy, String),
    embedder: Option<&Embedder>,
    early: Option<Result<Vec<f32>, EmbedError>>,
    rrf: Rrf,
) -> Result<(Strategy, Vec<SearchHit>, String), RagError> {
    let f = &query.filters;
    let text = query.query.as_str();
    // A failed query embedding fails DENSE; HYBRID answers with BM25 alone and says why.
    let (strategy, found, reason) = match (strategy, embedder, early) {
        (Strategy::Dense, Some(e), early) => {
            let v = early
                .unwrap_or_else(|| e.embed_query(text))
                .map_err(RagError::Embedding)?;
            let found = index.search(Query::Dense(&v), f, query.top_k)?;
            (strategy, found, reason)
        }
        (Strategy::Hybrid, Some(_), Some(early)) => hybrid_outcome(
            index.search_hybrid(text, || early, f, query.top_k, rrf)?,
            &reason,
        ),
        (Strategy::Hybrid, Some(e), None) => hybrid_outcome(
            index.search_hybrid(text, || e.embed_query(text), f, query.top_k, rrf)?,
            &reason,
        ),
        _ => (
            Strategy::Bm25,
            index.search(Query::Bm25 { text, rrf }, f, query.top_k)?,
            reason,
        ),
    };
    let hits = found
        .into_iter()
        .map(|f| SearchHit {
            record: f.hit.record.clone(),
            text: f.hit.text,
            score: f.hit.score,
            bm25_rank: f.bm25_rank,
            dense_rank: f.dense_rank,
        })
        .collect();
    Ok((strategy, hits, reason))
}

/// What a BM25 search may weigh to run where the request arrived (on the async worker)
/// instead of on the blocking pool: ~0.2 ms of work at 9k items with ten hits, less than
/// handing it to a blocking thread and back costs (BM25 server CPU per Search 0.37 -> 0.32 ms,
/// docs/PERFORMANCE.md). A larger index, a longer query or more hits go to the pool, so that
/// no request holds an async worker for long.
const IN_PLACE_MAX_ITEMS: u64 = 20_000;
const IN_PLACE_MAX_QUERY_BYTES: usize = 1024;
const IN_PLACE_MAX_TOP_K: usize = 100;

/// Whether a BM25 search of `query` over `items` is cheap enough to run in place (not a query
/// with quotes: quoted text reads the stored text of every candidate, [`crate::quotes`]).
fn cheap_enough(items: u64, query: &SearchQuery) -> bool {
    items <= IN_PLACE_MAX_ITEMS
        && query.query.len() <= IN_PLACE_MAX_QUERY_BYTES
        && query.top_k <= IN_PLACE_MAX_TOP_K
        && !query.query.contains('"')
}

/// A BM25 search of the base alone, in place, when it is [`cheap_enough`] and the index lock
/// is free at once (a run or refresh writing makes it wait on the pool instead); `None`
/// otherwise. A panic is caught and answered as the pool answers one.
fn bm25_in_place(
    slot: &Slot,
    query: &SearchQuery,
    reason: &str,
    index_state: &IndexState,
    rrf: Rrf,
) -> Option<Result<SearchOutcome, RagError>> {
    let index = slot.index.try_read().ok()?;
    if !cheap_enough(index.item_count(), query) {
        return None;
    }
    let searched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        search_index(
            &index,
            query,
            (Strategy::Bm25, reason.to_owned()),
            None,
            None,
            rrf,
        )
    }));
    Some(match searched {
        Ok(searched) => searched
            .map(|(strategy, hits, reason)| outcome(strategy, hits, reason, index_state.clone())),
        Err(panic) => Err(BlockingError::Panicked(panic_message(panic.as_ref())).into()),
    })
}

/// The message a panic carried.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a search panicked".to_owned())
}

fn outcome(
    strategy: Strategy,
    hits: Vec<SearchHit>,
    reason: String,
    index_state: IndexState,
) -> SearchOutcome {
    SearchOutcome {
        hits,
        strategy,
        dense_used: matches!(strategy, Strategy::Dense | Strategy::Hybrid),
        dense_unavailable_reason: reason,
        index_state,
    }
}

impl RagService {
    /// Ranked search: BM25, dense, or both fused with RRF; through the session's overlay when
    /// the query names one.
    pub async fn search(&self, query: SearchQuery) -> Result<SearchOutcome, RagError> {
        let strategy = match (query.strategy, &self.embedder) {
            (Strategy::Dense, None) => return Err(RagError::DenseUnavailable(NO_MODEL.into())),
            (Strategy::Default | Strategy::Hybrid, Some(_)) => Strategy::Hybrid,
            (Strategy::Default | Strategy::Hybrid | Strategy::Bm25, None) => Strategy::Bm25,
            (s @ (Strategy::Bm25 | Strategy::Dense), Some(_)) => s,
        };
        let (root, slot, index_state) = self.ready_slot(&query.workspace_root)?;
        let overlay = self.overlay_view(&query.session_id, &root)?;
        let embedder = self.embedder.clone();
        let rrf = self.rrf;
        let skip_when_named = self.skip_dense_when_named;
        let reason = self.dense_reason();
        if strategy == Strategy::Bm25
            && overlay.is_none()
            && let Some(outcome) = bm25_in_place(&slot, &query, &reason, &index_state, rrf)
        {
            return outcome;
        }
        self.blocking(move || {
            let mut embedded = slot
                .index
                .read()
                .map_err(|_| lock_poisoned())?
                .embedded_count();
            if let Some(o) = &overlay {
                embedded += o
                    .inner
                    .read()
                    .map_err(|_| lock_poisoned())?
                    .index
                    .embedded_count();
            }
            let mut plan = usable(
                strategy,
                embedded == 0 && embedder.is_some(),
                &index_state,
                reason,
            )?;
            // A query that quotes text, or names an item in code form, is decided by the lexical
            // signal; the query embedding (most of a HYBRID search's CPU) is not computed.
            if plan.0 == Strategy::Hybrid && skip_when_named {
                if !crate::quotes::quoted_spans(&query.query).is_empty() {
                    plan = (Strategy::Bm25, QUOTED.to_owned());
                } else if slot
                    .index
                    .read()
                    .map_err(|_| lock_poisoned())?
                    .names_decisive(&query.query, rrf)
                {
                    plan = (Strategy::Bm25, NAMED.to_owned());
                }
            }
            let (strategy, hits, reason) = match &overlay {
                None => search_base(&slot, &query, plan, embedder.as_deref(), rrf)?,
                Some(o) => overlay::search(&slot, o, &query, plan, embedder.as_deref(), rrf)?,
            };
            Ok(outcome(strategy, hits, reason, index_state))
        })
        .await?
    }

    /// Retrieval plus context assembly. Parts of the overlay's files are read from the
    /// overlay; every part is rendered with its workspace path.
    pub async fn context(
        &self,
        query: SearchQuery,
        budget: Budget,
    ) -> Result<(Assembled, SearchOutcome), RagError> {
        let (root, _, _) = self.ready_slot(&query.workspace_root)?;
        let overlay = self.overlay_view(&query.session_id, &root)?;
        let outcome = self.search(query).await?;
        let candidates: Vec<Candidate> = outcome
            .hits
            .iter()
            .map(|h| Candidate::of(&h.record, h.text.clone(), h.score))
            .collect();
        let assembled = self
            .blocking(move || {
                context::assemble(&root, candidates, budget, &mut |file, hash| {
                    let (bytes, current) = match overlay.as_ref().map(|o| o.file(file)) {
                        Some(Ok(FileView::Content { bytes, hash })) => (bytes, hash),
                        Some(Ok(FileView::Hidden) | Err(_)) => return None,
                        Some(Ok(FileView::Base)) | None => {
                            let abs = scan::own_file(&root, file)?;
                            let bytes =
                                path_policy::read_regular(&abs, scan::MAX_FILE_BYTES).ok()?;
                            let current = blake3::hash(&bytes).to_hex().to_string();
                            (bytes, current)
                        }
                    };
                    (current == hash)
                        .then(|| String::from_utf8(bytes).ok())
                        .flatten()
                })
            })
            .await?;
        Ok((assembled, outcome))
    }

    /// Exact bytes of spans from the files as they are now (as the session sees them, when
    /// it names one with an overlay: its content for files it changed, missing for files it
    /// deleted or awaits).
    pub async fn snippets(
        &self,
        workspace_root: &str,
        session_id: &str,
        spans: Vec<SpanRequest>,
    ) -> Result<Vec<Snippet>, RagError> {
        let (root, _) = self.slot(workspace_root)?;
        let overlay = self.overlay_view(session_id, &root)?;
        let mut checked = Vec::with_capacity(spans.len());
        for (i, s) in spans.into_iter().enumerate() {
            let path = check_relative(&format!("spans[{i}].span.path"), &s.path)?;
            checked.push(SpanRequest { path, ..s });
        }
        self.blocking(move || {
            let mut files: HashMap<String, Option<(Vec<u8>, String)>> = HashMap::new();
            let mut out = Vec::with_capacity(checked.len());
            for s in checked {
                if !files.contains_key(&s.path) {
                    let read = match overlay.as_ref().map(|o| o.file(&s.path)).transpose()? {
                        Some(FileView::Content { bytes, hash }) => Some((bytes, hash)),
                        Some(FileView::Hidden) => None,
                        // Read by the path policy: a symlink (inside or out), a FIFO or a
                        // device is missing, never followed or waited on.
                        Some(FileView::Base) | None => scan::own_file(&root, &s.path)
                            .and_then(|abs| {
                                path_policy::read_regular(&abs, scan::MAX_FILE_BYTES).ok()
                            })
                            .map(|b| {
                                let h = blake3::hash(&b).to_hex().to_string();
                                (b, h)
                            }),
                    };
                    files.insert(s.path.clone(), read);
                }
                out.push(read_span(&s, files.get(&s.path).and_then(Option::as_ref)));
            }
            Ok::<_, RagError>(out)
        })
        .await?
    }

    /// Items by canonical path, name or file, at most `limit`, with the number that matched;
    /// through the session's overlay when `session_id` names one.
    pub fn lookup(
        &self,
        workspace_root: &str,
        session_id: &str,
        target: &LookupTarget,
        kind: Option<Kind>,
        limit: usize,
    ) -> Result<(Vec<ItemRecord>, usize), RagError> {
        let (root, slot, _) = self.ready_slot(workspace_root)?;
        let overlay = self.overlay_view(session_id, &root)?;
        let index = slot.index.read().map_err(|_| lock_poisoned())?;
        if let Some(o) = &overlay {
            return overlay::lookup(&index, o, target, kind, limit);
        }
        let found = match target {
            LookupTarget::CanonPath(p) => index.lookup_canon(p, kind),
            LookupTarget::Name(n) => index.lookup_name(n, kind),
            LookupTarget::File(f) => index.lookup_file(f, kind),
        };
        let total = found.len();
        Ok((found.into_iter().take(limit).cloned().collect(), total))
    }

    /// Items of one file (for get_file_metadata), as the session sees it.
    pub fn items_of_file(
        &self,
        workspace_root: &str,
        session_id: &str,
        rel: &str,
    ) -> Result<u32, RagError> {
        let (root, slot) = self.slot(workspace_root)?;
        let overlay = self.overlay_view(session_id, &root)?;
        let index = slot.index.read().map_err(|_| lock_poisoned())?;
        match &overlay {
            Some(o) => overlay::items_of_file(&index, o, rel),
            None => Ok(index.items_of_file(rel)),
        }
    }
}

/// A page of a workspace's indexed files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePage {
    /// (path, language, content hash, items), path order.
    pub files: Vec<(String, String, String, u32)>,
    /// The last path of the page when more follow.
    pub next: Option<String>,
    /// Files in the index.
    pub total: u64,
}

impl RagService {
    /// Up to `limit` indexed files of the workspace after the path `after`.
    pub fn list_files(
        &self,
        workspace_root: &str,
        after: &str,
        limit: usize,
    ) -> Result<FilePage, RagError> {
        let (_, slot, _) = self.ready_slot(workspace_root)?;
        let index = slot.index.read().map_err(|_| lock_poisoned())?;
        let mut files = index.files_after(after, limit + 1);
        let more = files.len() > limit;
        files.truncate(limit);
        let next = more.then(|| files.last().map(|f| f.0.clone())).flatten();
        Ok(FilePage {
            files,
            next,
            total: index.file_count(),
        })
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
