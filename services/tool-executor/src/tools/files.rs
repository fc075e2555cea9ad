//! The file tools: `read_file`, `list_dir` and the local half of `get_file_metadata`. They run
//! on a blocking thread; every path goes through [`crate::paths`].

use std::path::Path;

use ploke_runtime::path_policy::stream_regular;

use ploke_proto::tools::v1::{
    DirEntry, EntryKind, GetFileMetadataArgs, GetFileMetadataResult, ListDirArgs, ListDirResult,
    ReadFileArgs, ReadFileResult, ToolErrorCode,
};

use ploke_proto::rag::v1::OverlayEntryState;

use super::Limits;
use crate::failure::ToolFailure;
use crate::overlay::{self, Shadow, View};
use crate::paths::resolve;

/// Default and largest `max_entries` of `list_dir`.
const LIST_DEFAULT: u32 = 500;
const LIST_MAX: u32 = 5000;

/// Reads a whole text file for a tool: refused when it is not a regular file (a directory, a
/// FIFO, a device: see [`ploke_runtime::path_policy::open_regular`]), over `max_bytes` or not
/// UTF-8. Returns the text and its blake3 hash (hex).
pub fn read_text(
    abs: &Path,
    field: &str,
    shown: &str,
    max_bytes: u64,
) -> Result<(String, String), ToolFailure> {
    let bytes = crate::paths::read(abs, field, shown, max_bytes)?;
    let hash = blake3::hash(&bytes).to_hex().to_string();
    let text = String::from_utf8(bytes).map_err(|_| {
        ToolFailure::new(
            ToolErrorCode::NotUtf8,
            field,
            format!("{shown} is not valid UTF-8 text"),
        )
    })?;
    Ok((text, hash))
}

/// `read_file`, through the session's overlay when it has one.
pub fn read_file(
    root: &Path,
    limits: &Limits,
    args: &ReadFileArgs,
    view: Option<&View>,
) -> Result<ReadFileResult, ToolFailure> {
    let path = resolve(root, "file", &args.file)?;
    let (text, file_hash) = overlay::read_text(view, &path, "file", limits.max_file_bytes)?;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let total = u32::try_from(lines.len()).unwrap_or(u32::MAX);
    let start = args.start_line.unwrap_or(1).max(1);
    if start > total.max(1) {
        return Err(ToolFailure::out_of_range(
            "start_line",
            format!(
                "{} has {total} lines; start_line {start} is past the end",
                path.rel
            ),
        )
        .hint(format!("use a start_line between 1 and {total}")));
    }
    let end = args.end_line.unwrap_or(total).min(total);
    if let Some(asked) = args.end_line
        && asked < start
    {
        return Err(ToolFailure::invalid(
            "end_line",
            format!("end_line {asked} is before start_line {start}"),
        ));
    }
    let mut content = String::new();
    let mut last = start.saturating_sub(1);
    let mut truncated = false;
    for (i, line) in lines
        .iter()
        .enumerate()
        .take(end as usize)
        .skip(start as usize - 1)
    {
        if content.len() + line.len() > limits.read_max_bytes {
            truncated = true;
            if content.is_empty() {
                // One line longer than the cap: its first part, cut on a char boundary.
                let mut cut = limits.read_max_bytes;
                while !line.is_char_boundary(cut) {
                    cut -= 1;
                }
                content.push_str(&line[..cut]);
                last = i as u32 + 1;
            }
            break;
        }
        content.push_str(line);
        last = i as u32 + 1;
    }
    Ok(ReadFileResult {
        file_path: path.rel,
        start_line: start,
        end_line: last,
        total_lines: total,
        content,
        file_hash,
        truncated,
    })
}

/// `list_dir`, with the session overlay's files added and its deleted files left out.
pub fn list_dir(
    root: &Path,
    args: &ListDirArgs,
    view: Option<&View>,
) -> Result<ListDirResult, ToolFailure> {
    let max = args.max_entries.unwrap_or(LIST_DEFAULT);
    if !(1..=LIST_MAX).contains(&max) {
        return Err(ToolFailure::out_of_range(
            "max_entries",
            format!("must be between 1 and {LIST_MAX}, got {max}"),
        ));
    }
    let asked = args.path.as_deref().unwrap_or("");
    let path = resolve(root, "path", asked)?;
    let shown = if path.rel.is_empty() { "." } else { &path.rel };
    let overlaid = view.map(|v| v.children(&path.rel)).unwrap_or_default();
    if let Some(v) = view
        && v.hides(&path.rel)
    {
        return Err(
            ToolFailure::invalid("path", format!("{shown} is a file, not a directory"))
                .hint("use read_file for files"),
        );
    }
    let mut entries = Vec::new();
    let listed = match std::fs::metadata(&path.abs) {
        Ok(meta) if !meta.is_dir() => {
            return Err(ToolFailure::invalid(
                "path",
                format!("{shown} is a file, not a directory"),
            )
            .hint("use read_file for files"));
        }
        Ok(_) => {
            Some(std::fs::read_dir(&path.abs).map_err(|e| ToolFailure::io("path", shown, &e))?)
        }
        // A directory only the developer has.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !overlaid.is_empty() => None,
        Err(e) => return Err(ToolFailure::io("path", shown, &e)),
    };
    for entry in listed.into_iter().flatten() {
        let entry = entry.map_err(|e| ToolFailure::io("path", shown, &e))?;
        // A name that is not UTF-8 could not be named back in any call: left out, as from
        // searches and the index.
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name.starts_with('.') && !args.include_hidden.unwrap_or(false) {
            continue;
        }
        if ploke_runtime::path_policy::protected(&entry.file_name()).is_some() {
            continue; // git's and ploke's own state: never read, so never listed
        }
        if overlaid.contains_key(&name) {
            continue; // the overlay's version (or its deletion) replaces it
        }
        let meta = match entry.path().symlink_metadata() {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue, // vanished meanwhile
            // A directory that can be read but not entered lists names it cannot describe:
            // said so, not answered as an empty directory.
            Err(e) => return Err(ToolFailure::io("path", shown, &e)),
        };
        let kind = if meta.is_symlink() {
            EntryKind::Symlink
        } else if meta.is_dir() {
            EntryKind::Dir
        } else if meta.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        };
        entries.push(DirEntry {
            name,
            kind: kind as i32,
            size_bytes: if kind == EntryKind::File {
                meta.len()
            } else {
                0
            },
        });
    }
    for (name, entry) in overlaid {
        if name.starts_with('.') && !args.include_hidden.unwrap_or(false) {
            continue;
        }
        match entry {
            None => entries.push(DirEntry {
                name,
                kind: EntryKind::Dir as i32,
                size_bytes: 0,
            }),
            Some(e) if e.state == OverlayEntryState::Deleted => {}
            Some(e) => entries.push(DirEntry {
                name,
                kind: EntryKind::File as i32,
                size_bytes: e.size,
            }),
        }
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let truncated = entries.len() > max as usize;
    entries.truncate(max as usize);
    Ok(ListDirResult {
        path: path.rel,
        entries,
        truncated,
    })
}

/// `get_file_metadata` without the index count; a missing file is an answer (`exists` false).
/// Only a regular file is hashed, and the hashing stops once `cancelled` says so. Through the
/// session's overlay, the developer's version is described.
pub fn file_metadata(
    root: &Path,
    args: &GetFileMetadataArgs,
    cancelled: &dyn Fn() -> bool,
    view: Option<&View>,
) -> Result<GetFileMetadataResult, ToolFailure> {
    if args.file_path.is_empty() {
        return Err(ToolFailure::new(
            ToolErrorCode::MissingField,
            "file_path",
            "must be set",
        ));
    }
    let path = resolve(root, "file_path", &args.file_path)?;
    let mut result = GetFileMetadataResult {
        file_path: path.rel.clone(),
        language: ploke_runtime::language::language_of(&path.abs)
            .unwrap_or("")
            .to_owned(),
        ..Default::default()
    };
    match view.map(|v| v.shadow(&path.rel)).transpose()? {
        None | Some(Shadow::Base) => {}
        Some(Shadow::Deleted) => return Ok(result),
        Some(Shadow::Pending) => return Err(overlay::pending("file_path", &path.rel)),
        Some(Shadow::Changed(bytes, hash)) => {
            result.exists = true;
            result.size_bytes = bytes.len() as u64;
            result.file_hash = hash;
            let newlines = bytes.iter().filter(|b| **b == b'\n').count() as u64;
            result.line_count = newlines + u64::from(bytes.last().is_some_and(|b| *b != b'\n'));
            return Ok(result);
        }
    }
    let meta = match std::fs::metadata(&path.abs) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(result),
        Err(e) => return Err(ToolFailure::io("file_path", &path.rel, &e)),
    };
    result.exists = true;
    result.is_dir = meta.is_dir();
    result.modified_at = meta.modified().ok().map(prost_types::Timestamp::from);
    if meta.is_dir() {
        return Ok(result);
    }
    let mut hasher = blake3::Hasher::new();
    let (mut newlines, mut last) = (0u64, b'\n');
    let meta = stream_regular(&path.abs, cancelled, &mut |chunk| {
        hasher.update(chunk);
        newlines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
        last = chunk[chunk.len() - 1];
    })
    .map_err(|e| crate::paths::unreadable("file_path", &path.rel, e))?;
    result.size_bytes = meta.len();
    result.file_hash = hasher.finalize().to_hex().to_string();
    result.line_count = newlines + u64::from(last != b'\n');
    Ok(result)
}
