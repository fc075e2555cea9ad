//! Ranked retrieval over a workspace index: BM25, dense or both fused with RRF. Each retriever
//! returns a window of candidates that the ranking priors ([`crate::rank`]) re-order; source
//! texts are read only for the hits that are kept.

use std::collections::HashMap;

use crate::bm25::Filters;
use crate::embed::EmbedError;
use crate::fusion::{self, Rrf};
use crate::rank::{self, LengthPrior};

use super::{IndexError, ItemRecord, WorkspaceIndex};

/// Candidates the BM25 list contributes to hybrid fusion, at least.
pub const FUSION_DEPTH: usize = 100;

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

/// What to search with.
#[derive(Debug, Clone, Copy)]
pub enum Query<'q> {
    /// Words, ranked by BM25.
    Bm25(&'q str),
    /// A query vector, ranked by cosine similarity.
    Dense(&'q [f32]),
    /// Both, fused with reciprocal rank fusion.
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

/// `scored` best first after the priors, cut to `limit`, with 1-based ranks.
pub(super) fn ranked<'a>(
    mut scored: Vec<(&'a ItemRecord, f32)>,
    prior: LengthPrior,
    limit: usize,
) -> Vec<Ranked<'a>> {
    for (record, score) in &mut scored {
        *score *= rank::factor(record, prior);
    }
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.truncate(limit);
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
    /// the two overlap; when embedding fails the BM25 ranking is answered alone.
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
        match vector {
            Ok(vector) => Ok(Hybrid::Fused(
                self.fuse_with_dense(bm25, &vector, filters, top_k, rrf)?,
            )),
            Err(e) => {
                let mut bm25 = bm25;
                bm25.truncate(top_k);
                let found = self.found(bm25.into_iter().map(|r| (r, r.rank, 0)).collect())?;
                Ok(Hybrid::Bm25Only(found, e))
            }
        }
    }

    /// The best `top_k` items for `query`, best first.
    pub fn search(
        &self,
        query: Query<'_>,
        filters: &Filters,
        top_k: usize,
    ) -> Result<Vec<Found<'_>>, IndexError> {
        let ranked: Vec<(Ranked<'_>, u32, u32)> = match query {
            Query::Bm25(text) => self
                .rank_bm25(text, filters, top_k)?
                .into_iter()
                .map(|r| (r, r.rank, 0))
                .collect(),
            Query::Dense(vector) => self
                .rank_dense(vector, filters, top_k)?
                .into_iter()
                .map(|r| (r, 0, r.rank))
                .collect(),
            Query::Hybrid { text, vector, rrf } => {
                let bm25 = self.rank_bm25(text, filters, bm25_depth(top_k))?;
                return self.fuse_with_dense(bm25, vector, filters, top_k, rrf);
            }
        };
        self.found(ranked)
    }

    /// The BM25 ranking fused with the dense ranking of `vector`, with texts.
    fn fuse_with_dense<'a>(
        &'a self,
        bm25: Vec<Ranked<'a>>,
        vector: &[f32],
        filters: &Filters,
        top_k: usize,
        rrf: Rrf,
    ) -> Result<Vec<Found<'a>>, IndexError> {
        let dense = self.rank_dense(vector, filters, dense_depth(top_k))?;
        self.fused(bm25, dense, rrf, top_k)
    }

    /// Two rankings fused with RRF, with texts.
    fn fused<'a>(
        &'a self,
        bm25: Vec<Ranked<'a>>,
        dense: Vec<Ranked<'a>>,
        rrf: Rrf,
        top_k: usize,
    ) -> Result<Vec<Found<'a>>, IndexError> {
        let bm25_ids: Vec<u64> = bm25.iter().map(|h| h.record.id).collect();
        let dense_ids: Vec<u64> = dense.iter().map(|h| h.record.id).collect();
        let mut pool: HashMap<u64, Ranked<'_>> = HashMap::new();
        for h in bm25.into_iter().chain(dense) {
            pool.entry(h.record.id).or_insert(h);
        }
        let ranked = fusion::fuse(&bm25_ids, &dense_ids, rrf, top_k)
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
