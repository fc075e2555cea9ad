//! Syntax highlighting with `syntect` (its bundled grammars and themes, loaded once): code
//! as styled ratatui spans for the TUI, and unified diffs coloured for a terminal (`ploke
//! ask`, `ploke edits`) — plain when stdout is not a terminal or `NO_COLOR` is set. The
//! palette follows the terminal: a light theme when `COLORFGBG` says the background is light,
//! 256 colours unless `COLORTERM` says 24-bit colour works.

use std::io::IsTerminal;
use std::sync::LazyLock;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use syntect::easy::HighlightLines;
use syntect::highlighting::{Theme, ThemeSet};
use syntect::parsing::{SyntaxReference, SyntaxSet};

static SYNTAXES: LazyLock<SyntaxSet> = LazyLock::new(SyntaxSet::load_defaults_newlines);
static THEMES: LazyLock<ThemeSet> = LazyLock::new(ThemeSet::load_defaults);
static PALETTE: LazyLock<Palette> = LazyLock::new(|| {
    Palette::of(
        std::env::var("COLORFGBG").ok().as_deref(),
        std::env::var("COLORTERM").ok().as_deref(),
    )
});

/// The colours the terminal shows well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Palette {
    /// A light background.
    pub light: bool,
    /// 24-bit colour; otherwise the 256-colour table.
    pub truecolor: bool,
}

impl Palette {
    /// From `COLORFGBG` (`FG;BG`, set by rxvt, Konsole, iTerm2 and others; a background of 7
    /// or 9–15 is light) and `COLORTERM` (`truecolor` or `24bit`).
    pub(crate) fn of(colorfgbg: Option<&str>, colorterm: Option<&str>) -> Self {
        let light = colorfgbg
            .and_then(|v| v.rsplit(';').next())
            .and_then(|bg| bg.trim().parse::<u8>().ok())
            .is_some_and(|bg| bg == 7 || (9..=15).contains(&bg));
        let truecolor = colorterm.is_some_and(|v| {
            let v = v.to_ascii_lowercase();
            v.contains("truecolor") || v.contains("24bit")
        });
        Self { light, truecolor }
    }

    /// The terminal's, read once.
    pub(crate) fn detected() -> Self {
        *PALETTE
    }

    fn theme(self) -> &'static Theme {
        let name = if self.light {
            "InspiredGitHub"
        } else {
            "base16-ocean.dark"
        };
        static FALLBACK: LazyLock<Theme> = LazyLock::new(Theme::default);
        THEMES.themes.get(name).unwrap_or(&FALLBACK)
    }

    /// `(r, g, b)` as this terminal can show it.
    pub(crate) fn rgb(self, r: u8, g: u8, b: u8) -> Color {
        if self.truecolor {
            Color::Rgb(r, g, b)
        } else {
            Color::Indexed(xterm_256(r, g, b))
        }
    }

    /// The ground of added and removed lines.
    fn grounds(self) -> (Color, Color) {
        match (self.light, self.truecolor) {
            (true, true) => (Color::Rgb(215, 245, 215), Color::Rgb(250, 220, 220)),
            (true, false) => (Color::Indexed(194), Color::Indexed(224)),
            (false, true) => (Color::Rgb(0, 48, 0), Color::Rgb(64, 0, 0)),
            // The nearest greys would lose the green and red: the darkest of the cube's.
            (false, false) => (Color::Indexed(22), Color::Indexed(52)),
        }
    }
}

/// The nearest colour of xterm's 256-colour table (its 6×6×6 cube or its grey ramp).
pub(crate) fn xterm_256(r: u8, g: u8, b: u8) -> u8 {
    const LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];
    let level = |v: u8| {
        (0..6)
            .min_by_key(|&i| (i32::from(LEVELS[i]) - i32::from(v)).abs())
            .unwrap_or(0)
    };
    let (ri, gi, bi) = (level(r), level(g), level(b));
    let cube = (LEVELS[ri], LEVELS[gi], LEVELS[bi]);
    let distance = |(x, y, z): (u8, u8, u8)| {
        let d = |a: u8, b: u8| (i32::from(a) - i32::from(b)).pow(2);
        d(x, r) + d(y, g) + d(z, b)
    };
    let mean = (u16::from(r) + u16::from(g) + u16::from(b)) / 3;
    let grey_step = (mean.saturating_sub(3) / 10).min(23) as u8;
    let grey_value = 8 + 10 * grey_step;
    let grey = (grey_value, grey_value, grey_value);
    if distance(grey) < distance(cube) {
        232 + grey_step
    } else {
        16 + 36 * ri as u8 + 6 * gi as u8 + bi as u8
    }
}

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

fn ratatui_style(palette: Palette, s: syntect::highlighting::Style) -> Style {
    let c = s.foreground;
    let mut style = Style::default().fg(palette.rgb(c.r, c.g, c.b));
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
pub(crate) struct Highlighter(Option<HighlightLines<'static>>, Palette);

impl Highlighter {
    /// For code in `language` (a fence token or a file name); plain if unknown.
    pub(crate) fn new(language: &str) -> Self {
        Self::with(Palette::detected(), language)
    }

    /// With `palette`'s theme and colours.
    pub(crate) fn with(palette: Palette, language: &str) -> Self {
        Self(
            syntax(language).map(|s| HighlightLines::new(s, palette.theme())),
            palette,
        )
    }

    /// One line (without its newline) as styled spans.
    pub(crate) fn line(&mut self, line: &str) -> Vec<Span<'static>> {
        let with_newline = format!("{line}\n");
        let ranges = self
            .0
            .as_mut()
            .and_then(|h| h.highlight_line(&with_newline, &SYNTAXES).ok());
        match ranges {
            Some(ranges) => ranges
                .into_iter()
                .map(|(style, text)| {
                    let style = ratatui_style(self.1, style);
                    Span::styled(text.trim_end_matches('\n').to_owned(), style)
                })
                .filter(|s| !s.content.is_empty())
                .collect(),
            None => vec![Span::raw(line.to_owned())],
        }
    }
}

/// A unified diff of `path` as styled lines: headers bold, hunks cyan, added and removed
/// lines on a green or red ground with their code highlighted.
pub(crate) fn diff_lines(path: &str, diff: &str) -> Vec<Line<'static>> {
    diff_lines_with(Palette::detected(), path, diff)
}

fn diff_lines_with(palette: Palette, path: &str, diff: &str) -> Vec<Line<'static>> {
    let mut code = Highlighter::with(palette, path);
    let (added, removed) = palette.grounds();
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
                marked('+', Color::Green, added, code.line(rest))
            } else if let Some(rest) = l.strip_prefix('-') {
                marked('-', Color::Red, removed, code.line(rest))
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
pub(crate) fn colour(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A unified diff for a terminal: with ANSI colours when `colour`, else as it is.
pub(crate) fn diff_ansi(path: &str, diff: &str, colour: bool) -> String {
    if !colour {
        return diff.to_owned();
    }
    diff_ansi_with(Palette::detected(), path, diff)
}

fn diff_ansi_with(palette: Palette, path: &str, diff: &str) -> String {
    let mut out = String::with_capacity(diff.len() * 2);
    for line in diff_lines_with(palette, path, diff) {
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
        Color::Indexed(n) => Some(format!("{};5;{n}", base + 8)),
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

    use super::Palette;

    const DARK_24BIT: Palette = Palette {
        light: false,
        truecolor: true,
    };

    #[test]
    fn a_coloured_diff_keeps_its_text_and_colours_the_changed_lines() {
        let coloured = super::diff_ansi_with(DARK_24BIT, "src/lib.rs", DIFF);
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
    fn light_and_256_colour_terminals_get_their_own_palette() {
        assert_eq!(
            Palette::of(None, None),
            Palette {
                light: false,
                truecolor: false
            }
        );
        assert_eq!(
            Palette::of(Some("0;15"), Some("truecolor")),
            Palette {
                light: true,
                truecolor: true
            }
        );
        assert_eq!(Palette::of(Some("15;default;0"), Some("24bit")), DARK_24BIT);
        assert!(!Palette::of(Some("12;8"), Some("")).light);
        assert!(Palette::of(Some("0;7"), None).light);
        // 256 colours: the cube, the grey ramp, the corners.
        assert_eq!(super::xterm_256(0, 0, 0), 16);
        assert_eq!(super::xterm_256(255, 255, 255), 231);
        assert_eq!(super::xterm_256(255, 0, 0), 196);
        assert_eq!(super::xterm_256(0, 95, 0), 22);
        assert_eq!(super::xterm_256(20, 20, 20), 233);
        assert_eq!(super::xterm_256(128, 128, 128), 244);
        let light_256 = Palette {
            light: true,
            truecolor: false,
        };
        let coloured = super::diff_ansi_with(light_256, "src/lib.rs", DIFF);
        assert_eq!(strip_ansi(&coloured), DIFF);
        assert!(!coloured.contains(";2;"), "{coloured:?}");
        let added = coloured.lines().nth(5).unwrap();
        assert!(added.contains("\x1b[1;32;48;5;194m+"), "{added:?}");
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
