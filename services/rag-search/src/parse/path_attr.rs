//! `#[path = "…"]` module declarations: `#[path = "imp/unix.rs"] mod sys;` makes that file the
//! module `sys` of the declaring file, wherever the file tree puts it. Only declarations at a
//! file's top level are followed (inside an inline `mod { … }` block the path would be relative
//! to a directory of that block's own).

use tree_sitter::Node;

use super::source::parse_tree;

/// One `#[path]` declaration: the module's name and the file it names, relative to the
/// workspace root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathModule {
    /// The module's name (`sys`).
    pub name: String,
    /// The file (`src/imp/unix.rs`), resolved against the declaring file's directory.
    pub file: String,
}

/// The `#[path]` module declarations at the top level of `src`, the Rust file `rel`. Cheap for
/// the files that have none: they are not parsed.
pub fn path_modules(rel: &str, src: &str) -> Vec<PathModule> {
    if !src.contains("#[path") {
        return Vec::new();
    }
    let Some(tree) = parse_tree(&tree_sitter_rust::LANGUAGE.into(), src) else {
        return Vec::new();
    };
    let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
    let root = tree.root_node();
    let mut cursor = root.walk();
    let mut out = Vec::new();
    for node in root.named_children(&mut cursor) {
        if node.kind() != "mod_item" || node.child_by_field_name("body").is_some() {
            continue;
        }
        let (Some(name), Some(path)) = (
            node.child_by_field_name("name")
                .and_then(|n| src.get(n.byte_range())),
            path_attribute(node, src),
        ) else {
            continue;
        };
        if let Some(file) = join(dir, path) {
            out.push(PathModule {
                name: name.to_owned(),
                file,
            });
        }
    }
    out
}

/// The value of a `#[path = "…"]` attribute directly above `node`.
fn path_attribute<'s>(node: Node<'_>, src: &'s str) -> Option<&'s str> {
    let mut prev = node.prev_named_sibling();
    while let Some(p) = prev {
        match p.kind() {
            "attribute_item" => {
                let text = src.get(p.byte_range())?;
                let inner = text.strip_prefix("#[")?.strip_suffix(']')?;
                if let Some((key, value)) = inner.split_once('=')
                    && key.trim() == "path"
                {
                    let value = value.trim();
                    return value.strip_prefix('"')?.strip_suffix('"');
                }
            }
            "line_comment" | "block_comment" => {}
            _ => return None,
        }
        prev = p.prev_named_sibling();
    }
    None
}

/// `dir/path` with `.` and `..` resolved; `None` when it leaves the workspace or is absolute.
fn join(dir: &str, path: &str) -> Option<String> {
    if path.starts_with('/') || path.contains('\\') {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_attributes_name_files_relative_to_the_declaring_file() {
        let src = r#"
#[cfg(unix)]
#[path = "imp/unix.rs"]
mod sys;

/// Generated.
#[path = "../generated/proto.rs"]
pub mod proto;

mod plain;

#[path = "/etc/passwd"]
mod absolute;

mod inline {
    #[path = "x.rs"]
    mod skipped;
}
"#;
        assert_eq!(
            path_modules("crates/net/src/lib.rs", src),
            vec![
                PathModule {
                    name: "sys".into(),
                    file: "crates/net/src/imp/unix.rs".into()
                },
                PathModule {
                    name: "proto".into(),
                    file: "crates/net/generated/proto.rs".into()
                },
            ]
        );
        assert!(path_modules("src/lib.rs", "mod a;\n").is_empty());
        assert!(path_modules("lib.rs", "#[path = \"../../x.rs\"]\nmod x;\n").is_empty());
    }
}
