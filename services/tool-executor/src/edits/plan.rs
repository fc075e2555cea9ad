//! Edit plans: every edit of a proposal resolved to a byte range of its file's content at
//! proposal time, so that applying all of them, or any chosen subset, is plain range
//! replacement; and the unified diffs a reviewer sees.

use serde::{Deserialize, Serialize};
use similar::TextDiff;

/// One edit resolved against its file's original content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedEdit {
    /// Position in the tool call's `edits` (0 for `create_file`).
    pub index: u32,
    /// File it changes, relative to the workspace root.
    pub file: String,
    /// Replaced byte range of the original content.
    pub start: usize,
    /// End of the replaced range (exclusive).
    pub end: usize,
    /// Text put in its place.
    pub replacement: String,
    /// Short description for reviewers.
    pub summary: String,
}

/// One file a proposal touches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedFile {
    /// Path relative to the workspace root.
    pub file: String,
    /// blake3 (hex) of the content the plan was made against; `None` when the file did not
    /// exist (it is created).
    pub base_hash: Option<String>,
}

/// Every file and edit of one proposal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Touched files in first-edit order.
    pub files: Vec<PlannedFile>,
    /// Edits in call order.
    pub edits: Vec<PlannedEdit>,
}

impl Plan {
    /// The new content of `file` — whose content is `original`, the text the plan was made
    /// against — with the chosen edits applied; `Ok(None)` when none of them touches it, an
    /// error when a range does not fit `original` (which a hash check rules out).
    pub fn content_with(
        &self,
        file: &str,
        original: &str,
        chosen: &[u32],
    ) -> Result<Option<String>, String> {
        let mut edits: Vec<&PlannedEdit> = self
            .edits
            .iter()
            .filter(|e| e.file == file && chosen.contains(&e.index))
            .collect();
        if edits.is_empty() {
            return Ok(None);
        }
        edits.sort_by_key(|e| e.start);
        let bad = |e: &PlannedEdit| format!("edit {} does not fit {file}", e.index);
        let mut out = String::with_capacity(original.len());
        let mut at = 0;
        for e in edits {
            out.push_str(original.get(at..e.start).ok_or_else(|| bad(e))?);
            out.push_str(&e.replacement);
            at = e.end;
        }
        let rest = original.get(at..);
        out.push_str(rest.ok_or_else(|| format!("an edit ends past the end of {file}"))?);
        Ok(Some(out))
    }

    /// Indices of every edit.
    pub fn all_indices(&self) -> Vec<u32> {
        self.edits.iter().map(|e| e.index).collect()
    }

    /// The file record of `name`.
    pub fn file(&self, name: &str) -> Option<&PlannedFile> {
        self.files.iter().find(|f| f.file == name)
    }

    /// The first pair of edits to one file whose ranges overlap, as (earlier index, later index).
    pub fn overlap(&self) -> Option<(u32, u32)> {
        let mut sorted: Vec<&PlannedEdit> = self.edits.iter().collect();
        sorted.sort_by(|a, b| (&a.file, a.start, a.end).cmp(&(&b.file, b.start, b.end)));
        sorted.windows(2).find_map(|w| {
            let (a, b) = (w[0], w[1]);
            let clash =
                a.file == b.file && (b.start < a.end || (a.start == b.start && a.end == b.end));
            clash.then(|| (a.index.min(b.index), a.index.max(b.index)))
        })
    }
}

/// Unified diff of `file` from `old` to `new` (`/dev/null` as the old side of a new file).
pub fn unified_diff(file: &str, old: &str, new: &str, creates: bool) -> String {
    let old_name = if creates {
        "/dev/null".to_owned()
    } else {
        format!("a/{file}")
    };
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&old_name, &format!("b/{file}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(edits: &[(usize, usize, &str)]) -> Plan {
        Plan {
            files: vec![PlannedFile {
                file: "a.rs".into(),
                base_hash: Some("h".into()),
            }],
            edits: edits
                .iter()
                .enumerate()
                .map(|(i, (s, e, r))| PlannedEdit {
                    index: i as u32,
                    file: "a.rs".into(),
                    start: *s,
                    end: *e,
                    replacement: (*r).into(),
                    summary: String::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn applies_all_or_chosen_edits_by_original_ranges() {
        let p = plan(&[(8, 13, "THREE"), (0, 3, "ONE")]);
        let original = "one two three\n";
        let with = |chosen: &[u32]| p.content_with("a.rs", original, chosen).unwrap();
        assert_eq!(with(&[0, 1]).unwrap(), "ONE two THREE\n");
        assert_eq!(with(&[1]).unwrap(), "ONE two three\n");
        assert_eq!(with(&[]), None);
        assert!(p.content_with("a.rs", "short", &[0]).is_err());
        assert_eq!(p.overlap(), None);
    }

    #[test]
    fn overlapping_ranges_are_found() {
        assert_eq!(plan(&[(0, 3, "x"), (2, 4, "y")]).overlap(), Some((0, 1)));
        assert_eq!(plan(&[(0, 3, "x"), (3, 4, "y")]).overlap(), None);
    }

    #[test]
    fn diffs_name_both_sides() {
        assert_eq!(
            unified_diff("a.rs", "a\nb\n", "a\nc\n", false),
            "--- a/a.rs\n+++ b/a.rs\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
        );
        assert_eq!(
            unified_diff("n.rs", "", "x\n", true),
            "--- /dev/null\n+++ b/n.rs\n@@ -0,0 +1 @@\n+x\n"
        );
    }
}
