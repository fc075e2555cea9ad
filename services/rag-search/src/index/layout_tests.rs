//! Canonical paths from module systems: a workspace of several languages (each parsed
//! language's items under its module system's paths, found by lookup and by search with a
//! language filter, moved when a refresh changes a package marker), Rust's `#[path]`
//! modules, and public paths through Rust's re-exports.

use super::*;
use crate::bm25::Filters;
use crate::rank::LengthPrior;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// `root` indexed (BM25 only) with its index in `data`.
fn indexed(root: &Path, data: &Path) -> WorkspaceIndex {
    let mut index = WorkspaceIndex::open(
        root,
        data,
        (Boosts::default(), LengthPrior::default()),
        None,
    )
    .unwrap();
    index.index_all(false, None, &mut |_| {}).unwrap();
    index
}

#[test]
fn each_language_is_parsed_into_items_of_its_module_system() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "src/shop/__init__.py", "");
    write(
        root,
        "src/shop/cart.py",
        "class Cart:\n    \"\"\"A basket.\"\"\"\n\n    def add_item(self, sku, qty=1):\n        \"\"\"Adds an item to the cart.\"\"\"\n        self.items.append((sku, qty))\n",
    );
    write(
        root,
        "src/shop/util/fmt.py",
        "def money(cents):\n    return f\"{cents / 100:.2f}\"\n",
    );
    write(root, "go.mod", "module example.com/shop\n\ngo 1.22\n");
    write(
        root,
        "pricing/price.go",
        "package pricing\n\n// Total sums the cart's prices.\nfunc Total(prices []int) int {\n\treturn 0\n}\n",
    );
    write(root, "web/package.json", "{\"name\": \"shop-web\"}\n");
    write(
        root,
        "web/src/cart.ts",
        "/** Shows the cart. */\nexport class CartView {\n  /** Renders every item of the cart. */\n  render(items: Item[]): string { return \"\"; }\n}\n",
    );
    write(
        root,
        "server/Main.java",
        "package com.shop;\n\npublic class Main {\n    public static void main(String[] args) {}\n}\n",
    );
    write(root, "README.md", "# Shop\n\nAdd items to a cart.\n");
    let mut index = indexed(root, data.path());

    let one = |index: &WorkspaceIndex, canon: &str| {
        let found = index.lookup_canon(canon, None);
        assert_eq!(found.len(), 1, "{canon}: {found:?}");
        let r = found[0];
        (
            r.file.clone(),
            r.item.kind,
            r.item.crate_name.clone(),
            r.item.doc.clone(),
        )
    };
    assert_eq!(
        one(&index, "shop.cart.Cart.add_item"),
        (
            "src/shop/cart.py".into(),
            Kind::Method,
            "shop".into(),
            "Adds an item to the cart.".into()
        )
    );
    assert_eq!(one(&index, "shop.cart.Cart").1, Kind::Class);
    assert_eq!(
        one(&index, "example.com/shop/pricing.Total"),
        (
            "pricing/price.go".into(),
            Kind::Function,
            "example.com/shop".into(),
            "Total sums the cart's prices.".into()
        )
    );
    assert_eq!(
        one(&index, "shop-web/src/cart.CartView.render"),
        (
            "web/src/cart.ts".into(),
            Kind::Method,
            "shop-web".into(),
            "Renders every item of the cart.".into()
        )
    );
    assert_eq!(one(&index, "com.shop.Main.main").1, Kind::Method);
    // Outside a package a Python file is named by its path after `src/`.
    assert_eq!(one(&index, "shop.util.fmt.money").2, "");

    // Search with a language filter answers only that language.
    let languages = |langs: &[&str]| Filters {
        languages: langs.iter().map(|l| (*l).to_owned()).collect(),
        ..Filters::default()
    };
    let hits = |filters: &Filters| -> Vec<String> {
        index
            .search_bm25("add an item to the cart", filters, 10)
            .unwrap()
            .into_iter()
            .map(|h| h.record.item.canon_path.clone())
            .collect()
    };
    assert_eq!(hits(&languages(&["python"]))[0], "shop.cart.Cart.add_item");
    let mut ts = hits(&languages(&["typescript"]));
    ts.sort();
    assert_eq!(
        ts,
        vec![
            "shop-web/src/cart.CartView",
            "shop-web/src/cart.CartView.render"
        ]
    );
    assert_eq!(
        hits(&languages(&["go"])),
        vec!["example.com/shop/pricing.Total"]
    );

    // A new package marker moves the files below it, unchanged as they are.
    write(root, "src/shop/util/__init__.py", "");
    let s = index
        .refresh(&["src/shop/util/__init__.py".to_owned()], None)
        .unwrap();
    assert_eq!(one(&index, "shop.util.fmt.money").2, "shop");
    assert_eq!(
        s.files_indexed, 3,
        "the marker (under the old layout, then in its package) and the one file it moved"
    );
}

#[test]
fn path_attributes_place_the_files_they_name() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "Cargo.toml", "[package]\nname = \"net\"\n");
    write(
        root,
        "src/lib.rs",
        "#[cfg(unix)]\n#[path = \"imp/unix.rs\"]\nmod sys;\n\n#[path = \"../generated/wire.rs\"]\npub mod proto;\n",
    );
    write(root, "src/imp/unix.rs", "pub fn open() {}\n");
    write(root, "generated/wire.rs", "pub struct Frame;\n");
    let mut index = indexed(root, data.path());
    let file_of = |index: &WorkspaceIndex, canon: &str| -> Vec<(String, String)> {
        index
            .lookup_canon(canon, None)
            .iter()
            .map(|r| (r.file.clone(), r.item.crate_name.clone()))
            .collect()
    };
    assert_eq!(
        file_of(&index, "crate::sys::open"),
        vec![("src/imp/unix.rs".to_owned(), "net".to_owned())]
    );
    assert_eq!(
        file_of(&index, "net::proto::Frame"),
        vec![("generated/wire.rs".to_owned(), "net".to_owned())]
    );
    // The declaration renamed by a refresh of the declaring file: the named file moves with it.
    write(
        root,
        "src/lib.rs",
        "#[path = \"imp/unix.rs\"]\nmod platform;\n#[path = \"../generated/wire.rs\"]\npub mod proto;\n",
    );
    let s = index.refresh(&["src/lib.rs".to_owned()], None).unwrap();
    assert_eq!(
        file_of(&index, "crate::platform::open"),
        vec![("src/imp/unix.rs".to_owned(), "net".to_owned())]
    );
    assert!(file_of(&index, "crate::sys::open").is_empty());
    assert_eq!(
        s.files_indexed, 2,
        "the declaring file and the one it moved"
    );
}

/// The canonical path of the first hit of a BM25 search (names fused).
fn named(index: &WorkspaceIndex, q: &str) -> String {
    let found = index
        .search(
            Query::Bm25 {
                text: q,
                rrf: crate::fusion::Rrf::default(),
            },
            &Filters::default(),
            5,
        )
        .unwrap();
    found[0].hit.record.item.canon_path.clone()
}

/// The canonical paths a lookup by (canonical or public) path finds.
fn looked_up(index: &WorkspaceIndex, path: &str) -> Vec<String> {
    index
        .lookup_canon(path, None)
        .iter()
        .map(|r| r.item.canon_path.clone())
        .collect()
}

/// A re-export compiled out on this host (and on every host these tests run on): it binds
/// nothing, as reqwest's wasm client is not `reqwest::Client` on a server.
const WASM_ONLY: &str = "#[cfg(all(target_arch = \"wasm32\", target_os = \"unknown\"))]\n";

#[test]
fn public_paths_follow_the_crate_s_re_exports_as_files_change_and_after_a_reopen() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "Cargo.toml", "[package]\nname = \"net-kit\"\n");
    let lib = |module: &str| {
        format!(
            "pub mod fast;\npub mod slow;\npub use self::{module}::Client;\npub use self::slow::Client as SlowClient;\npub use self::slow::Client as Tortoise;\n{WASM_ONLY}pub use self::slow::Client;\n"
        )
    };
    write(root, "src/lib.rs", &lib("fast"));
    let client = "pub struct Client;\nimpl Client {\n    /// Sends a request.\n    pub fn get(&self) {}\n}\n";
    write(
        root,
        "src/fast/mod.rs",
        "mod client;\npub use self::client::Client;\n",
    );
    // A free `get` beside the type: `net_kit::Client::get` is not it (paths compare without
    // case: module `client` and type `Client` are one key).
    write(
        root,
        "src/fast/client.rs",
        &format!("{client}\npub fn get() {{}}\n"),
    );
    write(root, "src/slow/mod.rs", "mod client;\npub use client::*;\n");
    write(root, "src/slow/client.rs", client);
    let mut index = indexed(root, data.path());
    assert_eq!(
        named(&index, "`net_kit::Client::get`"),
        "crate::fast::client::Client::get"
    );
    assert_eq!(
        named(&index, "`net_kit::slow::Client::get`"),
        "crate::slow::client::Client::get"
    );
    assert_eq!(
        looked_up(&index, "net_kit::Client::get"),
        vec!["crate::fast::client::Client::get"]
    );
    assert_eq!(
        looked_up(&index, "net_kit::slow::Client"),
        vec!["crate::slow::client::Client"]
    );
    // An `as` alias, for the type and for its method.
    assert_eq!(
        looked_up(&index, "net_kit::SlowClient"),
        vec!["crate::slow::client::Client"]
    );
    assert_eq!(
        looked_up(&index, "net_kit::SlowClient::get"),
        vec!["crate::slow::client::Client::get"]
    );
    // Not a path of the crate: nothing.
    assert!(looked_up(&index, "net_kit::Client::put").is_empty());
    // A name only an alias gives, written alone or from the root: the item bound under it.
    assert_eq!(named(&index, "`Tortoise`"), "crate::slow::client::Client");
    // (From the root, BM25 finds the crate's name in Cargo.toml too, and a type named weighs
    // half: the struct is among the first, not first.)
    let hits: Vec<String> = index
        .search(
            Query::Bm25 {
                text: "`net_kit::Tortoise`",
                rrf: crate::fusion::Rrf::default(),
            },
            &Filters::default(),
            3,
        )
        .unwrap()
        .iter()
        .map(|f| f.hit.record.item.canon_path.clone())
        .collect();
    assert!(
        hits.contains(&"crate::slow::client::Client".to_owned()),
        "{hits:?}"
    );
    // The root re-exports the other client now.
    write(root, "src/lib.rs", &lib("slow"));
    index.index_all(false, None, &mut |_| {}).unwrap();
    assert_eq!(
        named(&index, "`net_kit::Client::get`"),
        "crate::slow::client::Client::get"
    );
    drop(index);
    let index = WorkspaceIndex::open(
        root,
        data.path(),
        (Boosts::default(), LengthPrior::default()),
        None,
    )
    .unwrap();
    assert_eq!(
        looked_up(&index, "net_kit::Client::get"),
        vec!["crate::slow::client::Client::get"]
    );
    assert_eq!(
        named(&index, "`net_kit::Client::get`"),
        "crate::slow::client::Client::get"
    );
    assert_eq!(named(&index, "`Tortoise`"), "crate::slow::client::Client");
    // The alias gone, the name finds nothing.
    write(root, "src/lib.rs", "pub mod fast;\npub mod slow;\n");
    let mut index = index;
    index.index_all(false, None, &mut |_| {}).unwrap();
    assert!(
        index
            .search(
                Query::Bm25 {
                    text: "`Tortoise`",
                    rrf: crate::fusion::Rrf::default(),
                },
                &Filters::default(),
                5,
            )
            .unwrap()
            .is_empty()
    );
}

#[test]
fn python_public_paths_follow_the_package_s_imports() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let root = ws.path();
    let session = "class Session:\n    \"\"\"A session.\"\"\"\n\n    def send(self, request):\n        \"\"\"Sends a request.\"\"\"\n        return request\n\n    class Pool:\n        def get(self):\n            return 1\n";
    // The re-exported class lives in `core`; a decoy of the same text in `session` (whose
    // path has the query's word).
    write(
        root,
        "netkit/__init__.py",
        "try:\n    from .core import Session\nexcept ImportError:\n    pass\n",
    );
    write(root, "netkit/core.py", session);
    write(root, "netkit/session.py", session);
    let index = indexed(root, data.path());
    assert_eq!(
        named(&index, "`netkit.Session.send`"),
        "netkit.core.Session.send"
    );
    assert_eq!(
        named(&index, "`netkit.session.Session.send`"),
        "netkit.session.Session.send"
    );
    assert_eq!(
        looked_up(&index, "netkit.Session.send"),
        vec!["netkit.core.Session.send"]
    );
    // A nested class's method, by its public path.
    assert_eq!(
        looked_up(&index, "netkit.Session.Pool.get"),
        vec!["netkit.core.Session.Pool.get"]
    );
}
