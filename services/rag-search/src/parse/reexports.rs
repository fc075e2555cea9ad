//! Rust re-exports: the `pub use` declarations of a module, each a name the module makes
//! public for an item defined elsewhere (`pub use self::async_impl::Client;` at reqwest's root
//! is why `reqwest::Client` is `crate::async_impl::client::Client`). Kept as written; resolving
//! them takes the whole crate ([`crate::names`]).

use tree_sitter::Node;

use super::source::named_children;

/// One name a module makes public with `pub use`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reexport {
    /// The crate it belongs to, as code names it (empty when no Cargo manifest accounts for
    /// its file).
    pub crate_name: String,
    /// The module declaring it, as segments below its crate's root (`["async_impl"]`).
    pub module: Vec<String>,
    /// The name it binds there (`Client`, or the `as` alias); empty for a glob (`x::*`).
    pub name: String,
    /// The path as written, `self`, `super` and `crate` kept (`["self", "client", "Client"]`).
    pub target: Vec<String>,
}

/// Of the re-exports compiled out on this host (`compiled_out`), those nothing the host
/// compiles binds in their stead: a re-export of the same name in the same module
/// (`compiled`), or an item defined there (`items`: module and name); a glob gives way to a
/// glob of a sibling module (`unix::*` for `windows::*`), not to any glob of its module.
/// reqwest's wasm `Client` gives way to its hyper one; a wasm-only crate keeps its own.
pub(super) fn alone(
    compiled_out: Vec<Reexport>,
    compiled: &[Reexport],
    items: &[(Vec<String>, String)],
) -> Vec<Reexport> {
    let parent = |r: &Reexport| r.target.split_last().map(|(_, p)| p.to_vec());
    compiled_out
        .into_iter()
        .filter(|r| {
            let rival = |k: &Reexport| {
                k.module == r.module
                    && if r.name.is_empty() {
                        k.name.is_empty() && parent(k) == parent(r)
                    } else {
                        k.name == r.name
                    }
            };
            let defined = |(module, name): &(Vec<String>, String)| {
                !r.name.is_empty() && *module == r.module && *name == r.name
            };
            !compiled.iter().any(rival) && !items.iter().any(defined)
        })
        .collect()
}

/// The re-exports of one `use_declaration` in `module`, if it is public (`pub`, `pub(crate)`).
pub(super) fn of_use(
    node: Node<'_>,
    text: impl Fn(Node<'_>) -> String,
    (crate_name, module): (&str, &[String]),
) -> Vec<Reexport> {
    let public = named_children(node)
        .into_iter()
        .any(|c| c.kind() == "visibility_modifier" && !text(c).contains("self"));
    let Some(argument) = node.child_by_field_name("argument").filter(|_| public) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    tree(argument, &text, &[], module, &mut out);
    for r in &mut out {
        crate_name.clone_into(&mut r.crate_name);
    }
    out
}

/// Collects the bindings of a use tree under `prefix`.
fn tree(
    node: Node<'_>,
    text: &impl Fn(Node<'_>) -> String,
    prefix: &[String],
    module: &[String],
    out: &mut Vec<Reexport>,
) {
    let bind = |name: String, target: Vec<String>, out: &mut Vec<Reexport>| {
        out.push(Reexport {
            crate_name: String::new(),
            module: module.to_vec(),
            name,
            target,
        });
    };
    match node.kind() {
        "identifier" | "self" | "super" | "crate" | "scoped_identifier" => {
            let Some(segments) = path(node, text) else {
                return;
            };
            let mut target = prefix.to_vec();
            target.extend(segments);
            // `{self, ..}` binds the module the list is under by its own name.
            if target.last().is_some_and(|s| s == "self") && target.len() > 1 {
                target.pop();
            }
            match target.last() {
                Some(last) if !matches!(last.as_str(), "self" | "super" | "crate") => {
                    bind(last.clone(), target, out);
                }
                _ => {}
            }
        }
        "use_as_clause" => {
            let (Some(p), Some(alias)) = (
                node.child_by_field_name("path"),
                node.child_by_field_name("alias"),
            ) else {
                return;
            };
            let Some(segments) = path(p, text) else {
                return;
            };
            let mut target = prefix.to_vec();
            target.extend(segments);
            if target.last().is_some_and(|s| s == "self") {
                target.pop();
            }
            let alias = text(alias);
            // `as _` binds no name.
            if alias != "_" && !target.is_empty() {
                bind(alias, target, out);
            }
        }
        "scoped_use_list" => {
            let mut inner = prefix.to_vec();
            if let Some(p) = node.child_by_field_name("path") {
                let Some(segments) = path(p, text) else {
                    return;
                };
                inner.extend(segments);
            }
            if let Some(list) = node.child_by_field_name("list") {
                tree(list, text, &inner, module, out);
            }
        }
        "use_list" => {
            for child in named_children(node) {
                tree(child, text, prefix, module, out);
            }
        }
        "use_wildcard" => {
            let mut target = prefix.to_vec();
            if let Some(p) = named_children(node).first().copied() {
                let Some(segments) = path(p, text) else {
                    return;
                };
                target.extend(segments);
            }
            if !target.is_empty() {
                bind(String::new(), target, out);
            }
        }
        _ => {}
    }
}

/// The segments of a simple path (`a::b::C`, `self`, `super::x`); none for generic or
/// bracketed paths and macro variables.
fn path(node: Node<'_>, text: &impl Fn(Node<'_>) -> String) -> Option<Vec<String>> {
    match node.kind() {
        "identifier" | "self" | "super" | "crate" => Some(vec![text(node)]),
        "scoped_identifier" => {
            let mut segments = match node.child_by_field_name("path") {
                Some(p) => path(p, text)?,
                // `::name`: a path from the extern prelude.
                None => vec![String::from("::")],
            };
            segments.push(text(node.child_by_field_name("name")?));
            Some(segments)
        }
        _ => None,
    }
}
