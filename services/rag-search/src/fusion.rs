//! Reciprocal rank fusion: `score(d) = Σ_lists weight / (k + rank(d))`, ranks 1-based; a list
//! that misses `d` adds nothing. The lists: BM25, dense, and the items the query names
//! ([`crate::names`]). The first hits of the lexical ranking (BM25 and names without the dense
//! list) stay first ([`Rrf::lexical_top`]). Ties keep BM25's order, then the other lists', so
//! results are deterministic.

use rustc_hash::FxHashMap;

/// Fusion parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rrf {
    /// The `k` of RRF (60 in the original paper).
    pub k: f32,
    /// Weight of the BM25 list.
    pub bm25_weight: f32,
    /// Weight of the dense list.
    pub dense_weight: f32,
    /// Weight of the list of items the query names.
    pub name_weight: f32,
    /// How many of the lexical ranking's first hits stay first when a dense list is fused:
    /// each gains the most the dense list can give one item (`dense_weight / (k + 1)`), so
    /// the dense side may reorder them among themselves and ranks what follows, but pushes
    /// none of them down. The local model finds what words miss (recall) more than it orders
    /// the first hits (docs/RETRIEVAL.md). 0 = plain RRF.
    pub lexical_top: u32,
}

impl Default for Rrf {
    /// The configured defaults (`[rag_search] rrf_k`, `bm25_weight`, `dense_weight`): k = 10,
    /// dense weighted 0.2 — measured on ../shared/eval, see docs/RETRIEVAL.md.
    fn default() -> Self {
        Self {
            k: 10.0,
            bm25_weight: 1.0,
            dense_weight: 0.2,
            name_weight: NAME_WEIGHT,
            lexical_top: LEXICAL_TOP,
        }
    }
}

/// Default of [`Rrf::lexical_top`] (`[rag_search] lexical_top`).
pub const LEXICAL_TOP: u32 = 1;

/// Default weight of the names list (`[rag_search] name_weight`).
pub const NAME_WEIGHT: f32 = 1.0;

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
    /// 1-based rank among the items the query names, 0 = absent.
    pub name_rank: u32,
}

/// The ranked id lists to fuse, each best first.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lists<'a> {
    /// BM25.
    pub bm25: &'a [u64],
    /// Dense.
    pub dense: &'a [u64],
    /// Named items, with their name score ([`crate::names`]).
    pub names: &'a [(u64, f32)],
}

/// Fuses the ranked lists and returns the best `limit`. A named item adds
/// `name_weight · name_score / (k + 1)`: what its name says, not where it stands among the
/// named (a plain word that happens to name something counts little even when it is first).
pub fn fuse(lists: Lists<'_>, rrf: Rrf, limit: usize) -> Vec<Fused> {
    let mut by_id: FxHashMap<u64, Fused> = FxHashMap::default();
    let rank = |i: usize| u32::try_from(i + 1).unwrap_or(u32::MAX);
    for (i, id) in lists.bm25.iter().enumerate() {
        let e = slot(&mut by_id, *id);
        e.bm25_rank = rank(i);
        e.score += rrf.bm25_weight / (rrf.k + e.bm25_rank as f32);
    }
    for (i, (id, name_score)) in lists.names.iter().enumerate() {
        let e = slot(&mut by_id, *id);
        e.name_rank = rank(i);
        e.score += rrf.name_weight * name_score / (rrf.k + 1.0);
    }
    // The scores so far are the lexical ranking's.
    if rrf.lexical_top > 0 && !lists.dense.is_empty() {
        keep_lexical_top(&mut by_id, rrf);
    }
    for (i, id) in lists.dense.iter().enumerate() {
        let e = slot(&mut by_id, *id);
        e.dense_rank = rank(i);
        e.score += rrf.dense_weight / (rrf.k + e.dense_rank as f32);
    }
    let mut out: Vec<Fused> = by_id.into_values().collect();
    out.sort_by(order);
    out.truncate(limit);
    out
}

/// Best first: score, then BM25's order, the dense list's, the names' (in each, ranked before
/// unranked). Two items are ranked alike in every list only when both are in none of them, so
/// this is a total order that depends on the lists alone (each breaks its own ties by
/// [`crate::record::order_key`]), not on ids: every index of the same tree fuses alike. The
/// id comes last only to make the order total for the compiler's sake.
fn order(a: &Fused, b: &Fused) -> std::cmp::Ordering {
    let by = |rank: fn(&Fused) -> u32| {
        let (x, y) = (rank(a), rank(b));
        (x == 0).cmp(&(y == 0)).then(x.cmp(&y))
    };
    b.score
        .total_cmp(&a.score)
        .then_with(|| by(|f| f.bm25_rank))
        .then_with(|| by(|f| f.dense_rank))
        .then_with(|| by(|f| f.name_rank))
        .then(a.id.cmp(&b.id))
}

/// Raises the first [`Rrf::lexical_top`] entries of the lexical ranking (`lexical`: BM25 and
/// names fused, before the dense list; entries with no score are not raised) by the most the
/// dense list can give one entry: no entry after them can pass them by its dense rank.
fn keep_lexical_top(lexical: &mut FxHashMap<u64, Fused>, rrf: Rrf) {
    let mut first: Vec<&mut Fused> = lexical.values_mut().filter(|f| f.score > 0.0).collect();
    first.sort_by(|a, b| order(a, b));
    let most = rrf.dense_weight.max(0.0) / (rrf.k + 1.0);
    for f in first.into_iter().take(rrf.lexical_top as usize) {
        f.score += most;
    }
}

fn slot(by_id: &mut FxHashMap<u64, Fused>, id: u64) -> &mut Fused {
    by_id.entry(id).or_insert(Fused {
        id,
        score: 0.0,
        bm25_rank: 0,
        dense_rank: 0,
        name_rank: 0,
    })
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
            name_weight: 0.0,
            lexical_top: 0,
        };
        let out = fuse(two(&[10, 20, 30], &[30, 40]), paper, 10);
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
            name_weight: 0.0,
            lexical_top: 0,
        };
        let out = fuse(two(&[1, 2], &[3, 1]), rrf, 1);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].id, 3);
        assert!((out[0].score - 2.0 / 61.0).abs() < 1e-7);
        assert!(fuse(Lists::default(), Rrf::default(), 5).is_empty());
    }

    #[test]
    fn the_lexical_ranking_s_first_hits_stay_first() {
        let order = |lexical_top: u32, bm25: &[u64], dense: &[u64]| -> Vec<u64> {
            let rrf = Rrf {
                lexical_top,
                ..Rrf::default()
            };
            fuse(two(bm25, dense), rrf, 10)
                .iter()
                .map(|f| f.id)
                .collect()
        };
        // 3 (BM25 3rd, dense 1st: 1/13 + 0.2/11) passes 1 (1/11) and 2 (1/12) in plain RRF.
        assert_eq!(order(0, &[1, 2, 3], &[3, 4]), [3, 1, 2, 4]);
        // Kept first, 1 and 2 each gain 0.2/11, the most a dense rank gives: 3 follows them.
        assert_eq!(order(2, &[1, 2, 3], &[3, 4]), [1, 2, 3, 4]);
        assert_eq!(order(1, &[1, 2, 3], &[3, 4]), [1, 3, 2, 4]);
        // Among those kept, the dense side still decides: 2 (dense 1st) passes 1.
        assert_eq!(order(2, &[1, 2, 3], &[2]), [2, 1, 3]);
        // An item only the dense list has is never kept first, and without a dense list
        // nothing changes.
        assert_eq!(order(2, &[1], &[5, 1]), [1, 5]);
        assert_eq!(order(2, &[1, 2, 3], &[]), order(0, &[1, 2, 3], &[]));
        let raised = fuse(two(&[1, 2, 3], &[3, 4]), Rrf::default(), 10);
        assert!((raised[0].score - (1.0 / 11.0 + 0.2 / 11.0)).abs() < 1e-7);
    }

    fn two<'a>(bm25: &'a [u64], dense: &'a [u64]) -> Lists<'a> {
        Lists {
            bm25,
            dense,
            names: &[],
        }
    }

    #[test]
    fn a_named_item_joins_the_lists_it_is_in() {
        let rrf = Rrf::default();
        let out = fuse(
            Lists {
                bm25: &[1, 2, 3],
                dense: &[1],
                names: &[(3, 1.0), (9, 12.0 / 11.0 * 0.5)],
            },
            rrf,
            10,
        );
        let ranks: Vec<(u64, u32, u32, u32)> = out
            .iter()
            .map(|f| (f.id, f.bm25_rank, f.dense_rank, f.name_rank))
            .collect();
        // 3: 1/13 + 1·1.0/11 beats 1: 1/11 + 0.2/11; 9 (named only, 0.545/11 = 1/24) falls
        // behind 2 (BM25 rank 2, 1/12).
        assert_eq!(
            ranks,
            vec![(3, 3, 0, 1), (1, 1, 1, 0), (2, 2, 0, 0), (9, 0, 0, 2)]
        );
    }
}
