//! What a model reads back from a tool, the same for a session's model and an MCP client: each
//! typed result rendered as compact text (code stays code, not JSON-escaped), and typed errors
//! with their code, field and hint.

use std::fmt::Write as _;

use crate::common::v1::ItemKind;
use crate::tools::v1::{EntryKind, ToolError, ToolResult, tool_result};

/// The tool message text of a result.
pub fn result(r: &ToolResult) -> String {
    use tool_result::Result as R;
    let mut out = String::new();
    match &r.result {
        None => out.push_str("(the tool returned nothing)"),
        Some(R::RequestCodeContext(c)) => {
            let _ = writeln!(
                out,
                "{} part(s) for `{}`, {} of {} tokens{}:",
                c.parts.len(),
                c.search_term,
                c.total_tokens,
                c.token_budget,
                if c.truncated {
                    ", some candidates cut to fit"
                } else {
                    ""
                }
            );
            for p in &c.parts {
                out.push_str(&p.snippet);
            }
            if c.parts.is_empty() {
                out.push_str("no indexed code matched; try other words or search_code\n");
            }
        }
        Some(R::ReadFile(f)) => {
            let _ = writeln!(
                out,
                "{} lines {}-{} of {} (blake3 {}){}",
                f.file_path,
                f.start_line,
                f.end_line,
                f.total_lines,
                f.file_hash,
                if f.truncated {
                    ", cut at the byte cap; read on from the next line"
                } else {
                    ""
                }
            );
            out.push_str(&f.content);
        }
        Some(R::ListDir(d)) => {
            let _ = writeln!(out, "{}/", if d.path.is_empty() { "." } else { &d.path });
            for e in &d.entries {
                match e.kind() {
                    EntryKind::Dir => {
                        let _ = writeln!(out, "{}/", e.name);
                    }
                    EntryKind::Symlink => {
                        let _ = writeln!(out, "{} (symlink)", e.name);
                    }
                    EntryKind::Other => {
                        let _ = writeln!(out, "{} (not a regular file)", e.name);
                    }
                    EntryKind::File | EntryKind::Unspecified => {
                        let _ = writeln!(out, "{} ({} bytes)", e.name, e.size_bytes);
                    }
                }
            }
            if d.truncated {
                out.push_str("(more entries not shown; raise max_entries)\n");
            }
        }
        Some(R::SearchCode(s)) => {
            for m in &s.matches {
                let first = m.line_number.saturating_sub(m.before.len() as u32);
                for (i, l) in m.before.iter().enumerate() {
                    let _ = writeln!(out, "{}-{}-{l}", m.file_path, first + i as u32);
                }
                let _ = writeln!(out, "{}:{}:{}", m.file_path, m.line_number, m.line);
                for (i, l) in m.after.iter().enumerate() {
                    let _ = writeln!(out, "{}-{}-{l}", m.file_path, m.line_number + 1 + i as u32);
                }
            }
            let _ = writeln!(
                out,
                "({} match(es) in {} file(s) searched{})",
                s.matches.len(),
                s.files_searched,
                if s.truncated {
                    "; more matches not shown"
                } else {
                    ""
                }
            );
            for f in &s.skipped {
                let _ = writeln!(
                    out,
                    "(not searched to its end: {} {})",
                    f.file_path, f.reason
                );
            }
            let unnamed = s.files_skipped.saturating_sub(s.skipped.len() as u64);
            if unnamed > 0 {
                let _ = writeln!(out, "({unnamed} more file(s) not searched to their end)");
            }
        }
        Some(R::GetFileMetadata(m)) => {
            if !m.exists {
                let _ = writeln!(out, "{} does not exist", m.file_path);
            } else if m.is_dir {
                let _ = writeln!(out, "{} is a directory", m.file_path);
            } else {
                let _ = writeln!(
                    out,
                    "{}: {} bytes, {} lines, language {}, {} indexed item(s), blake3 {}, modified {}",
                    m.file_path,
                    m.size_bytes,
                    m.line_count,
                    if m.language.is_empty() {
                        "unknown"
                    } else {
                        &m.language
                    },
                    m.indexed_items,
                    m.file_hash,
                    m.modified_at.map(|t| t.to_string()).unwrap_or_default()
                );
            }
        }
        Some(R::CodeItemLookup(l)) => {
            if !l.found {
                out.push_str("no item matched\n");
            }
            for i in &l.items {
                let span = i.span.clone().unwrap_or_default();
                let kind = ItemKind::try_from(i.kind).unwrap_or(ItemKind::Unspecified);
                let _ = writeln!(
                    out,
                    "{} ({}) {}:{}-{}\n    {}",
                    i.canon_path,
                    kind.as_str_name()
                        .trim_start_matches("ITEM_KIND_")
                        .to_ascii_lowercase(),
                    span.path,
                    span.line_start,
                    span.line_end,
                    i.signature
                );
            }
        }
        Some(R::ApplyCodeEdit(o) | R::CreateFile(o)) => {
            let _ = writeln!(
                out,
                "applied (proposal {}): edits {:?}; files changed: {}. {}",
                o.proposal_id,
                o.applied_edits,
                o.files_changed.join(", "),
                o.message
            );
        }
    }
    out
}

/// A typed error as JSON (`code` by its short name, empty fields left out).
pub fn error_json(e: &ToolError) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    out.insert(
        "code".into(),
        e.code()
            .as_str_name()
            .trim_start_matches("TOOL_ERROR_CODE_")
            .into(),
    );
    for (key, value) in [
        ("field", &e.field),
        ("message", &e.message),
        ("retry_hint", &e.retry_hint),
    ] {
        if !value.is_empty() {
            out.insert(key.into(), value.as_str().into());
        }
    }
    serde_json::Value::Object(out)
}

/// The tool message text of an error.
pub fn error(e: &ToolError) -> String {
    let mut out = format!(
        "error {}",
        e.code()
            .as_str_name()
            .trim_start_matches("TOOL_ERROR_CODE_")
    );
    if !e.field.is_empty() {
        let _ = write!(out, " in `{}`", e.field);
    }
    let _ = write!(out, ": {}", e.message);
    if !e.retry_hint.is_empty() {
        let _ = write!(out, "\nhint: {}", e.retry_hint);
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::tools::v1::*;

    #[test]
    fn errors_name_code_field_and_hint() {
        let e = ToolError {
            code: ToolErrorCode::NoMatch as i32,
            field: "edits[0].search_replace.search".into(),
            message: "the search text does not occur in a.rs".into(),
            retry_hint: "copy the text exactly".into(),
        };
        assert_eq!(
            super::error(&e),
            "error NO_MATCH in `edits[0].search_replace.search`: the search text does not occur in a.rs\nhint: copy the text exactly"
        );
    }

    #[test]
    fn search_matches_read_like_grep() {
        let r = ToolResult {
            result: Some(tool_result::Result::SearchCode(SearchCodeResult {
                matches: vec![CodeMatch {
                    file_path: "a.rs".into(),
                    line_number: 3,
                    line: "fn x() {".into(),
                    before: vec!["// x".into()],
                    after: vec!["}".into()],
                }],
                files_searched: 2,
                truncated: false,
                skipped: Vec::new(),
                files_skipped: 0,
            })),
        };
        assert_eq!(
            super::result(&r),
            "a.rs-2-// x\na.rs:3:fn x() {\na.rs-4-}\n(1 match(es) in 2 file(s) searched)\n"
        );
    }
}
