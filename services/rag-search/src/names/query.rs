//! The query's side of names: which identifiers, paths, `Type::method`s and phrases a query
//! writes, how surely each is meant as a name, and the query's other words.

use rustc_hash::FxHashSet;

use crate::quotes::outside_quotes;
use crate::tokenize::{is_stopword, word_parts};

use super::key;

/// How much a name written as code counts, against a plain word (1.0).
pub(super) const CODE_STRENGTH: f32 = 1.0;
/// A capitalised word (`Token`, `Server`): often a type, sometimes the start of a sentence.
pub(super) const CAPITALISED_STRENGTH: f32 = 0.3;
/// A plain lowercase word that is also some item's name.
pub(super) const WORD_STRENGTH: f32 = 0.1;
/// Plain words written apart that together spell a name ([`phrases`]).
pub(super) const PHRASE_STRENGTH: f32 = 0.5;
/// Shortest name spelled by a phrase (`is ok` → `isok` is noise).
pub(super) const MIN_PHRASE_LEN: usize = 6;
/// Function words that begin names (`is_empty`, `as_bytes`, `to_string`, `on_record`): a
/// phrase may start with one.
pub(super) const NAME_LEADS: [&str; 11] = [
    "as", "by", "can", "for", "from", "has", "into", "is", "on", "to", "with",
];
/// Shortest name looked up (shorter ones are mostly noise: `id`, `io`).
pub(super) const MIN_LEN: usize = 3;
/// Shortest name looked up when it is written as code or qualified (`MethodFilter::or`,
/// `` `tx` ``): a name however short (one letter stays noise: `e.g`).
pub(super) const MIN_CODE_LEN: usize = 2;
/// Keywords as short as that, which a code span holds around names (`` `fn headers` ``).
const SHORT_KEYWORDS: [&str; 5] = ["as", "do", "fn", "if", "in"];

/// A name the query writes.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryName {
    /// Its lookup key.
    pub key: String,
    /// Keys of the path segments written before it (`Type` of `Type::method`).
    pub qualifiers: Vec<String>,
    /// Whether the last of them is written as a type is (capitalised: `Client` of
    /// `reqwest::Client::get`, not `client` of `reqwest::client::get`), which keys forget.
    pub type_qualified: bool,
    /// How surely it is meant as a name.
    pub strength: f32,
    /// For words spelling a name ([`phrases`]): their stems joined, to find the name written
    /// in other forms (`parsing escapes` for `parse_escape`).
    pub stems: Option<String>,
    /// For a name written as code: as written (`Execute`), to prefer the item spelled so over
    /// one whose name differs only in case or `_` (`execute`).
    pub spelled: Option<String>,
}

/// What a query says about names: the names it writes, and its words (identifier parts,
/// stemmed) to find them in items' paths.
#[derive(Debug, Clone, Default)]
pub struct QueryNames {
    /// The names, strongest first, each key once.
    pub names: Vec<QueryName>,
    /// The query's words, without function words.
    pub words: FxHashSet<String>,
    /// The keys of the query's identifiers and words in the order written, without function
    /// words, each with whether it was written capitalised (what is written side by side, and
    /// as types are, [`super::impls`]).
    pub order: Vec<(String, bool)>,
}

impl QueryNames {
    /// Whether the query names nothing.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// The names a query writes as code (what [`NameIndex::names_code`] looks at), without its
/// phrases and words.
pub fn code_names(text: &str) -> QueryNames {
    QueryNames {
        names: names_in(strip_commit_prefix(&outside_quotes(text)))
            .into_iter()
            .filter(|n| n.strength >= CODE_STRENGTH)
            .collect(),
        words: FxHashSet::default(),
        order: Vec::new(),
    }
}

/// The names in a query, and its words.
pub fn query_names(text: &str) -> QueryNames {
    // A commit prefix names no item, but its scope (`fix(client):`, `wasm:`) is context.
    let words = word_parts(text)
        .into_iter()
        .filter(|w| !is_stopword(w))
        .collect();
    // Quoted text is asked for as written, not by the names in it ([`crate::quotes`]).
    let unquoted = outside_quotes(text);
    let body = strip_commit_prefix(&unquoted);
    let mut names = names_in(body);
    for phrase in phrases(body) {
        if !names.iter().any(|n| n.key == phrase.key) {
            names.push(phrase);
        }
    }
    names.sort_by(|a, b| b.strength.total_cmp(&a.strength));
    let order = body
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
        .map(|t| (key(t), t.starts_with(char::is_uppercase)))
        .filter(|(k, _)| !is_stopword(k))
        .collect();
    QueryNames {
        names,
        words,
        order,
    }
}

/// Two or three plain words written apart that spell an item's name together (`send error`
/// for `send_error`, `max level hint` for `max_level_hint`): the query describes the item in
/// words. Stronger than one word that happens to be a name, weaker than a name written as code.
pub(super) fn phrases(text: &str) -> Vec<QueryName> {
    // Runs of plain words: an identifier, a number or punctuation ends a run.
    let mut runs: Vec<Vec<&str>> = vec![Vec::new()];
    for raw in text.split_whitespace() {
        let word = raw.trim_start_matches(['(', '"', '\'']);
        // An opening bracket or quote starts a run of its own.
        if word.len() != raw.len() {
            runs.push(Vec::new());
        }
        let trimmed = word.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '"', '\'']);
        let plain = !trimmed.is_empty() && trimmed.chars().all(char::is_alphabetic);
        if plain && let Some(run) = runs.last_mut() {
            run.push(trimmed);
        }
        if !plain || trimmed.len() != word.len() {
            runs.push(Vec::new());
        }
    }
    let mut out = Vec::new();
    for words in runs.iter().filter(|run| run.len() > 1) {
        // Each word once: lowercase, whether a function word, its stem.
        let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
        let stop: Vec<bool> = lower.iter().map(|w| is_stopword(w)).collect();
        let stems: Vec<String> = words.iter().map(|w| word_parts(w).concat()).collect();
        for n in [2usize, 3] {
            for start in 0..words.len().saturating_sub(n - 1) {
                let run = start..start + n;
                // Function words join no phrase, except the ones names start with
                // (`is empty`, `as bytes`, `into iter`, `with level`).
                let leads = !stop[start] || NAME_LEADS.contains(&lower[start].as_str());
                if !leads || stop[start + 1..run.end].iter().any(|s| *s) {
                    continue;
                }
                let joined = lower[run.clone()].concat();
                if joined.chars().count() < MIN_PHRASE_LEN {
                    continue;
                }
                out.push(QueryName {
                    type_qualified: false,
                    // Lowercase words without `_`: already a key.
                    key: joined,
                    qualifiers: Vec::new(),
                    strength: PHRASE_STRENGTH,
                    stems: Some(stems[run].concat()),
                    spelled: None,
                });
            }
        }
    }
    out
}

/// The names in a query (its commit prefix left out), each key once.
fn names_in(text: &str) -> Vec<QueryName> {
    let mut names: Vec<QueryName> = Vec::new();
    let bytes = text.as_bytes();
    let spans = inline_code(text);
    let in_backticks = |at: usize| spans.iter().any(|span| span.contains(&at));
    let is_ident = crate::tokenize::is_ident_char;
    let is_part = |c: char| is_ident(c) || c == ':';
    let mut rest = text;
    let mut offset = 0;
    while let Some(start) = rest.find(is_part) {
        // A `.` between identifier characters joins a path (`Session.request`, `pkg.mod.f`).
        let mut run_len = 0;
        let mut chars = rest[start..].char_indices().peekable();
        let mut prev = None;
        while let Some((i, c)) = chars.next() {
            let next_ident = chars.peek().is_some_and(|(_, n)| is_ident(*n));
            let dotted = c == '.' && prev.is_some_and(is_ident) && next_ident;
            if !(is_part(c) || dotted) {
                break;
            }
            run_len = i + c.len_utf8();
            prev = Some(c);
        }
        let run = &rest[start..start + run_len];
        let before = (offset + start).checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(offset + start + run_len).copied();
        // A word of a hyphenated name (`env-filter`, `tokio-util`: a feature's, a package's, a
        // flag's) names no item of the code, in backticks or not.
        let hyphenated = before == Some(b'-') || after == Some(b'-');
        let as_code = !hyphenated
            && (before == Some(b'`')
                || after == Some(b'(')
                || after == Some(b'`')
                || in_backticks(offset + start));
        let at_start = offset + start == 0;
        if let Some(name) = parse_run(run, as_code, at_start) {
            match names.iter_mut().find(|n| n.key == name.key) {
                Some(seen) if seen.strength < name.strength => *seen = name,
                Some(_) => {}
                None => names.push(name),
            }
        }
        offset += start + run_len;
        rest = &rest[start + run_len..];
    }
    names
}

/// Longest inline code span read as code (a longer one is a quoted message or output).
const MAX_INLINE_CODE: usize = 60;

/// Byte ranges of inline code spans: text between two single backticks on one line
/// (`` `fn headers ` ``), paired line by line. Fenced blocks (```` ``` ````) hold output and
/// examples, not names: nothing in them counts.
fn inline_code(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    let mut fenced = false;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let bytes = line.as_bytes();
        let single = |i: usize| {
            bytes[i] == b'`'
                && (i == 0 || bytes[i - 1] != b'`')
                && bytes.get(i + 1).is_none_or(|b| *b != b'`')
        };
        let ticks: Vec<usize> = (0..bytes.len()).filter(|i| single(*i)).collect();
        spans.extend(
            ticks
                .chunks_exact(2)
                .map(|pair| start + pair[0] + 1..start + pair[1])
                .filter(|span| span.len() <= MAX_INLINE_CODE),
        );
    }
    spans
}

/// A conventional-commit prefix (`fix(h1): `, `feat!: `) says what kind of change, not what
/// it names.
pub(crate) fn strip_commit_prefix(text: &str) -> &str {
    let Some((head, rest)) = text.split_once(": ") else {
        return text;
    };
    let kind = head.split('(').next().unwrap_or(head).trim_end_matches('!');
    let is_prefix = !kind.is_empty()
        && kind.len() <= 12
        && kind.chars().all(|c| c.is_ascii_lowercase())
        && (!head.contains('(') || head.trim_end_matches('!').ends_with(')'));
    if is_prefix { rest } else { text }
}

/// Extensions of file names a query may write (`config.rs`, `api.py`): the name is the stem.
const FILE_EXTENSIONS: [&str; 20] = [
    "rs", "py", "go", "ts", "tsx", "js", "jsx", "mjs", "java", "toml", "md", "json", "yaml", "yml",
    "proto", "c", "h", "cpp", "sh", "txt",
];

/// One run of identifier characters (`a::b::c`, `a.b.c`, `read_mem`, `Token`) as a name, if it
/// is one.
fn parse_run(run: &str, as_code: bool, at_start: bool) -> Option<QueryName> {
    let run = match run.rsplit_once('.') {
        Some((stem, ext)) if FILE_EXTENSIONS.contains(&ext) => stem,
        _ => run,
    };
    let segments: Vec<&str> = run
        .split("::")
        .flat_map(|s| s.split('.'))
        .map(|s| s.trim_matches(':'))
        .filter(|s| !s.is_empty())
        .collect();
    let (written, before) = segments.split_last()?;
    let last = written.trim_matches('_');
    // A `::` path is code wherever it is written; a dotted one only as code (prose without a
    // space after a full stop, `failed.It`, is no path).
    let min_len = if run.contains("::") || (as_code && !SHORT_KEYWORDS.contains(&last)) {
        MIN_CODE_LEN
    } else {
        MIN_LEN
    };
    if last.chars().count() < min_len || last.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let kept: Vec<&str> = before
        .iter()
        .copied()
        .filter(|s| !matches!(*s, "crate" | "self" | "super" | "Self"))
        .collect();
    let qualifiers: Vec<String> = kept.iter().map(|s| key(s)).collect();
    let type_qualified = kept
        .last()
        .is_some_and(|q| q.trim_matches('_').starts_with(char::is_uppercase));
    let lower = last.to_lowercase();
    let looks_like_code = as_code
        || !before.is_empty()
        || last.contains('_')
        || has_inner_capital(last)
        || (last.chars().any(|c| c.is_ascii_digit()) && last.chars().any(char::is_alphabetic));
    let strength = if looks_like_code {
        CODE_STRENGTH
    } else if is_stopword(&lower) {
        return None;
    } else if last.starts_with(char::is_uppercase) && !at_start {
        CAPITALISED_STRENGTH
    } else {
        WORD_STRENGTH
    };
    Some(QueryName {
        key: key(last),
        qualifiers,
        type_qualified,
        strength,
        stems: None,
        spelled: (strength >= CODE_STRENGTH).then(|| (*written).to_owned()),
    })
}

/// `readMem`, `ReadMem`, `HTTPServer`: a capital after the first character.
fn has_inner_capital(word: &str) -> bool {
    word.chars().skip(1).any(char::is_uppercase) && word.chars().any(char::is_lowercase)
}
