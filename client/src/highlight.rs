//! Syntax highlighting with `syntect` (its bundled grammars and themes, loaded once): code
//! as styled ratatui spans for the TUI, and unified diffs coloured for a terminal (`ploke
//! ask`, `ploke edits`) — plain when stdout is not a terminal or `NO_COLOR` is set.

use std::io::IsTerminal;
use std::sync::LazyLock;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use syntect::easy::HighlightLines;
use syntect::highlighting::{Theme, ThemeSet};
use syntect::parsing::{SyntaxReference, SyntaxSet};

static SYNTAXES: LazyLock<SyntaxSet> = LazyLock::new(SyntaxSet::load_defaults_newlines);
static THEME: LazyLock<Theme> = LazyLock::new(|| {
    let mut themes = ThemeSet::load_defaults();
    themes
        .themes
        .remove("base16-ocean.dark")
        .unwrap_or_default()
});

/// The grammar for a code fence's language (`rust`, `py`, …) or a file name's extension.
fn syntax(token: &str) -> Option<&'static SyntaxReference> {
    let token = token.trim();
    if token.is_empty() {
        return None;
    }
    let ext = token.rsplit('.').next().unwrap_or(token);
    SYNTAXES
        .find_syntax_by_token(token)
        .or_else(|| SYNTAXES.find_syntax_by_extension(ext))
}

fn ratatui_style(s: syntect::highlighting::Style) -> Style {
    let c = s.foreground;
    let mut style = Style::default().fg(Color::Rgb(c.r, c.g, c.b));
    let f = s.font_style;
    if f.contains(syntect::highlighting::FontStyle::BOLD) {
        style = style.add_modifier(Modifier::BOLD);
    }
    if f.contains(syntect::highlighting::FontStyle::ITALIC) {
        style = style.add_modifier(Modifier::ITALIC);
    }
    style
}

/// A highlighter for one piece of code, line after line.
pub struct Highlighter(Option<HighlightLines<'static>>);

impl Highlighter {
    /// For code in `language` (a fence token or a file name); plain if unknown.
    pub fn new(language: &str) -> Self {
        Self(syntax(language).map(|s| HighlightLines::new(s, &THEME)))
    }

    /// One line (without its newline) as styled spans.
    pub fn line(&mut self, line: &str) -> Vec<Span<'static>> {
        let with_newline = format!("{line}\n");
        let ranges = self
            .0
            .as_mut()
            .and_then(|h| h.highlight_line(&with_newline, &SYNTAXES).ok());
        match ranges {
            Some(ranges) => ranges
                .into_iter()
                .map(|(style, text)| {
                    Span::styled(text.trim_end_matches('\n').to_owned(), ratatui_style(style))
                })
                .filter(|s| !s.content.is_empty())
                .collect(),
            None => vec![Span::raw(line.to_owned())],
        }
    }
}

/// A unified diff of `path` as styled lines: headers bold, hunks cyan, added and removed
/// lines on a green or red ground with their code highlighted.
pub fn diff_lines(path: &str, diff: &str) -> Vec<Line<'static>> {
    let mut code = Highlighter::new(path);
    diff.lines()
        .map(|l| {
            if l.starts_with("+++") || l.starts_with("---") {
                Line::from(Span::styled(
                    l.to_owned(),
                    Style::default().add_modifier(Modifier::BOLD),
                ))
            } else if l.starts_with("@@") {
                Line::from(Span::styled(l.to_owned(), Style::default().fg(Color::Cyan)))
            } else if let Some(rest) = l.strip_prefix('+') {
                marked('+', Color::Green, Color::Rgb(0, 48, 0), code.line(rest))
            } else if let Some(rest) = l.strip_prefix('-') {
                marked('-', Color::Red, Color::Rgb(64, 0, 0), code.line(rest))
            } else {
                let rest = l.strip_prefix(' ').unwrap_or(l);
                let mut spans = vec![Span::raw(" ")];
                spans.extend(code.line(rest));
                Line::from(spans)
            }
        })
        .collect()
}

fn marked(sign: char, fg: Color, bg: Color, code: Vec<Span<'static>>) -> Line<'static> {
    let mut spans = vec![Span::styled(
        sign.to_string(),
        Style::default().fg(fg).add_modifier(Modifier::BOLD),
    )];
    spans.extend(code);
    Line::from(spans).style(Style::default().bg(bg))
}

/// Whether a stream takes colour: a terminal, and `NO_COLOR` unset (no-color.org).
pub fn colour(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A unified diff for a terminal: with ANSI colours when `colour`, else as it is.
pub fn diff_ansi(path: &str, diff: &str, colour: bool) -> String {
    if !colour {
        return diff.to_owned();
    }
    let mut out = String::with_capacity(diff.len() * 2);
    for line in diff_lines(path, diff) {
        let bg = line.style.bg;
        for span in &line.spans {
            out.push_str(&ansi(span.style.patch(Style { bg, ..span.style })));
            out.push_str(&span.content);
            out.push_str("\x1b[0m");
        }
        out.push('\n');
    }
    out
}

fn ansi(style: Style) -> String {
    let mut codes: Vec<String> = Vec::new();
    if style.add_modifier.contains(Modifier::BOLD) {
        codes.push("1".into());
    }
    if style.add_modifier.contains(Modifier::ITALIC) {
        codes.push("3".into());
    }
    let colour = |c: Color, base: u8| match c {
        Color::Rgb(r, g, b) => Some(format!("{};2;{r};{g};{b}", base + 8)),
        Color::Red => Some(format!("{}", base + 1)),
        Color::Green => Some(format!("{}", base + 2)),
        Color::Cyan => Some(format!("{}", base + 6)),
        _ => None,
    };
    if let Some(c) = style.fg.and_then(|c| colour(c, 30)) {
        codes.push(c);
    }
    if let Some(c) = style.bg.and_then(|c| colour(c, 40)) {
        codes.push(c);
    }
    if codes.is_empty() {
        String::new()
    } else {
        format!("\x1b[{}m", codes.join(";"))
    }
}

#[cfg(test)]
mod tests {
    const DIFF: &str = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n pub fn add(a: i32, b: i32) -> i32 {\n-    a + b\n+    a.wrapping_add(b)\n }\n";

    #[test]
    fn a_plain_diff_stays_byte_for_byte() {
        assert_eq!(super::diff_ansi("src/lib.rs", DIFF, false), DIFF);
    }

    #[test]
    fn a_coloured_diff_keeps_its_text_and_colours_the_changed_lines() {
        let coloured = super::diff_ansi("src/lib.rs", DIFF, true);
        let stripped: String = strip_ansi(&coloured);
        assert_eq!(stripped, DIFF);
        let removed = coloured.lines().nth(4).unwrap();
        let added = coloured.lines().nth(5).unwrap();
        assert!(removed.contains("\x1b[1;31;48;2;64;0;0m-"), "{removed:?}");
        assert!(added.contains("\x1b[1;32;48;2;0;48;0m+"), "{added:?}");
        // The code itself is highlighted (keywords differ in colour from identifiers).
        let context = coloured.lines().nth(3).unwrap();
        assert!(context.matches("\x1b[38;2;").count() >= 3, "{context:?}");
    }

    #[test]
    fn unknown_languages_are_plain() {
        let spans = super::Highlighter::new("no-such-language").line("x = 1");
        assert_eq!(spans, vec![ratatui::text::Span::raw("x = 1")]);
    }

    fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for c in chars.by_ref() {
                    if c == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }
}
