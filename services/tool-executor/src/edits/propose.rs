//! Turning `apply_code_edit` and `create_file` arguments into a [`Plan`]: paths checked for
//! writing, files read under the size cap, search texts matched exactly once, items located
//! through rag-search, overlaps refused, diffs made.

use std::collections::BTreeMap;
use std::path::Path;

use ploke_proto::common::v1::ItemKind;
use ploke_proto::rag::v1::CodeItem;
use ploke_proto::tools::v1::{
    ApplyCodeEditArgs, CreateFileArgs, FileDiff, OnExists, ProposedEdit, ReplaceItemEdit,
    SearchReplaceEdit, ToolErrorCode, code_edit,
};

use super::plan::{Plan, PlannedEdit, PlannedFile, unified_diff};
use crate::failure::ToolFailure;
use crate::overlay::{self, View};
use crate::paths::resolve;
use crate::rag::{Lookup, Rag};
use crate::tools::Limits;

/// A plan with what reviewers see.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Planned {
    /// The plan.
    pub plan: Plan,
    /// Each edit with its own diff.
    pub edits: Vec<ProposedEdit>,
    /// One diff per file.
    pub files: Vec<FileDiff>,
}

/// Where planning reads files: the workspace, through the session's overlay if it has one.
struct Files<'a> {
    root: &'a Path,
    limits: &'a Limits,
    view: Option<&'a View>,
}

/// A file as it was read for planning.
struct Original {
    text: String,
    hash: Option<String>,
}

/// Plans `apply_code_edit`, against the session overlay's files when there is one.
pub(super) async fn plan_code_edit(
    root: &Path,
    limits: &Limits,
    rag: &Rag,
    args: &ApplyCodeEditArgs,
    view: Option<&View>,
) -> Result<Planned, ToolFailure> {
    if let Some(v) = view {
        v.fetch_all().await?;
    }
    let session = view.map(View::session).unwrap_or_default();
    let files = Files { root, limits, view };
    if args.edits.is_empty() {
        return Err(ToolFailure::new(
            ToolErrorCode::MissingField,
            "edits",
            "give at least one edit",
        ));
    }
    let mut originals: BTreeMap<String, Original> = BTreeMap::new();
    let mut order = Vec::new();
    let mut edits = Vec::with_capacity(args.edits.len());
    for (i, edit) in args.edits.iter().enumerate() {
        let index = i as u32;
        let planned = match &edit.edit {
            Some(code_edit::Edit::SearchReplace(sr)) => {
                search_replace(&files, index, sr, &mut originals, &mut order)?
            }
            Some(code_edit::Edit::ReplaceItem(ri)) => {
                replace_item(&files, rag, session, index, ri, &mut originals, &mut order).await?
            }
            None => {
                return Err(ToolFailure::new(
                    ToolErrorCode::MissingField,
                    &format!("edits[{i}]"),
                    "set replace_item or search_replace",
                ));
            }
        };
        edits.push(planned);
    }
    let plan = Plan {
        files: order
            .iter()
            .map(|f: &String| PlannedFile {
                file: f.clone(),
                base_hash: originals.get(f).and_then(|o| o.hash.clone()),
            })
            .collect(),
        edits,
    };
    if let Some((a, b)) = plan.overlap() {
        return Err(ToolFailure::invalid(
            &format!("edits[{b}]"),
            format!("edits[{b}] overlaps edits[{a}] in the same file"),
        )
        .hint("merge the two edits into one, or make them touch separate text"));
    }
    finish(plan, &originals)
}

/// Plans `create_file`, against the session overlay's files when there is one (blocking; the
/// overlay's content of the file must have been fetched).
pub(super) fn plan_create_file(
    root: &Path,
    limits: &Limits,
    args: &CreateFileArgs,
    view: Option<&View>,
) -> Result<Planned, ToolFailure> {
    if args.file_path.is_empty() {
        return Err(ToolFailure::new(
            ToolErrorCode::MissingField,
            "file_path",
            "must be set",
        ));
    }
    let path = resolve(root, "file_path", &args.file_path)?;
    if path.rel.is_empty() {
        return Err(ToolFailure::invalid(
            "file_path",
            "names the workspace root, not a file",
        ));
    }
    if args.content.len() as u64 > limits.max_file_bytes {
        return Err(ToolFailure::new(
            ToolErrorCode::TooLarge,
            "content",
            format!(
                "{} bytes; the limit is {}",
                args.content.len(),
                limits.max_file_bytes
            ),
        ));
    }
    let on_exists = args
        .on_exists
        .map(OnExists::try_from)
        .transpose()
        .map_err(|_| ToolFailure::invalid("on_exists", "unknown value"))?
        .unwrap_or(OnExists::Error);
    let original = if !overlay::exists(view, &path)? {
        Original {
            text: String::new(),
            hash: None,
        }
    } else {
        match on_exists {
            OnExists::Unspecified | OnExists::Error => {
                return Err(ToolFailure::new(
                    ToolErrorCode::AlreadyExists,
                    "file_path",
                    format!("{} already exists", path.rel),
                )
                .hint("use apply_code_edit to change it, or set on_exists to overwrite"));
            }
            OnExists::Overwrite => {
                let (text, hash) =
                    overlay::read_text(view, &path, "file_path", limits.max_file_bytes)?;
                Original {
                    text,
                    hash: Some(hash),
                }
            }
        }
    };
    let summary = if original.hash.is_some() {
        format!("overwrite {}", path.rel)
    } else {
        format!("create {}", path.rel)
    };
    let plan = Plan {
        files: vec![PlannedFile {
            file: path.rel.clone(),
            base_hash: original.hash.clone(),
        }],
        edits: vec![PlannedEdit {
            index: 0,
            file: path.rel.clone(),
            start: 0,
            end: original.text.len(),
            replacement: args.content.clone(),
            summary,
        }],
    };
    let originals = BTreeMap::from([(path.rel, original)]);
    finish(plan, &originals)
}

/// Reads `file` once per plan (refusing directories, big, non-UTF-8 and read-only files: an
/// edit the apply would refuse is refused before anyone reviews it; a session's overlay is the
/// developer's checkout, whose files' modes the developer's client checks on delivery).
fn load<'a>(
    files: &Files<'_>,
    field: &str,
    input: &str,
    originals: &'a mut BTreeMap<String, Original>,
    order: &mut Vec<String>,
) -> Result<(String, &'a Original), ToolFailure> {
    let path = resolve(files.root, field, input)?;
    if !originals.contains_key(&path.rel) {
        if files.view.is_none()
            && let Some(mode) = super::apply::read_only(&path.abs)
        {
            return Err(ToolFailure::new(
                ToolErrorCode::PermissionDenied,
                field,
                format!("{} is read-only (mode {mode:o})", path.rel),
            )
            .hint("edit another file, or ask the user to make this one writable"));
        }
        let (text, hash) =
            overlay::read_text(files.view, &path, field, files.limits.max_file_bytes)?;
        order.push(path.rel.clone());
        originals.insert(
            path.rel.clone(),
            Original {
                text,
                hash: Some(hash),
            },
        );
    }
    let original = originals
        .get(&path.rel)
        .ok_or_else(|| ToolFailure::internal("file vanished from the plan"))?;
    Ok((path.rel, original))
}

fn search_replace(
    files: &Files<'_>,
    index: u32,
    edit: &SearchReplaceEdit,
    originals: &mut BTreeMap<String, Original>,
    order: &mut Vec<String>,
) -> Result<PlannedEdit, ToolFailure> {
    let field = |f: &str| format!("edits[{index}].search_replace.{f}");
    if edit.file_path.is_empty() {
        return Err(ToolFailure::new(
            ToolErrorCode::MissingField,
            &field("file_path"),
            "must be set",
        ));
    }
    if edit.search.is_empty() {
        return Err(ToolFailure::new(
            ToolErrorCode::MissingField,
            &field("search"),
            "must not be empty",
        ));
    }
    if edit.search == edit.replace {
        return Err(ToolFailure::invalid(
            &field("replace"),
            "is the same as search; the edit would change nothing",
        ));
    }
    let (file, original) = load(
        files,
        &field("file_path"),
        &edit.file_path,
        originals,
        order,
    )?;
    // A file written with CRLF line ends is searched and edited with them: a model writes
    // "\n" between lines whatever the file has, and its lines would never match, or its
    // replacement would leave LF lines in a CRLF file.
    let eol = line_end(&original.text);
    let crlf_search = with_line_end(&edit.search, eol);
    let (search, replace) = if original.text.contains(crlf_search.as_ref()) {
        (crlf_search, with_line_end(&edit.replace, eol))
    } else {
        (edit.search.as_str().into(), edit.replace.as_str().into())
    };
    let mut found = original.text.match_indices(search.as_ref());
    let Some((start, _)) = found.next() else {
        return Err(ToolFailure::new(
            ToolErrorCode::NoMatch,
            &field("search"),
            format!("the search text does not occur in {file}"),
        )
        .hint(
            "read_file the region and copy the text exactly, whitespace and indentation included",
        ));
    };
    let more = found.count();
    if more > 0 {
        return Err(ToolFailure::new(
            ToolErrorCode::AmbiguousMatch,
            &field("search"),
            format!(
                "the search text occurs {} times in {file}; it must occur exactly once",
                more + 1
            ),
        )
        .hint("include more surrounding lines in search so that it matches one place"));
    }
    Ok(PlannedEdit {
        index,
        file: file.clone(),
        start,
        end: start + search.len(),
        replacement: replace.into_owned(),
        summary: format!("search/replace in {file}"),
    })
}

async fn replace_item(
    files: &Files<'_>,
    rag: &Rag,
    session: &str,
    index: u32,
    edit: &ReplaceItemEdit,
    originals: &mut BTreeMap<String, Original>,
    order: &mut Vec<String>,
) -> Result<PlannedEdit, ToolFailure> {
    let field = |f: &str| format!("edits[{index}].replace_item.{f}");
    let canon = edit.canon_path.trim();
    if canon.is_empty() {
        return Err(ToolFailure::new(
            ToolErrorCode::MissingField,
            &field("canon_path"),
            "must be set",
        ));
    }
    if edit.new_code.trim().is_empty() {
        return Err(ToolFailure::new(
            ToolErrorCode::MissingField,
            &field("new_code"),
            "must not be empty",
        )
        .hint("to delete an item, use search_replace with an empty replace"));
    }
    let wanted_file = match edit.file_path.as_deref().filter(|f| !f.is_empty()) {
        Some(f) => Some(resolve(files.root, &field("file_path"), f)?.rel),
        None => None,
    };
    let mut refreshed = false;
    loop {
        let item = locate(
            files.root,
            rag,
            session,
            canon,
            wanted_file.as_deref(),
            &field,
        )
        .await?;
        let span = item.span.clone().unwrap_or_default();
        let (file, original) = load(files, &field("canon_path"), &span.path, originals, order)?;
        if original.hash.as_deref() != Some(item.file_hash.as_str()) {
            // The index saw an older version of the file: refresh it once and look again (an
            // overlay's files are indexed as they arrive; only the workspace's can lag).
            if refreshed || files.view.is_some_and(|v| v.hides(&file)) {
                return Err(ToolFailure::unavailable(format!(
                    "the code index has not caught up with {file}"
                )));
            }
            rag.refresh(files.root, vec![file]).await?;
            refreshed = true;
            continue;
        }
        let (start, end) = (span.byte_start as usize, span.byte_end as usize);
        let Some(old) = original.text.get(start..end) else {
            return Err(ToolFailure::internal(format!(
                "the index span of {canon} does not fit {file}"
            )));
        };
        let (start, replacement) = fit_indentation(&original.text, start, old, &edit.new_code);
        return Ok(PlannedEdit {
            index,
            file: file.clone(),
            start,
            end,
            replacement: with_line_end(&replacement, line_end(&original.text)).into_owned(),
            summary: format!("replace {canon}"),
        });
    }
}

/// The line end most of `text`'s lines have: "\r\n" or "\n".
fn line_end(text: &str) -> &'static str {
    let crlf = text.matches("\r\n").count();
    if crlf > 0 && crlf >= text.matches('\n').count() - crlf {
        "\r\n"
    } else {
        "\n"
    }
}

/// `text` with its "\n" line ends written as `eol`; as given when `eol` is "\n" or `text`
/// already has a CR (written for the file as it is).
fn with_line_end<'a>(text: &'a str, eol: &str) -> std::borrow::Cow<'a, str> {
    if eol == "\n" || text.contains('\r') {
        text.into()
    } else {
        text.replace('\n', eol).into()
    }
}

/// Where a replaced item starts and its new text, indented like the old one: the range starts
/// at the beginning of the item's line when only indentation precedes it, and new code written
/// without indentation gets the item's indentation on every line.
fn fit_indentation(text: &str, start: usize, old: &str, new_code: &str) -> (usize, String) {
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let indent = &text[line_start..start];
    let mut replacement = new_code.to_owned();
    if !old.ends_with('\n') && replacement.ends_with('\n') {
        replacement.pop();
    }
    if !indent.chars().all(|c| c == ' ' || c == '\t') {
        return (start, replacement.trim_start().to_owned());
    }
    let first = replacement
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    if indent.is_empty() || first.starts_with([' ', '\t']) {
        return (line_start, replacement);
    }
    let indented: Vec<String> = replacement
        .split('\n')
        .map(|l| {
            if l.trim().is_empty() {
                l.to_owned()
            } else {
                format!("{indent}{l}")
            }
        })
        .collect();
    (line_start, indented.join("\n"))
}

/// The one item `canon` names (in `file` when given).
async fn locate(
    root: &Path,
    rag: &Rag,
    session: &str,
    canon: &str,
    file: Option<&str>,
    field: &(dyn Fn(&str) -> String + Sync),
) -> Result<CodeItem, ToolFailure> {
    let found = rag
        .lookup(
            root,
            session,
            Lookup::CanonPath(canon.to_owned()),
            ItemKind::Unspecified,
            100,
        )
        .await?;
    let mut items: Vec<CodeItem> = found
        .items
        .into_iter()
        .filter(|i| file.is_none_or(|f| i.span.as_ref().is_some_and(|s| s.path == f)))
        .collect();
    match items.len() {
        0 => Err(ToolFailure::not_found(
            &field("canon_path"),
            match file {
                Some(f) => format!("no item {canon} in {f}"),
                None => format!("no item has the canonical path {canon}"),
            },
        )
        .hint("use code_item_lookup with the bare name to find the exact canonical path")),
        1 => Ok(items.remove(0)),
        n => {
            let places: Vec<String> = items
                .iter()
                .filter_map(|i| {
                    i.span
                        .as_ref()
                        .map(|s| format!("{}:{}", s.path, s.line_start))
                })
                .collect();
            Err(ToolFailure::new(
                ToolErrorCode::AmbiguousMatch,
                &field("canon_path"),
                format!(
                    "{n} items have the canonical path {canon}: {}",
                    places.join(", ")
                ),
            )
            .hint("set file_path to the file of the item you mean"))
        }
    }
}

/// Diffs per edit and per file.
fn finish(plan: Plan, originals: &BTreeMap<String, Original>) -> Result<Planned, ToolFailure> {
    let empty = Original {
        text: String::new(),
        hash: None,
    };
    let mut edits = Vec::with_capacity(plan.edits.len());
    for e in &plan.edits {
        let original = originals.get(&e.file).unwrap_or(&empty);
        let new = plan
            .content_with(&e.file, &original.text, &[e.index])
            .map_err(ToolFailure::internal)?
            .unwrap_or_default();
        edits.push(ProposedEdit {
            index: e.index,
            file_path: e.file.clone(),
            summary: e.summary.clone(),
            unified_diff: unified_diff(&e.file, &original.text, &new, original.hash.is_none()),
        });
    }
    let all = plan.all_indices();
    let mut files = Vec::with_capacity(plan.files.len());
    for f in &plan.files {
        let original = originals.get(&f.file).unwrap_or(&empty);
        let new = plan
            .content_with(&f.file, &original.text, &all)
            .map_err(ToolFailure::internal)?
            .unwrap_or_default();
        files.push(FileDiff {
            file_path: f.file.clone(),
            unified_diff: unified_diff(&f.file, &original.text, &new, f.base_hash.is_none()),
            base_hash: f.base_hash.clone().unwrap_or_default(),
            creates: f.base_hash.is_none(),
        });
    }
    Ok(Planned { plan, edits, files })
}

#[cfg(test)]
mod tests {
    use super::fit_indentation;

    const TEXT: &str = "impl A {\n    pub fn f(&self) {\n        1\n    }\n}\n";

    fn item() -> (usize, &'static str) {
        let start = TEXT.find("pub fn").unwrap();
        let end = TEXT.find("    }\n}").unwrap() + 5;
        (start, &TEXT[start..end])
    }

    #[test]
    fn new_code_indented_like_the_file_is_kept_as_is() {
        let (start, old) = item();
        let new = "    pub fn g(&self) {\n        2\n    }\n";
        assert_eq!(
            fit_indentation(TEXT, start, old, new),
            (9, "    pub fn g(&self) {\n        2\n    }".into())
        );
    }

    #[test]
    fn unindented_new_code_gets_the_items_indentation() {
        let (start, old) = item();
        let new = "pub fn g(&self) {\n    2\n}";
        assert_eq!(
            fit_indentation(TEXT, start, old, new),
            (9, "    pub fn g(&self) {\n        2\n    }".into())
        );
    }

    #[test]
    fn an_item_after_other_code_on_its_line_is_replaced_in_place() {
        let text = "struct A; struct B;\n";
        let start = text.find("struct B").unwrap();
        assert_eq!(
            fit_indentation(text, start, "struct B;", "  struct C;"),
            (start, "struct C;".into())
        );
    }
}
