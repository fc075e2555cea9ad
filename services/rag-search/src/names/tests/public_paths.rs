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
    let items = [
        method(1, "crate::async_impl::client::Client::get"),
        method(2, "crate::blocking::client::Client::get"),
        method(3, "crate::wasm::client::Client::get"),
        free,
        other,
    ];
    let mut index = indexed(&items);
    let reexport = |krate: &str, module: &[&str], name: &str, target: &[&str]| Reexport {
        crate_name: krate.into(),
        module: module.iter().map(|s| (*s).to_owned()).collect(),
        name: name.into(),
        target: target.iter().map(|s| (*s).to_owned()).collect(),
    };
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
