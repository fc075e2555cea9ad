//! What a query quotes: text between double quotes on one line (`"error decoding response
//! body"`), asked for as written, as grep would find it (an error message, a log line, a
//! string literal pasted from a terminal). BM25 puts the items holding it first
//! ([`crate::bm25`]); names are not looked for inside it ([`crate::names`]).

use std::borrow::Cow;
use std::ops::Range;

use crate::tokenize::{code_tokens, is_cjk, is_ident_char, is_stopword};

/// Longest span looked for, in bytes (a pasted line, not a file).
const MAX_SPAN_BYTES: usize = 200;
/// Spans looked for as written per query, at most (every quoted span is still left out of the
/// query's names).
const MAX_SPANS: usize = 4;

/// The spans a query quotes, each trimmed and lowercased with its white space collapsed. A
/// span must be more than one identifier (a quoted name is a name, found as one) and hold a
/// word that is not a stop word: `"Transfer-Encoding"` and `"could not create wasm byte
/// stream"` count, `"ansi"` and `" and "` do not.
pub fn quoted_spans(query: &str) -> Vec<String> {
    let mut spans = Vec::new();
    for (_, span) in quoted(query) {
        if !spans.contains(&span) {
            spans.push(span);
        }
    }
    spans.truncate(MAX_SPANS);
    spans
}

/// The query with the spans it quotes blanked out (each byte a space, so offsets hold).
pub fn outside_quotes(query: &str) -> Cow<'_, str> {
    let spans = quoted(query);
    if spans.is_empty() {
        return Cow::Borrowed(query);
    }
    let mut out = query.to_owned();
    for (range, _) in spans {
        out.replace_range(range.clone(), &" ".repeat(range.len()));
    }
    Cow::Owned(out)
}

/// Whether `text` holds one of `spans` (as [`quoted_spans`] made them), not as part of a
/// longer word (`"shr() overflow"` is not in `"overflowing_shr() overflow"`; a span of Chinese
/// is found inside a longer run, which has no word edges).
pub fn holds_any(text: &str, spans: &[String]) -> bool {
    let text = normalised(text);
    // Scripts written without spaces have no word edges to respect.
    let joins = |a: Option<char>, b: Option<char>| {
        a.zip(b)
            .is_some_and(|(a, b)| is_ident_char(a) && is_ident_char(b) && !is_cjk(a) && !is_cjk(b))
    };
    spans.iter().any(|span| {
        let (Some(first), last) = (span.chars().next(), span.chars().next_back()) else {
            return false;
        };
        // Every occurrence, overlapping ones too (one inside a word may hide the next).
        let mut from = 0;
        while let Some(found) = text.get(from..).and_then(|rest| rest.find(span.as_str())) {
            let at = from + found;
            if !joins(text[..at].chars().next_back(), Some(first))
                && !joins(last, text[at + span.len()..].chars().next())
            {
                return true;
            }
            from = at + first.len_utf8();
        }
        false
    })
}

/// Each quoted span that counts: where it is in `query` (inside the quotes) and its
/// normalised text.
fn quoted(query: &str) -> Vec<(Range<usize>, String)> {
    let mut found = Vec::new();
    if !query.contains('"') {
        return found;
    }
    let mut line_start = 0;
    for line in query.split_inclusive('\n') {
        let quotes: Vec<usize> = line.match_indices('"').map(|(at, _)| at).collect();
        // Quotes pair in order; an unpaired last one opens nothing.
        for pair in quotes.chunks_exact(2) {
            let inside = &line[pair[0] + 1..pair[1]];
            let span = normalised(inside);
            // A quoted run of CJK characters is a phrase, not a name.
            if span.len() <= MAX_SPAN_BYTES
                && span.contains(|c: char| !is_ident_char(c) || is_cjk(c))
                && code_tokens(&span).iter().any(|w| !is_stopword(w))
            {
                found.push((line_start + pair[0] + 1..line_start + pair[1], span));
            }
        }
        line_start += line.len();
    }
    found
}

/// `text` lowercased, its runs of white space made one space, trimmed (one string, made in
/// one pass: it runs on the stored text of every candidate of a quoted search).
fn normalised(text: &str) -> String {
    if text.is_ascii() {
        normalised_ascii(text)
    } else {
        normalised_chars(text)
    }
}

/// [`normalised`] for any text, char by char.
fn normalised_chars(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

/// [`normalised`] for ASCII text, byte by byte (most source code: a quoted search normalises
/// every candidate's text, which char by char cost more than ranking the query).
fn normalised_ascii(text: &str) -> String {
    // The ASCII characters `char::is_whitespace` counts (`u8::is_ascii_whitespace` leaves out
    // the vertical tab).
    let space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut out = Vec::with_capacity(text.len());
    let mut gap = false;
    for &b in text.as_bytes() {
        if space(b) {
            gap = !out.is_empty();
            continue;
        }
        if gap {
            out.push(b' ');
            gap = false;
        }
        out.push(b.to_ascii_lowercase());
    }
    // Only ASCII bytes were pushed: always UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_quoted_on_one_line_and_more_than_a_name() {
        assert_eq!(
            quoted_spans(
                r#"where is "error  decoding Response body" raised? "ansi" "Transfer-Encoding""#
            ),
            vec!["error decoding response body", "transfer-encoding"]
        );
        // A stop word alone, an unpaired quote, quotes across lines: nothing.
        assert!(quoted_spans(r#"joined with " and " here"#).is_empty());
        assert!(quoted_spans(r#"a "dangling quote"#).is_empty());
        assert!(quoted_spans("\"first line\nsecond\"").is_empty());
        let long = format!("\"{} x\"", "y".repeat(MAX_SPAN_BYTES));
        assert!(quoted_spans(&long).is_empty());
    }

    #[test]
    fn outside_quotes_blanks_only_the_spans_that_count() {
        let query = "fix `Conn::poll` \"setting h1 header_read_timeout\" and \"ansi\"";
        let outside = outside_quotes(query);
        assert_eq!(outside.len(), query.len());
        assert_eq!(
            outside,
            format!("fix `Conn::poll` \"{}\" and \"ansi\"", " ".repeat(30))
        );
        // Multi-byte characters inside a span are blanked byte for byte.
        let query = "voir \"échec de lecture\" ici";
        let outside = outside_quotes(query);
        assert_eq!(outside.len(), query.len());
        let blank = " ".repeat("échec de lecture".len());
        assert_eq!(outside, format!("voir \"{blank}\" ici"));
    }

    #[test]
    fn ascii_text_is_normalised_as_any_text_is() {
        let texts = [
            "",
            "   ",
            "  Error\tDecoding \r\n  RESPONSE\x0bbody\x0c ",
            "a\x1cb \x1f c",
            "fn main() {\n    println!(\"Hello,   World\");\n}\n",
            "x",
        ];
        for text in texts {
            assert_eq!(normalised_ascii(text), normalised_chars(text), "{text:?}");
        }
        assert_eq!(
            normalised("  Error\tDecoding \r\n  RESPONSE\x0bbody "),
            "error decoding response body"
        );
        assert_eq!(normalised("Ünïcode  Text"), "ünïcode text");
    }

    #[test]
    fn a_text_holds_a_span_whatever_its_case_and_spacing() {
        let spans = quoted_spans(r#""error decoding response body""#);
        assert!(holds_any(
            "f.write_str(\"Error decoding\n   response body\")",
            &spans
        ));
        assert!(!holds_any("error decoding the response body", &spans));
        // Not inside a longer word, at either end.
        let spans = quoted_spans(r#""shr() overflow in shift""#);
        assert!(holds_any(
            "assert!(x, \"shr() overflow in shift right.\")",
            &spans
        ));
        assert!(!holds_any(
            "\"overflowing_shr() overflow in shift right.\"",
            &spans
        ));
        assert!(!holds_any("\"shr() overflow in shifting\"", &spans));
        // An occurrence inside a word does not hide the next one it overlaps.
        assert!(holds_any("cab ab ab", &quoted_spans(r#""ab ab""#)));
        // Letters of any script are word characters; other characters are not.
        let spans = quoted_spans(r#""échec de lecture""#);
        assert!(holds_any("« Échec de lecture »", &spans));
        // Chinese has no word edges: a quoted word is found inside a longer run, and a run
        // with no punctuation is a phrase, not a name.
        let spans = quoted_spans(r#"where is "问候用户" done"#);
        assert_eq!(spans, ["问候用户"]);
        assert!(holds_any("/// 用中文问候用户，例如", &spans));
        assert!(!holds_any("/// 用中文问候", &spans));
        assert!(!holds_any("réchec de lecture", &spans));
        assert!(!holds_any("échec de lectureé", &spans));
    }
}
