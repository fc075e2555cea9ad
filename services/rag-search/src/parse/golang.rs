//! Go items through tree-sitter: functions, methods (`Type.Method`, the receiver's pointer and
//! type parameters dropped), struct, interface and other type declarations, interface methods
//! and constants, each with the `//` comment lines directly above; qualified by the package's
//! import path (`github.com/spf13/cobra.Command.Execute`).

use tree_sitter::Node;

use super::source::{
    DocStyle, Found, Source, child_of, items_of, named_children, trim_blank_lines,
};
use super::{Kind, ModuleLoc, ParsedItem};

/// Parses one Go file at `loc` (its package's import path as the one segment; without it the
/// `package` clause names the package).
pub fn parse_go(loc: &ModuleLoc, src: &str) -> Vec<ParsedItem> {
    items_of(
        &tree_sitter_go::LANGUAGE.into(),
        src,
        &loc.crate_name,
        |source, root| {
            let package = match loc.segments.first() {
                Some(p) if !p.is_empty() => p.clone(),
                _ => package_name(source, root).unwrap_or_default(),
            };
            source.set_module(package);
            walk(source, root);
        },
    )
}

fn package_name(source: &Source<'_>, root: Node<'_>) -> Option<String> {
    let clause = child_of(root, |k| k == "package_clause")?;
    let name = clause.named_child(0)?;
    Some(source.text(name).to_owned())
}

fn walk(source: &mut Source<'_>, container: Node<'_>) {
    for node in named_children(container) {
        match node.kind() {
            "function_declaration" => {
                if let Some(name) = source.field(node, "name") {
                    item(source, node, node, (Kind::Function, name, None));
                }
            }
            "method_declaration" => {
                let receiver = node
                    .child_by_field_name("receiver")
                    .and_then(|r| receiver_type(source, r));
                if let Some(name) = source.field(node, "name") {
                    item(
                        source,
                        node,
                        node,
                        (Kind::Method, name, receiver.as_deref()),
                    );
                }
            }
            "type_declaration" => types(source, node),
            "const_declaration" => {
                let specs = named_children(node)
                    .into_iter()
                    .filter(|n| n.kind() == "const_spec");
                for spec in specs {
                    // A lone spec is documented above `const`; one of a group above itself.
                    let outer = if node.named_child_count() == 1 {
                        node
                    } else {
                        spec
                    };
                    if let Some(name) = source.field(spec, "name") {
                        item(source, outer, spec, (Kind::Const, name, None));
                    }
                }
            }
            "ERROR" => walk(source, node),
            _ => {}
        }
    }
}

/// `type X struct {…}`, `type ( A int; B interface{…} )`, `type A = B`.
fn types(source: &mut Source<'_>, decl: Node<'_>) {
    let specs: Vec<Node<'_>> = named_children(decl)
        .into_iter()
        .filter(|n| matches!(n.kind(), "type_spec" | "type_alias"))
        .collect();
    let lone = specs.len() == 1;
    for spec in specs {
        let Some(name) = source.field(spec, "name") else {
            continue;
        };
        let ty = spec.child_by_field_name("type");
        let kind = match ty.map(|t| t.kind()) {
            _ if spec.kind() == "type_alias" => Kind::TypeAlias,
            Some("struct_type") => Kind::Struct,
            Some("interface_type") => Kind::Interface,
            _ => Kind::TypeAlias,
        };
        let outer = if lone { decl } else { spec };
        item(source, outer, spec, (kind, name, None));
        if let Some(iface) = ty.filter(|t| t.kind() == "interface_type") {
            let methods = named_children(iface)
                .into_iter()
                .filter(|n| n.kind() == "method_elem");
            for m in methods {
                if let Some(method) = source.field(m, "name") {
                    item(source, m, m, (Kind::Method, method, Some(name)));
                }
            }
        }
    }
}

/// `(s *Server[T])` → `Server`.
fn receiver_type(source: &Source<'_>, receiver: Node<'_>) -> Option<String> {
    let param = child_of(receiver, |k| k == "parameter_declaration")?;
    let ty = source.field(param, "type")?;
    let ty = ty.trim_start_matches('*');
    Some(ty.split('[').next().unwrap_or(ty).trim().to_owned())
}

/// Records one item (`what`: kind, name and the type it belongs to), its doc the `//` lines
/// directly above `outer`.
fn item(
    source: &mut Source<'_>,
    outer: Node<'_>,
    decl: Node<'_>,
    (kind, name, owner): (Kind, &str, Option<&str>),
) {
    let qualname = match owner {
        Some(t) => format!("{t}.{name}"),
        None => name.to_owned(),
    };
    let (start, doc) = match source.comments_above(
        outer,
        DocStyle::Lines,
        |n| n.kind() == "comment",
        |t| t.starts_with("//") && !t.starts_with("//go:"),
    ) {
        Some((start, lines)) => {
            let lines: Vec<&str> = lines
                .iter()
                .map(|l| l.trim_start_matches("//").trim())
                .collect();
            (start, trim_blank_lines(&lines))
        }
        None => (outer.start_byte(), String::new()),
    };
    source.push(Found {
        outer,
        decl,
        kind,
        name: name.to_owned(),
        qualname,
        start,
        doc,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{signature_and_doc, test_outline};

    #[test]
    fn go_items_with_doc_comments_and_import_paths() {
        let src = r#"// Package cobra is a commander.
package cobra

import "fmt"

// MaxDepth bounds the search.
const MaxDepth = 3

const (
	// A is first.
	A = iota
	B
)

// Command is just that, a command for your application.
//
// It has subcommands.
type Command struct {
	Use string
}

type (
	// Runner runs.
	Runner interface {
		// Run runs it.
		Run(args []string) error
	}
	PositionalArgs func(cmd *Command, args []string) error
	Alias = Command
)

// Execute uses the args and runs through the command tree.
func (c *Command) Execute() error {
	return nil
}

//go:noinline
func helper[T any](x T) T { return x }

// NewCommand makes one.

func NewCommand() *Command { return &Command{} }

func (Command) broken( {
}

func after() {}
"#;
        let loc = ModuleLoc {
            crate_name: "github.com/spf13/cobra".into(),
            segments: vec!["github.com/spf13/cobra".into()],
        };
        let items = parse_go(&loc, src);
        insta::assert_snapshot!(test_outline(&items));
        let execute = signature_and_doc(&items, "Execute");
        assert_eq!(
            execute,
            Some((
                "func (c *Command) Execute() error",
                "Execute uses the args and runs through the command tree."
            ))
        );
        let bare = parse_go(&ModuleLoc::default(), "package util\n\nfunc Do() {}\n");
        assert_eq!(bare[0].canon_path, "util.Do");
    }
}
