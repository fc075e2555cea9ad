//! A type written as code apart from a method's name ("add `new` to `Route`") qualifies it.

use super::*;

fn method(id: u64, path: &str) -> ItemRecord {
    let mut record = item(id, path, Kind::Method);
    let mut segments = path.rsplit("::");
    let (name, owner) = (segments.next().unwrap(), segments.next().unwrap());
    record.item.qualname = format!("{owner}::{name}");
    record
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
fn a_type_that_owns_none_of_the_items_found_changes_nothing() {
    let items = [
        method(1, "crate::routing::Router::new"),
        method(2, "crate::routing::route::Route::new"),
    ];
    let index = indexed(&items);
    // `Arc` owns no `new` here: the query scores as if it were not written.
    assert_eq!(
        found(&index, &items, "use an `Arc` in `new`", ALL),
        found(&index, &items, "use an arc in `new`", ALL)
    );
    // And a type written as a qualifier is not also written apart.
    assert_eq!(
        found(&index, &items, "`Router::new` for `Route`", ALL)[0].0,
        1
    );
}
