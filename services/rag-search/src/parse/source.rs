//! What every language's parser shares: line numbers of byte offsets, whitespace collapsing,
//! signatures cut before the body, doc comments directly above a node, and the item built
//! from all of them.

use tree_sitter::{Language, Node, Parser, Tree};

use super::{Kind, ParsedItem};

/// Longest signature kept, in characters.
const MAX_SIGNATURE: usize = 300;

/// Start byte of each line of a text.
pub(super) struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub(super) fn new(src: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(src.match_indices('\n').map(|(i, _)| i + 1));
        Self { starts }
    }

    /// 1-based line of a byte offset.
    pub(super) fn line_of(&self, byte: usize) -> u32 {
        let idx = match self.starts.binary_search(&byte) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        };
        u32::try_from(idx + 1).unwrap_or(u32::MAX)
    }
}

/// `a   b\n c` → `a b c`.
pub(super) fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A node's named children, in order (collected: a tree-sitter cursor cannot stay borrowed
/// across the walk's recursion).
pub(super) fn named_children(node: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor).collect()
}

/// The first named child of `node` whose kind `is` accepts.
pub(super) fn child_of<'t>(node: Node<'t>, is: impl Fn(&str) -> bool) -> Option<Node<'t>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor).find(|n| is(n.kind()))
}

/// A tree of `src` in `language`; `None` when the grammar does not load (a version mismatch).
pub(super) fn parse_tree(language: &Language, src: &str) -> Option<Tree> {
    let mut parser = Parser::new();
    parser.set_language(language).ok()?;
    parser.parse(src, None)
}

/// The source of one file and the items found in it so far.
pub(super) struct Source<'a> {
    pub(super) src: &'a str,
    lines: Lines,
    pub(super) items: Vec<ParsedItem>,
    crate_name: &'a str,
    /// What canonical paths start with: the module or package (`requests.sessions`), empty
    /// for none.
    module: String,
}

/// How a language writes doc comments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DocStyle {
    /// A run of line comments directly above, no blank line between (Go's `//`).
    Lines,
    /// The nearest block comment above, blank lines allowed between (`/** … */`, as the
    /// TypeScript compiler and javadoc attach them).
    Block,
}

/// One item about to be recorded.
pub(super) struct Found<'n> {
    /// The node whose span the item covers (an `export` or decorator wrapper included).
    pub(super) outer: Node<'n>,
    /// The declaration itself (its signature runs from the start of `outer` to its body).
    pub(super) decl: Node<'n>,
    pub(super) kind: Kind,
    pub(super) name: String,
    pub(super) qualname: String,
    /// First byte of the doc comment above, if there is one; else `outer`'s start.
    pub(super) start: usize,
    pub(super) doc: String,
}

impl<'a> Source<'a> {
    pub(super) fn new(src: &'a str, crate_name: &'a str) -> Self {
        Self {
            src,
            lines: Lines::new(src),
            items: Vec::new(),
            crate_name,
            module: String::new(),
        }
    }

    /// Names the module the items are in: their canonical paths are `module.qualname`.
    pub(super) fn set_module(&mut self, module: String) {
        self.module = module;
    }

    /// The text of a node.
    pub(super) fn text(&self, node: Node<'_>) -> &'a str {
        self.src.get(node.byte_range()).unwrap_or("")
    }

    /// The text of a node's field.
    pub(super) fn field(&self, node: Node<'_>, name: &str) -> Option<&'a str> {
        node.child_by_field_name(name).map(|n| self.text(n))
    }

    /// `decl` from `from` up to its body (the field `body`), whitespace collapsed, the trailing
    /// `{`, `:` or `;` cut.
    pub(super) fn signature(&self, from: usize, decl: Node<'_>) -> String {
        let end = decl
            .child_by_field_name("body")
            .map_or(decl.end_byte(), |b| b.start_byte());
        let mut sig = collapse_ws(self.src.get(from..end).unwrap_or(""));
        if sig.chars().count() > MAX_SIGNATURE {
            sig = sig.chars().take(MAX_SIGNATURE).collect::<String>() + "…";
        }
        sig.trim_end_matches([';', '{', ':', ' ']).to_owned()
    }

    /// The doc comments above `node` that `is_doc` accepts (`style` says which), top to
    /// bottom, and the first one's first byte.
    pub(super) fn comments_above(
        &self,
        node: Node<'_>,
        style: DocStyle,
        is_comment: impl Fn(Node<'_>) -> bool,
        is_doc: impl Fn(&str) -> bool,
    ) -> Option<(usize, Vec<&'a str>)> {
        let mut row = node.start_position().row;
        let mut prev = node.prev_sibling();
        let mut found = Vec::new();
        let mut start = None;
        while let Some(p) = prev {
            let adjacent = p.end_position().row + 1 >= row;
            if !is_comment(p) || (style == DocStyle::Lines && !adjacent) {
                break;
            }
            let text = self.text(p);
            if !is_doc(text) {
                break;
            }
            found.push(text);
            start = Some(p.start_byte());
            row = p.start_position().row;
            if style == DocStyle::Block {
                break;
            }
            prev = p.prev_sibling();
        }
        found.reverse();
        start.map(|s| (s, found))
    }

    /// Records an item.
    pub(super) fn push(&mut self, found: Found<'_>) {
        if found.name.is_empty() {
            return;
        }
        let byte_start = found.start.min(found.outer.start_byte());
        let byte_end = found.outer.end_byte();
        let signature = self.signature(found.outer.start_byte(), found.decl);
        self.items.push(ParsedItem {
            canon_path: dotted(&self.module, &found.qualname),
            name: found.name,
            qualname: found.qualname,
            kind: found.kind,
            byte_start,
            byte_end,
            line_start: self.lines.line_of(byte_start),
            line_end: self
                .lines
                .line_of(byte_end.saturating_sub(1).max(byte_start)),
            signature,
            doc: found.doc,
            crate_name: self.crate_name.to_owned(),
            test: false,
        });
    }

    /// The items, in file order (outer before inner).
    pub(super) fn finish(mut self) -> Vec<ParsedItem> {
        self.items
            .sort_by_key(|i| (i.byte_start, std::cmp::Reverse(i.byte_end)));
        self.items
    }
}

/// Parses `src` with `language` and records its items: `walk` gets the file's root and the
/// [`Source`] to push them into (naming the module first); the items in file order, none when
/// the grammar cannot be loaded.
pub(super) fn items_of(
    language: &Language,
    src: &str,
    crate_name: &str,
    walk: impl FnOnce(&mut Source<'_>, Node<'_>),
) -> Vec<ParsedItem> {
    let Some(tree) = parse_tree(language, src) else {
        return Vec::new();
    };
    let mut source = Source::new(src, crate_name);
    walk(&mut source, tree.root_node());
    source.finish()
}

/// `prefix.qualname` (a module or package and a name in it), or `qualname` without a prefix:
/// the canonical path of every language but Rust.
fn dotted(prefix: &str, qualname: &str) -> String {
    if prefix.is_empty() {
        qualname.to_owned()
    } else {
        format!("{prefix}.{qualname}")
    }
}

/// A `/** … */` block's text without its markers and the `*` at the start of each line.
pub(super) fn block_doc(text: &str) -> String {
    let inner = text
        .strip_prefix("/**")
        .unwrap_or(text)
        .strip_suffix("*/")
        .unwrap_or(text);
    let lines: Vec<&str> = inner
        .lines()
        .map(|l| {
            let l = l.trim();
            l.strip_prefix('*').map_or(l, str::trim_start)
        })
        .collect();
    trim_blank_lines(&lines)
}

/// Lines joined, blank ones at either end dropped.
pub(super) fn trim_blank_lines(lines: &[&str]) -> String {
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    match (first, last) {
        (Some(a), Some(b)) => lines[a..=b].join("\n"),
        _ => String::new(),
    }
}
