//! The dense half of a workspace index: giving items vectors (from the content-hash cache or
//! the model) and nearest-neighbour search with the same filters as BM25.

use crate::bm25::Filters;
use crate::embed::{self, EmbedError, Embedder};
use crate::vectors::TextHash;

use super::{Hit, IndexError, ItemRecord, Phase, Progress, Summary, WorkspaceIndex, hex_hash};

impl WorkspaceIndex {
    /// Gives every item without a vector one: from the content-hash cache when its embedded
    /// text was seen before, else from the model.
    pub(super) fn embed_missing(
        &mut self,
        embedder: Option<&Embedder>,
        summary: &mut Summary,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(), IndexError> {
        let (Some(vectors), Some(embedder)) = (self.vectors.as_mut(), embedder) else {
            return Ok(());
        };
        let mut missing: Vec<u64> = self
            .items
            .keys()
            .copied()
            .filter(|id| !vectors.contains(*id))
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
        let ids: Vec<u64> = to_embed.iter().map(|(id, _)| *id).collect();
        let texts = self.bm25.texts(&ids)?;
        let inputs: Vec<String> = to_embed
            .iter()
            .map(|(id, _)| {
                let r = &self.items[id];
                let body = texts.get(id).map_or("", String::as_str);
                embed::item_text(&r.item.canon_path, &r.item.signature, &r.item.doc, body)
            })
            .collect();
        let total = inputs.len() as u64;
        let base = vectors.len() as u64;
        let items = self.items.len() as u64;
        let (tx, rx) = std::sync::mpsc::channel::<usize>();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let embedded = std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                let tx = std::sync::Mutex::new(tx);
                embedder.embed_all(&inputs, threads, &|done| {
                    if let Ok(tx) = tx.lock() {
                        let _ = tx.send(done);
                    }
                })
            });
            for done in rx.iter() {
                progress(Progress {
                    phase: Phase::Embedding,
                    files_done: 0,
                    files_total: 0,
                    items_done: items,
                    embedded_done: base + done as u64,
                    message: format!("embedded {done} of {total} items"),
                });
            }
            worker
                .join()
                .unwrap_or_else(|_| Err(EmbedError("the embedding thread panicked".into())))
        })?;
        for ((id, hash), vector) in to_embed.into_iter().zip(embedded) {
            vectors.add(id, hash, vector)?;
        }
        summary.items_embedded += total;
        Ok(())
    }

    /// Dense hits for a query vector, best first, as (record, similarity, rank, text).
    pub fn search_dense(
        &self,
        query: &[f32],
        filters: &Filters,
        limit: usize,
    ) -> Result<Vec<Hit<'_>>, IndexError> {
        let Some(vectors) = self.vectors.as_ref() else {
            return Ok(Vec::new());
        };
        let keep = |id: u64| self.items.get(&id).is_some_and(|r| passes(r, filters));
        let mut found = vectors.search(query, crate::rank::window(limit), keep)?;
        for (id, similarity) in &mut found {
            if let Some(r) = self.items.get(id) {
                *similarity *= crate::rank::factor(r, self.prior);
            }
        }
        found.sort_by(|a, b| b.1.total_cmp(&a.1));
        found.truncate(limit);
        let ids: Vec<u64> = found.iter().map(|(id, _)| *id).collect();
        let mut texts = self.bm25.texts(&ids)?;
        let mut hits = Vec::with_capacity(found.len());
        for (id, similarity) in found {
            if let Some(record) = self.items.get(&id) {
                hits.push(Hit {
                    record,
                    score: similarity,
                    rank: u32::try_from(hits.len() + 1).unwrap_or(u32::MAX),
                    text: texts.remove(&id).unwrap_or_default(),
                });
            }
        }
        Ok(hits)
    }
}

/// Whether an item passes search filters (the dense side filters in Rust; BM25 in tantivy).
fn passes(r: &ItemRecord, f: &Filters) -> bool {
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
