use super::*;

fn outline(rel: &str, src: &str) -> Vec<String> {
    parse_rust(rel, src)
        .iter()
        .map(|i| {
            format!(
                "{:<10} {:<45} L{}-{}",
                i.kind.as_str(),
                i.canon_path,
                i.line_start,
                i.line_end
            )
        })
        .collect()
}

const FIXTURE: &str = r#"//! Module docs.
use std::fmt;

/// A configuration.
#[derive(Debug)]
pub struct Config {
    pub name: String,
}

impl Config {
    /// Loads it.
    pub fn load(path: &str) -> Result<Self, Error> {
        fn helper() {}
        Err(Error::missing(path))
    }

    cfg_io! {
        /// Only with io.
        pub fn io_only(&self) -> bool { true }
    }
}

impl<T: Clone> fmt::Display for Wrapper<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Ok(())
    }
}

pub trait Store {
    fn get(&self) -> u8;
    fn get_or_zero(&self) -> u8 {
        0
    }
    cfg_io! { fn flush(&mut self) {} }
}

mod inner {
    pub mod deeper {
        pub const LIMIT: usize = 3;
        pub static NAME: &str = "x";
        pub type Alias = u32;
        pub enum Mode { A, B }
        pub union Bits { a: u32, b: f32 }
    }
}

macro_rules! cfg_client {
    ($($item:item)*) => { $($item)* }
}

cfg_client! {
    pub fn only_with_client() {}

    impl Config {
        pub fn client_only(&self) {}
    }
}

mod file_module;
"#;

#[test]
fn items_of_every_kind_with_canonical_paths() {
    insta::assert_snapshot!(outline("src/proto/h1.rs", FIXTURE).join("\n"));
}

#[test]
fn spans_include_docs_and_attributes_and_bytes_match_lines() {
    let items = parse_rust("src/lib.rs", FIXTURE);
    let config = items
        .iter()
        .find(|i| i.canon_path == "crate::Config")
        .unwrap();
    assert_eq!(
        &FIXTURE[config.byte_start..config.byte_end],
        "/// A configuration.\n#[derive(Debug)]\npub struct Config {\n    pub name: String,\n}"
    );
    assert_eq!((config.line_start, config.line_end), (4, 8));
    assert_eq!(config.doc, "A configuration.");
    assert_eq!(config.signature, "pub struct Config");
    let load = items
        .iter()
        .find(|i| i.canon_path == "crate::Config::load")
        .unwrap();
    assert_eq!(load.kind, Kind::Method);
    assert_eq!(load.name, "load");
    assert_eq!(load.qualname, "Config::load");
    assert_eq!(
        load.signature,
        "pub fn load(path: &str) -> Result<Self, Error>"
    );
    // Items inside function bodies are not items.
    assert!(!items.iter().any(|i| i.name == "helper"));
    let fmt = items
        .iter()
        .find(|i| i.name == "fmt" && i.kind == Kind::Method)
        .unwrap();
    assert_eq!(fmt.qualname, "<Wrapper as fmt::Display>::fmt");
}

#[test]
fn a_file_with_syntax_errors_still_yields_what_was_recovered() {
    let src = "pub fn good_one() -> u8 { 1 }\n\nfn broken( {\n\npub struct StillHere { a: u8 }\n\nimpl StillHere {\n    pub fn method_after_error(&self) {}\n}\n";
    let names: Vec<String> = parse_rust("src/lib.rs", src)
        .into_iter()
        .map(|i| i.canon_path)
        .collect();
    assert!(names.contains(&"crate::good_one".to_owned()), "{names:?}");
    assert!(
        names.contains(&"crate::StillHere::method_after_error".to_owned()),
        "{names:?}"
    );
}

#[test]
fn garbage_and_empty_input_give_no_items_and_no_panic() {
    assert!(parse_rust("src/lib.rs", "").is_empty());
    let _ = parse_rust("src/lib.rs", "}}}{{{ fn fn fn <<<>>> \u{0}\u{1}");
    let _ = parse_rust(
        "src/lib.rs",
        "cfg_x! { cfg_y! { cfg_z! { cfg_w! { fn deep() {} } } } }",
    );
}

#[test]
fn public_uses_are_re_exports_of_their_module() {
    let src = r#"
use private::Hidden;
pub use self::async_impl::{Body, Client as AsyncClient, self};
pub(crate) use crate::de::from_str;
pub(self) use nothing::Here;
pub use super::up::*;
pub use ::external::Thing;
pub use inner::{deep::{Leaf, other::*}};
pub use a::b as _;
if_hyper! {
    pub use self::hyper_only::Upgraded;
}
mod nested {
    pub use super::Body as NestedBody;
}
fn body() {
    pub use not::AnExport;
}
"#;
    let loc = ModuleLoc {
        crate_name: "reqwest".into(),
        segments: vec!["top".into()],
    };
    let (_, reexports) = parse_rust_file(&loc, src);
    let shown: Vec<String> = reexports
        .iter()
        .map(|r| {
            assert_eq!(r.crate_name, "reqwest");
            format!(
                "{} {} = {}",
                r.module.join("::"),
                r.name,
                r.target.join("::")
            )
        })
        .collect();
    assert_eq!(
        shown,
        vec![
            "top Body = self::async_impl::Body",
            "top AsyncClient = self::async_impl::Client",
            "top async_impl = self::async_impl",
            "top from_str = crate::de::from_str",
            "top  = super::up",
            "top Thing = ::::external::Thing",
            "top Leaf = inner::deep::Leaf",
            "top  = inner::deep::other",
            "top Upgraded = self::hyper_only::Upgraded",
            "top::nested NestedBody = super::Body",
        ]
    );
}

#[test]
fn cfg_if_branches_are_in_or_out_as_the_host_compiles_them() {
    let src = r#"
cfg_if::cfg_if! {
    if #[cfg(target_os = "none")] {
        mod bare;
        pub use self::bare::Sys;
        pub use self::bare::BareOnly;
        pub fn in_bare() {}
    } else if #[cfg(any(unix, windows))] {
        mod host;
        pub use self::host::Sys;
        pub fn in_host() {}
    } else {
        pub use self::fallback::Sys;
        pub use self::fallback::Fallback;
    }
}
cfg_if! {
    if #[cfg(feature = "x")] {
        pub use self::with_x::Feature;
    } else {
        pub use self::without_x::Feature;
    }
}
"#;
    let loc = ModuleLoc {
        crate_name: "sys".into(),
        segments: Vec::new(),
    };
    let (items, reexports) = parse_rust_file(&loc, src);
    let shown: Vec<String> = reexports.iter().map(|r| r.target.join("::")).collect();
    // The host's branch binds `Sys`; the first branch a feature may compile binds `Feature`;
    // names no compiled branch binds stay.
    assert_eq!(
        shown,
        [
            "self::host::Sys",
            "self::with_x::Feature",
            "self::bare::BareOnly",
            "self::fallback::Fallback",
        ]
    );
    // Every branch's items are items, compiled here or not.
    let functions: Vec<&str> = items
        .iter()
        .filter(|i| i.kind == Kind::Function)
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(functions, ["in_bare", "in_host"]);
}

#[test]
fn re_exports_compiled_out_on_this_host_give_way_to_those_it_compiles() {
    // reqwest's shape: macros that wrap items in a target cfg, and plain cfg attributes; a
    // feature is unknown here and counts as on.
    let src = r#"
macro_rules! if_wasm {
    ($($item:item)*) => {$(
        #[cfg(all(target_arch = "wasm32", any(target_os = "unknown", target_os = "none")))]
        $item
    )*}
}
macro_rules! if_hyper {
    ($($item:item)*) => {$(
        #[cfg(not(all(target_arch = "wasm32", any(target_os = "unknown", target_os = "none"))))]
        $item
    )*}
}
if_hyper! {
    pub use self::async_impl::Client;
}
if_wasm! {
    pub use self::wasm::Client;
}
#[cfg(target_os = "none")]
pub use self::bare::Metal;
#[cfg(not(target_os = "none"))]
pub use self::hosted::Metal;
#[cfg(target_os = "none")]
// a comment between
pub use self::bare::Blocking;
#[cfg(feature = "blocking")]
pub use self::blocking::Blocking;
#[cfg(target_os = "none")]
mod bare_only {
    pub use super::Gone;
}
pub use self::after::After;
#[cfg(target_os = "none")]
pub use self::bare::OnlyThere;
#[cfg(target_os = "none")]
pub use self::bare::Defined;
pub struct Defined;
#[cfg(target_os = "none")]
pub use self::bare_sys::*;
pub use self::host_sys::*;
#[cfg(target_os = "none")]
pub use self::extras::more::*;
"#;
    let loc = ModuleLoc {
        crate_name: "reqwest".into(),
        segments: Vec::new(),
    };
    let (_, reexports) = parse_rust_file(&loc, src);
    let shown: Vec<String> = reexports.iter().map(|r| r.target.join("::")).collect();
    // What the host compiles out gives way to what it does not, of the same name in the same
    // module; alone (`Gone`, `OnlyThere`), it stays.
    assert_eq!(
        shown,
        [
            "self::async_impl::Client",
            "self::hosted::Metal",
            "self::blocking::Blocking",
            "self::after::After",
            "self::host_sys",
            "super::Gone",
            "self::bare::OnlyThere",
            "self::extras::more",
        ]
    );
}

#[test]
fn test_code_is_known_by_its_attributes_wherever_it_is() {
    let src = r#"
pub fn code() {}

#[test]
fn a_test_beside_the_code() {}

#[tokio::test(flavor = "multi_thread")]
async fn an_async_test() {}

#[bench]
fn a_bench(b: &mut Bencher) {}

#[cfg(test)]
mod helpers {
    pub fn fixture() {}
}

#[cfg(all(test, feature = "std"))]
impl Config {
    fn for_tests() -> Self { Config }
}

#[cfg(not(test))]
fn only_outside_tests() {}

#[cfg(any(test, feature = "x"))]
fn also_in_builds() {}

#[test_case(1)]
fn a_case(n: u8) {}

/// A helper with a doc comment and a test attribute below it.
#[inline]
#[test]
fn attributes_in_a_row() {}
"#;
    let flags: Vec<(String, bool)> = parse_rust("src/lib.rs", src)
        .into_iter()
        .map(|i| (i.canon_path, i.test))
        .collect();
    let want: Vec<(String, bool)> = [
        ("crate::code", false),
        ("crate::a_test_beside_the_code", true),
        ("crate::an_async_test", true),
        ("crate::a_bench", true),
        ("crate::helpers", true),
        ("crate::helpers::fixture", true),
        ("crate::impl Config", true),
        ("crate::Config::for_tests", true),
        ("crate::only_outside_tests", false),
        ("crate::also_in_builds", false),
        ("crate::a_case", true),
        ("crate::attributes_in_a_row", true),
    ]
    .into_iter()
    .map(|(p, t)| (p.to_owned(), t))
    .collect();
    assert_eq!(flags, want);
}
