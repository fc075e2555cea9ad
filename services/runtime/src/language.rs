//! The language of a file, guessed from its name; shared by retrieval and the tools so both
//! name languages the same way.

use std::path::Path;

/// The language of a path, from its extension (`rust`, `toml`, ...); `None` for unknown.
pub fn language_of(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    let name = path.file_name()?.to_str()?;
    Some(match ext.as_str() {
        "rs" => "rust",
        "toml" => "toml",
        "md" | "markdown" => "markdown",
        "json" => "json",
        "yaml" | "yml" => "yaml",
        "proto" => "protobuf",
        "py" => "python",
        "js" | "mjs" | "cjs" | "jsx" => "javascript",
        "ts" | "tsx" | "mts" | "cts" => "typescript",
        "go" => "go",
        // Read for Go's module paths (and searchable as text, like Cargo.toml).
        "mod" if name == "go.mod" => "gomod",
        "c" | "h" => "c",
        "cc" | "cpp" | "hpp" | "cxx" => "cpp",
        "java" => "java",
        "sh" | "bash" => "shell",
        "sql" => "sql",
        "html" | "htm" => "html",
        "css" => "css",
        "txt" | "rst" | "adoc" => "text",
        "lock" if name == "Cargo.lock" => return None,
        _ => return None,
    })
}
