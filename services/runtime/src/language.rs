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

/// Every name [`language_of`] gives, for checking a language a caller names.
pub const LANGUAGES: [&str; 19] = [
    "c",
    "cpp",
    "css",
    "go",
    "gomod",
    "html",
    "java",
    "javascript",
    "json",
    "markdown",
    "protobuf",
    "python",
    "rust",
    "shell",
    "sql",
    "text",
    "toml",
    "typescript",
    "yaml",
];

/// A language a caller names (`" Go "`, `python`), as [`LANGUAGES`] spells it; `None` when
/// it names none of them.
pub fn named(name: &str) -> Option<&'static str> {
    let name = name.trim().to_ascii_lowercase();
    LANGUAGES.iter().copied().find(|l| *l == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_language_is_trimmed_and_lowercased() {
        assert_eq!(named(" Go "), Some("go"));
        assert_eq!(named("python"), Some("python"));
        assert_eq!(named("golang"), None);
    }

    #[test]
    fn every_language_given_is_listed() {
        let names = [
            "a.rs", "a.toml", "a.md", "a.json", "a.yml", "a.proto", "a.py", "a.mjs", "a.tsx",
            "a.mts", "a.go", "go.mod", "a.h", "a.cpp", "A.java", "a.sh", "a.sql", "a.html",
            "a.css", "a.rst",
        ];
        for name in names {
            let language = language_of(Path::new(name));
            assert!(
                language.is_some_and(|l| LANGUAGES.contains(&l)),
                "{name}: {language:?}"
            );
        }
        assert_eq!(language_of(Path::new("x.mod")), None);
        assert_eq!(language_of(Path::new("Cargo.lock")), None);
    }
}
