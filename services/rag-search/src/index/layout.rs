//! Finding the workspace's crates: its Cargo manifests read through the path policy and
//! turned into a [`CrateLayout`]; after a refresh, the Rust files whose crate or module moved
//! are parsed again.

use std::collections::BTreeSet;
use std::path::Path;

use ploke_runtime::path_policy;

use crate::parse::CrateLayout;
use crate::scan::{self, ScannedFile};

use super::{IndexError, Summary, WorkspaceIndex};

/// Whether `rel` is a Cargo manifest.
pub(super) fn is_manifest(rel: &str) -> bool {
    rel == "Cargo.toml" || rel.ends_with("/Cargo.toml")
}

/// The crate layout of `root` from the manifests among `files` (relative paths).
pub(super) fn discover(root: &Path, files: &BTreeSet<String>) -> CrateLayout {
    let manifests: Vec<(&str, String)> = files
        .iter()
        .filter(|rel| is_manifest(rel))
        .filter_map(|rel| {
            let abs = scan::own_file(root, rel)?;
            let bytes = path_policy::read_regular(&abs, scan::MAX_FILE_BYTES).ok()?;
            Some((rel.as_str(), String::from_utf8(bytes).ok()?))
        })
        .collect();
    CrateLayout::from_manifests(manifests.iter().map(|(p, t)| (*p, t.as_str())), files)
}

impl WorkspaceIndex {
    /// Uses `layout` from now on (a run found it before parsing).
    pub(super) fn set_layout(&mut self, layout: CrateLayout) {
        self.layout = layout;
    }

    /// After a refresh touched manifests or added or removed Rust files: the layout found
    /// again, and every Rust file whose place in it changed parsed again.
    pub(super) fn relayout(&mut self, summary: &mut Summary) -> Result<(), IndexError> {
        let files: BTreeSet<String> = self.files.keys().cloned().collect();
        let layout = discover(&self.root, &files);
        if layout == self.layout {
            return Ok(());
        }
        self.layout = layout;
        let moved: Vec<String> = self
            .files
            .iter()
            .filter(|(rel, f)| {
                f.language == "rust"
                    && super::update::module_of(&self.layout, rel).key() != f.module
            })
            .map(|(rel, _)| rel.clone())
            .collect();
        for rel in moved {
            if let Some(abs) = scan::own_file(&self.root, &rel) {
                let file = ScannedFile {
                    rel,
                    abs,
                    language: "rust",
                };
                self.apply(&file, false, summary)?;
            }
        }
        Ok(())
    }
}
