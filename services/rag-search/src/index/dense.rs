//! The dense half of a workspace index: giving items vectors (from the content-hash cache or
//! the model) and nearest-neighbour search with the same filters as BM25.

use crate::bm25::Filters;
use crate::embed::{self, Embedder};
use crate::vectors::TextHash;

use super::search::ranked;
use super::{Hit, IndexError, ItemRecord, Ranked, Summary, WorkspaceIndex, hex_hash};

/// Items embedded (and kept) per step.
const EMBED_CHUNK: usize = 512;

/// Most items a refresh gives the model under its write lock (one edit's few items: tens of
/// milliseconds); more (a generated file, a pull touching hundreds of files) are left to
/// [`super::embed_pending`], which holds the lock only to take and keep each chunk, so that
/// searches never wait for the model.
pub(super) const EMBED_UNDER_LOCK_MAX: usize = 16;

impl WorkspaceIndex {
    /// Gives every item from id `first` on that has no vector one: from the content-hash cache
    /// when its embedded text was seen before, else from the model (under the caller's write
    /// lock: a refresh's few items; a full run uses [`super::build`]). More than
    /// [`EMBED_UNDER_LOCK_MAX`] for the model are left without one, counted in
    /// `summary.embed_deferred`.
    pub(super) fn embed_missing(
        &mut self,
        embedder: Option<&Embedder>,
        summary: &mut Summary,
        first: u64,
    ) -> Result<(), IndexError> {
        let (Some(vectors), Some(embedder)) = (self.vectors.as_mut(), embedder) else {
            return Ok(());
        };
        let mut missing: Vec<u64> = self
            .items
            .keys()
            .copied()
            .filter(|id| *id >= first && !vectors.contains(*id))
            .collect();
        missing.sort_unstable();
        let mut to_embed: Vec<(u64, TextHash)> = Vec::new();
        for id in missing {
            let Some(record) = self.items.get(&id) else {
                continue;
            };
            let hash = hex_hash(&record.embed_hash);
            if let Some(v) = vectors.cached(&hash).cloned() {
                vectors.add(id, hash, v)?;
                summary.embeddings_reused += 1;
            } else {
                to_embed.push((id, hash));
            }
        }
        if to_embed.is_empty() {
            return Ok(());
        }
        if to_embed.len() > EMBED_UNDER_LOCK_MAX {
            summary.embed_deferred += to_embed.len() as u64;
            return Ok(());
        }
        // The texts are read back from BM25: make the items just parsed visible to it.
        self.bm25.commit()?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        // In chunks, each kept as soon as it is embedded: a failure (an endpoint going away)
        // loses at most one chunk, and the next run embeds only what is still missing.
        for chunk in to_embed.chunks(EMBED_CHUNK) {
            let ids: Vec<u64> = chunk.iter().map(|(id, _)| *id).collect();
            let texts = self.bm25.texts(&ids)?;
            let inputs: Vec<String> = chunk
                .iter()
                .map(|(id, _)| {
                    let r = &self.items[id];
                    let body = texts.get(id).map_or("", String::as_str);
                    embed::item_text(&r.item.canon_path, &r.item.signature, &r.item.doc, body)
                })
                .collect();
            let embedded = embed::embed_with_progress(embedder, &inputs, threads, &mut |_| {})?;
            let mut kept = Vec::with_capacity(chunk.len());
            for ((id, hash), vector) in chunk.iter().zip(embedded) {
                // An input the endpoint refused on its own comes back empty: no vector.
                if !vector.is_empty() {
                    vectors.add(*id, *hash, vector)?;
                    kept.push(*hash);
                    summary.items_embedded += 1;
                }
            }
            if !kept.is_empty() {
                vectors.keep(&kept)?;
            }
        }
        Ok(())
    }

    /// Gives an item a vector computed elsewhere (imported vectors, benchmarks); false when the
    /// item does not exist or the index has no dense side.
    pub fn set_vector(&mut self, id: u64, vector: Vec<f32>) -> Result<bool, IndexError> {
        let (Some(vectors), Some(record)) = (self.vectors.as_mut(), self.items.get(&id)) else {
            return Ok(false);
        };
        vectors.add(id, hex_hash(&record.embed_hash), vector)?;
        Ok(true)
    }

    /// Dense ranking for a query vector, best first, after the ranking priors; scores are
    /// `(1 + cosine) / 2` times the priors (less of the length prior when the ranking is
    /// answered `alone`, not fused: [`crate::rank::DENSE_ALONE_PRIOR_SCALE`]).
    pub fn rank_dense(
        &self,
        query: &[f32],
        filters: &Filters,
        limit: usize,
        alone: bool,
    ) -> Result<Vec<Ranked<'_>>, IndexError> {
        let Some(vectors) = self.vectors.as_ref() else {
            return Ok(Vec::new());
        };
        let keep = |id: u64| self.items.get(&id).is_some_and(|r| passes(r, filters));
        let scored = vectors
            .search(query, crate::rank::window(limit), keep)?
            .into_iter()
            // Cosine similarity mapped to [0, 1], so that the priors scale it the same way for
            // every item (a negative similarity times a factor above 1 would fall).
            .filter_map(|(id, similarity)| Some((self.items.get(&id)?, (1.0 + similarity) / 2.0)))
            .collect();
        Ok(ranked(scored, self.prior.for_dense(alone), limit))
    }

    /// Dense hits for a query vector with their texts.
    pub fn search_dense(
        &self,
        query: &[f32],
        filters: &Filters,
        limit: usize,
    ) -> Result<Vec<Hit<'_>>, IndexError> {
        let ranked = self.rank_dense(query, filters, limit, true)?;
        self.with_texts(ranked)
    }
}

/// Whether an item passes search filters (the dense side filters in Rust; BM25 in tantivy).
pub(super) fn passes(r: &ItemRecord, f: &Filters) -> bool {
    (f.kinds.is_empty() || f.kinds.contains(&r.item.kind))
        && (f.languages.is_empty() || f.languages.contains(&r.language))
        && (f.path_prefixes.is_empty()
            || f.path_prefixes.iter().any(|p| {
                r.file == *p
                    || r.file
                        .strip_prefix(p.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            }))
}
