//! Where each source file sits in its language's module system, from the workspace's files
//! and manifests: Rust crates from Cargo manifests ([`CrateLayout`]); Python packages from
//! `__init__.py` files (`src/requests/sessions.py` → `requests.sessions`); Go packages from
//! `go.mod` (`module github.com/x/y` + the directory); TypeScript and JavaScript modules from
//! the nearest `package.json` `name` and the file's path (`index` files name their directory);
//! Java packages from each file's own `package` line.

use std::collections::BTreeSet;

use super::{CrateLayout, ModuleLoc, module_path};

/// Module systems of a workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// Rust crates.
    pub crates: CrateLayout,
    /// Directories holding an `__init__.py` (Python packages).
    python_packages: BTreeSet<String>,
    /// `go.mod` directories and their module paths, deepest first.
    go_modules: Vec<(String, String)>,
    /// `package.json` directories and their package names, deepest first.
    npm_packages: Vec<(String, String)>,
}

/// What names a module system's roots: read for [`Layout::from_manifests`].
pub fn is_manifest(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    matches!(name, "Cargo.toml" | "go.mod")
        || name == "package.json" && !rel.split('/').any(|p| p == "node_modules")
}

/// Whether adding or removing `rel` can move other files' modules (a manifest, or a Python
/// package marker).
pub fn shapes_layout(rel: &str) -> bool {
    is_manifest(rel) || is_package_init(rel)
}

/// Whether `rel` is a Python package's `__init__.py`.
pub(super) fn is_package_init(rel: &str) -> bool {
    rel == "__init__.py" || rel.ends_with("/__init__.py")
}

fn parent(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(d, _)| d)
}

/// `rel` below `dir` (`dir` empty: the workspace root).
fn below<'a>(dir: &str, rel: &'a str) -> Option<&'a str> {
    if dir.is_empty() {
        Some(rel)
    } else {
        rel.strip_prefix(dir)?.strip_prefix('/')
    }
}

/// The path without its last extension.
fn without_extension(rel: &str) -> &str {
    let name_at = rel.rfind('/').map_or(0, |i| i + 1);
    match rel[name_at..].rfind('.') {
        Some(dot) if dot > 0 => &rel[..name_at + dot],
        _ => rel,
    }
}

/// `path` in the deepest of `roots` (directory, name; deepest first) holding it: the root's
/// name, and the name followed by what lies below it (`example.com/m/sub`).
fn in_root(roots: &[(String, String)], path: &str) -> Option<ModuleLoc> {
    roots.iter().find_map(|(dir, name)| {
        let within = below(dir, path).or_else(|| (path == dir).then_some(""))?;
        let module = if within.is_empty() {
            name.clone()
        } else {
            format!("{name}/{within}")
        };
        Some(ModuleLoc {
            crate_name: name.clone(),
            segments: vec![module],
        })
    })
}

impl Layout {
    /// The layout from the workspace's manifests (path and text each, [`is_manifest`]) and
    /// its files (relative paths). A manifest that does not parse is skipped.
    pub fn from_manifests<'a>(
        manifests: impl IntoIterator<Item = (&'a str, &'a str)> + Clone,
        files: &BTreeSet<String>,
    ) -> Self {
        let cargo = manifests
            .clone()
            .into_iter()
            .filter(|(p, _)| *p == "Cargo.toml" || p.ends_with("/Cargo.toml"));
        let crates = CrateLayout::from_manifests(cargo, files);
        let mut go_modules = Vec::new();
        let mut npm_packages = Vec::new();
        for (path, text) in manifests {
            let dir = parent(path).to_owned();
            if path == "go.mod" || path.ends_with("/go.mod") {
                let module = text.lines().find_map(|l| {
                    let rest = l.trim().strip_prefix("module")?;
                    rest.starts_with(char::is_whitespace)
                        .then(|| rest.trim().trim_matches('"').to_owned())
                });
                if let Some(m) = module.filter(|m| !m.is_empty()) {
                    go_modules.push((dir, m));
                }
            } else if path == "package.json" || path.ends_with("/package.json") {
                let name = serde_json::from_str::<serde_json::Value>(text)
                    .ok()
                    .and_then(|v| v.get("name")?.as_str().map(str::to_owned));
                if let Some(n) = name.filter(|n| !n.is_empty()) {
                    npm_packages.push((dir, n));
                }
            }
        }
        // Deepest first: a nested module or package owns its files.
        go_modules.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.cmp(b)));
        npm_packages.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.cmp(b)));
        let python_packages = files
            .iter()
            .filter(|f| is_package_init(f))
            .map(|f| parent(f).to_owned())
            .collect();
        Self {
            crates,
            python_packages,
            go_modules,
            npm_packages,
        }
    }

    /// Where `rel`, a file of `language`, sits; `None` for languages parsed as line windows.
    pub fn locate(&self, rel: &str, language: &str) -> Option<ModuleLoc> {
        match language {
            "rust" => Some(self.crates.locate(rel).unwrap_or_else(|| ModuleLoc {
                crate_name: String::new(),
                segments: module_path(rel),
            })),
            "python" => Some(self.python(rel)),
            "go" => Some(self.go(rel)),
            "typescript" | "javascript" => Some(self.npm(rel)),
            "java" => Some(ModuleLoc::default()),
            _ => None,
        }
    }

    /// `a/b/c.py` in packages `a/b` (and `a`) → `a.b.c` in distribution `a`; outside any
    /// package its path after the last `src/` (`scripts/build.py` → `scripts.build`).
    fn python(&self, rel: &str) -> ModuleLoc {
        let stem = without_extension(rel);
        let mut dir = parent(rel);
        let in_package = self.python_packages.contains(dir);
        let base = if in_package {
            // Up to the topmost package: its parent is where imports start.
            while !dir.is_empty() && self.python_packages.contains(parent(dir)) {
                dir = parent(dir);
            }
            if self.python_packages.contains(dir) && !dir.is_empty() {
                parent(dir)
            } else {
                ""
            }
        } else {
            stem.rfind("src/")
                .filter(|i| *i == 0 || stem.as_bytes()[i - 1] == b'/')
                .map_or("", |i| &stem[..i + 3])
        };
        let within = below(base, stem).unwrap_or(stem);
        let mut segments: Vec<String> = within
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if segments.last().is_some_and(|s| s == "__init__") {
            segments.pop();
        }
        ModuleLoc {
            crate_name: if in_package {
                segments.first().cloned().unwrap_or_default()
            } else {
                String::new()
            },
            segments,
        }
    }

    /// The import path of `rel`'s package: its module's path and the directory below it;
    /// without a `go.mod` the directory (the parser falls back to the `package` clause).
    fn go(&self, rel: &str) -> ModuleLoc {
        let dir = parent(rel);
        if let Some(loc) = in_root(&self.go_modules, dir) {
            return loc;
        }
        ModuleLoc {
            crate_name: String::new(),
            segments: if dir.is_empty() {
                Vec::new()
            } else {
                vec![dir.to_owned()]
            },
        }
    }

    /// `name/sub/file` for `sub/file.ts` in package `name`; `index` files name their
    /// directory.
    fn npm(&self, rel: &str) -> ModuleLoc {
        let stem = without_extension(rel);
        let stem = stem
            .strip_suffix("/index")
            .unwrap_or(if stem == "index" { "" } else { stem });
        if let Some(loc) = in_root(&self.npm_packages, stem) {
            return loc;
        }
        ModuleLoc {
            crate_name: String::new(),
            segments: vec![stem.to_owned()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(files: &[&str], manifests: &[(&str, &str)]) -> Layout {
        let files: BTreeSet<String> = files.iter().map(|f| (*f).to_owned()).collect();
        Layout::from_manifests(manifests.iter().copied(), &files)
    }

    fn at(layout: &Layout, rel: &str, language: &str) -> (String, Vec<String>) {
        let loc = layout.locate(rel, language).unwrap_or_default();
        (loc.crate_name, loc.segments)
    }

    fn loc(krate: &str, segments: &[&str]) -> (String, Vec<String>) {
        (
            krate.to_owned(),
            segments.iter().map(|s| (*s).to_owned()).collect(),
        )
    }

    #[test]
    fn python_modules_follow_packages() {
        let l = layout(
            &[
                "src/requests/__init__.py",
                "src/requests/sessions.py",
                "src/requests/adapters/__init__.py",
                "src/requests/adapters/http.py",
                "tests/test_api.py",
                "setup.py",
                "tools/src/gen.py",
            ],
            &[],
        );
        let cases = [
            (
                "src/requests/sessions.py",
                loc("requests", &["requests", "sessions"]),
            ),
            ("src/requests/__init__.py", loc("requests", &["requests"])),
            (
                "src/requests/adapters/http.py",
                loc("requests", &["requests", "adapters", "http"]),
            ),
            ("tests/test_api.py", loc("", &["tests", "test_api"])),
            ("setup.py", loc("", &["setup"])),
            ("tools/src/gen.py", loc("", &["gen"])),
        ];
        for (rel, want) in cases {
            assert_eq!(at(&l, rel, "python"), want, "{rel}");
        }
    }

    #[test]
    fn go_packages_take_their_module_path() {
        let l = layout(
            &[
                "go.mod",
                "cobra.go",
                "doc/man.go",
                "tools/go.mod",
                "tools/gen/main.go",
                "x/y.go",
            ],
            &[
                (
                    "go.mod",
                    "// comment\nmodule github.com/spf13/cobra\n\ngo 1.15\n",
                ),
                ("tools/go.mod", "module \"example.com/tools\"\n"),
            ],
        );
        let cases = [
            (
                "cobra.go",
                loc("github.com/spf13/cobra", &["github.com/spf13/cobra"]),
            ),
            (
                "doc/man.go",
                loc("github.com/spf13/cobra", &["github.com/spf13/cobra/doc"]),
            ),
            (
                "tools/gen/main.go",
                loc("example.com/tools", &["example.com/tools/gen"]),
            ),
            // A file beside a nested go.mod is in that module's root package.
            (
                "tools/tools.go",
                loc("example.com/tools", &["example.com/tools"]),
            ),
        ];
        for (rel, want) in cases {
            assert_eq!(at(&l, rel, "go"), want, "{rel}");
        }
        let bare = layout(&["pkg/errors/errors.go", "main.go"], &[]);
        assert_eq!(
            at(&bare, "pkg/errors/errors.go", "go"),
            loc("", &["pkg/errors"])
        );
        assert_eq!(at(&bare, "main.go", "go"), loc("", &[]));
    }

    #[test]
    fn npm_modules_take_their_package_name() {
        let l = layout(
            &[
                "package.json",
                "src/index.ts",
                "src/util/str.ts",
                "web/package.json",
                "web/app.tsx",
            ],
            &[
                ("package.json", r#"{"name": "rxjs", "version": "7.8.1"}"#),
                ("web/package.json", r#"{"name": "@acme/web"}"#),
            ],
        );
        let cases = [
            ("src/index.ts", loc("rxjs", &["rxjs/src"])),
            ("src/util/str.ts", loc("rxjs", &["rxjs/src/util/str"])),
            ("web/app.tsx", loc("@acme/web", &["@acme/web/app"])),
        ];
        for (rel, want) in cases {
            assert_eq!(at(&l, rel, "typescript"), want, "{rel}");
        }
        assert_eq!(
            at(&layout(&[], &[]), "lib/index.js", "javascript"),
            loc("", &["lib"])
        );
        assert!(!is_manifest("node_modules/x/package.json"));
        assert!(l.locate("README.md", "markdown").is_none());
    }
}
