//! The code-aware tokenizer shared by indexing and queries: each identifier is kept whole
//! (lowercased) and also split into its snake_case, CamelCase and letter/digit parts, the parts
//! English-stemmed (`read_lines` → `read_lines read line`, `HTTPServer2` → `httpserver2 http
//! server 2`). Queries also drop English function words (see docs/RETRIEVAL.md for what each
//! step bought on the evaluation).

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};

/// Longest token kept, in bytes; longer runs (hashes, base64) are dropped.
const MAX_TOKEN_BYTES: usize = 64;

/// Splits an identifier into its parts (original case).
pub(crate) fn split_identifier(ident: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    for chunk in ident.split('_').filter(|c| !c.is_empty()) {
        let chars: Vec<(usize, char)> = chunk.char_indices().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (pos, c) = chars[i];
            let (_, p) = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|(_, n)| n.is_lowercase());
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_uppercase() && c.is_uppercase() && next_lower)
                || (p.is_alphabetic() && c.is_ascii_digit())
                || (p.is_ascii_digit() && c.is_alphabetic());
            if boundary {
                parts.push(&chunk[start..pos]);
                start = pos;
            }
        }
        parts.push(&chunk[start..]);
    }
    parts
}

/// English stem of a word part (`headers` → `header`, `parsing` → `pars`); digits and short
/// parts stay as they are.
fn stem(part: &str) -> String {
    static STEMMER: std::sync::LazyLock<rust_stemmers::Stemmer> = std::sync::LazyLock::new(|| {
        rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English)
    });
    if part.len() <= 3 || !part.chars().all(|c| c.is_ascii_alphabetic()) {
        return part.to_owned();
    }
    // A query's words are stemmed three times (BM25 terms, names, phrases) and a corpus says
    // the same words over and over: stems are remembered per thread, up to STEMS_KEPT words
    // (forgotten all at once when full).
    thread_local! {
        static STEMS: std::cell::RefCell<rustc_hash::FxHashMap<Box<str>, Box<str>>> =
            std::cell::RefCell::default();
    }
    STEMS.with_borrow_mut(|stems| {
        if let Some(stem) = stems.get(part) {
            return String::from(&**stem);
        }
        let stem = STEMMER.stem(part).into_owned();
        if stems.len() >= STEMS_KEPT {
            stems.clear();
        }
        stems.insert(part.into(), stem.as_str().into());
        stem
    })
}

/// Words whose stems a thread remembers ([`stem`]): a few hundred KiB at most per thread.
const STEMS_KEPT: usize = 4096;

/// English function words dropped from queries (not from the index): they match comments
/// everywhere and only add noise to a ranking.
pub fn is_stopword(token: &str) -> bool {
    const WORDS: &[&str] = &[
        "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "do", "does", "for",
        "from", "has", "have", "if", "in", "into", "is", "it", "its", "of", "on", "or", "so",
        "than", "that", "the", "their", "them", "then", "there", "these", "this", "those", "to",
        "too", "was", "were", "when", "which", "while", "will", "with", "would",
    ];
    WORDS.binary_search(&token).is_ok()
}

/// Every token of `text`, in order, lowercased.
pub fn code_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(text, |t, _, _| out.push(t.to_owned()));
    out
}

/// Whether `c` can be part of an identifier (letters and digits of any script, `_`).
pub fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifiers of `text` (the runs of [`is_ident_char`]), in order.
pub fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !is_ident_char(c))
        .filter(|ident| !ident.is_empty())
}

/// The stemmed, lowercased parts of every identifier of `text`, without the whole identifiers
/// (`read_mem` → `read mem`): one word once, whether written alone or inside a name.
pub fn word_parts(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for ident in identifiers(text) {
        if ident.len() > MAX_TOKEN_BYTES {
            continue;
        }
        out.extend(
            split_identifier(ident)
                .into_iter()
                .map(|p| stem(&p.to_lowercase())),
        );
    }
    out
}

/// Whether `c` is written without spaces between words: Han ideographs, kana and Hangul.
/// Their runs are tokenized as overlapping pairs of characters ([`cjk_tokens`]).
pub fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30ff}'   // Hiragana, Katakana
        | '\u{3400}'..='\u{4dbf}' // CJK Extension A
        | '\u{4e00}'..='\u{9fff}' // CJK Unified Ideographs
        | '\u{ac00}'..='\u{d7af}' // Hangul syllables
        | '\u{f900}'..='\u{faff}' // CJK Compatibility Ideographs
        | '\u{ff66}'..='\u{ff9f}' // Halfwidth Katakana
        | '\u{20000}'..='\u{2fa1f}' // CJK Extensions B–F, Compatibility Supplement
    )
}

/// The tokens of a run of [`is_ident_char`] holding CJK characters: the whole run (when short
/// enough), each stretch of other characters as an identifier of its own, and each pair of
/// neighbouring CJK characters (a lone one alone). A word inside a run of Chinese
/// (`问候用户` in `用中文问候用户`) is then found by its pairs, as search engines for these
/// scripts do; a run longer than [`MAX_TOKEN_BYTES`] (a sentence) is no longer dropped.
fn cjk_tokens(ident: &str, from: usize, f: &mut dyn FnMut(&str, usize, usize)) {
    let whole = (ident.len() <= MAX_TOKEN_BYTES).then(|| ident.to_lowercase());
    if let Some(whole) = &whole {
        f(whole, from, from + ident.len());
    }
    // A pair or a lone character that is the whole run is said once.
    let mut f = |t: &str, a: usize, b: usize| {
        if whole.as_deref() != Some(t) {
            f(t, a, b);
        }
    };
    let chars: Vec<(usize, char)> = ident.char_indices().collect();
    let mut i = 0;
    while let Some(&(at, c)) = chars.get(i) {
        let cjk = is_cjk(c);
        let mut j = i + 1;
        while chars.get(j).is_some_and(|&(_, d)| is_cjk(d) == cjk) {
            j += 1;
        }
        let end = chars.get(j).map_or(ident.len(), |&(e, _)| e);
        if !cjk {
            word_tokens(&ident[at..end], from + at, &mut f);
        } else if j - i == 1 {
            f(&ident[at..end], from + at, from + end);
        } else {
            for k in i..j - 1 {
                let (a, _) = chars[k];
                let b = chars.get(k + 2).map_or(ident.len(), |&(e, _)| e);
                f(&ident[a..b], from + a, from + b);
            }
        }
        i = j;
    }
}

/// The tokens of one identifier without CJK characters: whole (lowercased) and its stemmed
/// parts.
fn word_tokens(ident: &str, from: usize, f: &mut dyn FnMut(&str, usize, usize)) {
    let to = from + ident.len();
    if ident.len() > MAX_TOKEN_BYTES {
        return;
    }
    let whole = ident.to_lowercase();
    f(&whole, from, to);
    for part in split_identifier(ident) {
        let lower = stem(&part.to_lowercase());
        if lower != whole {
            f(&lower, from, to);
        }
    }
}

/// Calls `f(token, byte_from, byte_to)` for every token of `text`.
fn for_each_token(text: &str, mut f: impl FnMut(&str, usize, usize)) {
    let mut start: Option<usize> = None;
    let emit = |from: usize, to: usize, f: &mut dyn FnMut(&str, usize, usize)| {
        let ident = &text[from..to];
        if !ident.is_ascii() && ident.contains(is_cjk) {
            cjk_tokens(ident, from, f);
        } else {
            word_tokens(ident, from, f);
        }
    };
    for (i, c) in text.char_indices() {
        let word = is_ident_char(c);
        match (word, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                emit(s, i, &mut f);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        emit(s, text.len(), &mut f);
    }
}

/// The tantivy tokenizer registered as `code`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CodeTokenizer;

/// Tokens of one text, produced eagerly.
#[derive(Debug)]
pub struct CodeTokenStream {
    tokens: Vec<Token>,
    index: usize,
}

impl Tokenizer for CodeTokenizer {
    type TokenStream<'a> = CodeTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> CodeTokenStream {
        let mut tokens = Vec::new();
        for_each_token(text, |t, from, to| {
            let position = tokens.len();
            tokens.push(Token {
                offset_from: from,
                offset_to: to,
                position,
                text: t.to_owned(),
                position_length: 1,
            });
        });
        CodeTokenStream { tokens, index: 0 }
    }
}

impl TokenStream for CodeTokenStream {
    fn advance(&mut self) -> bool {
        if self.index < self.tokens.len() {
            self.index += 1;
            true
        } else {
            false
        }
    }

    fn token(&self) -> &Token {
        &self.tokens[self
            .index
            .saturating_sub(1)
            .min(self.tokens.len().saturating_sub(1))]
    }

    fn token_mut(&mut self) -> &mut Token {
        let i = self
            .index
            .saturating_sub(1)
            .min(self.tokens.len().saturating_sub(1));
        &mut self.tokens[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_kept_whole_and_split() {
        assert_eq!(code_tokens("read_line"), vec!["read_line", "read", "line"]);
        assert_eq!(code_tokens("HashMap"), vec!["hashmap", "hash", "map"]);
        assert_eq!(
            code_tokens("HTTPServer2"),
            vec!["httpserver2", "http", "server", "2"]
        );
        assert_eq!(
            code_tokens("fn parse_h2_frame(x: &Vec<u8>)"),
            vec![
                "fn",
                "parse_h2_frame",
                "pars",
                "h",
                "2",
                "frame",
                "x",
                "vec",
                "u8",
                "u",
                "8"
            ]
        );
        assert_eq!(code_tokens("Config::load"), vec!["config", "load"]);
        assert_eq!(code_tokens("__private"), vec!["__private", "privat"]);
        assert_eq!(code_tokens("é_naïve"), vec!["é_naïve", "é", "naïve"]);
        assert!(code_tokens("  ::<>{}  ").is_empty());
    }

    #[test]
    fn stopwords_are_sorted_for_binary_search_and_parts_are_stemmed() {
        assert!(is_stopword("the") && is_stopword("would") && !is_stopword("header"));
        assert_eq!(
            code_tokens("parse_headers"),
            vec!["parse_headers", "pars", "header"]
        );
    }

    #[test]
    fn cjk_runs_are_tokenized_as_pairs_of_characters() {
        assert_eq!(
            code_tokens("/// 用中文问候用户，例如 HTTP服务器"),
            [
                "用中文问候用户",
                "用中",
                "中文",
                "文问",
                "问候",
                "候用",
                "用户",
                "例如",
                "http服务器",
                "http",
                "服务",
                "务器",
            ]
        );
        // A word inside the run shares its pairs with the query that names it alone.
        let doc = code_tokens("用中文问候用户");
        assert!(
            code_tokens("问候用户")
                .iter()
                .skip(1)
                .all(|t| doc.contains(t))
        );
        // A lone character, kana and Hangul; a sentence too long to keep whole keeps its pairs.
        assert_eq!(
            code_tokens("値 ひらがな"),
            ["値", "ひらがな", "ひら", "らが", "がな"]
        );
        assert_eq!(code_tokens("한국어"), ["한국어", "한국", "국어"]);
        let sentence = "这是一个非常长的中文句子没有任何标点符号用来测试分词器的行为";
        let tokens = code_tokens(sentence);
        assert!(!tokens.contains(&sentence.to_owned()));
        assert_eq!(tokens.len(), sentence.chars().count() - 1);
        // Nothing changes for other scripts.
        assert_eq!(
            code_tokens("größe_Ändern"),
            ["größe_ändern", "größe", "ändern"]
        );
    }

    #[test]
    fn overlong_runs_are_dropped() {
        let hash = "a".repeat(65);
        assert_eq!(code_tokens(&format!("{hash} ok")), vec!["ok"]);
    }

    #[test]
    fn tantivy_stream_matches_code_tokens() {
        let mut tok = CodeTokenizer;
        let mut stream = tok.token_stream("parseConfig x");
        let mut seen = Vec::new();
        while stream.advance() {
            seen.push((stream.token().text.clone(), stream.token().position));
        }
        assert_eq!(
            seen,
            vec![
                ("parseconfig".to_owned(), 0),
                ("pars".to_owned(), 1),
                ("config".to_owned(), 2),
                ("x".to_owned(), 3)
            ]
        );
    }
}
