//! Ranked retrieval over a workspace index: BM25, dense or both, fused with RRF together with
//! the items the query names ([`crate::names`]). Each retriever returns a window of candidates
//! that the ranking priors ([`crate::rank`]) re-order; source texts are read only for the hits
//! that are kept.

use rustc_hash::FxHashMap;

use crate::bm25::Filters;
use crate::embed::EmbedError;
use crate::fusion::{self, Lists, Rrf};
use crate::names::{QueryNames, code_names, query_names};
use crate::rank::{self, LengthPrior};

use super::{IndexError, ItemRecord, WorkspaceIndex};

/// Candidates the BM25 list contributes to fusion, at least (tantivy collects twice as many,
/// [`rank::window`], for the priors to re-order). Depth 100 and 40 score alike on
/// ../shared/eval (BM25 main R@10 / MRR 0.566 / 0.363 and 0.573 / 0.364, HYBRID 0.581 / 0.344
/// and 0.582 / 0.345; polyglot BM25 0.849 / 0.545 both) and 40 collects half the candidates
/// (a BM25 search 231 -> 208 us in process); 30 loses (HYBRID main R@10 0.561).
pub const FUSION_DEPTH: usize = 40;

/// Candidates the dense list contributes to hybrid fusion, at least. With its small weight only
/// its first ranks move the fused order: dense depth 10, 30, 50 and 100 scored R@10 0.591,
/// 0.588, 0.587, 0.588 on ../shared/eval, and a shallower nearest-neighbour search is cheaper
/// (docs/PERFORMANCE.md).
pub const DENSE_FUSION_DEPTH: usize = 20;

pub(super) fn dense_depth(top_k: usize) -> usize {
    top_k.max(DENSE_FUSION_DEPTH)
}

pub(super) fn bm25_depth(top_k: usize) -> usize {
    top_k.max(FUSION_DEPTH)
}

/// Items the names list contributes to fusion, at most.
pub(super) const NAME_DEPTH: usize = 50;

/// What to search with.
#[derive(Debug, Clone, Copy)]
pub enum Query<'q> {
    /// Words, ranked by BM25, fused with the items they name.
    Bm25 {
        /// The words.
        text: &'q str,
        /// Fusion parameters (the dense weight is not used).
        rrf: Rrf,
    },
    /// A query vector, ranked by cosine similarity.
    Dense(&'q [f32]),
    /// Both (and the names), fused with reciprocal rank fusion ([`crate::fusion`]).
    Hybrid {
        /// The words.
        text: &'q str,
        /// Their vector.
        vector: &'q [f32],
        /// Fusion parameters.
        rrf: Rrf,
    },
}

/// One result: the item with its text, the final score and each list's rank (0 = absent).
#[derive(Debug, Clone)]
pub struct Found<'a> {
    /// The item and its text.
    pub hit: Hit<'a>,
    /// 1-based rank in the BM25 list.
    pub bm25_rank: u32,
    /// 1-based rank in the dense list.
    pub dense_rank: u32,
}

/// An item one retriever found, ranked, without its text.
#[derive(Debug, Clone, Copy)]
pub struct Ranked<'a> {
    /// The item.
    pub record: &'a ItemRecord,
    /// The retriever's score after the ranking priors.
    pub score: f32,
    /// 1-based rank in the retriever's list.
    pub rank: u32,
}

/// A ranked item with its source text.
#[derive(Debug, Clone)]
pub struct Hit<'a> {
    /// The item.
    pub record: &'a ItemRecord,
    /// The retriever's score after the ranking priors.
    pub score: f32,
    /// 1-based rank in the retriever's list.
    pub rank: u32,
    /// Source text of the item as indexed.
    pub text: String,
}

/// `scored` best first after the priors (equal scores by [`ItemRecord::order_key`]), cut to
/// `limit`, with 1-based ranks.
pub(super) fn ranked<'a>(
    mut scored: Vec<(&'a ItemRecord, f32)>,
    prior: LengthPrior,
    limit: usize,
) -> Vec<Ranked<'a>> {
    for (record, score) in &mut scored {
        *score *= rank::factor(record, prior);
    }
    scored.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then_with(|| a.0.order_key().cmp(&b.0.order_key()))
    });
    scored.truncate(limit);
    numbered(scored)
}

/// Scored items in their order, with 1-based ranks.
fn numbered(scored: Vec<(&ItemRecord, f32)>) -> Vec<Ranked<'_>> {
    scored
        .into_iter()
        .enumerate()
        .map(|(i, (record, score))| Ranked {
            record,
            score,
            rank: u32::try_from(i + 1).unwrap_or(u32::MAX),
        })
        .collect()
}

/// The names of `text` when names weigh anything in fusion (none otherwise).
pub(super) fn weighed_names(text: &str, rrf: Rrf) -> QueryNames {
    if rrf.name_weight > 0.0 {
        query_names(text)
    } else {
        QueryNames::default()
    }
}

/// The outcome of [`WorkspaceIndex::search_hybrid`].
#[derive(Debug)]
pub enum Hybrid<'a> {
    /// Both lists fused.
    Fused(Vec<Found<'a>>),
    /// The query could not be embedded: BM25 alone, and why.
    Bm25Only(Vec<Found<'a>>, EmbedError),
}

impl WorkspaceIndex {
    /// HYBRID search that embeds the query (`embed`, on a second thread) while BM25 ranks, so
    /// the two overlap; when embedding fails the BM25 ranking is answered alone (with the
    /// named items).
    pub fn search_hybrid(
        &self,
        text: &str,
        embed: impl FnOnce() -> Result<Vec<f32>, EmbedError> + Send,
        filters: &Filters,
        top_k: usize,
        rrf: Rrf,
    ) -> Result<Hybrid<'_>, IndexError> {
        let (vector, bm25) = std::thread::scope(|scope| {
            let embedding = scope.spawn(embed);
            let bm25 = self.rank_bm25(text, filters, bm25_depth(top_k));
            let vector = embedding
                .join()
                .unwrap_or_else(|_| Err(EmbedError::Model("the embedding thread panicked".into())));
            (vector, bm25)
        });
        let bm25 = bm25?;
        let names = self.rank_names(text, filters, rrf);
        match vector {
            Ok(vector) => {
                let dense = self.rank_dense(&vector, filters, dense_depth(top_k), false)?;
                Ok(Hybrid::Fused(self.fused(
                    [bm25, dense, names],
                    rrf,
                    top_k,
                )?))
            }
            Err(e) => Ok(Hybrid::Bm25Only(self.lexical(bm25, names, rrf, top_k)?, e)),
        }
    }

    /// The best `top_k` items for `query`, best first.
    pub fn search(
        &self,
        query: Query<'_>,
        filters: &Filters,
        top_k: usize,
    ) -> Result<Vec<Found<'_>>, IndexError> {
        match query {
            Query::Bm25 { text, rrf } => {
                let bm25 = self.rank_bm25(text, filters, bm25_depth(top_k))?;
                let names = self.rank_names(text, filters, rrf);
                self.lexical(bm25, names, rrf, top_k)
            }
            Query::Dense(vector) => {
                let ranked = self.rank_dense(vector, filters, top_k, true)?;
                self.found(ranked.into_iter().map(|r| (r, 0, r.rank)).collect())
            }
            Query::Hybrid { text, vector, rrf } => {
                let bm25 = self.rank_bm25(text, filters, bm25_depth(top_k))?;
                let dense = self.rank_dense(vector, filters, dense_depth(top_k), false)?;
                let names = self.rank_names(text, filters, rrf);
                self.fused([bm25, dense, names], rrf, top_k)
            }
        }
    }

    /// BM25 fused with the named items; BM25 alone (its own scores) when nothing is named.
    fn lexical<'a>(
        &'a self,
        mut bm25: Vec<Ranked<'a>>,
        names: Vec<Ranked<'a>>,
        rrf: Rrf,
        top_k: usize,
    ) -> Result<Vec<Found<'a>>, IndexError> {
        if names.is_empty() {
            bm25.truncate(top_k);
            return self.found(bm25.into_iter().map(|r| (r, r.rank, 0)).collect());
        }
        self.fused([bm25, Vec::new(), names], rrf, top_k)
    }

    /// The rankings (BM25, dense, named) fused with RRF, with texts.
    fn fused<'a>(
        &'a self,
        [bm25, dense, names]: [Vec<Ranked<'a>>; 3],
        rrf: Rrf,
        top_k: usize,
    ) -> Result<Vec<Found<'a>>, IndexError> {
        let ids = |list: &[Ranked<'_>]| -> Vec<u64> { list.iter().map(|h| h.record.id).collect() };
        let (bm25_ids, dense_ids) = (ids(&bm25), ids(&dense));
        let name_ids: Vec<(u64, f32)> = names.iter().map(|h| (h.record.id, h.score)).collect();
        let mut pool: FxHashMap<u64, Ranked<'_>> = FxHashMap::default();
        for h in bm25.into_iter().chain(dense).chain(names) {
            pool.entry(h.record.id).or_insert(h);
        }
        let lists = Lists {
            bm25: &bm25_ids,
            dense: &dense_ids,
            names: &name_ids,
        };
        let ranked = fusion::fuse(lists, rrf, top_k)
            .into_iter()
            .filter_map(|f| {
                let r = pool.remove(&f.id)?;
                Some((
                    Ranked {
                        score: f.score,
                        ..r
                    },
                    f.bm25_rank,
                    f.dense_rank,
                ))
            })
            .collect();
        self.found(ranked)
    }

    /// Whether the query names, written as code, an item of this index: then the lexical
    /// signal decides and a dense ranking adds little (docs/RETRIEVAL.md).
    pub fn names_decisive(&self, text: &str, rrf: Rrf) -> bool {
        rrf.name_weight > 0.0 && self.items.names().names_code(&code_names(text))
    }

    /// The items the query names, best first, after the ranking priors (none when names
    /// weigh nothing).
    pub fn rank_names(&self, text: &str, filters: &Filters, rrf: Rrf) -> Vec<Ranked<'_>> {
        let names = weighed_names(text, rrf);
        if names.is_empty() {
            return Vec::new();
        }
        let index = self.items.names();
        let resolved = index.resolve(&names, &|_| false);
        let scored = index.matches(
            &names,
            &resolved,
            |id| {
                self.items
                    .get(&id)
                    .filter(|r| super::dense::passes(r, filters))
            },
            &|r| index.at_root_of_base(r),
        );
        ranked(scored, self.prior, NAME_DEPTH)
    }

    /// Ranked items (with their BM25 and dense ranks) with texts.
    fn found<'a>(
        &'a self,
        ranked: Vec<(Ranked<'a>, u32, u32)>,
    ) -> Result<Vec<Found<'a>>, IndexError> {
        let ranks: Vec<(u32, u32)> = ranked.iter().map(|(_, b, d)| (*b, *d)).collect();
        Ok(self
            .with_texts(ranked.into_iter().map(|(r, _, _)| r).collect())?
            .into_iter()
            .zip(ranks)
            .map(|(hit, (bm25_rank, dense_rank))| Found {
                hit,
                bm25_rank,
                dense_rank,
            })
            .collect())
    }

    /// BM25 ranking for `query`, best first, after the ranking priors ([`crate::rank`]).
    pub fn rank_bm25(
        &self,
        query: &str,
        filters: &Filters,
        limit: usize,
    ) -> Result<Vec<Ranked<'_>>, IndexError> {
        let scored = self
            .bm25
            .search(query, filters, rank::window(limit))?
            .into_iter()
            .filter_map(|c| Some((self.items.get(&c.id)?, c.score)))
            .collect();
        Ok(ranked(scored, self.prior, limit))
    }

    /// BM25 hits for `query` with their texts.
    pub fn search_bm25(
        &self,
        query: &str,
        filters: &Filters,
        limit: usize,
    ) -> Result<Vec<Hit<'_>>, IndexError> {
        let ranked = self.rank_bm25(query, filters, limit)?;
        self.with_texts(ranked)
    }

    /// The ranked items with their source texts.
    pub fn with_texts<'a>(&'a self, ranked: Vec<Ranked<'a>>) -> Result<Vec<Hit<'a>>, IndexError> {
        let ids: Vec<u64> = ranked.iter().map(|r| r.record.id).collect();
        let mut texts = self.bm25.texts(&ids)?;
        Ok(ranked
            .into_iter()
            .map(|r| Hit {
                record: r.record,
                score: r.score,
                rank: r.rank,
                text: texts.remove(&r.record.id).unwrap_or_default(),
            })
            .collect())
    }
}
