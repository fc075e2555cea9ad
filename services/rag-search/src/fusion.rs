//! Reciprocal rank fusion: `score(d) = Σ_lists weight / (k + rank(d))`, ranks 1-based; a list
//! that misses `d` adds nothing. Ties keep BM25 order (then id) so results are deterministic.

use std::collections::HashMap;

/// Fusion parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rrf {
    /// The `k` of RRF (60 in the original paper).
    pub k: f32,
    /// Weight of the BM25 list.
    pub bm25_weight: f32,
    /// Weight of the dense list.
    pub dense_weight: f32,
}

impl Default for Rrf {
    /// The configured defaults (`[rag_search] rrf_k`, `bm25_weight`, `dense_weight`): k = 10,
    /// dense weighted 0.2 — measured on ../shared/eval, see docs/RETRIEVAL.md.
    fn default() -> Self {
        Self {
            k: 10.0,
            bm25_weight: 1.0,
            dense_weight: 0.2,
        }
    }
}

/// One fused entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fused {
    /// Item id.
    pub id: u64,
    /// Fused score.
    pub score: f32,
    /// 1-based BM25 rank, 0 = absent.
    pub bm25_rank: u32,
    /// 1-based dense rank, 0 = absent.
    pub dense_rank: u32,
}

/// Fuses two ranked id lists (best first) and returns the best `limit`.
pub fn fuse(bm25: &[u64], dense: &[u64], rrf: Rrf, limit: usize) -> Vec<Fused> {
    let mut by_id: HashMap<u64, Fused> = HashMap::new();
    for (list, weight, is_bm25) in [
        (bm25, rrf.bm25_weight, true),
        (dense, rrf.dense_weight, false),
    ] {
        for (i, id) in list.iter().enumerate() {
            let rank = u32::try_from(i + 1).unwrap_or(u32::MAX);
            let e = by_id.entry(*id).or_insert(Fused {
                id: *id,
                score: 0.0,
                bm25_rank: 0,
                dense_rank: 0,
            });
            e.score += weight / (rrf.k + rank as f32);
            if is_bm25 {
                e.bm25_rank = rank;
            } else {
                e.dense_rank = rank;
            }
        }
    }
    let mut out: Vec<Fused> = by_id.into_values().collect();
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then((a.bm25_rank == 0).cmp(&(b.bm25_rank == 0)))
            .then(a.bm25_rank.cmp(&b.bm25_rank))
            .then(a.id.cmp(&b.id))
    });
    out.truncate(limit);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_arithmetic() {
        let paper = Rrf {
            k: 60.0,
            bm25_weight: 1.0,
            dense_weight: 1.0,
        };
        let out = fuse(&[10, 20, 30], &[30, 40], paper, 10);
        let got: Vec<(u64, u32, u32)> = out
            .iter()
            .map(|f| (f.id, f.bm25_rank, f.dense_rank))
            .collect();
        // 30: 1/63 + 1/61 beats 10: 1/61 alone; 20 (1/62) beats 40 (1/62) on the BM25 tie rule.
        assert_eq!(got, vec![(30, 3, 1), (10, 1, 0), (20, 2, 0), (40, 0, 2)]);
        assert!((out[0].score - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-7);
        assert!((out[1].score - 1.0 / 61.0).abs() < 1e-7);
    }

    #[test]
    fn weights_and_limit() {
        let rrf = Rrf {
            k: 60.0,
            bm25_weight: 0.0,
            dense_weight: 2.0,
        };
        let out = fuse(&[1, 2], &[3, 1], rrf, 1);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].id, 3);
        assert!((out[0].score - 2.0 / 61.0).abs() < 1e-7);
        assert!(fuse(&[], &[], Rrf::default(), 5).is_empty());
    }
}
