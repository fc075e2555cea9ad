//! TypeScript and JavaScript items through tree-sitter (the TSX grammar reads JavaScript and
//! JSX too): functions, generators, `const f = () => …` and `function` expressions bound at
//! the top, classes with their methods and arrow-function fields, interfaces with their
//! method signatures, type aliases, enums, namespaces, and CommonJS assignments
//! (`exports.f = function`, `Type.prototype.m = function`); each with the `/** … */` comment
//! directly above (above its `export` when exported). Overload signatures followed by their
//! implementation are one item with it. Qualified by the module's path
//! (`my-pkg/src/util/strings.Trimmer.trim`).

use std::collections::{HashMap, HashSet};

use tree_sitter::{Language, Node};

use super::source::{DocStyle, Found, Source, block_doc, child_of, items_of, named_children};
use super::{Kind, ModuleLoc, ParsedItem};

/// Parses one TypeScript or JavaScript file at `loc` (its module path as the one segment).
/// `rel`'s extension picks the grammar: `.ts`, `.mts`, `.cts` TypeScript, else TSX.
pub fn parse_typescript(rel: &str, loc: &ModuleLoc, src: &str) -> Vec<ParsedItem> {
    let plain_ts = [".ts", ".mts", ".cts"].iter().any(|e| rel.ends_with(e));
    let language: Language = if plain_ts {
        tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into()
    } else {
        tree_sitter_typescript::LANGUAGE_TSX.into()
    };
    items_of(&language, src, &loc.crate_name, |source, root| {
        source.set_module(loc.segments.first().cloned().unwrap_or_default());
        let mut walker = Walker {
            source,
            overloads: HashMap::new(),
        };
        walker.statements(root, &[]);
    })
}

struct Walker<'s, 'a> {
    source: &'s mut Source<'a>,
    /// Where the overload signatures of a function still to come start, by qualified name.
    overloads: HashMap<String, usize>,
}

/// A statement's declaration (inside its `export`, if exported).
fn declaration(node: Node<'_>) -> Node<'_> {
    match node.kind() {
        "export_statement" => node.child_by_field_name("declaration").unwrap_or(node),
        _ => node,
    }
}

fn is_function_value(node: Node<'_>) -> bool {
    matches!(
        node.kind(),
        "arrow_function" | "function_expression" | "function" | "generator_function"
    )
}

impl Walker<'_, '_> {
    /// Statements of a program or namespace body. `outer`: enclosing namespaces.
    fn statements(&mut self, container: Node<'_>, outer: &[String]) {
        let nodes = named_children(container);
        let implemented: HashSet<&str> = nodes
            .iter()
            .map(|n| declaration(*n))
            .filter(|d| d.kind() == "function_declaration")
            .filter_map(|d| self.source.field(d, "name"))
            .collect();
        for node in nodes.iter().copied() {
            let decl = declaration(node);
            let overload = (decl.kind() == "function_signature")
                .then(|| self.source.field(decl, "name"))
                .flatten()
                .filter(|name| implemented.contains(name));
            if let Some(name) = overload {
                // Part of the implementation's item, which starts at the first signature.
                let start = self.doc_above(node).map_or(node.start_byte(), |(s, _)| s);
                self.overloads
                    .entry(scoped(outer, name).join("."))
                    .or_insert(start);
                continue;
            }
            self.statement(node, node, outer);
        }
    }

    /// The `/** … */` doc comment above a statement: its first byte and its text.
    fn doc_above(&self, node: Node<'_>) -> Option<(usize, String)> {
        let (start, lines) = self.source.comments_above(
            node,
            DocStyle::Block,
            |n| n.kind() == "comment",
            |t| t.starts_with("/**") && !t.starts_with("/***"),
        )?;
        let doc = lines
            .iter()
            .map(|l| block_doc(l))
            .collect::<Vec<_>>()
            .join("\n");
        Some((start, doc))
    }

    /// One statement; `outer_node` is what the item spans (its `export` wrapper).
    fn statement(&mut self, outer_node: Node<'_>, node: Node<'_>, outer: &[String]) {
        match node.kind() {
            "export_statement" => {
                if let Some(decl) = node.child_by_field_name("declaration") {
                    self.statement(outer_node, decl, outer);
                } else if let Some(value) = node.child_by_field_name("value")
                    && is_function_value(value)
                    && let Some(name) = self.source.field(value, "name")
                {
                    // `export default function name() {}` parses as a value in some forms.
                    self.item(outer_node, value, Kind::Function, name, outer);
                }
            }
            // A function expression stands alone only where the parser recovered from an error.
            "function_declaration"
            | "generator_function_declaration"
            | "function_signature"
            | "function_expression" => {
                if let Some(name) = self.source.field(node, "name") {
                    self.item(outer_node, node, Kind::Function, name, outer);
                }
            }
            "class_declaration" | "abstract_class_declaration" | "class" => {
                if let Some(name) = self.source.field(node, "name") {
                    self.item(outer_node, node, Kind::Class, name, outer);
                    if let Some(body) = node.child_by_field_name("body") {
                        self.members(body, &scoped(outer, name));
                    }
                }
            }
            "interface_declaration" => {
                if let Some(name) = self.source.field(node, "name") {
                    self.item(outer_node, node, Kind::Interface, name, outer);
                    if let Some(body) = node.child_by_field_name("body") {
                        self.members(body, &scoped(outer, name));
                    }
                }
            }
            "type_alias_declaration" => {
                if let Some(name) = self.source.field(node, "name") {
                    self.item(outer_node, node, Kind::TypeAlias, name, outer);
                }
            }
            "enum_declaration" => {
                if let Some(name) = self.source.field(node, "name") {
                    self.item(outer_node, node, Kind::Enum, name, outer);
                }
            }
            "lexical_declaration" | "variable_declaration" => {
                let declarators: Vec<Node<'_>> = named_children(node)
                    .into_iter()
                    .filter(|d| d.kind() == "variable_declarator")
                    .collect();
                let lone = declarators.len() == 1;
                for d in declarators {
                    let (Some(name), Some(value)) = (
                        d.child_by_field_name("name"),
                        d.child_by_field_name("value"),
                    ) else {
                        continue;
                    };
                    if name.kind() == "identifier" && is_function_value(value) {
                        let span = if lone { outer_node } else { d };
                        let name = self.source.text(name);
                        self.item(span, value, Kind::Function, name, outer);
                    }
                }
            }
            "internal_module" | "module" => {
                let name = node
                    .child_by_field_name("name")
                    .or_else(|| node.named_child(0))
                    .map(|n| self.source.text(n).trim_matches(['"', '\'']).to_owned());
                let body = node
                    .child_by_field_name("body")
                    .or_else(|| child_of(node, |k| k == "statement_block"));
                if let (Some(name), Some(body)) = (name, body) {
                    self.item(outer_node, node, Kind::Module, &name, outer);
                    self.statements(body, &scoped(outer, &name));
                }
            }
            "ambient_declaration" => {
                for child in named_children(node) {
                    self.statement(outer_node, child, outer);
                }
            }
            // `namespace A {}` is an expression statement to the grammar.
            "expression_statement" => match node.named_child(0) {
                Some(inner) if inner.kind() == "internal_module" => {
                    self.statement(outer_node, inner, outer);
                }
                _ => self.assignment(node, outer),
            },
            "ERROR" => self.statements(node, outer),
            _ => {}
        }
    }

    /// Class and interface members.
    fn members(&mut self, body: Node<'_>, owner: &[String]) {
        for member in named_children(body) {
            let is_method = match member.kind() {
                "method_definition" | "abstract_method_signature" | "method_signature" => true,
                "public_field_definition" => member
                    .child_by_field_name("value")
                    .is_some_and(is_function_value),
                _ => false,
            };
            if !is_method {
                continue;
            }
            if let Some(name) = member.child_by_field_name("name") {
                let name = self.source.text(name).trim_matches(['"', '\'']).to_owned();
                self.item(member, member, Kind::Method, &name, owner);
            }
        }
    }

    /// `exports.f = function …`, `module.exports.f = …`, `Type.prototype.m = …`,
    /// `Type.m = …`.
    fn assignment(&mut self, statement: Node<'_>, outer: &[String]) {
        let Some(assign) = statement
            .named_child(0)
            .filter(|n| n.kind() == "assignment_expression")
        else {
            return;
        };
        let (Some(left), Some(right)) = (
            assign.child_by_field_name("left"),
            assign.child_by_field_name("right"),
        ) else {
            return;
        };
        if left.kind() != "member_expression" || !is_function_value(right) {
            return;
        }
        let path: Vec<&str> = self
            .source
            .text(left)
            .split('.')
            .map(str::trim)
            .filter(|s| !matches!(*s, "prototype" | "exports" | "module"))
            .collect();
        let Some((name, owner)) = path.split_last() else {
            return;
        };
        if name.is_empty()
            || owner.iter().any(|s| {
                !s.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
            })
        {
            return;
        }
        let kind = if owner.is_empty() {
            Kind::Function
        } else {
            Kind::Method
        };
        let mut scope = outer.to_vec();
        scope.extend(owner.iter().map(|s| (*s).to_owned()));
        let name = (*name).to_owned();
        self.item(statement, right, kind, &name, &scope);
    }

    fn item(
        &mut self,
        outer_node: Node<'_>,
        decl: Node<'_>,
        kind: Kind,
        name: &str,
        owner: &[String],
    ) {
        let qualname = scoped(owner, name).join(".");
        let (mut start, doc) = self
            .doc_above(outer_node)
            .unwrap_or((outer_node.start_byte(), String::new()));
        if kind == Kind::Function
            && let Some(first) = self.overloads.remove(&qualname)
        {
            start = start.min(first);
        }
        self.source.push(Found {
            outer: outer_node,
            decl,
            kind,
            name: name.to_owned(),
            qualname,
            start,
            doc,
        });
    }
}

fn scoped(outer: &[String], name: &str) -> Vec<String> {
    let mut v = outer.to_vec();
    v.push(name.to_owned());
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{signature_and_doc, test_outline};

    const TS: &str = r#"import { x } from "./x";

/**
 * Creates an Observable that emits the mapped values.
 * @param project The function.
 */
export function map<T, R>(project: (v: T) => R): OperatorFunction<T, R> {
  return (source) => source;
}

/** A subscriber. */
export abstract class Subscriber<T> extends Subscription implements Observer<T> {
  /** Pushes a value. */
  next(value: T): void {}
  protected abstract _next(value: T): void;
  handler = (e: Event) => {};
  count = 0;
}

export interface Observer<T> {
  /** Receives a value. */
  next: (value: T) => void;
  complete(): void;
}

export type Predicate<T> = (v: T) => boolean;
export enum Kind { A, B }

/** Two at once. */
export const identity = <T>(x: T): T => x, other = function () {};

namespace Util {
  export function helper(): void {
    function inner() {}
  }
}

export default function main() {}

/** @deprecated Pass an array. */
export function concat<T>(a: T): T;
export function concat<T>(a: T, b: T): T;
/** Concatenates its arguments. */
export function concat(...args: any[]): any {
  return args;
}

declare function ambient(x: number): void;

function broken( {
}

function after() {}
"#;

    const JS: &str = r#"'use strict';

/**
 * Register a command.
 */
exports.command = function command(name) {
  return name;
};

/** Parses the options. */

Command.prototype.parseOptions = function (argv) {};

module.exports.helper = (x) => <div>{x}</div>;
"#;

    #[test]
    fn typescript_items_with_jsdoc_and_module_paths() {
        let loc = ModuleLoc {
            crate_name: "rxjs".into(),
            segments: vec!["rxjs/src/operators/map".into()],
        };
        let items = parse_typescript("src/operators/map.ts", &loc, TS);
        insta::assert_snapshot!("typescript", test_outline(&items));
        let map = signature_and_doc(&items, "map");
        assert_eq!(
            map,
            Some((
                "export function map<T, R>(project: (v: T) => R): OperatorFunction<T, R>",
                "Creates an Observable that emits the mapped values.\n@param project The function."
            ))
        );
        let loc = ModuleLoc {
            crate_name: String::new(),
            segments: vec!["lib/command".into()],
        };
        insta::assert_snapshot!(
            "javascript",
            test_outline(&parse_typescript("lib/command.js", &loc, JS))
        );
    }
}
