//! Turning files into code items: Rust through tree-sitter (error-tolerant: a file with syntax
//! errors yields what the parser recovered), other text files as line windows.

mod crates;
mod module_path;
mod rust;
mod text;

pub use crates::{CrateLayout, ModuleLoc};
pub use module_path::module_path;
pub use rust::{parse_rust, parse_rust_in};
pub use text::{WINDOW_LINES, line_windows};

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
            Kind::TextWindow => "text_window",
        }
    }

    /// Every kind.
    pub const ALL: [Kind; 13] = [
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
        Kind::TextWindow,
    ];
}

/// One item of a file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ParsedItem {
    /// Canonical path (`crate::a::Type::method`, `crate::a::<Type as Trait>::method`); for text
    /// windows `path#Lstart-end`.
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
}

pub use ploke_runtime::language::language_of;
