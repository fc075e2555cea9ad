//! Paths written from a crate's root, through its re-exports ([`super::super::paths`]).

use super::*;

#[test]
fn a_public_path_finds_the_item_its_crate_re_exports_there() {
    let method = |id: u64, path: &str| {
        let mut record = item(id, path, Kind::Method);
        record.item.qualname = "Client::get".into();
        record.item.crate_name = "reqwest".into();
        record
    };
    let mut free = item(4, "crate::de::from_str", Kind::Function);
    free.item.crate_name = "serde_json".into();
    let mut other = item(5, "crate::value::from_str", Kind::Function);
    other.item.crate_name = "serde_json".into();
    // A free `get` in the module whose name only case tells from the type's.
    let mut free_get = item(6, "crate::async_impl::client::get", Kind::Function);
    free_get.item.crate_name = "reqwest".into();
    let items = [
        method(1, "crate::async_impl::client::Client::get"),
        method(2, "crate::blocking::client::Client::get"),
        method(3, "crate::wasm::client::Client::get"),
        free,
        other,
        free_get,
    ];
    let mut index = indexed(&items);
    // reqwest's root re-exports the async client; each module re-exports its own, one of
    // them by a glob.
    index.set_reexports(
        "src/lib.rs",
        &[
            reexport("reqwest", &[], "Client", &["self", "async_impl", "Client"]),
            reexport("reqwest", &[], "from_str", &["crate", "de", "from_str"]),
        ],
    );
    index.set_reexports(
        "src/async_impl/mod.rs",
        &[reexport(
            "reqwest",
            &["async_impl"],
            "Client",
            &["self", "client", "Client"],
        )],
    );
    index.set_reexports(
        "src/blocking/mod.rs",
        &[reexport("reqwest", &["blocking"], "", &["client"])],
    );
    index.set_reexports(
        "src/lib.rs#serde_json",
        &[reexport(
            "serde_json",
            &[],
            "from_str",
            &["crate", "de", "from_str"],
        )],
    );
    let order = |index: &NameIndex, query: &str| -> Vec<u64> {
        found(index, &items, query, ALL)
            .iter()
            .map(|(id, _)| *id)
            .collect()
    };
    // The public path of the async client (with the crate or from its root), of the blocking
    // one (through its glob), and a re-exported free function.
    assert_eq!(order(&index, "`reqwest::Client::get`")[0], 1);
    let scores = found(&index, &items, "`reqwest::Client::get`", ALL);
    let score = |id: u64| scores.iter().find(|(i, _)| *i == id).map(|(_, s)| *s);
    assert!(score(6) < score(1), "{scores:?}");
    assert_eq!(order(&index, "`Client::get`")[0], 1);
    assert_eq!(order(&index, "`reqwest::blocking::Client::get`")[0], 2);
    assert_eq!(order(&index, "`serde_json::from_str`")[0], 4);
    // The canonical path itself is exact too.
    assert_eq!(order(&index, "`crate::wasm::client::Client::get`")[0], 3);
    // The root re-exports the other client now: the public path follows.
    index.set_reexports(
        "src/lib.rs",
        &[reexport(
            "reqwest",
            &[],
            "Client",
            &["self", "wasm", "client", "Client"],
        )],
    );
    assert_eq!(order(&index, "`reqwest::Client::get`")[0], 3);
    // Without re-exports, no client is preferred for the public path.
    index.remove_reexports("src/lib.rs");
    let scores = found(&index, &items, "`reqwest::Client::get`", ALL);
    assert_eq!(scores[0].1, scores[1].1, "{scores:?}");
    assert_eq!(scores[1].1, scores[2].1, "{scores:?}");
}

#[test]
fn of_items_sharing_a_name_those_their_crate_s_root_binds_come_first() {
    let in_crate = |id: u64, path: &str, qualname: &str, krate: &str| {
        let mut record = item(id, path, Kind::Method);
        record.item.qualname = qualname.into();
        record.item.crate_name = krate.into();
        record
    };
    let items = [
        // reqwest: the root re-exports the async `Body`; the blocking one is
        // `reqwest::blocking::Body`.
        in_crate(
            1,
            "crate::blocking::body::Body::as_bytes",
            "Body::as_bytes",
            "reqwest",
        ),
        in_crate(
            2,
            "crate::async_impl::body::Body::as_bytes",
            "Body::as_bytes",
            "reqwest",
        ),
        // serde_json: `Map` is re-exported at the root (through a glob of a module of
        // re-exports), `OccupiedEntry` is not.
        in_crate(
            3,
            "crate::map::OccupiedEntry::remove_entry",
            "OccupiedEntry::remove_entry",
            "serde_json",
        ),
        in_crate(
            4,
            "crate::map::Map::remove_entry",
            "Map::remove_entry",
            "serde_json",
        ),
        // Another crate with none at its root: not compared with reqwest's.
        in_crate(5, "crate::body::Body::as_bytes", "Body::as_bytes", "other"),
        // A free function defined in the root module is bound there.
        in_crate(6, "crate::remove_entry", "remove_entry", "serde_json"),
    ];
    let mut index = indexed(&items);
    index.set_reexports(
        "reqwest/src/lib.rs",
        &[reexport(
            "reqwest",
            &[],
            "Body",
            &["self", "async_impl", "Body"],
        )],
    );
    index.set_reexports(
        "reqwest/src/async_impl/mod.rs",
        &[reexport(
            "reqwest",
            &["async_impl"],
            "Body",
            &["self", "body", "Body"],
        )],
    );
    index.set_reexports(
        "serde_json/src/lib.rs",
        &[reexport("serde_json", &[], "", &["crate", "exports"])],
    );
    index.set_reexports(
        "serde_json/src/exports.rs",
        &[reexport(
            "serde_json",
            &["exports"],
            "Map",
            &["crate", "map", "Map"],
        )],
    );
    let score = |query: &str, id: u64| {
        found(&index, &items, query, ALL)
            .into_iter()
            .find(|(i, _)| *i == id)
            .map(|(_, s)| s)
    };
    // Equal but for the root: the blocking body is set aside, the other crate's is not.
    let async_body = score("`as_bytes`", 2);
    assert_eq!(score("`as_bytes`", 1), async_body.map(|s| s * NOT_AT_ROOT));
    assert_eq!(score("`as_bytes`", 5), async_body);
    let map = score("`remove_entry`", 4);
    assert_eq!(score("`remove_entry`", 3), map.map(|s| s * NOT_AT_ROOT));
    assert_eq!(score("`remove_entry`", 6), map);
    // The type written still decides: `OccupiedEntry::remove_entry` fits its own.
    let order: Vec<u64> = found(&index, &items, "`OccupiedEntry::remove_entry`", ALL)
        .iter()
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(order[0], 3, "{order:?}");
    // A session that changed reqwest's root (its re-exports hidden) prefers neither body.
    let names = query_names("`as_bytes`");
    let resolved = index.resolve(&names, &|_| false);
    let hidden = |file: &str| file == "reqwest/src/lib.rs";
    let scores: Vec<(u64, f32)> = index
        .matches(
            &names,
            &resolved,
            |id| items.iter().find(|i| i.id == id),
            &|r| index.at_root(r, &hidden),
        )
        .into_iter()
        .map(|(r, s)| (r.id, s))
        .collect();
    let hidden_score = |id: u64| scores.iter().find(|(i, _)| *i == id).map(|(_, s)| *s);
    assert_eq!(hidden_score(1), hidden_score(2));
}

fn reexport(krate: &str, module: &[&str], name: &str, target: &[&str]) -> Reexport {
    Reexport {
        crate_name: krate.into(),
        module: module.iter().map(|s| (*s).to_owned()).collect(),
        name: name.into(),
        target: target.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// Whether the query's first name resolves to anything.
fn resolves(index: &NameIndex, query: &str, hidden: &dyn Fn(&str) -> bool) -> Vec<String> {
    let names = query_names(query);
    let mut paths: Vec<String> = index
        .resolve(&names, hidden)
        .0
        .into_iter()
        .next()
        .unwrap_or_default()
        .into_iter()
        .collect();
    paths.sort();
    paths
}

#[test]
fn globs_that_loop_or_number_thousands_end_and_still_resolve() {
    let mut thing = item(1, "crate::big::gen_7::Thing", Kind::Struct);
    thing.item.crate_name = "web".into();
    let mut other = item(2, "crate::a::Other", Kind::Struct);
    other.item.crate_name = "web".into();
    let mut index = indexed(&[thing, other]);
    // web-sys's shape: a module of thousands of globs (one of them its own), and two modules
    // whose globs import each other.
    let mut big: Vec<Reexport> = (0..3000)
        .map(|i| {
            let module = format!("gen_{i}");
            reexport("web", &["big"], "", &["self", module.as_str()])
        })
        .collect();
    big.push(reexport("web", &["big"], "", &["self"]));
    index.set_reexports("src/big/mod.rs", &big);
    index.set_reexports(
        "src/loops.rs",
        &[
            reexport("web", &["a"], "", &["crate", "b"]),
            reexport("web", &["b"], "", &["crate", "a"]),
        ],
    );
    assert_eq!(
        resolves(&index, "`web::big::Thing`", &|_| false),
        vec!["web::big::gen7::thing"]
    );
    assert_eq!(
        resolves(&index, "`web::b::Other`", &|_| false),
        vec!["web::a::other"]
    );
    assert!(resolves(&index, "`web::b::Missing`", &|_| false).is_empty());
}

#[test]
fn a_module_of_re_exports_only_and_a_changed_file_s_re_exports() {
    let mut thing = item(1, "crate::a::Thing", Kind::Struct);
    thing.item.crate_name = "k".into();
    let mut index = indexed(&[thing]);
    // `pub mod prelude;` whose file holds `pub use crate::a::Thing;` alone: no item is in it.
    index.set_reexports(
        "src/prelude.rs",
        &[reexport(
            "k",
            &["prelude"],
            "Thing",
            &["crate", "a", "Thing"],
        )],
    );
    assert_eq!(
        resolves(&index, "`k::prelude::Thing`", &|_| false),
        vec!["k::a::thing"]
    );
    // A session's overlay changed src/prelude.rs: its old re-exports do not count.
    assert!(resolves(&index, "`k::prelude::Thing`", &|f| f == "src/prelude.rs").is_empty());
}

#[test]
fn the_public_path_yields_to_the_words_of_another_items_path() {
    let method = |id: u64, path: &str| {
        let mut record = item(id, path, Kind::Method);
        record.item.qualname = "RequestBuilder::from_parts".into();
        record.item.crate_name = "reqwest".into();
        record
    };
    let items = [
        method(1, "crate::async_impl::request::RequestBuilder::from_parts"),
        method(2, "crate::wasm::request::RequestBuilder::from_parts"),
    ];
    let mut index = indexed(&items);
    index.set_reexports(
        "src/lib.rs",
        &[reexport(
            "reqwest",
            &[],
            "RequestBuilder",
            &["self", "async_impl", "request", "RequestBuilder"],
        )],
    );
    // Nothing else said, the name is the re-exported one's.
    let bare = found(&index, &items, "`RequestBuilder::from_parts`", ALL);
    let ids = |found: &[(u64, f32)]| found.iter().map(|(id, _)| *id).collect::<Vec<_>>();
    assert_eq!(ids(&bare), vec![1, 2], "{bare:?}");
    // The query says wasm: the wasm one's path has more of its words.
    let wasm = found(
        &index,
        &items,
        "add `RequestBuilder::from_parts` for wasm targets",
        ALL,
    );
    assert_eq!(ids(&wasm), vec![2, 1], "{wasm:?}");
}
