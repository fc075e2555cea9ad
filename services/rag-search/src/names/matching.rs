//! Scoring the items a query's names find ([`super::query`]), in one index or across the
//! layers of a session (its overlay above the base): each name's candidates are gathered from
//! every layer first, so that the rivals a rule compares (the item a crate's root binds and its
//! siblings) are the same whether a session changed one of their files or not.

use std::borrow::Cow;

use rustc_hash::{FxHashMap, FxHashSet};

use super::{
    CONTEXT, Fit, MAX_CONTEXT, MAX_RIVALS, NOT_AT_ROOT, NameIndex, OTHER_FORM, OTHER_SPELLING,
    PART, PLURAL, QueryName, QueryNames, Resolved, apart, impls, kind_factor, owners, paths,
};
use crate::parse::Kind;
use crate::record::ItemRecord;
use crate::tokenize::word_parts;

/// One index's part in a search: its names, and how its ids resolve to its items that an
/// upper layer does not shadow.
pub struct NameLayer<'a, 'r> {
    pub names: &'r NameIndex,
    pub item: &'r dyn Fn(u64) -> Option<&'a ItemRecord>,
    /// Whether an upper layer shadows any of its files (else every id resolves, and a name's
    /// specificity counts its ids without looking them up).
    pub shadowed: bool,
}

/// What one name finds in one layer.
pub(super) struct Found<'a> {
    /// How many visible items it matched (by name, in another form, or at an aliased public
    /// path).
    shared_by: usize,
    form: f32,
    /// Whether the name's own key matched (then its spelling as written counts).
    as_keyed: bool,
    pub(super) candidates: Vec<Candidate<'a>>,
}

/// How a name matches an item's, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tier {
    /// Its key is the item's name's.
    Key,
    /// A plural written for a singular name (`headers` for `header`).
    Plural,
    /// Words spelling the name in another form (`parsing escapes` for `parse_escape`).
    OtherForm,
    /// Words spelling a run of words inside a longer name (`value filters`).
    Part,
}

/// An item one of the query's names finds, before it is scored.
pub(super) struct Candidate<'a> {
    pub(super) record: &'a ItemRecord,
    /// Whether it belongs to a type.
    pub(super) owned: bool,
    /// How it fits the qualifiers written, or the types written apart from the name (none when
    /// neither are).
    pub(super) fit: Option<Fit>,
    /// How many of the query's other words its path has.
    pub(super) context: usize,
    /// Found at a public path under another name (an `as` alias), not by the name written.
    aliased: bool,
}

/// The items a query's names find in each layer (in the order of `layers`) that `passes`
/// (the search's filters), with their name score. `resolved` merges every layer's resolution
/// ([`NameIndex::resolve`]); `at_root` says whether a crate's root binds an item's type,
/// through every layer.
pub fn matches_layers<'a>(
    layers: &[NameLayer<'a, '_>],
    query: &QueryNames,
    resolved: &Resolved,
    passes: &dyn Fn(&ItemRecord) -> bool,
    at_root: &dyn Fn(&ItemRecord) -> bool,
) -> Vec<Vec<(&'a ItemRecord, f32)>> {
    let mut found: Vec<FxHashMap<u64, (&'a ItemRecord, f32)>> =
        layers.iter().map(|_| FxHashMap::default()).collect();
    let nothing = FxHashSet::default();
    let side_by_side = apart::SideBySide::default();
    // What each name finds in each layer.
    let mut per_name: Vec<Vec<Option<Found<'a>>>> = query
        .names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let public = resolved.0.get(i).unwrap_or(&nothing);
            // Every layer matches the name the way the best of them can (its key before a
            // plural, another form or a part of a longer name), as one index of all their
            // items would.
            let tier = layers.iter().filter_map(|l| l.names.tier(name)).min();
            let mut per_layer: Vec<Option<Found<'a>>> = layers
                .iter()
                .map(|layer| layer.names.find(name, tier, public, query, (layer, passes)))
                .collect();
            apart::qualify_by_types_apart(name, query, &mut per_layer);
            apart::qualify_by_words_before(name, query, &side_by_side, &mut per_layer);
            apart::yield_public_path(name, &mut per_layer);
            per_layer
        })
        .collect();
    let modules = apart::qualify_by_modules_apart(query, &mut per_name);
    for ((name, per_layer), module) in query.names.iter().zip(per_name).zip(modules) {
        // A name is shared by the items of every layer (a session's changed file counts once).
        let shared_by: usize = per_layer.iter().flatten().map(|f| f.shared_by).sum();
        // A qualified name (`fmt::Layer::on_record`) is shared only by the items its
        // qualifiers fit as well or better.
        let mut per_fit = [0usize; 5];
        for fit in per_layer
            .iter()
            .flatten()
            .flat_map(|f| &f.candidates)
            .filter_map(|c| c.fit)
        {
            per_fit[fit as usize] += 1;
        }
        let aside = set_aside(
            per_layer
                .iter()
                .enumerate()
                .flat_map(|(l, f)| {
                    f.iter()
                        .flat_map(move |f| f.candidates.iter().map(move |c| (l, c)))
                })
                .collect(),
            at_root,
        );
        for (l, f) in per_layer.into_iter().enumerate() {
            let (Some(f), Some(found)) = (f, found.get_mut(l)) else {
                continue;
            };
            for c in &f.candidates {
                let shared_by = match c.fit {
                    Some(fit @ (Fit::Exact | Fit::Whole | Fit::Owner | Fit::Path)) => {
                        per_fit[..=fit as usize].iter().sum()
                    }
                    Some(Fit::Nothing) | None => shared_by,
                };
                let specificity = 1.0 / (1.0 + (shared_by.max(1) as f32).ln());
                let qualified = c.fit.map_or(1.0, |fit| fit.factor(c.owned));
                let spelled = name.spelled.as_deref().filter(|_| f.as_keyed);
                let (form, spelling) = match spelled {
                    // An alias is the name as written: no other form, no other spelling.
                    _ if c.aliased => (1.0, 1.0),
                    Some(spelled) if spelled != c.record.item.name => (f.form, OTHER_SPELLING),
                    _ => (f.form, 1.0),
                };
                let set_aside = if aside.contains(&(l, c.record.id)) {
                    NOT_AT_ROOT
                } else {
                    1.0
                };
                let as_module = if module && c.record.item.kind != Kind::Module {
                    apart::MODULE_WRITTEN
                } else {
                    1.0
                };
                let score = name.strength
                    * as_module
                    * form
                    * spelling
                    * specificity
                    * qualified
                    * (1.0 + CONTEXT * c.context as f32)
                    * kind_factor(c.record.item.kind)
                    * set_aside;
                let e = found.entry(c.record.id).or_insert((c.record, 0.0));
                e.1 = e.1.max(score);
            }
        }
    }
    impls::add_impl_methods(layers, query, passes, &mut found);
    found
        .into_iter()
        .map(|f| f.into_values().collect())
        .collect()
}

impl NameIndex {
    /// The items a query's names find, with their name score. `item` resolves an id (and says
    /// whether the item may be answered: filters); `at_root` says whether a crate's root binds
    /// an item's type ([`Self::at_root`]).
    pub fn matches<'a>(
        &self,
        query: &QueryNames,
        resolved: &Resolved,
        item: impl Fn(u64) -> Option<&'a ItemRecord>,
        at_root: &dyn Fn(&ItemRecord) -> bool,
    ) -> Vec<(&'a ItemRecord, f32)> {
        let layer = NameLayer {
            names: self,
            item: &item,
            shadowed: false,
        };
        matches_layers(&[layer], query, resolved, &|_| true, at_root)
            .pop()
            .unwrap_or_default()
    }

    /// How `name` matches here at best ([`Tier`]); none when it does not.
    fn tier(&self, name: &QueryName) -> Option<Tier> {
        [Tier::Key, Tier::Plural, Tier::OtherForm, Tier::Part]
            .into_iter()
            .find(|t| self.tier_ids(name, *t).is_some())
    }

    /// The methods of the trait impls of the type keyed `ty`.
    pub(super) fn impl_methods(&self, ty: &str) -> &[u64] {
        self.impl_methods.get(ty).map_or(&[], Vec::as_slice)
    }

    /// The ids `name` matches in `tier`.
    fn tier_ids(&self, name: &QueryName, tier: Tier) -> Option<&Vec<u64>> {
        match tier {
            Tier::Key => self.by_key.get(&name.key),
            Tier::Plural => name.key.strip_suffix('s').and_then(|k| self.by_key.get(k)),
            // Words in another form than the name's (`parsing escapes`).
            Tier::OtherForm => name.stems.as_ref().and_then(|s| self.by_stems.get(s)),
            // Words spelling part of a longer name (`value filters`).
            Tier::Part => name.stems.as_ref().and_then(|s| self.by_part.get(s)),
        }
    }

    /// What `name` finds here (in `tier`, the best any layer of the search matches it in):
    /// by its key (or a plural, another form, a part of a longer name), and at the public
    /// paths `public` under another name; none when nothing. Each item's fit is that of the
    /// qualifiers written with the name ([`apart`] adds the types and modules written
    /// apart from it).
    fn find<'a>(
        &self,
        name: &QueryName,
        tier: Option<Tier>,
        public: &FxHashSet<String>,
        query: &QueryNames,
        (layer, passes): (&NameLayer<'a, '_>, &dyn Fn(&ItemRecord) -> bool),
    ) -> Option<Found<'a>> {
        let item = |id: u64| (layer.item)(id).filter(|r| passes(r));
        // The spelling as written counts only where the key itself matched.
        let by_name = tier.and_then(|tier| {
            let form = match tier {
                Tier::Key => 1.0,
                Tier::Plural => PLURAL,
                Tier::OtherForm => OTHER_FORM,
                Tier::Part => PART,
            };
            self.tier_ids(name, tier)
                .map(|ids| (ids, form, tier == Tier::Key))
        });
        // Items a re-export binds under another name (`pub use fmt::Subscriber as
        // FmtSubscriber`): found at their public path, not by the name written.
        let aliased = self.aliased(public, &name.key, &item);
        let (ids, form, as_keyed): (Cow<'_, [u64]>, f32, bool) = match by_name {
            Some((ids, form, as_keyed)) if aliased.is_empty() => (ids.into(), form, as_keyed),
            Some((ids, form, as_keyed)) => {
                let mut all = ids.clone();
                all.extend(aliased.iter().filter(|id| !ids.contains(id)));
                (all.into(), form, as_keyed)
            }
            None if aliased.is_empty() => return None,
            None => (aliased.as_slice().into(), 1.0, false),
        };
        // Its qualifiers already count (QUALIFIED): not again as context. (A type written
        // apart still does: "add `add` to `ExtensionStrategy`" measured better so.)
        let qualifier_words: Vec<String> =
            name.qualifiers.iter().flat_map(|q| word_parts(q)).collect();
        let candidates: Vec<Candidate<'a>> = ids
            .iter()
            .filter_map(|id| {
                let record = item(*id)?;
                let owned = owners(&record.item.qualname).next().is_some();
                let fit = (!name.qualifiers.is_empty()).then(|| {
                    // Paths compare without case: the type written must be the item's own
                    // (`Client::get` is no free `client::get`).
                    let at_public_path = !public.is_empty()
                        && owned == name.type_qualified
                        && paths::path_of(record).is_some_and(|p| public.contains(&p));
                    if at_public_path {
                        Fit::Exact
                    } else {
                        Fit::of(record, &name.qualifiers)
                    }
                });
                let context = self.path_words.get(id).map_or(0, |words| {
                    words
                        .iter()
                        .filter(|w| query.words.contains(*w) && !qualifier_words.contains(*w))
                        .count()
                        .min(MAX_CONTEXT)
                });
                Some(Candidate {
                    record,
                    owned,
                    fit,
                    context,
                    aliased: aliased.contains(id),
                })
            })
            .collect();
        // A name many items share says less about which one is meant.
        Some(Found {
            shared_by: if layer.shadowed {
                ids.iter().filter(|id| (layer.item)(**id).is_some()).count()
            } else {
                ids.len()
            },
            form,
            as_keyed,
            candidates,
        })
    }

    /// The items at the public paths `public` whose own name is not `key`: what a re-export
    /// binds under another name (`tracing_subscriber::FmtSubscriber` is `fmt::Subscriber`).
    fn aliased<'a>(
        &self,
        public: &FxHashSet<String>,
        key: &str,
        item: &dyn Fn(u64) -> Option<&'a ItemRecord>,
    ) -> Vec<u64> {
        let mut out = Vec::new();
        for path in public {
            let Some(own) = path.rsplit("::").next().filter(|own| *own != key) else {
                continue;
            };
            for id in self.by_key.get(own).into_iter().flatten() {
                let at_path = item(*id).is_some_and(|r| paths::path_of(r).as_ref() == Some(path));
                if at_path && !out.contains(id) {
                    out.push(*id);
                }
            }
        }
        out
    }
}

/// The candidates of one name, across layers (`(layer, candidate)`), that another of their
/// crate outranks by being bound at its root ([`NOT_AT_ROOT`]) where neither the qualifiers
/// written (`blocking::Body::as_bytes`) nor the query's other words (`wasm` in "implement
/// `basic_auth` for wasm") fit them better; none when there are too many to tell apart.
fn set_aside(
    candidates: Vec<(usize, &Candidate<'_>)>,
    at_root: &dyn Fn(&ItemRecord) -> bool,
) -> FxHashSet<(usize, u64)> {
    if !(2..=MAX_RIVALS).contains(&candidates.len()) {
        return FxHashSet::default();
    }
    // Only items with a rival of their own crate are looked at.
    let mut per_crate: FxHashMap<&str, usize> = FxHashMap::default();
    for (_, c) in &candidates {
        *per_crate
            .entry(c.record.item.crate_name.as_str())
            .or_default() += 1;
    }
    let reach: Vec<bool> = candidates
        .iter()
        .map(|(_, c)| {
            per_crate
                .get(c.record.item.crate_name.as_str())
                .is_some_and(|n| *n > 1)
                && at_root(c.record)
        })
        .collect();
    // Per crate, the best fit and the most context of a candidate bound at its root (fits
    // order best first; none when no qualifier is written nor a type apart, for all of one
    // name's candidates alike).
    let mut best: FxHashMap<&str, (Option<Fit>, usize)> = FxHashMap::default();
    for ((_, c), _) in candidates.iter().zip(&reach).filter(|(_, at)| **at) {
        let entry = best
            .entry(c.record.item.crate_name.as_str())
            .or_insert((c.fit, c.context));
        entry.0 = entry.0.min(c.fit);
        entry.1 = entry.1.max(c.context);
    }
    candidates
        .iter()
        .zip(&reach)
        .filter(|((_, c), at)| {
            !**at
                && best
                    .get(c.record.item.crate_name.as_str())
                    .is_some_and(|(fit, context)| c.fit >= *fit && c.context <= *context)
        })
        .map(|((l, c), _)| (*l, c.record.id))
        .collect()
}
