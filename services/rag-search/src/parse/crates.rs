//! Where each Rust file sits in its crate, from the workspace's Cargo manifests: every target
//! Cargo knows (`[lib] path`, `[[bin]]`, `src/bin/*`, examples, tests, benches, `build.rs`,
//! each workspace member's own manifest) is a crate root, and a file's module path is its
//! place under the deepest root directory that holds it. A file no manifest accounts for
//! falls back to the file-tree rule ([`super::module_path`]). A file a `#[path = …]`
//! declaration names is the module it declares ([`super::path_attr`]).

use std::collections::BTreeSet;

use serde::Deserialize;

use super::path_attr::PathModule;

/// A file's place: its crate and its module path within it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModuleLoc {
    /// The crate's name as code writes it (`my_crate`); empty when no manifest names it.
    pub crate_name: String,
    /// Module path segments after `crate`.
    pub segments: Vec<String>,
}

impl ModuleLoc {
    /// `crate_name::a::b`, what a change of place is detected by.
    pub fn key(&self) -> String {
        std::iter::once(self.crate_name.as_str())
            .chain(self.segments.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("::")
    }
}

/// What kind of target a crate root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum TargetKind {
    Lib,
    Bin,
    Example,
    Test,
    Bench,
    Build,
}

/// One crate root.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    kind: TargetKind,
    crate_name: String,
    /// The root file, relative to the workspace root.
    root: String,
    /// The directory its modules live in (the root file's), relative; `None` when the root
    /// claims no directory (`src/bin/x.rs`, `examples/x.rs`, `build.rs`: siblings are roots of
    /// their own).
    dir: Option<String>,
}

/// The crate roots of a workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrateLayout {
    targets: Vec<Target>,
    /// Files `#[path]` declarations place, and where: file → its module.
    path_modules: std::collections::BTreeMap<String, ModuleLoc>,
    /// The `#[path]` declarations, by declaring file (a change to one may move others).
    declarations: std::collections::BTreeMap<String, Vec<PathModule>>,
}

/// How many `#[path]` hops are followed (a declared file declaring more, …).
const MAX_PATH_HOPS: usize = 4;

#[derive(Debug, Default, Deserialize)]
struct Manifest {
    package: Option<Package>,
    lib: Option<TargetSpec>,
    #[serde(default)]
    bin: Vec<TargetSpec>,
    #[serde(default)]
    example: Vec<TargetSpec>,
    #[serde(default)]
    test: Vec<TargetSpec>,
    #[serde(default)]
    bench: Vec<TargetSpec>,
}

#[derive(Debug, Default, Deserialize)]
struct Package {
    name: Option<String>,
    build: Option<toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct TargetSpec {
    name: Option<String>,
    path: Option<String>,
}

/// `a/b` joined with `c` (`c` when `a/b` is empty), `.` and `..` resolved.
fn join(dir: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

fn parent(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(d, _)| d)
}

fn stem(rel: &str) -> &str {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name.strip_suffix(".rs").unwrap_or(name)
}

/// A crate name as code writes it.
fn code_name(name: &str) -> String {
    name.replace('-', "_")
}

impl CrateLayout {
    /// The layout from the workspace's manifests (`dir/Cargo.toml` path and text each) and
    /// its files (relative paths, for Cargo's automatic targets). A manifest that does not
    /// parse is skipped.
    pub fn from_manifests<'a>(
        manifests: impl IntoIterator<Item = (&'a str, &'a str)>,
        files: &BTreeSet<String>,
    ) -> Self {
        let mut targets = Vec::new();
        for (path, text) in manifests {
            let Ok(manifest) = toml::from_str::<Manifest>(text) else {
                tracing::debug!(manifest = %path, "a Cargo manifest does not parse; its files get the file-tree rule");
                continue;
            };
            let Some(package) = &manifest.package else {
                continue; // a virtual workspace root: its members have their own manifests
            };
            let package = Pkg {
                dir: parent(path),
                name: package.name.as_deref().unwrap_or_default(),
                build: package.build.as_ref(),
            };
            targets.extend(package_targets(&package, &manifest, files));
        }
        Self {
            targets,
            ..Self::default()
        }
    }

    /// Places the files `#[path]` declarations name (`declarations`: each declaring file and
    /// what it declares): each becomes the declared module of its declaring file's module.
    pub fn with_path_modules(
        mut self,
        declarations: std::collections::BTreeMap<String, Vec<PathModule>>,
    ) -> Self {
        self.declarations = declarations;
        // A declared file may itself declare: each pass places one more hop.
        for _ in 0..MAX_PATH_HOPS {
            let mut placed = std::collections::BTreeMap::new();
            for (declarer, modules) in &self.declarations {
                let Some(at) = self.locate(declarer) else {
                    continue;
                };
                for m in modules {
                    let mut segments = at.segments.clone();
                    segments.push(m.name.clone());
                    placed.insert(
                        m.file.clone(),
                        ModuleLoc {
                            crate_name: at.crate_name.clone(),
                            segments,
                        },
                    );
                }
            }
            if placed == self.path_modules {
                break;
            }
            self.path_modules = placed;
        }
        self
    }

    /// The `#[path]` declarations, by declaring file.
    pub fn path_declarations(&self) -> &std::collections::BTreeMap<String, Vec<PathModule>> {
        &self.declarations
    }

    /// Where `rel` (a `.rs` file) sits: the root it is, else the deepest root directory
    /// holding it (a library before a binary sharing its directory); `None` when no target
    /// accounts for it.
    pub fn locate(&self, rel: &str) -> Option<ModuleLoc> {
        if let Some(loc) = self.path_modules.get(rel) {
            return Some(loc.clone());
        }
        if let Some(t) = self.targets.iter().find(|t| t.root == rel) {
            return Some(ModuleLoc {
                crate_name: t.crate_name.clone(),
                segments: Vec::new(),
            });
        }
        let (target, dir) = self
            .targets
            .iter()
            .filter_map(|t| {
                let dir = t.dir.as_deref()?;
                let inside = dir.is_empty() || rel.starts_with(&format!("{dir}/"));
                inside.then_some((t, dir))
            })
            .max_by(|(a, ad), (b, bd)| ad.len().cmp(&bd.len()).then(b.kind.cmp(&a.kind)))?;
        let within = if dir.is_empty() {
            rel
        } else {
            &rel[dir.len() + 1..]
        };
        Some(ModuleLoc {
            crate_name: target.crate_name.clone(),
            segments: tree_segments(within),
        })
    }
}

/// Module segments of a file below its root directory: `a/mod.rs` and `a.rs` → `a`,
/// `a/b.rs` → `a::b`.
fn tree_segments(within: &str) -> Vec<String> {
    let mut segments: Vec<String> = within.split('/').map(str::to_owned).collect();
    if let Some(last) = segments.pop() {
        let s = stem(&last);
        if s != "mod" {
            segments.push(s.to_owned());
        }
    }
    segments
}

/// A package's manifest directory (relative; empty at the workspace root) and settings.
struct Pkg<'a> {
    dir: &'a str,
    name: &'a str,
    build: Option<&'a toml::Value>,
}

/// Every target of one package.
fn package_targets(
    package: &Pkg<'_>,
    manifest: &Manifest,
    files: &BTreeSet<String>,
) -> Vec<Target> {
    let at = |rel: &str| join(package.dir, rel);
    let exists = |rel: &str| files.contains(rel);
    let mut out = Vec::new();
    let lib = manifest.lib.as_ref();
    let lib_root = lib
        .and_then(|l| l.path.as_deref())
        .map(&at)
        .or_else(|| Some(at("src/lib.rs")).filter(|p| exists(p)));
    if let Some(root) = lib_root {
        let name = lib.and_then(|l| l.name.as_deref()).unwrap_or(package.name);
        out.push(Target {
            kind: TargetKind::Lib,
            crate_name: code_name(name),
            dir: Some(parent(&root).to_owned()),
            root,
        });
    }
    let kinds = [
        (TargetKind::Bin, &manifest.bin, "src/bin"),
        (TargetKind::Example, &manifest.example, "examples"),
        (TargetKind::Test, &manifest.test, "tests"),
        (TargetKind::Bench, &manifest.bench, "benches"),
    ];
    for (kind, declared, auto_dir) in kinds {
        // Declared targets, by path or by Cargo's conventions for their name.
        for spec in declared {
            let name = spec.name.as_deref().unwrap_or_default();
            let root = match spec.path.as_deref() {
                Some(p) => at(p),
                None if kind == TargetKind::Bin && name == package.name => at("src/main.rs"),
                None => {
                    let single = at(&format!("{auto_dir}/{name}.rs"));
                    if exists(&single) {
                        single
                    } else {
                        at(&format!("{auto_dir}/{name}/main.rs"))
                    }
                }
            };
            let dir = owned_dir(&root, auto_dir);
            out.push(Target {
                kind,
                crate_name: code_name(if name.is_empty() { stem(&root) } else { name }),
                dir,
                root,
            });
        }
        // Automatic ones: `DIR/x.rs` (a root alone) and `DIR/x/main.rs` (a root directory).
        let auto = at(auto_dir);
        let prefix = format!("{auto}/");
        for file in files.range(prefix.clone()..) {
            let Some(rest) = file.strip_prefix(&prefix) else {
                break;
            };
            let (name, root) = match rest.split_once('/') {
                None if rest.ends_with(".rs") => (stem(rest), file.clone()),
                Some((d, "main.rs")) => (d, file.clone()),
                _ => continue,
            };
            if out.iter().any(|t| t.root == root) {
                continue;
            }
            let dir = owned_dir(&root, auto_dir);
            out.push(Target {
                kind,
                crate_name: code_name(name),
                dir,
                root,
            });
        }
    }
    if exists(&at("src/main.rs")) && !out.iter().any(|t| t.root == at("src/main.rs")) {
        out.push(Target {
            kind: TargetKind::Bin,
            crate_name: code_name(package.name),
            dir: Some(at("src")),
            root: at("src/main.rs"),
        });
    }
    let build = match package.build {
        Some(toml::Value::String(p)) => Some(at(p)),
        Some(toml::Value::Boolean(false)) => None,
        _ => Some(at("build.rs")).filter(|p| exists(p)),
    };
    if let Some(root) = build {
        out.push(Target {
            kind: TargetKind::Build,
            crate_name: "build_script_build".into(),
            dir: None,
            root,
        });
    }
    out
}

/// The directory a root's modules live in: none for a root alone in an automatic directory
/// (`src/bin/x.rs`, `examples/x.rs`: its siblings are roots too), else the root's directory.
fn owned_dir(root: &str, auto_dir: &str) -> Option<String> {
    let dir = parent(root);
    let alone = dir == auto_dir || dir.ends_with(&format!("/{auto_dir}"));
    (!alone).then(|| dir.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace shaped like ripgrep's (a `[[bin]]` outside `src/`) with a member crate, a
    /// custom `[lib] path`, and every automatic target kind.
    fn layout() -> CrateLayout {
        let root = r#"
            [package]
            name = "ripgrep"
            build = "build.rs"
            [[bin]]
            name = "rg"
            path = "crates/core/main.rs"
            [[example]]
            name = "declared"
            path = "demo/declared.rs"
            [workspace]
            members = ["crates/searcher", "crates/odd"]
        "#;
        let searcher = "[package]\nname = \"grep-searcher\"\n";
        let odd = "[package]\nname = \"odd\"\n[lib]\nname = \"odd_lib\"\npath = \"lib/odd.rs\"\n";
        let files: BTreeSet<String> = [
            "build.rs",
            "crates/core/main.rs",
            "crates/core/flags/mod.rs",
            "crates/core/flags/hiargs.rs",
            "crates/core/search.rs",
            "crates/searcher/src/lib.rs",
            "crates/searcher/src/searcher/glue.rs",
            "crates/searcher/src/main.rs",
            "crates/searcher/src/bin/tool.rs",
            "crates/searcher/src/bin/multi/main.rs",
            "crates/searcher/src/bin/multi/util.rs",
            "crates/searcher/examples/simple.rs",
            "crates/searcher/examples/big/main.rs",
            "crates/searcher/examples/big/helper.rs",
            "crates/searcher/tests/integration.rs",
            "crates/searcher/benches/speed.rs",
            "crates/odd/lib/odd.rs",
            "crates/odd/lib/inner.rs",
            "demo/declared.rs",
            "scripts/loose.rs",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        CrateLayout::from_manifests(
            [
                ("Cargo.toml", root),
                ("crates/searcher/Cargo.toml", searcher),
                ("crates/odd/Cargo.toml", odd),
            ],
            &files,
        )
    }

    fn at(layout: &CrateLayout, rel: &str) -> Option<String> {
        layout.locate(rel).map(|l| l.key())
    }

    #[test]
    fn every_target_cargo_knows_is_a_crate_root() {
        let l = layout();
        let cases: &[(&str, Option<&str>)] = &[
            // A [[bin]] outside src/ owns its directory (ripgrep's crates/core).
            ("crates/core/main.rs", Some("rg")),
            ("crates/core/flags/hiargs.rs", Some("rg::flags::hiargs")),
            ("crates/core/flags/mod.rs", Some("rg::flags")),
            ("crates/core/search.rs", Some("rg::search")),
            // A member's library; its src/main.rs is a binary of the package's name.
            ("crates/searcher/src/lib.rs", Some("grep_searcher")),
            (
                "crates/searcher/src/searcher/glue.rs",
                Some("grep_searcher::searcher::glue"),
            ),
            ("crates/searcher/src/main.rs", Some("grep_searcher")),
            // src/bin/x.rs is a root alone; src/bin/x/main.rs owns its directory.
            ("crates/searcher/src/bin/tool.rs", Some("tool")),
            ("crates/searcher/src/bin/multi/main.rs", Some("multi")),
            ("crates/searcher/src/bin/multi/util.rs", Some("multi::util")),
            ("crates/searcher/examples/simple.rs", Some("simple")),
            ("crates/searcher/examples/big/main.rs", Some("big")),
            (
                "crates/searcher/examples/big/helper.rs",
                Some("big::helper"),
            ),
            ("crates/searcher/tests/integration.rs", Some("integration")),
            ("crates/searcher/benches/speed.rs", Some("speed")),
            // [lib] name and path.
            ("crates/odd/lib/odd.rs", Some("odd_lib")),
            ("crates/odd/lib/inner.rs", Some("odd_lib::inner")),
            ("demo/declared.rs", Some("declared")),
            ("build.rs", Some("build_script_build")),
            // Nothing accounts for it: the file-tree rule applies.
            ("scripts/loose.rs", None),
        ];
        for (rel, want) in cases {
            assert_eq!(at(&l, rel).as_deref(), *want, "{rel}");
        }
    }

    #[test]
    fn a_library_and_a_binary_sharing_src_give_its_modules_to_the_library() {
        let files: BTreeSet<String> = ["src/lib.rs", "src/main.rs", "src/config.rs"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        let l = CrateLayout::from_manifests(
            [("Cargo.toml", "[package]\nname = \"my-tool\"\n")],
            &files,
        );
        assert_eq!(at(&l, "src/config.rs").as_deref(), Some("my_tool::config"));
        assert_eq!(at(&l, "src/main.rs").as_deref(), Some("my_tool"));
        // A manifest that does not parse accounts for nothing.
        let broken = CrateLayout::from_manifests([("Cargo.toml", "[package")], &files);
        assert_eq!(broken.locate("src/config.rs"), None);
    }
}
