//! Names as their own retrieval signal: the identifiers, paths and `Type::method`s a query
//! writes ([`query`]) are looked up among the items' names (case and `_` ignored, a plural `s`
//! forgiven), and the items so found form a ranked list that fusion weighs beside BM25 and the
//! dense list — so an item the user names comes first even when its body shares few of the
//! query's words. A name written as code (`snake_case`, `CamelCase`, `a::b`, in backticks, with
//! `()`) counts more than a plain word that happens to name something, two or three words in a
//! row that spell a name together (`send error` for `send_error`) count in between (half that
//! when they spell only a run of words inside a longer name: `value filters` for
//! `has_value_filters`), and a name many items share (`new`, `poll`) counts less than a rare
//! one. Among items sharing a name, the one whose path holds more of the query's other words
//! (`blocking` in "add bytes to blocking::Response") wins, and an item at the very path written
//! — canonical, or public through its crate's re-exports ([`paths`]: `reqwest::Client::get`) —
//! fits best (a type or a module written as code apart from the name qualifies it as well, and
//! so does a path told in words: `Route` in "add `new` to `Route`", `reload` in
//! "`max_level_hint` in `reload`", "WASM client"; [`apart`]); among items the query does not
//! tell apart, the one whose type its crate's root binds comes first (`reqwest::Body`'s
//! `as_bytes`). Scoring, in one index or across a session's layers: [`matching`]. The constants were chosen on ../shared/eval
//! (docs/RETRIEVAL.md, "Names").

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use rustc_hash::{FxHashMap, FxHashSet};

use crate::parse::{Kind, Reexport};
use crate::record::ItemRecord;
use crate::tokenize::word_parts;

mod apart;
mod impls;
mod matching;
mod paths;
mod query;

pub use matching::{NameLayer, matches_layers};
pub use paths::head_of;
pub(crate) use paths::path_of;
use query::CODE_STRENGTH;
pub(crate) use query::strip_commit_prefix;
#[cfg(test)]
use query::{CAPITALISED_STRENGTH, PHRASE_STRENGTH, WORD_STRENGTH, phrases};
pub use query::{QueryName, QueryNames, code_names, query_names};

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
/// Gain per other query word in the item's path (`blocking` and `response` for
/// `blocking::response::Response::bytes` asked as "bytes … blocking::Response"), up to
/// [`MAX_CONTEXT`] words.
const CONTEXT: f32 = 1.0;
const MAX_CONTEXT: usize = 4;
/// Among items of one crate sharing a name, those whose type (or themselves) the crate's root
/// does not bind, when another's it does: a user naming `Body::as_bytes` in reqwest means
/// `reqwest::Body`'s, not `reqwest::blocking::Body`'s.
pub(crate) const NOT_AT_ROOT: f32 = 0.8;
/// Most items of one name looked at for [`NOT_AT_ROOT`] (a common name says little anyway).
const MAX_RIVALS: usize = 32;

/// A name's lookup key: lowercase without `_` (`read_mem`, `readMem` and `ReadMem` are one).
pub fn key(name: &str) -> String {
    key_chars(name).collect()
}

/// Whether `name` has the lookup key `key` (without making it).
pub(crate) fn key_eq(name: &str, key: &str) -> bool {
    key_chars(name).eq(key.chars())
}

/// The characters of `name`'s lookup key.
fn key_chars(name: &str) -> impl Iterator<Item = char> + '_ {
    name.chars()
        .filter(|c| *c != '_')
        .flat_map(char::to_lowercase)
}

/// The item paths each of a query's names can mean ([`NameIndex::resolve`]).
#[derive(Debug, Clone, Default)]
pub struct Resolved(Vec<FxHashSet<String>>);

impl Resolved {
    /// Adds what another layer of the same workspace resolved for the same query.
    pub fn extend(&mut self, other: Resolved) {
        if self.0.len() < other.0.len() {
            self.0.resize_with(other.0.len(), FxHashSet::default);
        }
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            mine.extend(theirs);
        }
    }
}

/// The items of one index by name key, with the words of the path around each one's name.
#[derive(Debug, Clone, Default)]
pub struct NameIndex {
    by_key: FxHashMap<String, Vec<u64>>,
    /// Names of several words by their stems joined (`parse_escape` as `parsescap`).
    by_stems: FxHashMap<String, Vec<u64>>,
    /// Names of three or more words by the stems of each run of two or three of their words
    /// inside them (`has_value_filters` under `value filters` and `has value`).
    by_part: FxHashMap<String, Vec<u64>>,
    path_words: FxHashMap<u64, Box<[String]>>,
    /// The methods of trait impls by their type's key (`error` for `<Error as
    /// fmt::Display>::fmt`), for queries that name an impl by its type and trait ([`impls`]).
    impl_methods: FxHashMap<String, Vec<u64>>,
    /// Rust items' paths and the re-exports that make public paths of them.
    paths: paths::Paths,
    /// [`Self::at_root_unhidden`]'s answers since the last change.
    at_root_seen: AtRootSeen,
}

/// What [`NameIndex::at_root_unhidden`] answered per type (or free item) since the index last
/// changed: searches ask it of the same types again and again, and each answer walks
/// re-exports. (Keyed by path, not item id: a session's overlay numbers its items apart.)
/// The base's answers are also kept per item id ([`NameIndex::at_root_of_base`]): finding an
/// item's type path costs more than the answer's lookup.
#[derive(Debug, Default)]
struct AtRootSeen(
    RwLock<FxHashMap<String, bool>>,
    RwLock<FxHashMap<u64, bool>>,
);

impl Clone for AtRootSeen {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl AtRootSeen {
    fn forget(&mut self) {
        self.0
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.1
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn read(&self) -> RwLockReadGuard<'_, FxHashMap<String, bool>> {
        // The map is whole after any panic: a poisoned lock is used as it is.
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, FxHashMap<String, bool>> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn read_ids(&self) -> RwLockReadGuard<'_, FxHashMap<u64, bool>> {
        self.1.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_ids(&self) -> RwLockWriteGuard<'_, FxHashMap<u64, bool>> {
        self.1.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl NameIndex {
    /// Whether an item is found by its name (impl blocks and text windows have none).
    fn named(record: &ItemRecord) -> bool {
        !matches!(record.item.kind, Kind::Impl | Kind::TextWindow)
    }

    /// Adds an item.
    pub fn insert(&mut self, record: &ItemRecord) {
        self.at_root_seen.forget();
        if !Self::named(record) {
            return;
        }
        self.paths.insert(record);
        self.by_key
            .entry(key(&record.item.name))
            .or_default()
            .push(record.id);
        if let Some(ty) = impls::impl_type_key(&record.item.qualname) {
            self.impl_methods.entry(ty).or_default().push(record.id);
        }
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
        self.at_root_seen.forget();
        if Self::named(record) {
            self.paths.remove(record);
        }
        unlist(&mut self.by_key, key(&record.item.name), record.id);
        if let Some(ty) = impls::impl_type_key(&record.item.qualname) {
            unlist(&mut self.impl_methods, ty, record.id);
        }
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
        self.at_root_seen.forget();
        self.by_key.clear();
        self.by_stems.clear();
        self.by_part.clear();
        self.path_words.clear();
        self.impl_methods.clear();
        self.paths.clear();
    }

    /// Sets the re-exports of `file`, replacing those it had.
    pub fn set_reexports(&mut self, file: &str, reexports: &[Reexport]) {
        self.at_root_seen.forget();
        self.paths.set_reexports(file, reexports);
    }

    /// Forgets the re-exports of `file`.
    pub fn remove_reexports(&mut self, file: &str) {
        self.at_root_seen.forget();
        self.paths.remove_reexports(file);
    }

    /// The items a path written as code (`reqwest::Client::get`, a `crate::` path, or one from
    /// a crate's root) can mean through the crates' re-exports, by their paths ([`path_of`]);
    /// none for a path into a module.
    pub(crate) fn resolve_path(&self, written: &str) -> FxHashSet<String> {
        let written = written.strip_prefix("crate::").unwrap_or(written);
        let segments: Vec<&str> = path_segments(written).collect();
        let lowercase = segments
            .last()
            .is_none_or(|s| !s.starts_with(char::is_uppercase));
        let keys: Vec<String> = segments.into_iter().map(key).collect();
        self.paths.resolve(&keys, lowercase, &|_| false)
    }

    /// For each of the query's names written with a path (`reqwest::Client::get`,
    /// `Client::get`), the paths of the items it can mean through the crates' re-exports, in
    /// the order of `query.names` (see [`paths`]), the re-exports of files `hidden` says no to
    /// left out (those a session's overlay changed). Layers of one workspace merge theirs with
    /// [`Resolved::extend`].
    pub fn resolve(&self, query: &QueryNames, hidden: &dyn Fn(&str) -> bool) -> Resolved {
        Resolved(
            query
                .names
                .iter()
                .map(|n| {
                    if n.qualifiers.is_empty() {
                        return self.paths.resolve_alias(&n.key, hidden);
                    }
                    let mut written = n.qualifiers.clone();
                    written.push(n.key.clone());
                    let lowercase = n
                        .spelled
                        .as_deref()
                        .is_none_or(|s| !s.starts_with(char::is_uppercase));
                    self.paths.resolve(&written, lowercase, hidden)
                })
                .collect(),
        )
    }

    /// Whether an item's type (or the item, when it belongs to none) is bound at its crate's
    /// root under its own name: defined or re-exported there ([`NOT_AT_ROOT`]), the
    /// re-exports of files `hidden` says no to left out.
    pub fn at_root(&self, record: &ItemRecord, hidden: &dyn Fn(&str) -> bool) -> bool {
        head_of(record).is_some_and(|head| self.paths.at_root(&head, hidden))
    }

    /// [`Self::at_root`] of the type (or free item) at `head` ([`head_of`]) with nothing hidden
    /// (a search of the base, or a layer that hides nothing), remembered until the index
    /// changes.
    pub fn at_root_unhidden(&self, head: &str) -> bool {
        let seen = self.at_root_seen.read().get(head).copied();
        if let Some(known) = seen {
            return known;
        }
        let answer = self.paths.at_root(head, &|_| false);
        self.at_root_seen.write().insert(head.to_owned(), answer);
        answer
    }

    /// [`Self::at_root`] with nothing hidden (a search of the base, of this index's own items),
    /// remembered per item until the index changes.
    pub fn at_root_of_base(&self, record: &ItemRecord) -> bool {
        let seen = self.at_root_seen.read_ids().get(&record.id).copied();
        if let Some(known) = seen {
            return known;
        }
        let answer = head_of(record).is_some_and(|head| self.at_root_unhidden(&head));
        self.at_root_seen.write_ids().insert(record.id, answer);
        answer
    }

    /// [`Self::at_root`] of the type (or free item) at `head`.
    pub fn at_root_hiding(&self, head: &str, hidden: &dyn Fn(&str) -> bool) -> bool {
        self.paths.at_root(head, hidden)
    }

    /// Whether one of the query's names written as code is an item's name here.
    pub fn names_code(&self, query: &QueryNames) -> bool {
        query
            .names
            .iter()
            .any(|n| n.strength >= CODE_STRENGTH && self.by_key.contains_key(&n.key))
    }
}

/// The segments of a path written in Rust's (`a::B::c`) or Python's (`a.B.c`) form.
pub(crate) fn path_segments(path: &str) -> impl DoubleEndedIterator<Item = &str> {
    path.split([':', '.']).filter(|s| !s.is_empty())
}

/// The runs of two or three words inside a longer name (what a query's phrase may spell), each
/// as its stems joined.
fn parts_of(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for len in 2..words.len().min(4) {
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
/// `blocking::Request::try_clone`, or `reqwest::blocking::Request` with the crate), or the
/// types it writes apart from the name (`Route` in "add `new` to `Route`": `Owner` or
/// `Nothing`), best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fit {
    /// The path written is the item's, canonical or public through re-exports
    /// (`reqwest::Client::get` for `crate::async_impl::client::Client::get`).
    Exact,
    /// Its own type or trait is the last qualifier and the others are in its path.
    Whole,
    /// Its own type or trait is the last qualifier, or a type written apart from the name.
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

    /// The fit one step worse (nothing stays nothing).
    fn worse(self) -> Self {
        match self {
            Self::Exact => Self::Whole,
            Self::Whole => Self::Owner,
            Self::Owner => Self::Path,
            Self::Path | Self::Nothing => Self::Nothing,
        }
    }

    /// What a fit weighs; an exact path weighs what a whole one does (its own type named for a
    /// method, its module for a free item), and is told apart from those by being shared less.
    fn factor(self, owned: bool) -> f32 {
        match self {
            Self::Exact if !owned => QUALIFIED,
            Self::Exact | Self::Whole | Self::Owner => OWNER_QUALIFIED,
            Self::Path => QUALIFIED,
            Self::Nothing => OTHERWISE_QUALIFIED,
        }
    }
}

/// The type (and trait) an item belongs to, from its qualified name: `Type` of
/// `Type::method`, `Type` and `Trait` of `<Type<T> as Trait<S>>::method`, `Class` of
/// `Outer.Class.method`; nothing for a free item.
pub(crate) fn owners(qualname: &str) -> impl Iterator<Item = &str> {
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
