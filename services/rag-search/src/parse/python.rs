//! Python items through tree-sitter: functions, classes, their methods (nested classes too)
//! and module-level `UPPER_CASE` constants, each with its docstring; qualified as Python
//! writes them (`package.module.Class.method`). Definitions under module-level `if`/`try`
//! blocks count; definitions inside function bodies do not.

use tree_sitter::Node;

use super::reexports::Reexport;
use super::source::{Found, Source, items_of, named_children, trim_blank_lines};
use super::{Kind, ModuleLoc, ParsedItem};

/// Parses one Python file at `loc` (its dotted module path in `segments`).
pub fn parse_python(loc: &ModuleLoc, src: &str) -> Vec<ParsedItem> {
    parse_python_file(loc, src, false).0
}

/// [`parse_python`], with the names the module imports from its own package at its top level
/// (`from .sessions import Session` in `requests/__init__.py` makes `requests.Session`), as
/// re-exports; `package` says whether the file is its package's `__init__.py` (where `.` is
/// the module itself, not its parent).
pub fn parse_python_file(
    loc: &ModuleLoc,
    src: &str,
    package: bool,
) -> (Vec<ParsedItem>, Vec<Reexport>) {
    let mut reexports = Vec::new();
    let items = items_of(
        &tree_sitter_python::LANGUAGE.into(),
        src,
        &loc.crate_name,
        |source, root| {
            source.set_module(loc.segments.join("."));
            walk(source, root, &[], false);
            if !loc.crate_name.is_empty() {
                top_level_imports(source, root, (loc, package), &mut reexports);
            }
        },
    );
    (items, reexports)
}

/// The `from … import …` statements a module runs when imported: at its top level and in
/// its top-level `try`/`except` and `if` blocks (`try: from ._speedups import parse` …),
/// not under `if TYPE_CHECKING:` (those names exist for type checkers only).
fn top_level_imports(
    source: &Source<'_>,
    container: Node<'_>,
    at: (&ModuleLoc, bool),
    out: &mut Vec<Reexport>,
) {
    for node in named_children(container) {
        match node.kind() {
            "import_from_statement" => imports(source, node, at.0, at.1, out),
            "if_statement" | "elif_clause"
                if node
                    .child_by_field_name("condition")
                    .is_some_and(|c| source.text(c).contains("TYPE_CHECKING")) => {}
            "try_statement" | "except_clause" | "else_clause" | "finally_clause" | "block"
            | "if_statement" | "elif_clause" => top_level_imports(source, node, at, out),
            _ => {}
        }
    }
}

/// The re-exports of one `from … import …` at a module's top level: names from this
/// distribution only (relative, or absolute under its top package), none starting with `_`.
fn imports(
    source: &Source<'_>,
    node: Node<'_>,
    loc: &ModuleLoc,
    package: bool,
    out: &mut Vec<Reexport>,
) {
    let Some(from) = node.child_by_field_name("module_name") else {
        return;
    };
    let mut target: Vec<String> = Vec::new();
    match from.kind() {
        "relative_import" => {
            for part in named_children(from) {
                match part.kind() {
                    "import_prefix" => {
                        // `.` is this package: the module itself in an `__init__.py`, its
                        // parent elsewhere; each further dot one package up.
                        let dots = source.text(part).matches('.').count();
                        target.push("self".into());
                        let ups = if package {
                            dots.saturating_sub(1)
                        } else {
                            dots
                        };
                        target.extend(std::iter::repeat_n("super".to_owned(), ups));
                    }
                    "dotted_name" => target.extend(dotted(source, part)),
                    _ => {}
                }
            }
        }
        "dotted_name" => {
            let parts = dotted(source, from);
            // Another distribution's names are not this one's paths.
            if parts.first() != Some(&loc.crate_name) {
                return;
            }
            target.push("crate".into());
            target.extend(parts.into_iter().skip(1));
        }
        _ => return,
    }
    let module: Vec<String> = loc.segments.iter().skip(1).cloned().collect();
    let bind = |name: String, path: Vec<String>, out: &mut Vec<Reexport>| {
        out.push(Reexport {
            crate_name: loc.crate_name.clone(),
            module: module.clone(),
            name,
            target: path,
        });
    };
    if named_children(node)
        .iter()
        .any(|c| c.kind() == "wildcard_import")
    {
        bind(String::new(), target.clone(), out);
    }
    let mut cursor = node.walk();
    for name in node.children_by_field_name("name", &mut cursor) {
        let (path, alias) = match name.kind() {
            "aliased_import" => (
                name.child_by_field_name("name"),
                name.child_by_field_name("alias").map(|a| source.text(a)),
            ),
            _ => (Some(name), None),
        };
        let Some(path) = path else {
            continue;
        };
        let parts = dotted(source, path);
        let Some(last) = parts.last() else {
            continue;
        };
        let bound = alias.unwrap_or(last).to_owned();
        if bound.starts_with('_') {
            continue;
        }
        let mut full = target.clone();
        full.extend(parts);
        bind(bound, full, out);
    }
}

/// The identifiers of a `dotted_name`.
fn dotted(source: &Source<'_>, node: Node<'_>) -> Vec<String> {
    named_children(node)
        .iter()
        .filter(|n| n.kind() == "identifier")
        .map(|n| source.text(*n).to_owned())
        .collect()
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

    #[test]
    fn imports_from_the_own_package_are_re_exports() {
        let src = r#"
from .sessions import Session, session
from .models import Request as Req, _private
from . import utils
from requests.adapters import HTTPAdapter
from urllib3 import PoolManager
from .compat import *
import os
if True:
    from .hidden import Conditional
def f():
    from .x import Y
"#;
        let shown = |loc: &ModuleLoc, package: bool| -> Vec<String> {
            parse_python_file(loc, src, package)
                .1
                .iter()
                .map(|r| {
                    assert_eq!(r.crate_name, "requests");
                    format!(
                        "{} {} = {}",
                        r.module.join("."),
                        r.name,
                        r.target.join("::")
                    )
                })
                .collect()
        };
        let init = ModuleLoc {
            crate_name: "requests".into(),
            segments: vec!["requests".into()],
        };
        assert_eq!(
            shown(&init, true),
            vec![
                " Session = self::sessions::Session",
                " session = self::sessions::session",
                " Req = self::models::Request",
                " utils = self::utils",
                " HTTPAdapter = crate::adapters::HTTPAdapter",
                "  = self::compat",
                " Conditional = self::hidden::Conditional",
            ]
        );
        // In a module that is not its package's `__init__.py`, `.` is the package above it.
        let api = ModuleLoc {
            crate_name: "requests".into(),
            segments: vec!["requests".into(), "api".into()],
        };
        assert_eq!(
            shown(&api, false)[0],
            "api Session = self::super::sessions::Session"
        );
        // Two dots in a sub-package's module; spaces between them; a fallback import in a
        // `try`; nothing under `if TYPE_CHECKING:`.
        let deep = r#"
from .. import sessions
from . . models import Request
try:
    from ._speedups import parse
except ImportError:
    from ._pure import parse
if TYPE_CHECKING:
    from .types import Hint
"#;
        let adapters = ModuleLoc {
            crate_name: "requests".into(),
            segments: vec!["requests".into(), "sub".into(), "adapters".into()],
        };
        let found: Vec<String> = parse_python_file(&adapters, deep, false)
            .1
            .iter()
            .map(|r| format!("{} = {}", r.name, r.target.join("::")))
            .collect();
        assert_eq!(
            found,
            vec![
                "sessions = self::super::super::sessions",
                "Request = self::super::super::models::Request",
                "parse = self::super::_speedups::parse",
                "parse = self::super::_pure::parse",
            ]
        );
        // Outside a package nothing is a path of a distribution.
        let script = ModuleLoc {
            crate_name: String::new(),
            segments: vec!["build".into()],
        };
        assert!(parse_python_file(&script, src, false).1.is_empty());
    }
}
