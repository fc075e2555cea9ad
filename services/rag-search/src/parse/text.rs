//! Non-Rust text files as windows of lines.

use super::{Kind, ParsedItem};

/// Lines per window.
pub const WINDOW_LINES: usize = 40;

/// Splits `text` into consecutive windows of [`WINDOW_LINES`] lines (the last may be shorter).
pub fn line_windows(rel: &str, text: &str) -> Vec<ParsedItem> {
    let mut items = Vec::new();
    let mut starts = vec![0usize];
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' && i + 1 < text.len() {
            starts.push(i + 1);
        }
    }
    if text.is_empty() {
        return items;
    }
    for (w, chunk) in starts.chunks(WINDOW_LINES).enumerate() {
        let first = chunk[0];
        let last_line_start = chunk[chunk.len() - 1];
        let end = text[last_line_start..]
            .find('\n')
            .map_or(text.len(), |n| last_line_start + n + 1);
        let line_start = (w * WINDOW_LINES + 1) as u32;
        let line_end = line_start + chunk.len() as u32 - 1;
        let head = text[first..end]
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        items.push(ParsedItem {
            canon_path: format!("{rel}#L{line_start}-{line_end}"),
            name: rel.rsplit('/').next().unwrap_or(rel).to_owned(),
            qualname: format!("{rel}#L{line_start}-{line_end}"),
            kind: Kind::TextWindow,
            byte_start: first,
            byte_end: end,
            line_start,
            line_end,
            signature: head.trim().chars().take(200).collect(),
            doc: String::new(),
            crate_name: String::new(),
            test: false,
        });
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_every_line_exactly_once() {
        let text: String = (1..=95).map(|i| format!("line {i}\n")).collect();
        let items = line_windows("docs/a.md", &text);
        let spans: Vec<(u32, u32)> = items.iter().map(|i| (i.line_start, i.line_end)).collect();
        assert_eq!(spans, vec![(1, 40), (41, 80), (81, 95)]);
        assert_eq!(items[0].byte_start, 0);
        assert_eq!(items[2].byte_end, text.len());
        assert_eq!(
            &text[items[1].byte_start..items[1].byte_start + 7],
            "line 41"
        );
        assert_eq!(items[1].canon_path, "docs/a.md#L41-80");
        assert!(line_windows("x", "").is_empty());
    }
}
