//! Python items through tree-sitter: functions, classes, their methods (nested classes too)
//! and module-level `UPPER_CASE` constants, each with its docstring; qualified as Python
//! writes them (`package.module.Class.method`). Definitions under module-level `if`/`try`
//! blocks count; definitions inside function bodies do not.

use tree_sitter::Node;

use super::source::{Found, Source, items_of, named_children, trim_blank_lines};
use super::{Kind, ModuleLoc, ParsedItem};

/// Parses one Python file at `loc` (its dotted module path in `segments`).
pub fn parse_python(loc: &ModuleLoc, src: &str) -> Vec<ParsedItem> {
    items_of(
        &tree_sitter_python::LANGUAGE.into(),
        src,
        &loc.crate_name,
        |source, root| {
            source.set_module(loc.segments.join("."));
            walk(source, root, &[], false);
        },
    )
}

/// The statements of a module or class body. `outer` holds the enclosing classes' names.
fn walk(source: &mut Source<'_>, container: Node<'_>, outer: &[&str], in_class: bool) {
    for node in named_children(container) {
        let (outer_node, decl) = match node.kind() {
            "decorated_definition" => match node.child_by_field_name("definition") {
                Some(d) => (node, d),
                None => continue,
            },
            "function_definition" | "class_definition" => (node, node),
            "expression_statement" if !in_class => {
                constant(source, node);
                continue;
            }
            // Conditional and guarded definitions (`if TYPE_CHECKING:`, `try: … except`).
            "if_statement" | "elif_clause" | "else_clause" | "try_statement" | "except_clause"
            | "finally_clause" | "with_statement" | "block" | "ERROR" => {
                // Their blocks and clauses are among their children.
                walk(source, node, outer, in_class);
                continue;
            }
            _ => continue,
        };
        let Some(name) = source.field(decl, "name") else {
            continue;
        };
        let is_class = decl.kind() == "class_definition";
        let kind = match (is_class, in_class) {
            (true, _) => Kind::Class,
            (false, true) => Kind::Method,
            (false, false) => Kind::Function,
        };
        let mut path: Vec<&str> = outer.to_vec();
        path.push(name);
        let qualname = path.join(".");
        source.push(Found {
            outer: outer_node,
            decl,
            kind,
            name: name.to_owned(),
            qualname,
            start: outer_node.start_byte(),
            doc: docstring(source, decl),
        });
        if is_class && let Some(body) = decl.child_by_field_name("body") {
            walk(source, body, &path, true);
        }
    }
}

/// A module-level `NAME = …` whose name is all capitals.
fn constant(source: &mut Source<'_>, statement: Node<'_>) {
    let Some(assignment) = statement
        .named_child(0)
        .filter(|n| n.kind() == "assignment")
    else {
        return;
    };
    let Some(left) = assignment
        .child_by_field_name("left")
        .filter(|n| n.kind() == "identifier")
    else {
        return;
    };
    let name = source.text(left);
    let is_constant = name.chars().any(|c| c.is_ascii_uppercase())
        && !name.chars().any(|c| c.is_ascii_lowercase());
    if !is_constant {
        return;
    }
    source.push(Found {
        outer: statement,
        decl: statement,
        kind: Kind::Const,
        name: name.to_owned(),
        qualname: name.to_owned(),
        start: statement.start_byte(),
        doc: String::new(),
    });
}

/// The docstring of a function or class: its body's first statement when that is a string,
/// each line trimmed.
fn docstring(source: &Source<'_>, decl: Node<'_>) -> String {
    let Some(first) = decl
        .child_by_field_name("body")
        .and_then(|b| b.named_child(0))
        .filter(|s| s.kind() == "expression_statement")
        .and_then(|s| s.named_child(0))
        .filter(|s| s.kind() == "string")
    else {
        return String::new();
    };
    let content: String = named_children(first)
        .into_iter()
        .filter(|c| c.kind() == "string_content")
        .map(|c| source.text(c))
        .collect();
    let lines: Vec<&str> = content.lines().map(str::trim).collect();
    trim_blank_lines(&lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{signature_and_doc, test_outline};

    #[test]
    fn python_items_with_docstrings_and_dotted_paths() {
        let src = r#""""Module docs."""
import os

MAX_RETRIES = 3
default_timeout = 5


def get(url, **kwargs):
    """Sends a GET request.

    :param url: URL.
    """
    def inner():
        pass
    return request("get", url, **kwargs)


@dataclass
class Session(Base):
    """A user session."""

    class Config:
        def load(self): ...

    @property
    def headers(self) -> dict:
        return {}

    async def send(self, request):
        """Send it."""


if TYPE_CHECKING:
    def typed(x: int) -> int:
        return x

def broken(:
    pass

def after():
    return 1
"#;
        let loc = ModuleLoc {
            crate_name: "requests".into(),
            segments: vec!["requests".into(), "api".into()],
        };
        let items = parse_python(&loc, src);
        insta::assert_snapshot!(test_outline(&items));
        let get = signature_and_doc(&items, "get");
        assert_eq!(
            get,
            Some((
                "def get(url, **kwargs)",
                "Sends a GET request.\n\n:param url: URL."
            ))
        );
        assert!(items.iter().all(|i| i.crate_name == "requests"));
    }
}
