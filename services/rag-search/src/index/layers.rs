//! Searching indexes stacked as layers — a session's overlay (the developer's changed files)
//! over the workspace's base — as if they were one: each layer is ranked with the files a layer
//! above shadows left out, and the rankings are merged by score, then fused like one index's.
//!
//! Why the scores of two indexes compare:
//! - BM25: every layer is scored with the same corpus statistics ([`CorpusStats`]: document
//!   counts, field lengths and document frequencies of all layers summed), so a term weighs
//!   the same in both and lengths are normalised against one average. Scored with its own
//!   statistics, a term in the overlay's ten files would weigh several times less than in the
//!   base's thousands, and the developer's new function would rank below base items that
//!   mention the query's words in passing. (The base's statistics still count the files the
//!   overlay shadows: a few documents among thousands, well inside BM25's own noise.)
//! - dense: cosine similarity against the same query vector from the same model is absolute.
//! - the ranking priors ([`crate::rank`]) are per item, the same in every layer.
//!
//! - names: scored across the layers at once ([`crate::names::matches_layers`]): a name
//!   matches every layer the way the best of them can, its rarity counts the session's items
//!   once, and the rivals one rule compares are the same whatever layer holds them.
//!
//! The merged BM25, dense and names lists are fused by RRF exactly as one index fuses its own,
//! so an overlay item gets the ranks it would have had in one index.

use std::cell::RefCell;
use std::collections::HashSet;

use rustc_hash::FxHashMap;

use crate::bm25::{CorpusStats, Filters, Scope};
use crate::fusion::{self, Lists, Rrf};
use crate::names::{NameLayer, Resolved, head_of, matches_layers};
use crate::rank;
use crate::record::ItemRecord;

use super::dense::passes;
use super::search::{NAME_DEPTH, bm25_depth, dense_depth, ranked, weighed_names};
use super::{Found, Hit, IndexError, Query, Ranked, WorkspaceIndex};

/// One index of a layered search, with the files of it that a layer above shadows.
#[derive(Debug, Clone, Copy)]
pub struct Layer<'a> {
    /// The index.
    pub index: &'a WorkspaceIndex,
    /// Files (relative paths) of this index never to answer from.
    pub hidden: &'a HashSet<&'a str>,
}

/// A result of a layered search: the layer it comes from (its position in the slice given)
/// and the result itself.
#[derive(Debug, Clone)]
pub struct LayeredFound<'a> {
    /// Position of the layer in the slice searched.
    pub layer: usize,
    /// The item, its text, score and ranks.
    pub found: Found<'a>,
}

/// A ranked item and the layer it comes from.
type Tagged<'a> = (usize, Ranked<'a>);

/// Lists from several layers (each best first) as one, best `limit` first, ranks renumbered.
/// Equal scores keep the upper layer first (the developer's version of a tie wins).
fn merge(lists: Vec<Vec<Tagged<'_>>>, limit: usize) -> Vec<Tagged<'_>> {
    let mut all: Vec<Tagged<'_>> = lists.into_iter().flatten().collect();
    all.sort_by(|a, b| {
        b.1.score
            .total_cmp(&a.1.score)
            .then(b.0.cmp(&a.0))
            .then(a.1.rank.cmp(&b.1.rank))
    });
    all.truncate(limit);
    for (i, (_, r)) in all.iter_mut().enumerate() {
        r.rank = u32::try_from(i + 1).unwrap_or(u32::MAX);
    }
    all
}

/// The BM25 ranking of every layer, merged (see the module doc for why scores compare).
pub fn rank_bm25_layers<'a>(
    layers: &[Layer<'a>],
    text: &str,
    filters: &Filters,
    limit: usize,
) -> Result<Vec<Tagged<'a>>, IndexError> {
    let indexes: Vec<&crate::bm25::Bm25> = layers.iter().map(|l| &l.index.bm25).collect();
    let stats = CorpusStats::of(&indexes);
    let mut lists = Vec::with_capacity(layers.len());
    for (i, layer) in layers.iter().enumerate() {
        let scope = Scope {
            hidden: Some(layer.hidden),
            stats: Some(&stats),
        };
        let scored = layer
            .index
            .bm25
            .search_scoped(text, filters, rank::window(limit), &scope)?
            .into_iter()
            .filter_map(|c| Some((layer.index.items.get(&c.id)?, c.score)))
            .collect();
        let list = ranked(scored, layer.index.prior, limit);
        lists.push(list.into_iter().map(|r| (i, r)).collect());
    }
    Ok(merge(lists, limit))
}

/// The dense ranking of every layer that has vectors, merged (`alone`: as
/// [`WorkspaceIndex::rank_dense`]).
pub fn rank_dense_layers<'a>(
    layers: &[Layer<'a>],
    vector: &[f32],
    filters: &Filters,
    limit: usize,
    alone: bool,
) -> Result<Vec<Tagged<'a>>, IndexError> {
    let mut lists = Vec::with_capacity(layers.len());
    for (i, layer) in layers.iter().enumerate() {
        let index = layer.index;
        let Some(vectors) = index.vectors.as_ref() else {
            continue;
        };
        let keep = |id: u64| {
            index
                .items
                .get(&id)
                .is_some_and(|r| passes(r, filters) && !layer.hidden.contains(r.file.as_str()))
        };
        let scored = vectors
            .search(vector, rank::window(limit), keep)?
            .into_iter()
            // As [`WorkspaceIndex::rank_dense`]: cosine mapped to [0, 1] before the priors.
            .filter_map(|(id, similarity)| Some((index.items.get(&id)?, (1.0 + similarity) / 2.0)))
            .collect();
        let list = ranked(scored, index.prior.for_dense(alone), limit);
        lists.push(list.into_iter().map(|r| (i, r)).collect());
    }
    Ok(merge(lists, limit))
}

/// The items the query names in every layer, merged (none when names weigh nothing).
pub(super) fn rank_names_layers<'a>(
    layers: &[Layer<'a>],
    text: &str,
    filters: &Filters,
    rrf: Rrf,
) -> Vec<Tagged<'a>> {
    let names = weighed_names(text, rrf);
    if names.is_empty() {
        return Vec::new();
    }
    // A path is resolved through every layer's re-exports (the base has the crate's root),
    // without those of the base's files an upper layer changed.
    let mut resolved = Resolved::default();
    for layer in layers {
        let hidden = |file: &str| layer.hidden.contains(file);
        resolved.extend(layer.index.items.names().resolve(&names, &hidden));
    }
    // A crate's root may be in any layer (the base's, or a session's changed `lib.rs`); each
    // type is asked once per query.
    let seen: RefCell<FxHashMap<String, bool>> = RefCell::default();
    let at_root = |record: &ItemRecord| {
        let Some(head) = head_of(record) else {
            return false;
        };
        if let Some(known) = seen.borrow().get(&head) {
            return *known;
        }
        let answer = layers.iter().any(|layer| {
            let names = layer.index.items.names();
            if layer.hidden.is_empty() {
                names.at_root_unhidden(&head)
            } else {
                names.at_root_hiding(&head, &|file: &str| layer.hidden.contains(file))
            }
        });
        seen.borrow_mut().insert(head, answer);
        answer
    };
    // Each layer's items an upper layer does not shadow.
    let items: Vec<Box<dyn Fn(u64) -> Option<&'a ItemRecord> + '_>> = layers
        .iter()
        .map(|layer| {
            let items = &layer.index.items;
            Box::new(move |id: u64| {
                items
                    .get(&id)
                    .filter(|r| !layer.hidden.contains(r.file.as_str()))
            }) as Box<dyn Fn(u64) -> Option<&'a ItemRecord> + '_>
        })
        .collect();
    let name_layers: Vec<NameLayer<'a, '_>> = layers
        .iter()
        .zip(&items)
        .map(|(layer, item)| NameLayer {
            names: layer.index.items.names(),
            item: item.as_ref(),
            shadowed: !layer.hidden.is_empty(),
        })
        .collect();
    let passes = |r: &ItemRecord| passes(r, filters);
    let lists = matches_layers(&name_layers, &names, &resolved, &passes, &at_root)
        .into_iter()
        .zip(layers)
        .enumerate()
        .map(|(i, (scored, layer))| {
            ranked(scored, layer.index.prior, NAME_DEPTH)
                .into_iter()
                .map(|r| (i, r))
                .collect()
        })
        .collect();
    merge(lists, NAME_DEPTH)
}

/// The best `top_k` items of all layers for `query`, best first, with their texts.
pub fn search_layers<'a>(
    layers: &[Layer<'a>],
    query: Query<'_>,
    filters: &Filters,
    top_k: usize,
) -> Result<Vec<LayeredFound<'a>>, IndexError> {
    let ranked: Vec<(Tagged<'a>, u32, u32)> = match query {
        Query::Bm25 { text, rrf } => {
            let bm25 = rank_bm25_layers(layers, text, filters, bm25_depth(top_k))?;
            let names = rank_names_layers(layers, text, filters, rrf);
            if names.is_empty() {
                bm25.into_iter()
                    .take(top_k)
                    .map(|t| (t, t.1.rank, 0))
                    .collect()
            } else {
                fused([bm25, Vec::new(), names], rrf, top_k)
            }
        }
        Query::Dense(vector) => rank_dense_layers(layers, vector, filters, top_k, true)?
            .into_iter()
            .map(|t| (t, 0, t.1.rank))
            .collect(),
        Query::Hybrid { text, vector, rrf } => {
            let bm25 = rank_bm25_layers(layers, text, filters, bm25_depth(top_k))?;
            let dense = rank_dense_layers(layers, vector, filters, dense_depth(top_k), false)?;
            let names = rank_names_layers(layers, text, filters, rrf);
            fused([bm25, dense, names], rrf, top_k)
        }
    };
    with_texts(layers, ranked)
}

/// An item's key in fusion: its layer in the top byte, its id below (ids count from 1 and
/// never reach 2^56).
fn key((layer, r): &Tagged<'_>) -> u64 {
    ((*layer as u64) << 56) | r.record.id
}

/// The merged rankings (BM25, dense, named) fused with RRF.
fn fused<'a>(
    [bm25, dense, names]: [Vec<Tagged<'a>>; 3],
    rrf: Rrf,
    top_k: usize,
) -> Vec<(Tagged<'a>, u32, u32)> {
    let keys = |list: &[Tagged<'_>]| -> Vec<u64> { list.iter().map(key).collect() };
    let (bm25_keys, dense_keys) = (keys(&bm25), keys(&dense));
    let name_keys: Vec<(u64, f32)> = names.iter().map(|t| (key(t), t.1.score)).collect();
    let mut pool: FxHashMap<u64, Tagged<'a>> = FxHashMap::default();
    for t in bm25.into_iter().chain(dense).chain(names) {
        pool.entry(key(&t)).or_insert(t);
    }
    let lists = Lists {
        bm25: &bm25_keys,
        dense: &dense_keys,
        names: &name_keys,
    };
    fusion::fuse(lists, rrf, top_k)
        .into_iter()
        .filter_map(|f| {
            let (layer, r) = pool.remove(&f.id)?;
            let r = Ranked {
                score: f.score,
                ..r
            };
            Some(((layer, r), f.bm25_rank, f.dense_rank))
        })
        .collect()
}

/// Ranked items with their texts, read from each item's own layer.
fn with_texts<'a>(
    layers: &[Layer<'a>],
    ranked: Vec<(Tagged<'a>, u32, u32)>,
) -> Result<Vec<LayeredFound<'a>>, IndexError> {
    let mut texts: Vec<FxHashMap<u64, String>> = Vec::with_capacity(layers.len());
    for (i, layer) in layers.iter().enumerate() {
        let ids: Vec<u64> = ranked
            .iter()
            .filter(|((l, _), _, _)| *l == i)
            .map(|((_, r), _, _)| r.record.id)
            .collect();
        texts.push(if ids.is_empty() {
            FxHashMap::default()
        } else {
            layer.index.bm25.texts(&ids)?
        });
    }
    Ok(ranked
        .into_iter()
        .map(|((layer, r), bm25_rank, dense_rank)| LayeredFound {
            layer,
            found: Found {
                hit: Hit {
                    record: r.record,
                    score: r.score,
                    rank: r.rank,
                    text: texts
                        .get_mut(layer)
                        .and_then(|t| t.remove(&r.record.id))
                        .unwrap_or_default(),
                },
                bm25_rank,
                dense_rank,
            },
        })
        .collect())
}

#[cfg(test)]
#[path = "layers_tests.rs"]
mod tests;
