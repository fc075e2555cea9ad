//! Finding the workspace's module systems: its manifests (Cargo, go.mod, package.json) read
//! through the path policy and turned into a [`Layout`] with its Python packages; after a
//! refresh, the files whose crate, package or module moved are parsed again.

use std::collections::BTreeSet;
use std::path::Path;

use ploke_runtime::path_policy;

use crate::parse::{self, Layout};
use crate::scan::{self, ScannedFile};

use super::{IndexError, Summary, WorkspaceIndex};

/// The text of a workspace file, read through the path policy.
fn read_text(root: &Path, rel: &str) -> Option<String> {
    let abs = scan::own_file(root, rel)?;
    let bytes = path_policy::read_regular(&abs, scan::MAX_FILE_BYTES).ok()?;
    String::from_utf8(bytes).ok()
}

/// A Rust file's `#[path]` declarations as it is on disk now.
fn path_modules_of(root: &Path, rel: &str) -> Vec<parse::PathModule> {
    read_text(root, rel).map_or_else(Vec::new, |t| parse::path_modules(rel, &t))
}

/// Whether a Rust file declares `#[path]` modules (as it is on disk now).
pub(super) fn declares_path_modules(root: &Path, rel: &str) -> bool {
    !path_modules_of(root, rel).is_empty()
}

/// The layout of `root` from the manifests among `files` (relative paths) and the Rust
/// files' `#[path]` declarations. With `known` (the layout before, and the files changed
/// since), only the changed files and the known declaring ones are read for declarations.
pub(super) fn discover(
    root: &Path,
    files: &BTreeSet<String>,
    known: Option<(&Layout, &[String])>,
) -> Layout {
    let manifests: Vec<(&str, String)> = files
        .iter()
        .filter(|rel| parse::is_manifest(rel))
        .filter_map(|rel| Some((rel.as_str(), read_text(root, rel)?)))
        .collect();
    let candidates: BTreeSet<&String> = match known {
        Some((layout, changed)) => layout
            .crates
            .path_declarations()
            .keys()
            .chain(changed)
            .filter(|rel| files.contains(*rel))
            .collect(),
        None => files.iter().collect(),
    };
    let declarations = candidates
        .into_iter()
        .filter(|rel| rel.ends_with(".rs"))
        .map(|rel| (rel.clone(), path_modules_of(root, rel)))
        .filter(|(_, modules)| !modules.is_empty())
        .collect();
    let mut layout = Layout::from_manifests(manifests.iter().map(|(p, t)| (*p, t.as_str())), files);
    layout.crates = std::mem::take(&mut layout.crates).with_path_modules(declarations);
    layout
}

impl WorkspaceIndex {
    /// Uses `layout` from now on (a run found it before parsing).
    pub(super) fn set_layout(&mut self, layout: Layout) {
        self.layout = layout;
    }

    /// After a refresh (of `changed`) touched manifests or package markers, `#[path]`
    /// declarations, or added or removed source files: the layout found again, and every file
    /// whose place in it changed parsed again.
    pub(super) fn relayout(
        &mut self,
        changed: &[String],
        summary: &mut Summary,
    ) -> Result<(), IndexError> {
        let files: BTreeSet<String> = self.files.keys().cloned().collect();
        let layout = discover(&self.root, &files, Some((&self.layout, changed)));
        if layout == self.layout {
            return Ok(());
        }
        self.layout = layout;
        let moved: Vec<(String, &str)> = self
            .files
            .iter()
            .filter(|(rel, f)| {
                let loc = self.layout.locate(rel, &f.language);
                super::update::module_key(&f.language, loc.as_ref()) != f.module
            })
            .filter_map(|(rel, _)| Some((rel.clone(), parse::language_of(Path::new(rel))?)))
            .collect();
        for (rel, language) in moved {
            if let Some(abs) = scan::own_file(&self.root, &rel) {
                let file = ScannedFile { rel, abs, language };
                self.apply(&file, false, summary)?;
            }
        }
        Ok(())
    }
}
