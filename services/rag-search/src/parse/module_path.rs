//! The module path of a Rust file from its place in the crate: `src/lib.rs` → `crate`,
//! `src/a/mod.rs` and `src/a.rs` → `crate::a`, `src/a/b.rs` → `crate::a::b`.

use std::path::Path;

/// Module path segments (after `crate`) of `rel`, a `/`-separated path relative to the
/// workspace root. The crate root is the nearest `src/` directory; `src/bin/x.rs` and files
/// outside `src/` are roots of their own.
pub fn module_path(rel: &str) -> Vec<String> {
    let parts: Vec<&str> = rel.split('/').collect();
    let Some(src) = parts.iter().rposition(|p| *p == "src") else {
        // Outside src/ (tests/, examples/, build.rs): each file is its own crate root.
        return Vec::new();
    };
    let inside = &parts[src + 1..];
    if inside.first() == Some(&"bin") {
        return Vec::new();
    }
    let mut segments: Vec<String> = inside.iter().map(|s| (*s).to_owned()).collect();
    if let Some(last) = segments.pop() {
        let stem = Path::new(&last)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        let is_root = segments.is_empty() && (stem == "lib" || stem == "main");
        if stem != "mod" && !is_root {
            segments.push(stem);
        }
    }
    segments
}

#[cfg(test)]
mod tests {
    use super::module_path;

    #[test]
    fn module_paths_follow_the_file_tree() {
        let cases: &[(&str, &[&str])] = &[
            ("src/lib.rs", &[]),
            ("src/main.rs", &[]),
            ("src/config.rs", &["config"]),
            ("src/proto/mod.rs", &["proto"]),
            ("src/proto/h1/role.rs", &["proto", "h1", "role"]),
            ("crates/foo/src/lib.rs", &[]),
            ("crates/foo/src/a/b.rs", &["a", "b"]),
            ("src/bin/tool.rs", &[]),
            ("build.rs", &[]),
            ("src/a/main.rs", &["a", "main"]),
        ];
        for (path, want) in cases {
            assert_eq!(module_path(path), want.to_vec(), "{path}");
        }
    }
}
