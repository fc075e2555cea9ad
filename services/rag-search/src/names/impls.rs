//! Trait impls a query names by their type and their trait, without a method's name: "Display
//! for Error", "`LocalSet` Drop", "the `Future` impl of `UpgradeableConnection`". The methods of
//! `<Error as Display>` are what such a query means, though no word of it is their name. The
//! two must be written as types are, capitalised, and side by side (only function words
//! between them) or in a query that says `impl`: a type and a trait named apart or as plain
//! words ("wraps a service in `LoadShed`", "create a default `MethodRouter`") are mostly two
//! things the query speaks of, not one impl.

use rustc_hash::FxHashMap;

use super::matching::NameLayer;
use super::{CONTEXT, MAX_CONTEXT, QueryName, QueryNames, key, kind_factor, owners};
use crate::record::ItemRecord;
use crate::tokenize::word_parts;

/// The most a type and a trait written together count: a name written as code, before the
/// factor a method's own type written with it gives ([`super::OWNER_QUALIFIED`]), so a method
/// the query names outranks the other methods of its impl. Less when neither is written as
/// code (two capitalised words, "Display for Error": 0.6).
const MAX_STRENGTH: f32 = 1.0;

/// The key of the type whose trait impl a method is in (`error` for `<Error as
/// fmt::Display>::fmt`), with its trait's; none for other items.
pub(super) fn impl_keys(qualname: &str) -> Option<(String, String)> {
    if !qualname.starts_with('<') || !qualname.contains(" as ") {
        return None;
    }
    let mut own = owners(qualname);
    let (ty, tr) = (own.next()?, own.next()?);
    Some((key(ty), key(tr)))
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

/// Whether the query writes the names keyed `a` and `b` as one impl: both capitalised, next
/// to each other (in either order, function words aside) or anywhere in a query that says
/// `impl`.
fn written_as_one(query: &QueryNames, a: &str, b: &str) -> bool {
    let capitalised = |k: &str| query.order.iter().any(|(w, cap)| *cap && w == k);
    if !capitalised(a) || !capitalised(b) {
        return false;
    }
    let is = |w: &(String, bool), k: &str| w.1 && w.0 == k;
    query
        .order
        .iter()
        .any(|(w, _)| IMPL_WORDS.contains(&w.as_str()))
        || query.order.windows(2).any(|pair| {
            (is(&pair[0], a) && is(&pair[1], b)) || (is(&pair[0], b) && is(&pair[1], a))
        })
}

/// Adds to `found` (per layer, as [`super::matches_layers`] fills it) the methods of the trait
/// impls the query names by type and trait — two of its names, each written alone, as one
/// impl ([`written_as_one`]) — each scored as a name of the pair's strength shared by the
/// methods of its impl, with the query's other words in its path as context; an item already
/// found keeps the better of its scores. A type implementing a trait of its own name is left
/// out: one name written cannot tell the two apart.
pub(super) fn add_impl_methods<'a>(
    layers: &[NameLayer<'a, '_>],
    query: &QueryNames,
    passes: &dyn Fn(&ItemRecord) -> bool,
    found: &mut [FxHashMap<u64, (&'a ItemRecord, f32)>],
) {
    let single: Vec<&QueryName> = query
        .names
        .iter()
        .filter(|n| n.qualifiers.is_empty() && n.stems.is_none())
        .collect();
    for ty in &single {
        // The methods of this type's trait impls whose trait is another name written, per
        // trait: (layer, record).
        let mut by_trait: FxHashMap<String, Vec<(usize, &'a ItemRecord)>> = FxHashMap::default();
        for (l, layer) in layers.iter().enumerate() {
            for id in layer.names.impl_methods(&ty.key) {
                let Some(record) = (layer.item)(*id).filter(|r| passes(r)) else {
                    continue;
                };
                let Some((_, tr)) = impl_keys(&record.item.qualname) else {
                    continue;
                };
                if tr != ty.key
                    && single.iter().any(|n| n.key == tr)
                    && written_as_one(query, &ty.key, &tr)
                {
                    by_trait.entry(tr).or_default().push((l, record));
                }
            }
        }
        for (tr, methods) in by_trait {
            let Some(trait_name) = single.iter().find(|n| n.key == tr) else {
                continue;
            };
            let strength = (ty.strength + trait_name.strength).min(MAX_STRENGTH);
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
