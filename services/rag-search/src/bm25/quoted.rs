//! Quoted text in a BM25 search ([`crate::quotes`]): the items holding every word of a span
//! are drawn into the candidates, and those whose stored text holds it as written come first
//! (their score multiplied by [`EXACT`]).

use tantivy::Term;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};

use crate::tokenize::{code_tokens, is_stopword};

/// How much a hit whose text holds a quoted span gains: enough to come before every hit
/// without it whatever the length prior does (at most ~3 for the longest functions).
pub(super) const EXACT: f32 = 10.0;

/// A clause matching the items whose `field` has every word of `span` (stop words left out).
pub(super) fn every_word(field: Field, span: &str) -> Option<Box<dyn Query>> {
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
