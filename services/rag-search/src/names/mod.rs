//! Names as their own retrieval signal: the identifiers, paths and `Type::method`s a query
//! writes are looked up among the items' names (case and `_` ignored, a plural `s` forgiven),
//! and the items so found form a ranked list that fusion weighs beside BM25 and the dense
//! list — so an item the user names comes first even when its body shares few of the query's
//! words. A name written as code (`snake_case`, `CamelCase`, `a::b`, in backticks, with `()`)
//! counts more than a plain word that happens to name something, two or three words in a row
//! that spell a name together (`send error` for `send_error`) count in between (half that when
//! they spell only a run of words inside a longer name: `value filters` for
//! `has_value_filters`), and a name
//! many items share (`new`, `poll`) counts less than a rare one. Among items sharing a name,
//! the one whose path holds more of the query's other words (`blocking` in "add bytes to
//! blocking::Response") wins. The constants were chosen on ../shared/eval (docs/RETRIEVAL.md, "Names").

use rustc_hash::{FxHashMap, FxHashSet};

use crate::parse::Kind;
use crate::quotes::outside_quotes;
use crate::record::ItemRecord;
use crate::tokenize::{is_stopword, word_parts};

/// How much a name written as code counts, against a plain word (1.0).
const CODE_STRENGTH: f32 = 1.0;
/// A capitalised word (`Token`, `Server`): often a type, sometimes the start of a sentence.
const CAPITALISED_STRENGTH: f32 = 0.3;
/// A plain lowercase word that is also some item's name.
const WORD_STRENGTH: f32 = 0.1;
/// Plain words written apart that together spell a name ([`phrases`]).
const PHRASE_STRENGTH: f32 = 0.5;
/// Shortest name spelled by a phrase (`is ok` → `isok` is noise).
const MIN_PHRASE_LEN: usize = 6;
/// Function words that begin names (`is_empty`, `as_bytes`, `to_string`, `on_record`): a
/// phrase may start with one.
const NAME_LEADS: [&str; 11] = [
    "as", "by", "can", "for", "from", "has", "into", "is", "on", "to", "with",
];
/// Factor when the query qualifies a name (`Type::method`) and the item's path has the
/// qualifier; and when it has none of them.
const QUALIFIED: f32 = 1.5;
const OTHERWISE_QUALIFIED: f32 = 0.4;
/// Factor when the query's last qualifier is the item's own type or trait (`Request` of
/// `blocking::Request::try_clone` for `Request::try_clone`, not `RequestBuilder::try_clone`
/// in module `request`).
const OWNER_QUALIFIED: f32 = 2.0;
/// A type, trait or module named counts half: a change or a question that names a type is as
/// often about one of its methods, which the type's name then finds as context.
const NOT_A_FUNCTION: f32 = 0.5;
/// A plural written for a singular name (`headers` for `header`).
const PLURAL: f32 = 0.8;
/// Words spelling a name in another form (`parsing escapes` for `parse_escape`).
const OTHER_FORM: f32 = 0.8;
/// Words spelling a run of words inside a longer name (`value filters` for
/// `has_value_filters`).
const PART: f32 = 0.5;
/// A name written as code that matches an item's only up to case or `_` (`Execute` for
/// `execute`, Go's exported and unexported methods; `Body` for `body`).
const OTHER_SPELLING: f32 = 0.5;
/// Shortest name looked up (shorter ones are mostly noise: `id`, `io`).
const MIN_LEN: usize = 3;
/// Gain per other query word in the item's path (`blocking` and `response` for
/// `blocking::response::Response::bytes` asked as "bytes … blocking::Response"), up to
/// [`MAX_CONTEXT`] words.
const CONTEXT: f32 = 1.0;
const MAX_CONTEXT: usize = 4;

/// A name's lookup key: lowercase without `_` (`read_mem`, `readMem` and `ReadMem` are one).
pub fn key(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether `name` has the lookup key `key` (without making it).
fn key_eq(name: &str, key: &str) -> bool {
    name.chars()
        .filter(|c| *c != '_')
        .flat_map(char::to_lowercase)
        .eq(key.chars())
}

/// A name the query writes.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryName {
    /// Its lookup key.
    pub key: String,
    /// Keys of the path segments written before it (`Type` of `Type::method`).
    pub qualifiers: Vec<String>,
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
    QueryNames { names, words }
}

/// Two or three plain words written apart that spell an item's name together (`send error`
/// for `send_error`, `max level hint` for `max_level_hint`): the query describes the item in
/// words. Stronger than one word that happens to be a name, weaker than a name written as code.
fn phrases(text: &str) -> Vec<QueryName> {
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
        let as_code = before == Some(b'`')
            || after == Some(b'(')
            || after == Some(b'`')
            || in_backticks(offset + start);
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
fn strip_commit_prefix(text: &str) -> &str {
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
    if last.chars().count() < MIN_LEN || last.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let qualifiers: Vec<String> = before
        .iter()
        .filter(|s| !matches!(**s, "crate" | "self" | "super" | "Self"))
        .map(|s| key(s))
        .collect();
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
        strength,
        stems: None,
        spelled: (strength >= CODE_STRENGTH).then(|| (*written).to_owned()),
    })
}

/// `readMem`, `ReadMem`, `HTTPServer`: a capital after the first character.
fn has_inner_capital(word: &str) -> bool {
    word.chars().skip(1).any(char::is_uppercase) && word.chars().any(char::is_lowercase)
}

/// The items of one index by name key, with the words of the path around each one's name.
#[derive(Debug, Clone, Default)]
pub struct NameIndex {
    by_key: FxHashMap<String, Vec<u64>>,
    /// Names of several words by their stems joined (`parse_escape` as `parsescap`).
    by_stems: FxHashMap<String, Vec<u64>>,
    /// Names of three or more words by the stems of each run of two or more of their words
    /// inside them (`has_value_filters` under `value filters` and `has value`).
    by_part: FxHashMap<String, Vec<u64>>,
    path_words: FxHashMap<u64, Box<[String]>>,
}

impl NameIndex {
    /// Whether an item is found by its name (impl blocks and text windows have none).
    fn named(record: &ItemRecord) -> bool {
        !matches!(record.item.kind, Kind::Impl | Kind::TextWindow)
    }

    /// Adds an item.
    pub fn insert(&mut self, record: &ItemRecord) {
        if !Self::named(record) {
            return;
        }
        self.by_key
            .entry(key(&record.item.name))
            .or_default()
            .push(record.id);
        let own = word_parts(&record.item.name);
        if let Some(stems) = stems_of(&own) {
            self.by_stems.entry(stems).or_default().push(record.id);
        }
        for part in parts_of(&own) {
            self.by_part.entry(part).or_default().push(record.id);
        }
        // The words of the path around the name (its module, type, trait), not the name's own.
        let mut words = word_parts(&record.item.canon_path);
        words.retain(|w| w != "crate" && !own.contains(w));
        words.sort_unstable();
        words.dedup();
        self.path_words.insert(record.id, words.into_boxed_slice());
    }

    /// Removes an item.
    pub fn remove(&mut self, record: &ItemRecord) {
        unlist(&mut self.by_key, key(&record.item.name), record.id);
        let own = word_parts(&record.item.name);
        for part in parts_of(&own) {
            unlist(&mut self.by_part, part, record.id);
        }
        if let Some(stems) = stems_of(&own) {
            unlist(&mut self.by_stems, stems, record.id);
        }
        self.path_words.remove(&record.id);
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.by_key.clear();
        self.by_stems.clear();
        self.by_part.clear();
        self.path_words.clear();
    }

    /// Whether one of the query's names written as code is an item's name here.
    pub fn names_code(&self, query: &QueryNames) -> bool {
        query
            .names
            .iter()
            .any(|n| n.strength >= CODE_STRENGTH && self.by_key.contains_key(&n.key))
    }

    /// The items a query's names find, with their name score. `item` resolves an id (and says
    /// whether the item may be answered: filters, shadowing).
    pub fn matches<'a>(
        &self,
        query: &QueryNames,
        item: impl Fn(u64) -> Option<&'a ItemRecord>,
    ) -> Vec<(&'a ItemRecord, f32)> {
        let mut found: FxHashMap<u64, (&'a ItemRecord, f32)> = FxHashMap::default();
        for name in &query.names {
            // The spelling as written counts only where the key itself matched.
            let (ids, form, spelled) = match self.by_key.get(&name.key) {
                Some(ids) => (ids, 1.0, name.spelled.as_deref()),
                None => match name.key.strip_suffix('s').and_then(|k| self.by_key.get(k)) {
                    Some(ids) => (ids, PLURAL, None),
                    // Words in another form than the name's (`parsing escapes`).
                    None => match name.stems.as_ref().and_then(|s| self.by_stems.get(s)) {
                        Some(ids) => (ids, OTHER_FORM, None),
                        // Words spelling part of a longer name (`value filters`).
                        None => match name.stems.as_ref().and_then(|s| self.by_part.get(s)) {
                            Some(ids) => (ids, PART, None),
                            None => continue,
                        },
                    },
                },
            };
            // Its qualifiers already count (QUALIFIED): not again as context.
            let qualifier_words: Vec<String> =
                name.qualifiers.iter().flat_map(|q| word_parts(q)).collect();
            // A name many items share says less about which one is meant; a qualified name
            // (`fmt::Layer::on_record`) is shared only by the items its qualifiers fit as well
            // or better.
            let candidates: Vec<(u64, &ItemRecord, Option<Fit>)> = ids
                .iter()
                .filter_map(|id| {
                    let record = item(*id)?;
                    let fit =
                        (!name.qualifiers.is_empty()).then(|| Fit::of(record, &name.qualifiers));
                    Some((*id, record, fit))
                })
                .collect();
            let mut per_fit = [0usize; 4];
            for fit in candidates.iter().filter_map(|c| c.2) {
                per_fit[fit as usize] += 1;
            }
            for (id, record, fit) in candidates {
                let shared_by = match fit {
                    Some(fit @ (Fit::Whole | Fit::Owner | Fit::Path)) => {
                        per_fit[..=fit as usize].iter().sum()
                    }
                    Some(Fit::Nothing) | None => ids.len(),
                };
                let specificity = 1.0 / (1.0 + (shared_by.max(1) as f32).ln());
                let qualified = fit.map_or(1.0, Fit::factor);
                let context = self.path_words.get(&id).map_or(0, |words| {
                    words
                        .iter()
                        .filter(|w| query.words.contains(*w) && !qualifier_words.contains(*w))
                        .count()
                        .min(MAX_CONTEXT)
                });
                let spelling = match spelled {
                    Some(spelled) if spelled != record.item.name => OTHER_SPELLING,
                    _ => 1.0,
                };
                let score = name.strength
                    * form
                    * spelling
                    * specificity
                    * qualified
                    * (1.0 + CONTEXT * context as f32)
                    * kind_factor(record.item.kind);
                let e = found.entry(id).or_insert((record, 0.0));
                e.1 = e.1.max(score);
            }
        }
        found.into_values().collect()
    }
}

/// The runs of two or more words inside a name of three or more (not the whole name), each
/// as its stems joined.
fn parts_of(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for len in 2..words.len() {
        for start in 0..=words.len() - len {
            out.push(words[start..start + len].concat());
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A name of several words (its [`word_parts`]) as its stems joined; none for a one-word name.
fn stems_of(parts: &[String]) -> Option<String> {
    (parts.len() > 1).then(|| parts.concat())
}

/// Takes `id` off the list under `key`, and the key with its last id.
fn unlist(map: &mut FxHashMap<String, Vec<u64>>, key: String, id: u64) {
    if let Some(ids) = map.get_mut(&key) {
        ids.retain(|i| *i != id);
        if ids.is_empty() {
            map.remove(&key);
        }
    }
}

fn kind_factor(kind: Kind) -> f32 {
    match kind {
        Kind::Function | Kind::Method => 1.0,
        _ => NOT_A_FUNCTION,
    }
}

/// How an item fits the qualifiers a query writes before a name (`blocking::Request` of
/// `blocking::Request::try_clone`, or `reqwest::blocking::Request` with the crate), best
/// first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fit {
    /// Its own type or trait is the last qualifier and the others are in its path.
    Whole,
    /// Its own type or trait is the last qualifier.
    Owner,
    /// Its path has one of the qualifiers.
    Path,
    /// None of them.
    Nothing,
}

impl Fit {
    fn of(record: &ItemRecord, qualifiers: &[String]) -> Self {
        let Some((last, before)) = qualifiers.split_last() else {
            return Self::Nothing;
        };
        let in_path = |q: &String| {
            crate::tokenize::identifiers(&record.item.canon_path).any(|segment| key_eq(segment, q))
        };
        // The crate completes a whole path (`reqwest::blocking::Client` of a Rust item whose
        // canonical path is `crate::blocking::client::Client` in crate `reqwest`), but alone
        // it is no fit: every item of the crate has it (`tracing_subscriber::fmt` would make
        // each `fmt` method a fit).
        let in_crate_or_path = |q: &String| key_eq(&record.item.crate_name, q) || in_path(q);
        let owner_named = owners(&record.item.qualname).any(|o| key_eq(o, last));
        if owner_named && before.iter().all(in_crate_or_path) {
            Self::Whole
        } else if owner_named {
            Self::Owner
        } else if qualifiers.iter().any(in_path) {
            Self::Path
        } else {
            Self::Nothing
        }
    }

    fn factor(self) -> f32 {
        match self {
            Self::Whole | Self::Owner => OWNER_QUALIFIED,
            Self::Path => QUALIFIED,
            Self::Nothing => OTHERWISE_QUALIFIED,
        }
    }
}

/// The type (and trait) an item belongs to, from its qualified name: `Type` of
/// `Type::method`, `Type` and `Trait` of `<Type<T> as Trait<S>>::method`, `Class` of
/// `Outer.Class.method`; nothing for a free item.
fn owners(qualname: &str) -> impl Iterator<Item = &str> {
    let head = qualname
        .rsplit_once("::")
        .or_else(|| qualname.rsplit_once('.'))
        .map_or("", |(head, _)| head);
    let head = head.trim_start_matches('<').trim_end_matches('>');
    let (ty, tr) = head.split_once(" as ").unwrap_or((head, ""));
    [ty, tr].into_iter().filter_map(|part| {
        let bare = part.split('<').next().unwrap_or(part);
        let last = bare.rsplit(['.', ':', ' ', '&']).next().unwrap_or(bare);
        (!last.is_empty()).then_some(last)
    })
}

#[cfg(test)]
mod tests;
