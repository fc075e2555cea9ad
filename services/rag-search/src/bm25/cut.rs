//! Where a BM25 ranking is cut: the best `limit` documents, with equal scores at the cut
//! decided by each document's order key, so that every index of the same tree keeps the same
//! ones.

use tantivy::collector::TopDocs;
use tantivy::collector::sort_key::{SortBySimilarityScore, SortByStaticFastValue};
use tantivy::query::Query;
use tantivy::{DocAddress, Searcher};

use super::CorpusStats;
use super::schema::ORDER_FIELD;

/// Documents collected past the cut, so that a run of equal scores across it is usually seen
/// whole ([`top_docs`]).
const TIE_SLACK: usize = 32;

/// The best `limit` documents for `query`, best first. Which of several documents of equal score
/// make the cut is otherwise tantivy's choice (by where each document happens to sit, which
/// differs between two indexes of the same tree), so the cut is made by each document's order
/// key ([`crate::record::order_key`]) and every index keeps the same documents. The search
/// collects [`TIE_SLACK`] more than asked: when the run of equal scores at the cut ends inside
/// them, the run is ordered by key there; only a longer run (a one-word query over many alike
/// items) runs the search again ordering by score and key, which reads the key of every match
/// (a fifth more instructions). Ties inside the cut are ordered by the caller
/// ([`crate::index`]'s ranking).
pub(super) fn top_docs(
    searcher: &Searcher,
    query: &dyn Query,
    limit: usize,
    stats: Option<&CorpusStats>,
) -> tantivy::Result<Vec<(f32, DocAddress)>> {
    let wanted = limit.saturating_add(TIE_SLACK);
    let mut top = collect(
        searcher,
        query,
        &TopDocs::with_limit(wanted).order_by_score(),
        stats,
    )?;
    let (Some(&(cut, _)), Some(&(next, _))) = (
        top.get(limit.wrapping_sub(1)).filter(|_| limit > 0),
        top.get(limit),
    ) else {
        // Every match is in (or none is asked for).
        top.truncate(limit);
        return Ok(top);
    };
    if next != cut {
        top.truncate(limit);
        return Ok(top);
    }
    let run_seen_whole = top.len() < wanted || top.last().is_some_and(|d| d.0 != cut);
    if run_seen_whole {
        let keys = searcher
            .segment_readers()
            .iter()
            .map(|r| r.fast_fields().u64(ORDER_FIELD))
            .collect::<Result<Vec<_>, _>>()?;
        let key = |address: &DocAddress| {
            keys.get(address.segment_ord as usize)
                .and_then(|c| c.first(address.doc_id))
        };
        let start = top.iter().position(|d| d.0 == cut).unwrap_or(limit);
        let end = top
            .iter()
            .rposition(|d| d.0 == cut)
            .map_or(limit, |i| i + 1);
        if let Some(run) = top.get_mut(start..end) {
            run.sort_by_key(|(_, address)| key(address));
        }
        top.truncate(limit);
        return Ok(top);
    }
    let keyed = TopDocs::with_limit(limit).order_by((
        (SortBySimilarityScore, tantivy::Order::Desc),
        (
            SortByStaticFastValue::<u64>::for_field(ORDER_FIELD),
            tantivy::Order::Asc,
        ),
    ));
    Ok(collect(searcher, query, &keyed, stats)?
        .into_iter()
        .map(|((score, _), address)| (score, address))
        .collect())
}

/// `collector` over `query`, with corpus statistics from `stats` when given.
fn collect<C: tantivy::collector::Collector>(
    searcher: &Searcher,
    query: &dyn Query,
    collector: &C,
    stats: Option<&CorpusStats>,
) -> tantivy::Result<C::Fruit> {
    match stats {
        Some(stats) => searcher.search_with_statistics_provider(query, collector, stats),
        None => searcher.search(query, collector),
    }
}
