//! Quoted text in a BM25 search ([`crate::quotes`]): the items holding every word of a span
//! count those words once more, so that they reach the candidate window, and those whose
//! stored text holds it as written come first
//! (their score multiplied by [`EXACT`]), the innermost of them before the items around it.

use std::borrow::Cow;

use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Value};
use tantivy::{DocAddress, Searcher, TantivyDocument, Term};

use crate::tokenize::{code_tokens, is_stopword};

/// How much the BM25 score of a hit whose text holds a quoted span is multiplied by: it comes
/// before the hits without it unless their own score is ten times higher, before the priors
/// applied later (the length prior, ~3 at most for items of a few hundred lines, ~4 at a
/// thousand; test code halved).
pub(super) const EXACT: f32 = 10.0;

/// For each span, a clause matching the items whose `field` has every word of it (they match
/// the query's own terms already: the clause adds those words' score once more).
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

/// Holders that take part in the test of one inside another, best first; the ones after them
/// are raised without it (the test searches a holder's text for each shorter holder of its file).
const NESTING_CHECKED: usize = 100;

/// Multiplies by [`EXACT`] the score of each hit whose stored `text` holds one of `spans`, and
/// re-sorts `top` best first (nothing to do without spans). A hit around other holders of its
/// file (a class or impl around the method that writes the message: its text holds theirs) is
/// raised only if it still holds a span once their texts are left out: the innermost item that
/// writes the text is the answer, and the items around it rank by their own words.
pub(super) fn raise_holders(
    searcher: &Searcher,
    fields: (Field, Field),
    top: &mut [(f32, DocAddress)],
    spans: &[String],
) -> tantivy::Result<()> {
    if spans.is_empty() {
        return Ok(());
    }
    let (file, text) = fields;
    // Each holder: where it is in `top`, its file and its text.
    let mut holders: Vec<(usize, String, String)> = Vec::new();
    for (at, (_, address)) in top.iter().enumerate() {
        let doc: TantivyDocument = searcher.doc(*address)?;
        let field = |f: Field| {
            doc.get_first(f)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
        };
        if crate::quotes::holds_any(field(text), spans) {
            // Only the first NESTING_CHECKED holders' texts are compared.
            let kept = if holders.len() < NESTING_CHECKED {
                field(text).to_owned()
            } else {
                String::new()
            };
            holders.push((at, field(file).to_owned(), kept));
        }
    }
    for (i, (at, file, text)) in holders.iter().enumerate() {
        let own = if i < NESTING_CHECKED {
            left_of(text, file, &holders[..NESTING_CHECKED.min(holders.len())])
        } else {
            Cow::Borrowed(text.as_str())
        };
        let holds = match &own {
            Cow::Borrowed(_) => true,
            Cow::Owned(rest) => crate::quotes::holds_any(rest, spans),
        };
        if holds && let Some((score, _)) = top.get_mut(*at) {
            *score *= EXACT;
        }
    }
    top.sort_by(|a, b| b.0.total_cmp(&a.0));
    Ok(())
}

/// `text` without the texts of the shorter `holders` of `file` it holds (longest first, so an
/// item inside one of them goes with it); borrowed when it holds none.
fn left_of<'a>(text: &'a str, file: &str, holders: &[(usize, String, String)]) -> Cow<'a, str> {
    let mut inside: Vec<&str> = holders
        .iter()
        .filter(|(_, f, inner)| f == file && inner.len() < text.len())
        .map(|(_, _, inner)| inner.as_str())
        .collect();
    inside.sort_by_key(|inner| std::cmp::Reverse(inner.len()));
    let mut own = Cow::Borrowed(text);
    for inner in inside {
        if own.contains(inner) {
            own = Cow::Owned(own.replace(inner, "\n"));
        }
    }
    own
}
