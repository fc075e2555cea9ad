//! Turning files into code items: Rust, Python, Go, TypeScript/JavaScript and Java through
//! tree-sitter (error-tolerant: a file with syntax errors yields what the parser recovered),
//! each qualified by its language's module system ([`Layout`]); other text files as line
//! windows.

mod cfg;
mod crates;
mod golang;
mod java;
mod layout;
mod module_path;
mod path_attr;
mod python;
mod reexports;
mod rust;
mod source;
mod text;
mod typescript;

pub use crates::{CrateLayout, ModuleLoc};
pub use golang::parse_go;
pub use java::parse_java;
pub use layout::{Layout, is_manifest, shapes_layout};
pub use module_path::module_path;
pub use path_attr::{PathModule, path_modules};
pub use python::{parse_python, parse_python_file};
pub use reexports::Reexport;
pub use rust::{parse_rust, parse_rust_file, parse_rust_in};
pub use text::{WINDOW_LINES, line_windows};
pub use typescript::parse_typescript;

/// Items of one file: parsed by its language at `loc` ([`Layout::locate`]), else line windows;
/// with its re-exports (Rust's `pub use`, Python's top-level `from … import` of its own
/// package; none for other languages yet).
pub fn parse_file(
    rel: &str,
    language: &str,
    loc: Option<&ModuleLoc>,
    text: &str,
) -> (Vec<ParsedItem>, Vec<Reexport>) {
    // The walks recurse once per nested block: a small file of thousands of nested `mod {}`s
    // or namespaces overflowed the stack and aborted the whole process, at every start.
    let parsed = matches!(
        language,
        "rust" | "python" | "go" | "typescript" | "javascript" | "java"
    );
    if parsed && loc.is_some() && too_deep(language, text) {
        tracing::warn!(
            file = rel,
            max = MAX_NESTING,
            "nested too deeply to parse; indexed as line windows"
        );
        return (line_windows(rel, text), Vec::new());
    }
    let items = match (language, loc) {
        ("rust", Some(loc)) => return parse_rust_file(loc, text),
        ("python", Some(loc)) => {
            return parse_python_file(loc, text, layout::is_package_init(rel));
        }
        ("go", Some(loc)) => parse_go(loc, text),
        ("typescript" | "javascript", Some(loc)) => parse_typescript(rel, loc, text),
        ("java", Some(loc)) => parse_java(loc, text),
        _ => line_windows(rel, text),
    };
    (items, Vec::new())
}

/// Deepest nesting of brackets (or, for Python, of indentation columns) a file is parsed at;
/// real code stays far below it (2,000 nested blocks still parsed on a worker's stack).
pub const MAX_NESTING: usize = 256;

/// Whether `text` nests deeper than [`MAX_NESTING`]: brackets counted through strings and
/// comments alike (an over-count only sends a file to line windows), and for Python the
/// indentation of a line, in columns.
fn too_deep(language: &str, text: &str) -> bool {
    let mut depth = 0usize;
    for b in text.bytes() {
        match b {
            b'{' | b'(' | b'[' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return true;
                }
            }
            b'}' | b')' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    language == "python"
        && text.lines().any(|l| {
            l.bytes()
                .take_while(|b| matches!(b, b' ' | b'\t'))
                .map(|b| if b == b'\t' { 8 } else { 1 })
                .sum::<usize>()
                > MAX_NESTING
        })
}

/// The signature and doc of the item named `name`, for parser tests.
#[cfg(test)]
pub(crate) fn signature_and_doc<'i>(
    items: &'i [ParsedItem],
    name: &str,
) -> Option<(&'i str, &'i str)> {
    items
        .iter()
        .find(|i| i.name == name)
        .map(|i| (i.signature.as_str(), i.doc.as_str()))
}

/// One line per item (kind, canonical path, lines, the doc's first line), for snapshots.
#[cfg(test)]
pub(crate) fn test_outline(items: &[ParsedItem]) -> String {
    items
        .iter()
        .map(|i| {
            format!(
                "{:<10} {:<50} L{}-{} {}",
                i.kind.as_str(),
                i.canon_path,
                i.line_start,
                i.line_end,
                i.doc.lines().next().unwrap_or("")
            )
            .trim_end()
            .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What an item is (mirrors `ploke.common.v1.ItemKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Free function.
    Function,
    /// Function in an impl or trait.
    Method,
    /// Struct.
    Struct,
    /// Enum.
    Enum,
    /// Union.
    Union,
    /// Trait.
    Trait,
    /// Impl block.
    Impl,
    /// Module.
    Module,
    /// Const.
    Const,
    /// Static.
    Static,
    /// Type alias.
    TypeAlias,
    /// `macro_rules!`.
    Macro,
    /// A class (Python, TypeScript/JavaScript, Java).
    Class,
    /// An interface (Go, TypeScript, Java).
    Interface,
    /// Lines of a non-Rust text file.
    TextWindow,
}

impl Kind {
    /// Lowercase name, as in the index.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Function => "function",
            Kind::Method => "method",
            Kind::Struct => "struct",
            Kind::Enum => "enum",
            Kind::Union => "union",
            Kind::Trait => "trait",
            Kind::Impl => "impl",
            Kind::Module => "module",
            Kind::Const => "const",
            Kind::Static => "static",
            Kind::TypeAlias => "type_alias",
            Kind::Macro => "macro",
            Kind::Class => "class",
            Kind::Interface => "interface",
            Kind::TextWindow => "text_window",
        }
    }

    /// Every kind.
    pub const ALL: [Kind; 15] = [
        Kind::Function,
        Kind::Method,
        Kind::Struct,
        Kind::Enum,
        Kind::Union,
        Kind::Trait,
        Kind::Impl,
        Kind::Module,
        Kind::Const,
        Kind::Static,
        Kind::TypeAlias,
        Kind::Macro,
        Kind::Class,
        Kind::Interface,
        Kind::TextWindow,
    ];
}

/// One item of a file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ParsedItem {
    /// Canonical path (Rust `crate::a::Type::method`, `crate::a::<Type as Trait>::method`;
    /// Python `pkg.mod.Class.method`; Go `example.com/m/pkg.Type.Method`; TypeScript
    /// `pkg/src/file.Class.method`; Java `com.acme.Class.method`); for text windows
    /// `path#Lstart-end`.
    pub canon_path: String,
    /// Bare name (`method`; for impls `impl Trait for Type`).
    pub name: String,
    /// Qualified name within its module (`Type::method`, `<Type as Trait>::method`).
    pub qualname: String,
    /// What it is.
    pub kind: Kind,
    /// First byte, including doc comments and attributes directly above.
    pub byte_start: usize,
    /// End byte (exclusive).
    pub byte_end: usize,
    /// First line (1-based), including doc comments and attributes.
    pub line_start: u32,
    /// Last line (1-based, inclusive).
    pub line_end: u32,
    /// Declaration without the body (`pub fn load(path: &Path) -> Result<Config>`).
    pub signature: String,
    /// Doc comment text (without `///`).
    pub doc: String,
    /// The crate it belongs to, as code names it (`my_crate`); empty when no Cargo manifest
    /// accounts for its file.
    #[serde(default)]
    pub crate_name: String,
    /// Test code its attributes say it is: a Rust item with `#[test]` (`#[tokio::test]`,
    /// `#[bench]`, …) or under `#[cfg(test)]`, itself or in a module, impl or trait. (Test code
    /// known by its path or file, `mod tests` or `test_*.py`: [`crate::rank::is_test_code`].)
    #[serde(default)]
    pub test: bool,
}

impl ParsedItem {
    /// Its name as answers give it: none for a text window (its `name` is a line range).
    pub fn answered_name(&self) -> &str {
        match self.kind {
            Kind::TextWindow => "",
            _ => &self.name,
        }
    }
}

pub use ploke_runtime::language::language_of;

#[cfg(test)]
mod nesting_tests {
    use super::*;

    fn loc() -> ModuleLoc {
        ModuleLoc::default()
    }

    #[test]
    fn blocks_nested_past_the_limit_are_line_windows_not_a_stack_overflow() {
        let nested = |open: &str, n: usize, inner: &str| {
            let mut s = String::new();
            for i in 0..n {
                s.push_str(&open.replace("{i}", &i.to_string()));
            }
            s.push_str(inner);
            s.push_str(&"}\n".repeat(n));
            s
        };
        for (rel, language, text) in [
            (
                "src/lib.rs",
                "rust",
                nested("mod m{i} {\n", 5_000, "pub fn f() {}\n"),
            ),
            (
                "src/a.ts",
                "typescript",
                nested("namespace N{i} {\n", 3_000, "export function f() {}\n"),
            ),
            (
                "src/D.java",
                "java",
                nested("class C{i} {\n", 20_000, "void f() {}\n"),
            ),
        ] {
            let (items, _) = parse_file(rel, language, Some(&loc()), &text);
            assert!(!items.is_empty(), "{rel}");
            assert!(items.iter().all(|i| i.kind == Kind::TextWindow), "{rel}");
        }
        let python: String = (0..300)
            .map(|i| format!("{}class C{i}:\n", " ".repeat(i)))
            .collect();
        assert!(too_deep("python", &python));
        // Nesting real code reaches is parsed as before.
        let (items, _) = parse_file(
            "src/lib.rs",
            "rust",
            Some(&loc()),
            &nested("mod m{i} {\n", 100, "pub fn deep() {}\n"),
        );
        assert!(items.iter().any(|i| i.name == "deep"), "{items:?}");
    }
}
