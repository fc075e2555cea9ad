//! Request paths and spans: checking a relative path a request names, and reading a span of a
//! file as it is now (for GetSnippets).

use std::path::{Component, Path};

use ploke_runtime::path_policy;

use super::{Snippet, SnippetStatus, SpanRequest};
use crate::error::RagError;

/// Checks that `rel` is a relative path that stays inside the root.
pub fn check_relative(field: &str, rel: &str) -> Result<String, RagError> {
    let bad = |reason| RagError::BadPath {
        field: field.to_owned(),
        path: rel.to_owned(),
        reason,
    };
    if rel.trim().is_empty() {
        return Err(bad("is empty"));
    }
    if rel.contains('\0') {
        return Err(bad("contains a NUL byte"));
    }
    if rel.len() > path_policy::MAX_PATH_BYTES {
        return Err(bad("is longer than 4096 bytes"));
    }
    let path = Path::new(rel);
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => return Err(bad("must not contain `..`")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(bad("must be relative to the workspace root"));
            }
        }
    }
    if parts.is_empty() {
        return Err(bad("names no file"));
    }
    Ok(parts.join("/"))
}

fn line_of(bytes: &[u8], offset: usize) -> u32 {
    let newlines = bytes[..offset.min(bytes.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count();
    u32::try_from(newlines + 1).unwrap_or(u32::MAX)
}

pub(super) fn read_span(s: &SpanRequest, file: Option<&(Vec<u8>, String)>) -> Snippet {
    let mut out = Snippet {
        path: s.path.clone(),
        byte_start: s.byte_start,
        byte_end: s.byte_end,
        line_start: 0,
        line_end: 0,
        text: String::new(),
        file_hash: String::new(),
        status: SnippetStatus::Missing,
    };
    let Some((bytes, hash)) = file else {
        return out;
    };
    out.file_hash = hash.clone();
    let (Ok(start), Ok(end)) = (usize::try_from(s.byte_start), usize::try_from(s.byte_end)) else {
        out.status = SnippetStatus::OutOfRange;
        return out;
    };
    let text = bytes
        .get(start..end)
        .and_then(|b| std::str::from_utf8(b).ok());
    match text {
        None => out.status = SnippetStatus::OutOfRange,
        Some(t) => {
            out.text = t.to_owned();
            out.line_start = line_of(bytes, start);
            out.line_end = line_of(bytes, end.saturating_sub(1).max(start));
            out.status = if s.expected_hash.is_empty() || s.expected_hash == *hash {
                SnippetStatus::Ok
            } else {
                SnippetStatus::Stale
            };
        }
    }
    out
}
