//! What a query writes apart from a name that tells the name's items apart: a type written as
//! code (`Route` in "add `new` to `Route`"), a module written as code ("`max_level_hint` in
//! `reload`"), a path told in words ("`execute` method on WASM client"), and its words against
//! the public path a name resolves to ("for wasm targets" against `reqwest::RequestBuilder`,
//! which is `async_impl`'s).

use super::matching::Found;
use rustc_hash::FxHashSet;

use super::{CODE_STRENGTH, Fit, QueryName, QueryNames, key, key_eq, owners, paths};
use crate::record::ItemRecord;

/// What a name written as a module ([`qualify_by_modules_apart`]) counts for its own items
/// that are not modules (`Handle::reload` for `reload` in "`max_level_hint` in `reload`").
pub(super) const MODULE_WRITTEN: f32 = 0.5;

/// A type written as code apart from an unqualified name written as code ("add `new` to
/// `Route`"; not a plain word, which names less surely) is that name's qualifier when it is the
/// own type (or trait) of an item the name finds in any layer: those items fit as
/// `Route::new`'s would, the name's other items fit nothing. Not when the name is itself a
/// type's, as written ("add `Route` to `Router`" means the type `Route`, not `Router::route`).
pub(super) fn qualify_by_types_apart(
    name: &QueryName,
    query: &QueryNames,
    per_layer: &mut [Option<Found<'_>>],
) {
    if !bare_code(name) {
        return;
    }
    let written = types_written(query, &name.key);
    if written.is_empty() {
        return;
    }
    let candidates = || per_layer.iter().flatten().flat_map(|f| &f.candidates);
    let names_a_type = name.spelled.as_deref().is_some_and(|spelled| {
        spelled.starts_with(char::is_uppercase)
            && candidates().any(|c| !c.owned && c.record.item.name == spelled)
    });
    if names_a_type {
        return;
    }
    let apart: Vec<&str> = written
        .into_iter()
        .filter(|ty| candidates().any(|c| owned_by_any(c.record, &[ty])))
        .collect();
    if apart.is_empty() {
        return;
    }
    // A type written is more specific than a trait written: where one candidate's own type
    // is written (`BoxMakeWriter` in "`make_writer_for` in `BoxMakeWriter`", which also
    // writes the trait `MakeWriter`), those reached only through their trait (its impls for
    // other types, and the trait's own declaration of the method) fit by a qualifier in
    // their path, not as their owner.
    let traits: Vec<&str> = candidates()
        .filter_map(|c| owners(&c.record.item.qualname).nth(1))
        .collect();
    let by_type = |record: &ItemRecord| {
        type_of(record).is_some_and(|ty| is_one_of(ty, &apart) && !traits.contains(&ty))
    };
    let type_written = candidates().any(|c| by_type(c.record));
    for c in per_layer
        .iter_mut()
        .flatten()
        .flat_map(|f| &mut f.candidates)
    {
        c.fit = Some(if by_type(c.record) {
            Fit::Owner
        } else if owned_by_any(c.record, &apart) {
            if type_written { Fit::Path } else { Fit::Owner }
        } else {
            Fit::Nothing
        });
    }
}

/// Whether the type (or trait) of one of the keys `types` is the item's own.
fn owned_by_any(record: &ItemRecord, types: &[&str]) -> bool {
    owners(&record.item.qualname).any(|o| is_one_of(o, types))
}

/// Whether `name` has one of the lookup keys `keys`.
fn is_one_of(name: &str, keys: &[&str]) -> bool {
    keys.iter().any(|k| key_eq(name, k))
}

/// The item's own type (`X` of `<X as Trait>::m`, or a trait's for its own methods).
fn type_of(record: &ItemRecord) -> Option<&str> {
    owners(&record.item.qualname).next()
}

/// The keys of the types a query writes as code apart from the name keyed `key` (`Route` in
/// "add `new` to `Route`"): names spelled capitalised, without qualifiers.
fn types_written<'q>(query: &'q QueryNames, key: &str) -> Vec<&'q str> {
    query
        .names
        .iter()
        .filter(|n| n.key != key && n.strength >= CODE_STRENGTH && n.qualifiers.is_empty())
        .filter(|n| {
            n.spelled
                .as_deref()
                .is_some_and(|s| s.starts_with(char::is_uppercase))
        })
        .map(|n| n.key.as_str())
        .collect()
}

/// The item a qualified name finds at its crate's public path
/// (`reqwest::RequestBuilder::from_parts` is `async_impl`'s) fits it exactly, unless the
/// query's other words are more of the path of a rival its qualifiers fit as well ("for wasm
/// targets" of `wasm::request::RequestBuilder::from_parts`): the re-export is what the name
/// means when nothing else is said. Then it fits as its qualifiers make it, as its rivals do.
pub(super) fn yield_public_path(name: &QueryName, per_layer: &mut [Option<Found<'_>>]) {
    let most = per_layer
        .iter()
        .flatten()
        .flat_map(|f| &f.candidates)
        .filter(|c| matches!(c.fit, Some(Fit::Whole | Fit::Owner)))
        .map(|c| c.context)
        .max();
    let Some(most) = most else {
        return;
    };
    for c in per_layer
        .iter_mut()
        .flatten()
        .flat_map(|f| &mut f.candidates)
    {
        if c.fit == Some(Fit::Exact) && c.context < most {
            c.fit = Some(Fit::of(c.record, &name.qualifiers));
        }
    }
}

/// A module written as code apart from a name written as code ("pass through
/// `max_level_hint` in `reload`", "`fn headers` for `wasm::multipart`") qualifies that name
/// when some of its items are in that module and some are not: those fit by their path, the
/// others fit nothing (as a type written apart qualifies, [`qualify_by_types_apart`]). Not
/// when the name's items are told apart already (qualifiers, a type written apart, a path told
/// in words). Returns, for each of the query's names, whether it was so written as a module:
/// then it counts less for its own items that are not modules ([`MODULE_WRITTEN`]).
pub(super) fn qualify_by_modules_apart(
    query: &QueryNames,
    per_name: &mut [Vec<Option<Found<'_>>>],
) -> Vec<bool> {
    let mut as_module = vec![false; query.names.len()];
    // The modules written: names written as code in lower case, as runs of keys.
    let modules: Vec<(usize, Vec<&str>)> = query
        .names
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            m.strength >= CODE_STRENGTH
                && m.spelled
                    .as_deref()
                    .is_some_and(|s| s.starts_with(|c: char| c.is_lowercase()))
        })
        .map(|(i, m)| {
            let run = m.qualifiers.iter().map(String::as_str);
            (i, run.chain([m.key.as_str()]).collect())
        })
        .collect();
    if modules.is_empty() {
        return as_module;
    }
    for (n, (name, per_layer)) in query.names.iter().zip(per_name.iter_mut()).enumerate() {
        let candidates = || per_layer.iter().flatten().flat_map(|f| &f.candidates);
        if !bare_code(name) || candidates().any(|c| c.fit.is_some()) {
            continue;
        }
        // Each item's module path, as keys, read once.
        let paths: Vec<Vec<String>> = candidates().map(|c| module_keys(c.record)).collect();
        let Some((m, inside)) = modules
            .iter()
            .filter(|(m, _)| *m != n)
            .map(|(m, run)| {
                (
                    *m,
                    paths.iter().map(|p| has_run(p, run)).collect::<Vec<_>>(),
                )
            })
            .find(|(_, inside)| inside.contains(&true) && inside.contains(&false))
        else {
            continue;
        };
        let all = per_layer
            .iter_mut()
            .flatten()
            .flat_map(|f| &mut f.candidates);
        for (c, inside) in all.zip(inside) {
            c.fit = Some(if inside { Fit::Path } else { Fit::Nothing });
        }
        if let Some(flag) = as_module.get_mut(m) {
            *flag = true;
        }
    }
    as_module
}

/// A path told in words qualifies a name written as code: two words side by side (function
/// words aside) that are, in that order, a module of an item's path and a module below it or
/// its own type or trait ("`execute` method on WASM client" for `wasm::client::Client::execute`,
/// "`collect_str` methods for Value serializer" for `value::ser::Serializer`'s). Where nothing
/// qualified the name's items yet, those so told fit by their path and the others fit nothing;
/// where a type written apart did ("`build` method on WASM `RequestBuilder`", every builder's
/// `build` fitting as its owner's), those of the best fit not so told fit one step worse. Not
/// when every item of that fit or none is so told.
pub(super) fn qualify_by_words_before<'q>(
    name: &QueryName,
    query: &'q QueryNames,
    side_by_side: &SideBySide<'q>,
    per_layer: &mut [Option<Found<'_>>],
) {
    if !bare_code(name) {
        return;
    }
    let candidates = || per_layer.iter().flatten().flat_map(|f| &f.candidates);
    let Some(best) = candidates().map(|c| c.fit).min() else {
        return;
    };
    let pairs = side_by_side.get_or_init(|| {
        query
            .order
            .windows(2)
            .filter_map(|pair| match pair {
                [(outer, _), (inner, _)] => Some((outer.as_str(), inner.as_str())),
                _ => None,
            })
            .collect()
    });
    let told: Vec<bool> = candidates()
        .map(|c| c.fit == best && told_in_words(c.record, pairs))
        .collect();
    let at_best = candidates().filter(|c| c.fit == best).count();
    let count = told.iter().filter(|t| **t).count();
    if count == 0 || count == at_best {
        return;
    }
    let all = per_layer
        .iter_mut()
        .flatten()
        .flat_map(|f| &mut f.candidates);
    for (c, told) in all.zip(told).filter(|(c, _)| c.fit == best) {
        c.fit = match (best, told) {
            (None, true) => Some(Fit::Path),
            (None, false) => Some(Fit::Nothing),
            (Some(_), true) => best,
            (Some(fit), false) => Some(fit.worse()),
        };
    }
}

/// The query's keys written side by side, in order (function words aside): gathered once per
/// query, when a name first asks ([`qualify_by_words_before`]).
pub(super) type SideBySide<'q> = std::cell::OnceCell<FxHashSet<(&'q str, &'q str)>>;

/// A name written as code without qualifiers: the one a type, a module or words written apart
/// can qualify.
fn bare_code(name: &QueryName) -> bool {
    name.qualifiers.is_empty() && name.strength >= CODE_STRENGTH
}

/// Whether a pair of keys written side by side (`pairs`) is a module of the item's path and,
/// after it, a module below it or the item's own type or trait.
fn told_in_words(record: &ItemRecord, pairs: &FxHashSet<(&str, &str)>) -> bool {
    let module = module_keys(record);
    let owners: Vec<String> = owners(&record.item.qualname).map(key).collect();
    module.iter().enumerate().any(|(i, outer)| {
        let below = module.iter().skip(i + 1).chain(&owners);
        below
            .into_iter()
            .any(|inner| pairs.contains(&(outer.as_str(), inner.as_str())))
    })
}

/// The keys of an item's module path below its crate's root (`wasm`, `multipart` of
/// `crate::wasm::multipart`); none for languages whose modules are not read.
fn module_keys(record: &ItemRecord) -> Vec<String> {
    paths::module_of(record)
        .map(|module| module.into_iter().map(key).collect())
        .unwrap_or_default()
}

/// Whether the keys `run` follow each other in `path`.
fn has_run(path: &[String], run: &[&str]) -> bool {
    !run.is_empty()
        && path
            .windows(run.len())
            .any(|w| w.iter().zip(run).all(|(p, r)| p == r))
}
