//! Rust items through tree-sitter. Error-tolerant: items inside `ERROR` nodes are still
//! collected, and the bodies of brace-delimited item-level macro invocations
//! (`cfg_feature! { ... }`) are parsed as items too. Items inside function bodies are not items.

use tree_sitter::{Node, Parser};

use super::cfg;
use super::reexports::{self, Reexport};
use super::source::{Lines, child_of, collapse_ws, named_children};
use super::{Kind, ModuleLoc, ParsedItem, module_path};

/// How deep macro bodies are re-parsed.
const MAX_MACRO_DEPTH: usize = 3;

#[derive(Debug, Clone)]
enum Scope {
    Module,
    Impl {
        self_ty: String,
        trait_: Option<String>,
    },
    Trait {
        name: String,
    },
}

struct Walker<'a> {
    src: &'a str,
    lines: Lines,
    items: Vec<ParsedItem>,
    reexports: Vec<Reexport>,
    crate_name: &'a str,
    /// The file's `macro_rules!` that wrap each item given in a `#[cfg]` ([`cfg::wrapping_predicate`]),
    /// by name, with the predicate.
    cfg_macros: Vec<(String, String)>,
    /// Whether the code being walked is compiled out on this host ([`cfg::left_out`]): its
    /// re-exports bind nothing here.
    left_out: bool,
    /// Whether the code being walked is test code by its attributes (a module, impl or trait
    /// under `#[cfg(test)]`): its items are [`ParsedItem::test`].
    in_test: bool,
    /// Re-exports compiled out on this host: kept only where nothing else binds their name in
    /// their module ([`parse_rust_file`]).
    compiled_out_reexports: Vec<Reexport>,
    /// The names of module-level items the host compiles, with their module: a re-export
    /// compiled out gives way to those too.
    compiled_items: Vec<(Vec<String>, String)>,
}

/// Parses one Rust file (`rel` relative to the workspace root) into items, its module path
/// from its place in the file tree.
pub fn parse_rust(rel: &str, src: &str) -> Vec<ParsedItem> {
    let loc = ModuleLoc {
        crate_name: String::new(),
        segments: module_path(rel),
    };
    parse_rust_in(&loc, src)
}

/// Parses one Rust file at `loc` (its crate and module, [`super::CrateLayout`]) into items.
pub fn parse_rust_in(loc: &ModuleLoc, src: &str) -> Vec<ParsedItem> {
    parse_rust_file(loc, src).0
}

/// [`parse_rust_in`], with the file's re-exports (`pub use`) in file order.
pub fn parse_rust_file(loc: &ModuleLoc, src: &str) -> (Vec<ParsedItem>, Vec<Reexport>) {
    let mut walker = Walker {
        src,
        lines: Lines::new(src),
        items: Vec::new(),
        reexports: Vec::new(),
        crate_name: &loc.crate_name,
        cfg_macros: Vec::new(),
        left_out: false,
        in_test: false,
        compiled_out_reexports: Vec::new(),
        compiled_items: Vec::new(),
    };
    walker.parse_region(0, src.len(), &loc.segments, &Scope::Module, 0);
    walker
        .items
        .sort_by_key(|i| (i.byte_start, std::cmp::Reverse(i.byte_end)));
    // A re-export compiled out on this host gives way to one that is not, of the same name in
    // the same module (reqwest's wasm `Client` to its hyper one, `windows::Foo` to `unix::Foo`
    // on Linux); alone, it stays (a wasm-only crate keeps its public paths).
    let mut reexports = walker.reexports;
    let alone = reexports::alone(
        walker.compiled_out_reexports,
        &reexports,
        &walker.compiled_items,
    );
    reexports.extend(alone);
    (walker.items, reexports)
}

fn new_parser() -> Option<Parser> {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_rust::LANGUAGE.into())
        .ok()?;
    Some(parser)
}

/// `Foo<T>` → `Foo`, `&'a mut Bar<'a, T>` → `&'a mut Bar`.
fn strip_generics(s: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for c in s.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    collapse_ws(&out)
}

impl Walker<'_> {
    fn text(&self, node: Node<'_>, offset: usize) -> &str {
        self.src
            .get(node.start_byte() + offset..node.end_byte() + offset)
            .unwrap_or("")
    }

    /// Parses `src[start..end]` and collects its items.
    fn parse_region(
        &mut self,
        start: usize,
        end: usize,
        module: &[String],
        scope: &Scope,
        depth: usize,
    ) {
        let Some(mut parser) = new_parser() else {
            return;
        };
        let Some(region) = self.src.get(start..end) else {
            return;
        };
        let Some(tree) = parser.parse(region, None) else {
            return;
        };
        self.walk(tree.root_node(), start, module, scope, depth);
    }

    fn walk(
        &mut self,
        container: Node<'_>,
        offset: usize,
        module: &[String],
        scope: &Scope,
        depth: usize,
    ) {
        for node in named_children(container) {
            match node.kind() {
                "function_item" => {
                    let kind = match scope {
                        Scope::Module => Kind::Function,
                        Scope::Impl { .. } | Scope::Trait { .. } => Kind::Method,
                    };
                    self.push(node, offset, module, scope, kind);
                }
                "struct_item" => self.push(node, offset, module, scope, Kind::Struct),
                "enum_item" => self.push(node, offset, module, scope, Kind::Enum),
                "union_item" => self.push(node, offset, module, scope, Kind::Union),
                "type_item" => self.push(node, offset, module, scope, Kind::TypeAlias),
                "const_item" => self.push(node, offset, module, scope, Kind::Const),
                "static_item" => self.push(node, offset, module, scope, Kind::Static),
                "macro_definition" => {
                    self.push(node, offset, module, scope, Kind::Macro);
                    // A definition compiled out here defines nothing; a later one replaces an
                    // earlier one of the same name.
                    let defined = !self.left_out && !self.compiled_out(node, offset);
                    if let (Some(name), true) = (node.child_by_field_name("name"), defined) {
                        let name = self.text(name, offset).to_owned();
                        self.cfg_macros.retain(|(m, _)| *m != name);
                        if let Some(predicate) = cfg::wrapping_predicate(self.text(node, offset)) {
                            self.cfg_macros.push((name, predicate.to_owned()));
                        }
                    }
                }
                "trait_item" => {
                    self.push(node, offset, module, scope, Kind::Trait);
                    if let (Some(name), Some(body)) = (
                        node.child_by_field_name("name"),
                        node.child_by_field_name("body"),
                    ) {
                        let inner = Scope::Trait {
                            name: self.text(name, offset).to_owned(),
                        };
                        let test = self.test_attributed(node, offset);
                        self.walk_test_if(test, |w| w.walk(body, offset, module, &inner, depth));
                    }
                }
                "impl_item" => {
                    self.push(node, offset, module, scope, Kind::Impl);
                    if let (Some(ty), Some(body)) = (
                        node.child_by_field_name("type"),
                        node.child_by_field_name("body"),
                    ) {
                        let inner = Scope::Impl {
                            self_ty: strip_generics(self.text(ty, offset)),
                            trait_: node
                                .child_by_field_name("trait")
                                .map(|t| collapse_ws(self.text(t, offset))),
                        };
                        let test = self.test_attributed(node, offset);
                        self.walk_test_if(test, |w| w.walk(body, offset, module, &inner, depth));
                    }
                }
                "mod_item" => {
                    if let (Some(name), Some(body)) = (
                        node.child_by_field_name("name"),
                        node.child_by_field_name("body"),
                    ) {
                        self.push(node, offset, module, scope, Kind::Module);
                        let mut inner = module.to_vec();
                        inner.push(self.text(name, offset).to_owned());
                        let out = self.compiled_out(node, offset);
                        let test = self.test_attributed(node, offset);
                        self.walk_out_if(out, |w| {
                            w.walk_test_if(test, |w| {
                                w.walk(body, offset, &inner, &Scope::Module, depth);
                            });
                        });
                    }
                }
                "macro_invocation" if depth < MAX_MACRO_DEPTH => {
                    // `cfg_feature! { items }`: parse the braces' content as items — in a
                    // module, and in an impl or trait body (methods under mio's
                    // `cfg_io_source! { pub fn register(..) }`), where they are its methods.
                    if let Some(tt) = child_of(node, |k| k == "token_tree") {
                        let text = self.text(tt, offset);
                        if text.starts_with('{') && text.ends_with('}') && text.len() >= 2 {
                            let start = tt.start_byte() + offset + 1;
                            let end = tt.end_byte() + offset - 1;
                            let out = self.invokes_left_out(node, offset)
                                || self.compiled_out(node, offset);
                            let branches = self.cfg_if_branches(node, offset, start..end);
                            self.walk_out_if(out, |w| match branches {
                                // `cfg_if! { if #[cfg(unix)] { .. } else { .. } }`: the first
                                // branch the host may compile is in, the others out.
                                Some(branches) => {
                                    let mut taken = false;
                                    for (compiled, range) in branches {
                                        w.walk_out_if(taken || !compiled, |w| {
                                            w.parse_region(
                                                range.start,
                                                range.end,
                                                module,
                                                scope,
                                                depth + 1,
                                            );
                                        });
                                        taken |= compiled;
                                    }
                                }
                                None => w.parse_region(start, end, module, scope, depth + 1),
                            });
                        }
                    }
                }
                "use_declaration" if matches!(scope, Scope::Module) => {
                    let found = reexports::of_use(
                        node,
                        |n| self.text(n, offset).to_owned(),
                        (self.crate_name, module),
                    );
                    if self.left_out || self.compiled_out(node, offset) {
                        self.compiled_out_reexports.extend(found);
                    } else {
                        self.reexports.extend(found);
                    }
                }
                "ERROR" | "declaration_list" => self.walk(node, offset, module, scope, depth),
                _ => {}
            }
        }
    }

    /// Runs `walk` with the code it walks compiled out on this host if `out` (or already).
    fn walk_out_if(&mut self, out: bool, walk: impl FnOnce(&mut Self)) {
        let was = self.left_out;
        self.left_out |= out;
        walk(self);
        self.left_out = was;
    }

    /// Runs `walk` with the code it walks test code if `test` (or already).
    fn walk_test_if(&mut self, test: bool, walk: impl FnOnce(&mut Self)) {
        let was = self.in_test;
        self.in_test |= test;
        walk(self);
        self.in_test = was;
    }

    /// Whether an attribute directly above `node` makes it test code: `#[cfg(test)]` (or
    /// `all(test, ..)`), or a test harness's (`#[test]`, `#[tokio::test]`,
    /// `#[tokio::test(flavor = ..)]`, `#[bench]`, `#[rstest]`, `#[test_case(..)]`).
    fn test_attributed(&self, node: Node<'_>, offset: usize) -> bool {
        self.any_attribute(node, offset, |text| {
            cfg::predicate_of(text).is_some_and(cfg::test_only) || is_test_harness(text)
        })
    }

    /// Whether one of the `#[cfg]` attributes directly above `node` leaves it out on this host.
    fn compiled_out(&self, node: Node<'_>, offset: usize) -> bool {
        self.any_attribute(node, offset, |text| {
            cfg::predicate_of(text).is_some_and(cfg::left_out)
        })
    }

    /// Whether one of the attributes directly above `node` (comments between them allowed)
    /// satisfies `wanted`, given its text.
    fn any_attribute(&self, node: Node<'_>, offset: usize, wanted: impl Fn(&str) -> bool) -> bool {
        let mut prev = node.prev_sibling();
        while let Some(p) = prev {
            match p.kind() {
                "attribute_item" if wanted(self.text(p, offset)) => return true,
                "attribute_item" | "line_comment" | "block_comment" => {}
                _ => return false,
            }
            prev = p.prev_sibling();
        }
        false
    }

    /// The branches of a `cfg_if!` invocation whose braces' content is `src[inside]`: whether
    /// the host may compile each (its predicate not false for certain; `else` always), and the
    /// bytes of its body; none for another macro or a body not of that shape.
    fn cfg_if_branches(
        &self,
        node: Node<'_>,
        offset: usize,
        inside: std::ops::Range<usize>,
    ) -> Option<Vec<(bool, std::ops::Range<usize>)>> {
        let name = self.text(node.child_by_field_name("macro")?, offset);
        if name.rsplit("::").next() != Some("cfg_if") {
            return None;
        }
        let body = self.src.get(inside.clone())?;
        let branches = cfg::if_branches(body)?;
        Some(
            branches
                .into_iter()
                .map(|(predicate, range)| {
                    let compiled = predicate.is_none_or(|p| !cfg::left_out(p));
                    (
                        compiled,
                        inside.start + range.start..inside.start + range.end,
                    )
                })
                .collect(),
        )
    }

    /// Whether a macro invocation is of one of the file's cfg-wrapping macros whose predicate
    /// leaves its items out on this host (reqwest's `if_wasm! { ... }`).
    fn invokes_left_out(&self, node: Node<'_>, offset: usize) -> bool {
        let Some(name) = node.child_by_field_name("macro") else {
            return false;
        };
        let name = self.text(name, offset);
        let name = name.rsplit("::").next().unwrap_or(name);
        self.cfg_macros
            .iter()
            .any(|(m, predicate)| m == name && cfg::left_out(predicate))
    }

    /// Doc comments and attributes directly above `node`: (first byte, doc text).
    fn leading(&self, node: Node<'_>, offset: usize) -> (usize, String) {
        let mut start = node.start_byte();
        let mut docs = Vec::new();
        let mut row = node.start_position().row;
        let mut prev = node.prev_sibling();
        while let Some(p) = prev {
            let text = self.text(p, offset);
            let is_doc =
                p.kind() == "line_comment" && text.starts_with("///") && !text.starts_with("////")
                    || p.kind() == "block_comment" && text.starts_with("/**");
            let is_attr = p.kind() == "attribute_item";
            if !(is_doc || is_attr) || p.end_position().row + 1 < row {
                break;
            }
            if is_doc {
                docs.push(
                    text.trim_start_matches("///")
                        .trim_start_matches("/**")
                        .trim_end_matches("*/")
                        .trim()
                        .to_owned(),
                );
            }
            start = p.start_byte();
            row = p.start_position().row;
            prev = p.prev_sibling();
        }
        docs.reverse();
        (start + offset, docs.join("\n"))
    }

    fn signature(&self, node: Node<'_>, offset: usize) -> String {
        let end = node
            .child_by_field_name("body")
            .map_or(node.end_byte(), |b| b.start_byte());
        let raw = self
            .src
            .get(node.start_byte() + offset..end + offset)
            .unwrap_or("");
        let mut sig = collapse_ws(raw);
        if sig.chars().count() > 300 {
            sig = sig.chars().take(300).collect::<String>() + "…";
        }
        sig.trim_end_matches([';', '{', ' ']).to_owned()
    }

    fn push(
        &mut self,
        node: Node<'_>,
        offset: usize,
        module: &[String],
        scope: &Scope,
        kind: Kind,
    ) {
        let name = match kind {
            Kind::Impl => {
                let ty = node
                    .child_by_field_name("type")
                    .map(|t| strip_generics(self.text(t, offset)))
                    .unwrap_or_default();
                match node.child_by_field_name("trait") {
                    Some(t) => format!("impl {} for {ty}", collapse_ws(self.text(t, offset))),
                    None => format!("impl {ty}"),
                }
            }
            _ => match node.child_by_field_name("name") {
                Some(n) => self.text(n, offset).to_owned(),
                None => return,
            },
        };
        if name.is_empty() {
            return;
        }
        if matches!(scope, Scope::Module) && !self.left_out && !self.compiled_out(node, offset) {
            self.compiled_items.push((module.to_vec(), name.clone()));
        }
        let qualname = match (kind, scope) {
            (Kind::Macro, _) => format!("{name}!"),
            (_, Scope::Module) => name.clone(),
            (
                _,
                Scope::Impl {
                    self_ty,
                    trait_: None,
                },
            ) => format!("{self_ty}::{name}"),
            (
                _,
                Scope::Impl {
                    self_ty,
                    trait_: Some(t),
                },
            ) => format!("<{self_ty} as {t}>::{name}"),
            (_, Scope::Trait { name: t }) => format!("{t}::{name}"),
        };
        let mut canon = String::from("crate");
        for m in module {
            canon.push_str("::");
            canon.push_str(m);
        }
        canon.push_str("::");
        canon.push_str(&qualname);
        let (byte_start, doc) = self.leading(node, offset);
        let byte_end = node.end_byte() + offset;
        let line_end = self
            .lines
            .line_of(byte_end.saturating_sub(1).max(byte_start));
        self.items.push(ParsedItem {
            canon_path: canon,
            name,
            qualname,
            kind,
            byte_start,
            byte_end,
            line_start: self.lines.line_of(byte_start),
            line_end,
            signature: self.signature(node, offset),
            doc,
            crate_name: self.crate_name.to_owned(),
            test: self.in_test || self.test_attributed(node, offset),
        });
    }
}

/// Whether an attribute's text is a test harness's (`#[test]`, `#[tokio::test(..)]`,
/// `#[bench]`, `#[rstest]`, `#[test_case(..)]`, `#[wasm_bindgen_test]`).
fn is_test_harness(attribute: &str) -> bool {
    let Some(inner) = attribute.trim().strip_prefix("#[") else {
        return false;
    };
    let path = inner
        .split(|c: char| c == '(' || c == ']' || c == '=' || c.is_whitespace())
        .next()
        .unwrap_or("");
    let last = path.rsplit("::").next().unwrap_or(path);
    matches!(
        last,
        "test" | "bench" | "rstest" | "test_case" | "wasm_bindgen_test"
    )
}

#[cfg(test)]
mod tests;
