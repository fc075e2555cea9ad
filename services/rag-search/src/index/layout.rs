//! Finding the workspace's module systems: its manifests (Cargo, go.mod, package.json) read
//! through the path policy and turned into a [`Layout`] with its Python packages; after a
//! refresh, the files whose crate, package or module moved are parsed again.

use std::collections::BTreeSet;
use std::path::Path;

use ploke_runtime::path_policy;

use crate::parse::{self, Layout};
use crate::scan::{self, ScannedFile};

use super::{IndexError, Summary, WorkspaceIndex};

/// The layout of `root` from the manifests among `files` (relative paths).
pub(super) fn discover(root: &Path, files: &BTreeSet<String>) -> Layout {
    let manifests: Vec<(&str, String)> = files
        .iter()
        .filter(|rel| parse::is_manifest(rel))
        .filter_map(|rel| {
            let abs = scan::own_file(root, rel)?;
            let bytes = path_policy::read_regular(&abs, scan::MAX_FILE_BYTES).ok()?;
            Some((rel.as_str(), String::from_utf8(bytes).ok()?))
        })
        .collect();
    Layout::from_manifests(manifests.iter().map(|(p, t)| (*p, t.as_str())), files)
}

impl WorkspaceIndex {
    /// Uses `layout` from now on (a run found it before parsing).
    pub(super) fn set_layout(&mut self, layout: Layout) {
        self.layout = layout;
    }

    /// After a refresh touched manifests or package markers, or added or removed source
    /// files: the layout found again, and every file whose place in it changed parsed again.
    pub(super) fn relayout(&mut self, summary: &mut Summary) -> Result<(), IndexError> {
        let files: BTreeSet<String> = self.files.keys().cloned().collect();
        let layout = discover(&self.root, &files);
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
