//! Quoted text in a BM25 search ([`crate::quotes`]): the items holding every word of a span
//! are drawn into the candidates, and those whose stored text holds it as written come first
//! (their score multiplied by [`EXACT`]).

use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Value};
use tantivy::{DocAddress, Searcher, TantivyDocument, Term};

use crate::tokenize::{code_tokens, is_stopword};

/// How much the BM25 score of a hit whose text holds a quoted span is multiplied by: it comes
/// before the hits without it unless their own score is ten times higher (the length prior
/// applied later moves a score by ~3 at most).
pub(super) const EXACT: f32 = 10.0;

/// For each span, a clause matching the items whose `field` has every word of it.
pub(super) fn every_word_clauses(
    field: Field,
    spans: &[String],
) -> impl Iterator<Item = (Occur, Box<dyn Query>)> + '_ {
    spans
        .iter()
        .filter_map(move |span| every_word(field, span))
        .map(|q| (Occur::Should, q))
}

/// A clause matching the items whose `field` has every word of `span` (stop words left out).
fn every_word(field: Field, span: &str) -> Option<Box<dyn Query>> {
    let mut words = code_tokens(span);
    words.retain(|w| !is_stopword(w));
    words.sort_unstable();
    words.dedup();
    if words.is_empty() {
        return None;
    }
    let must: Vec<(Occur, Box<dyn Query>)> = words
        .iter()
        .map(|w| {
            let term = TermQuery::new(
                Term::from_field_text(field, w),
                IndexRecordOption::WithFreqs,
            );
            (Occur::Must, Box::new(term) as Box<dyn Query>)
        })
        .collect();
    Some(Box::new(BooleanQuery::new(must)))
}

/// Multiplies by [`EXACT`] the score of each hit whose stored `text` holds one of `spans`, and
/// re-sorts `top` best first (nothing to do without spans).
pub(super) fn raise_holders(
    searcher: &Searcher,
    text: Field,
    top: &mut [(f32, DocAddress)],
    spans: &[String],
) -> tantivy::Result<()> {
    if spans.is_empty() {
        return Ok(());
    }
    for (score, address) in top.iter_mut() {
        let doc: TantivyDocument = searcher.doc(*address)?;
        let stored = doc.get_first(text).and_then(|v| v.as_str());
        if stored.is_some_and(|t| crate::quotes::holds_any(t, spans)) {
            *score *= EXACT;
        }
    }
    top.sort_by(|a, b| b.0.total_cmp(&a.0));
    Ok(())
}
