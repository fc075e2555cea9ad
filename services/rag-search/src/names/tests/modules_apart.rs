//! A module written as code apart from a name ("`max_level_hint` in `reload`"), or a path told
//! in words ("`execute` method on WASM client"), qualifies it.

use super::*;
use crate::names::apart::MODULE_WRITTEN;

/// A method `qualname` in module `module` (`crate::reload`).
fn method(id: u64, module: &str, qualname: &str) -> ItemRecord {
    let mut record = item(id, &format!("{module}::{qualname}"), Kind::Method);
    record.item.qualname = qualname.into();
    record
}

fn ids(found: &[(u64, f32)]) -> Vec<u64> {
    found.iter().map(|(id, _)| *id).collect()
}

fn score(found: &[(u64, f32)], id: u64) -> f32 {
    found
        .iter()
        .find(|(i, _)| *i == id)
        .map_or(0.0, |(_, s)| *s)
}

#[test]
fn a_module_written_apart_from_a_name_qualifies_it_and_counts_less_as_a_name() {
    let items = [
        method(
            1,
            "crate::reload",
            "<Layer as crate::Layer<S>>::max_level_hint",
        ),
        method(
            2,
            "crate::filter::env",
            "<EnvFilter as Layer<S>>::max_level_hint",
        ),
        method(3, "crate::reload", "Handle::reload"),
    ];
    let index = indexed(&items);
    // Without the module the two `max_level_hint`s are alike.
    let alone = found(&index, &items, "pass through `max_level_hint`", ALL);
    assert_eq!(ids(&alone), vec![1, 2], "{alone:?}");
    assert_eq!(score(&alone, 1), score(&alone, 2), "{alone:?}");
    // `reload` is the module of one of them: that one fits by its path (x1.5) and is the
    // only one so fitting (shared by one); the other fits nothing (x0.4). `reload` still
    // finds `Handle::reload`, at half what the name alone would give it.
    let written = found(
        &index,
        &items,
        "pass through `max_level_hint` in `reload`",
        ALL,
    );
    assert_eq!(ids(&written), vec![1, 3, 2], "{written:?}");
    let with_context = 1.0 + CONTEXT;
    let two_ways = 1.0 / (1.0 + 2f32.ln());
    assert!((score(&written, 1) - QUALIFIED * with_context).abs() < 1e-6);
    assert!((score(&written, 2) - OTHERWISE_QUALIFIED * two_ways).abs() < 1e-6);
    let as_name = found(&index, &items, "call `reload`", ALL);
    assert!((score(&written, 3) - MODULE_WRITTEN * score(&as_name, 3)).abs() < 1e-6);
}

#[test]
fn a_module_path_written_apart_finds_the_name_inside_it_not_its_namesake() {
    let items = [
        method(1, "crate::wasm::multipart", "Part::headers"),
        method(2, "crate::async_impl::multipart", "Part::headers"),
        method(3, "crate::wasm::request", "RequestBuilder::multipart"),
    ];
    let index = indexed(&items);
    let written = found(&index, &items, "`fn headers ` for `wasm::multipart`", ALL);
    assert_eq!(ids(&written)[0], 1, "{written:?}");
    assert!(score(&written, 3) < score(&written, 1), "{written:?}");
}

#[test]
fn a_module_every_candidate_is_in_or_a_hyphenated_word_qualifies_nothing() {
    let items = [
        method(
            1,
            "crate::reload",
            "<Layer as crate::Layer<S>>::max_level_hint",
        ),
        method(2, "crate::reload", "<Layer as Filter<S>>::max_level_hint"),
        method(3, "crate::filter::env::field", "SpanMatch::filter"),
        method(4, "crate::filter::targets", "Targets::filter"),
    ];
    let index = indexed(&items);
    let written = found(&index, &items, "`max_level_hint` in `reload`", ALL);
    assert_eq!(score(&written, 1), score(&written, 2), "{written:?}");
    // `env-filter` is a feature's name: neither word is code, so `env` qualifies no `filter`.
    let feature = found(&index, &items, "use `Targets` if `env-filter` is off", ALL);
    let plain = found(&index, &items, "use `Targets` if env filter is off", ALL);
    assert_eq!(feature, plain);
}

#[test]
fn a_path_told_in_words_before_a_type_qualifies_a_name() {
    let items = [
        method(1, "crate::async_impl::client", "Client::execute"),
        method(2, "crate::wasm::client", "Client::execute"),
        method(3, "crate::blocking::client", "Client::execute"),
    ];
    let index = indexed(&items);
    // "WASM client": the module `wasm` and, below it, `client` (or the type `Client`). That
    // one fits by its path, alone (x1.5); the others fit nothing (x0.4).
    let told = "Make `execute` method on WASM client for compatibility with async_impl";
    let written = found(&index, &items, told, ALL);
    assert_eq!(ids(&written)[0], 2, "{written:?}");
    let apart = 1.0 / (1.0 + 3f32.ln());
    // `wasm`, `client` of its path are words of the query; `async_impl`'s two.
    assert!((score(&written, 2) - QUALIFIED * (1.0 + 2.0 * CONTEXT)).abs() < 1e-6);
    assert!(
        (score(&written, 1) - OTHERWISE_QUALIFIED * apart * (1.0 + 3.0 * CONTEXT)).abs() < 1e-6
    );
    // The same words not side by side tell nothing: the path with the most of them leads.
    let apart_words = "Make `execute` method on client for WASM, compatible with async_impl";
    let scattered = found(&index, &items, apart_words, ALL);
    assert_eq!(ids(&scattered), vec![1, 2, 3], "{scattered:?}");
}

#[test]
fn a_path_told_in_words_tells_apart_the_items_a_type_written_apart_left_alike() {
    let items = [
        method(1, "crate::async_impl::request", "RequestBuilder::build"),
        method(2, "crate::wasm::request", "RequestBuilder::build"),
        method(3, "crate::blocking::request", "RequestBuilder::build"),
        method(4, "crate::async_impl::client", "ClientBuilder::build"),
    ];
    let index = indexed(&items);
    // `RequestBuilder` owns three of the `build`s alike (x2, shared three ways); "WASM
    // RequestBuilder" tells which: the other two fit one step worse, by their path (x1.5).
    let query = "Introduce `build` method on WASM RequestBuilder for compatibility with async_impl";
    let written = found(&index, &items, query, ALL);
    assert_eq!(ids(&written)[0], 2, "{written:?}");
    let context = |words: f32| 1.0 + words * CONTEXT;
    // `wasm`, `request`, `builder` of its path are words of the query.
    assert!((score(&written, 2) - OWNER_QUALIFIED * context(3.0)).abs() < 1e-6);
    let three_ways = 1.0 / (1.0 + 3f32.ln());
    assert!((score(&written, 1) - QUALIFIED * three_ways * context(4.0)).abs() < 1e-6);
    // Without the words side by side, the three fit alike and `async_impl`'s words lead.
    let plain = found(
        &index,
        &items,
        "Introduce `build` on RequestBuilder for WASM, as async_impl",
        ALL,
    );
    assert_eq!(ids(&plain)[0], 1, "{plain:?}");
}
