//! A type written as code apart from a method's name ("add `new` to `Route`") qualifies it.

use super::*;

fn method(id: u64, path: &str) -> ItemRecord {
    let mut record = item(id, path, Kind::Method);
    let mut segments = path.rsplit("::");
    let (name, owner) = (segments.next().unwrap(), segments.next().unwrap());
    record.item.qualname = format!("{owner}::{name}");
    record
}

/// `Router::new` and `Route::new`: one name, two owning types.
fn two_news() -> [ItemRecord; 2] {
    [
        method(1, "crate::routing::Router::new"),
        method(2, "crate::routing::route::Route::new"),
    ]
}

#[test]
fn a_type_written_apart_from_a_method_s_name_fits_as_its_qualifier() {
    let items = [
        method(1, "crate::routing::Router::new"),
        method(2, "crate::routing::route::Route::new"),
        method(3, "crate::routing::method_routing::MethodRouter::new"),
        item(4, "crate::routing::route::Route", Kind::Struct),
    ];
    let index = indexed(&items);
    let written = found(&index, &items, "Add `new` to `Route`", ALL);
    // `Route` is `Route::new`'s own type: that one shares the name with nobody and fits as
    // `Route::new` would (x2); the other `new`s fit nothing (x0.4) and share it three ways.
    // The type's words still count as context, for all of them (`route`, `routing`).
    let three_ways = 1.0 / (1.0 + 3f32.ln());
    let with_context = 1.0 + CONTEXT;
    let methods: Vec<(u64, f32)> = written.into_iter().filter(|(id, _)| *id != 4).collect();
    let expected = [
        (2, OWNER_QUALIFIED * with_context),
        (1, OTHERWISE_QUALIFIED * three_ways * with_context),
        (3, OTHERWISE_QUALIFIED * three_ways * with_context),
    ];
    assert_eq!(methods.len(), expected.len(), "{methods:?}");
    for ((id, score), (want_id, want)) in methods.iter().zip(expected) {
        assert_eq!(*id, want_id, "{methods:?}");
        assert!((score - want).abs() < 1e-6, "{methods:?}");
    }
}

#[test]
fn a_name_that_is_itself_a_type_s_is_not_qualified_by_another_type() {
    let items = [
        item(1, "crate::routing::route::Route", Kind::Struct),
        method(2, "crate::routing::Router::route"),
    ];
    let index = indexed(&items);
    // "`Route`" names the type `Route`: `Router` owning a `route` method does not make that
    // method the one meant. Every item scores as if `Router` were a plain word (without the
    // guard the type would fit nothing, x0.4, and the method fit as `Router::route`, x2).
    let written = found(&index, &items, "Add `Route` to `Router`", ALL);
    let plain = found(&index, &items, "Add `Route` to router", ALL);
    assert_eq!(written, plain);
    assert_eq!(written.len(), 2, "{written:?}");
}

#[test]
fn the_rule_sees_every_layer_and_only_the_items_a_search_may_answer() {
    let base_items = [method(1, "crate::routing::Router::new")];
    let overlay_items = [method(2, "crate::routing::route::Route::new")];
    let (base, overlay) = (indexed(&base_items), indexed(&overlay_items));
    let scores = |passes: &dyn Fn(&ItemRecord) -> bool| -> Vec<(u64, f32)> {
        let query = query_names("Add `new` to `Route`");
        let resolved = Resolved::default();
        let in_overlay = |id: u64| overlay_items.iter().find(|i| i.id == id);
        let in_base = |id: u64| base_items.iter().find(|i| i.id == id);
        let layers = [
            NameLayer {
                names: &overlay,
                item: &in_overlay,
                shadowed: false,
            },
            NameLayer {
                names: &base,
                item: &in_base,
                shadowed: false,
            },
        ];
        matches_layers(&layers, &query, &resolved, passes, &|_| false)
            .into_iter()
            .flatten()
            .map(|(r, s)| (r.id, s))
            .collect()
    };
    // `Route::new` is in the session's overlay only: the base's `Router::new` still fits
    // nothing, as it would in one index of both.
    let both = scores(&|_| true);
    let with_context = 1.0 + CONTEXT;
    let two_ways = 1.0 / (1.0 + 2f32.ln());
    assert_eq!(
        both,
        [
            (2, OWNER_QUALIFIED * with_context),
            (1, OTHERWISE_QUALIFIED * two_ways * with_context)
        ]
    );
    // A filter that leaves `Route::new` out leaves the rule nothing to qualify (the name is
    // still shared two ways: specificity counts what the index holds).
    let filtered = scores(&|r| r.id != 2);
    assert_eq!(filtered, [(1, two_ways * with_context)]);
}

#[test]
fn a_type_that_owns_none_of_the_items_found_changes_nothing() {
    let items = two_news();
    let index = indexed(&items);
    // `Arc` owns no `new` here: the query scores as if it were not written.
    assert_eq!(
        found(&index, &items, "use an `Arc` in `new`", ALL),
        found(&index, &items, "use an arc in `new`", ALL)
    );
}

#[test]
fn a_name_written_with_its_qualifier_keeps_it_whatever_else_is_written() {
    let items = two_news();
    let index = indexed(&items);
    // `Router` is written before `new`: `Route`, written apart, qualifies nothing.
    let found = found(&index, &items, "`Router::new` for `Route`", ALL);
    let with_context = 1.0 + CONTEXT;
    assert_eq!(
        found,
        [
            (1, OWNER_QUALIFIED * with_context),
            (2, OTHERWISE_QUALIFIED / (1.0 + 2f32.ln()) * with_context)
        ]
    );
}

#[test]
fn a_type_written_apart_is_more_specific_than_its_trait_written_beside_it() {
    let items = [
        method(1, "crate::w::MakeWriter::make_writer_for"),
        method(
            2,
            "crate::w::<BoxMakeWriter as MakeWriter>::make_writer_for",
        ),
        method(3, "crate::w::<WithFilter as MakeWriter>::make_writer_for"),
    ];
    let index = indexed(&items);
    // The type `BoxMakeWriter` is its impl's own: that one fits as its owner (x2, shared with
    // nobody, `box` of its path as context); the trait's declaration and its impl for another
    // type are reached through the trait only: a qualifier in their path (x1.5, shared three
    // ways).
    let written = found(
        &index,
        &items,
        "fix `make_writer_for` in `BoxMakeWriter`, a `MakeWriter`",
        ALL,
    );
    let three_ways = 1.0 / (1.0 + 3f32.ln());
    let expected = [
        (2, OWNER_QUALIFIED * (1.0 + CONTEXT)),
        (1, QUALIFIED * three_ways),
        (3, QUALIFIED * three_ways),
    ];
    assert_eq!(written.len(), expected.len(), "{written:?}");
    for ((id, score), (want_id, want)) in written.iter().zip(expected) {
        assert_eq!(*id, want_id, "{written:?}");
        assert!((score - want).abs() < 1e-6, "{written:?}");
    }
    // The trait alone written: every item it owns fits as its owner, alike.
    let trait_only = found(&index, &items, "fix `make_writer_for` of `MakeWriter`", ALL);
    assert_eq!(trait_only.len(), 3, "{trait_only:?}");
    for (_, score) in &trait_only {
        assert!(
            (score - OWNER_QUALIFIED * three_ways).abs() < 1e-6,
            "{trait_only:?}"
        );
    }
}
