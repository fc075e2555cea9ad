//! Java items through tree-sitter: classes, interfaces, enums, records and annotation types
//! (nested ones too), their methods and constructors, each with the `/** … */` Javadoc
//! directly above; qualified by the file's `package` (`com.acme.Parser.Inner.parse`).

use tree_sitter::Node;

use super::source::{DocStyle, Found, Source, block_doc, child_of, items_of, named_children};
use super::{Kind, ModuleLoc, ParsedItem};

/// Parses one Java file (`loc` gives only the crate name; the package comes from the file).
pub fn parse_java(loc: &ModuleLoc, src: &str) -> Vec<ParsedItem> {
    items_of(
        &tree_sitter_java::LANGUAGE.into(),
        src,
        &loc.crate_name,
        |source, root| {
            let package = child_of(root, |k| k == "package_declaration")
                .and_then(|p| child_of(p, |k| matches!(k, "scoped_identifier" | "identifier")))
                .map(|n| source.text(n).to_owned())
                .unwrap_or_default();
            source.set_module(package);
            walk(source, root, &[]);
        },
    )
}

fn walk(source: &mut Source<'_>, container: Node<'_>, owner: &[String]) {
    for node in named_children(container) {
        let kind = match node.kind() {
            "class_declaration" | "record_declaration" => Kind::Class,
            "interface_declaration" | "annotation_type_declaration" => Kind::Interface,
            "enum_declaration" => Kind::Enum,
            "method_declaration"
            | "constructor_declaration"
            | "compact_constructor_declaration" => Kind::Method,
            "enum_body_declarations" | "ERROR" => {
                walk(source, node, owner);
                continue;
            }
            _ => continue,
        };
        let Some(name) = source.field(node, "name") else {
            continue;
        };
        let mut path = owner.to_vec();
        path.push(name.to_owned());
        let qualname = path.join(".");
        let (start, doc) = match source.comments_above(
            node,
            DocStyle::Block,
            |n| n.kind() == "block_comment",
            |t| t.starts_with("/**"),
        ) {
            Some((start, docs)) => (
                start,
                docs.iter()
                    .map(|d| block_doc(d))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            None => (node.start_byte(), String::new()),
        };
        source.push(Found {
            outer: node,
            decl: node,
            kind,
            name: name.to_owned(),
            qualname,
            start,
            doc,
        });
        if kind != Kind::Method
            && let Some(body) = node.child_by_field_name("body")
        {
            walk(source, body, &path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{signature_and_doc, test_outline};

    #[test]
    fn java_items_with_javadoc_and_packages() {
        let src = r#"package com.acme.text;

import java.util.List;

/** Parses text. */
public final class Parser<T> implements Iterable<T> {
    /**
     * Creates a parser.
     * @param input the text
     */
    public Parser(String input) {}

    /** Parses one token. */
    @Override
    public Token next() throws IOException {
        return null;
    }

    static class Inner {
        void run() {}
    }

    enum Mode { A, B; int code() { return 1; } }
}

interface Visitor { void visit(Node n); }

record Point(int x, int y) {}
"#;
        let items = parse_java(&ModuleLoc::default(), src);
        insta::assert_snapshot!(test_outline(&items));
        let next = signature_and_doc(&items, "next");
        assert_eq!(
            next,
            Some((
                "@Override public Token next() throws IOException",
                "Parses one token."
            ))
        );
    }
}
