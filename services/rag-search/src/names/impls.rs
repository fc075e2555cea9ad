//! Trait impls a query names by their type and their trait, without a method's name: "Display
//! for Error", "`LocalSet` Drop", "the `Future` impl of `UpgradeableConnection`". The methods of
//! `<Error as Display>` are what such a query means, though no word of it is their name. The
//! two must be written as types are, capitalised, and side by side (only function words
//! between them) or in a query that says `impl`: a type and a trait named apart or as plain
//! words ("wraps a service in `LoadShed`", "create a default `MethodRouter`") are mostly two
//! things the query speaks of, not one impl.

use rustc_hash::{FxHashMap, FxHashSet};

use super::matching::NameLayer;
use super::query::CAPITALISED_STRENGTH;
use super::{CONTEXT, MAX_CONTEXT, QueryNames, key, key_chars, kind_factor, owners};
use crate::record::ItemRecord;
use crate::tokenize::word_parts;

/// The most a type and a trait written together count: a name written as code, before the
/// factor a method's own type written with it gives ([`super::OWNER_QUALIFIED`]), so a method
/// the query names outranks the other methods of its impl. Less when neither is written as
/// code (two capitalised words, "Display for Error": 0.6).
const MAX_STRENGTH: f32 = 1.0;

/// The key of the type whose trait impl a method is in (`error` for `<Error as
/// fmt::Display>::fmt`); none for other items.
pub(super) fn impl_type_key(qualname: &str) -> Option<String> {
    if !qualname.starts_with('<') || !qualname.contains(" as ") {
        return None;
    }
    owners(qualname).next().map(key)
}

/// Words that say an impl is meant, wherever its type and trait are written.
const IMPL_WORDS: [&str; 6] = [
    "impl",
    "impls",
    "implementation",
    "implementations",
    "implement",
    "implements",
];

/// What the query writes that [`add_impl_methods`] asks about, gathered once per query so that
/// each question is a lookup (a query of thousands of words must not cost a walk of them per
/// candidate method).
struct Written<'q> {
    /// Strength by key of the names written (alone, or ending a path: `Error` of
    /// `hyper::Error`), not spelled in words.
    strength: FxHashMap<&'q str, f32>,
    /// Keys written capitalised at least once.
    capitalised: FxHashSet<&'q str>,
    /// Keys written capitalised next to each other (function words aside), both orders.
    adjacent: FxHashSet<(&'q str, &'q str)>,
    /// Whether the query says `impl`.
    says_impl: bool,
}

impl<'q> Written<'q> {
    fn of(query: &'q QueryNames) -> Self {
        let capitalised: FxHashSet<&str> = query
            .order
            .iter()
            .filter(|(_, cap)| *cap)
            .map(|(w, _)| w.as_str())
            .collect();
        // A word capitalised only as a sentence's first ("Display for Error shows …") counts
        // as a capitalised word here: beside another type, as one impl, it is a type too.
        let strength = query
            .names
            .iter()
            .filter(|n| n.stems.is_none())
            .map(|n| {
                let key = n.key.as_str();
                let at_least = if capitalised.contains(key) {
                    CAPITALISED_STRENGTH
                } else {
                    0.0
                };
                (key, n.strength.max(at_least))
            })
            .collect();
        let mut adjacent = FxHashSet::default();
        for pair in query.order.windows(2) {
            if let [(a, true), (b, true)] = pair {
                adjacent.insert((a.as_str(), b.as_str()));
                adjacent.insert((b.as_str(), a.as_str()));
            }
        }
        let says_impl = query
            .order
            .iter()
            .any(|(w, _)| IMPL_WORDS.contains(&w.as_str()));
        Self {
            strength,
            capitalised,
            adjacent,
            says_impl,
        }
    }

    /// Whether the names keyed `a` and `b` are written as one impl: both names, capitalised,
    /// next to each other or in a query that says `impl`.
    fn as_one(&self, a: &str, b: &str) -> bool {
        self.strength.contains_key(b)
            && self.capitalised.contains(a)
            && self.capitalised.contains(b)
            && (self.says_impl || self.adjacent.contains(&(a, b)))
    }
}

/// Adds to `found` (per layer, as [`super::matches_layers`] fills it) the methods of the trait
/// impls the query names by type and trait — two of its names written as one impl
/// ([`Written::as_one`]) — each scored as a name of the pair's strength shared by the
/// methods of its impl, with the query's other words in its path as context; an item already
/// found keeps the better of its scores. A type implementing a trait of its own name is left
/// out: one name written cannot tell the two apart.
pub(super) fn add_impl_methods<'a>(
    layers: &[NameLayer<'a, '_>],
    query: &QueryNames,
    passes: &dyn Fn(&ItemRecord) -> bool,
    found: &mut [FxHashMap<u64, (&'a ItemRecord, f32)>],
) {
    let written = Written::of(query);
    if written.strength.len() < 2 || written.capitalised.len() < 2 {
        return;
    }
    let mut trait_key = String::new();
    for (&ty, &ty_strength) in &written.strength {
        if !written.capitalised.contains(ty) {
            continue;
        }
        // The methods of this type's trait impls whose trait is another name written with it
        // as one impl, per trait: (layer, record).
        let mut by_trait: FxHashMap<String, Vec<(usize, &'a ItemRecord)>> = FxHashMap::default();
        for (l, layer) in layers.iter().enumerate() {
            for id in layer.names.impl_methods(ty) {
                let Some(record) = (layer.item)(*id).filter(|r| passes(r)) else {
                    continue;
                };
                let Some(tr) = owners(&record.item.qualname).nth(1) else {
                    continue;
                };
                trait_key.clear();
                trait_key.extend(key_chars(tr));
                if trait_key != ty && written.as_one(ty, &trait_key) {
                    by_trait
                        .entry(trait_key.clone())
                        .or_default()
                        .push((l, record));
                }
            }
        }
        for (tr, methods) in by_trait {
            let trait_strength = written.strength.get(tr.as_str()).copied().unwrap_or(0.0);
            let strength = (ty_strength + trait_strength).min(MAX_STRENGTH);
            let specificity = 1.0 / (1.0 + (methods.len() as f32).ln());
            for (l, record) in methods {
                // The type's and the trait's words are the pair, not context.
                let pair_words: Vec<String> =
                    owners(&record.item.qualname).flat_map(word_parts).collect();
                let (Some(layer), Some(found)) = (layers.get(l), found.get_mut(l)) else {
                    continue;
                };
                let context = layer.names.path_words.get(&record.id).map_or(0, |words| {
                    words
                        .iter()
                        .filter(|w| query.words.contains(*w) && !pair_words.contains(*w))
                        .count()
                        .min(MAX_CONTEXT)
                });
                let score = strength
                    * specificity
                    * (1.0 + CONTEXT * context as f32)
                    * kind_factor(record.item.kind);
                let e = found.entry(record.id).or_insert((record, 0.0));
                e.1 = e.1.max(score);
            }
        }
    }
}
