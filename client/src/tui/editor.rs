//! The message editor: `ratatui-textarea` (multi-line, cursor movement, the readline keys,
//! undo, soft word wrap) behind the few operations the TUI needs.

use ratatui::style::{Color, Modifier, Style};
use ratatui_textarea::{CursorMove, Input, Key, TextArea, WrapMode};

/// What the user is writing.
#[derive(Debug, Clone)]
pub(crate) struct Editor(TextArea<'static>);

impl Default for Editor {
    fn default() -> Self {
        let mut area = TextArea::default();
        area.set_cursor_line_style(Style::default());
        area.set_cursor_style(Style::default().add_modifier(Modifier::REVERSED));
        area.set_placeholder_text("ask about your code · /help for commands");
        area.set_placeholder_style(Style::default().fg(Color::DarkGray));
        area.set_wrap_mode(WrapMode::WordOrGlyph);
        Self(area)
    }
}

impl Editor {
    /// The whole message, lines joined with `\n`.
    pub(crate) fn text(&self) -> String {
        self.0.lines().join("\n")
    }

    /// Whether nothing is written.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the message has one line (↑↓ then browse the history).
    pub(crate) fn is_single_line(&self) -> bool {
        self.0.lines().len() <= 1
    }

    /// Rows the message takes wrapped at `width` columns (the input box grows with them): each
    /// line its display width (wide characters count two) plus the cursor's cell, and a row
    /// of slack for a wrapped one (words that do not fit move down whole).
    pub(crate) fn rows(&self, width: u16) -> usize {
        let width = usize::from(width.max(1));
        self.0
            .lines()
            .iter()
            .map(|line| {
                let cells = ratatui::text::Line::from(line.as_str()).width() + 1;
                match cells.div_ceil(width) {
                    1 => 1,
                    n => n + 1,
                }
            })
            .sum()
    }

    /// Replaces the message, cursor at its end.
    pub(crate) fn set_text(&mut self, text: &str) {
        self.clear();
        self.insert_str(text);
    }

    /// Empties the message.
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// Types one character.
    pub(crate) fn insert_char(&mut self, c: char) {
        self.0.insert_char(c);
    }

    /// Inserts `text` at the cursor, newlines included (a paste).
    pub(crate) fn insert_str(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        self.0.insert_str(text);
    }

    /// Breaks the line at the cursor.
    pub(crate) fn newline(&mut self) {
        self.0.insert_newline();
    }

    /// Deletes the character before the cursor.
    pub(crate) fn backspace(&mut self) {
        self.0.delete_char();
    }

    /// Moves the cursor one line up.
    pub(crate) fn up(&mut self) {
        self.0.move_cursor(CursorMove::Up);
    }

    /// Moves the cursor one line down.
    pub(crate) fn down(&mut self) {
        self.0.move_cursor(CursorMove::Down);
    }

    /// Any other key: cursor movement (←→, Home/End, Ctrl-A/E/F/B, Alt-F/B), deletion
    /// (Ctrl-W word, Ctrl-K to the end, Ctrl-D), Ctrl-Y yank. Ctrl-U deletes to the start of the
    /// line as in readline (the widget's own Ctrl-U is undo, here Ctrl-Z).
    pub(crate) fn input(&mut self, input: Input) {
        match input {
            Input {
                key: Key::Char('u'),
                ctrl: true,
                alt: false,
                ..
            } => {
                self.0.delete_line_by_head();
            }
            Input {
                key: Key::Char('z'),
                ctrl: true,
                alt: false,
                ..
            } => {
                self.0.undo();
            }
            other => {
                self.0.input(other);
            }
        }
    }

    /// The widget to draw.
    pub(crate) fn widget(&self) -> &TextArea<'static> {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Editor;

    #[test]
    fn a_long_line_takes_the_rows_it_wraps_to() {
        let mut e = Editor::default();
        assert_eq!(e.rows(20), 1);
        e.set_text("short");
        assert_eq!(e.rows(20), 1);
        // 45 cells and the cursor: three rows of 20, and one of slack.
        e.set_text(&"word ".repeat(9));
        assert_eq!(e.rows(20), 4);
        // Wide characters take two cells each: 12 take 24, two rows and the slack.
        e.set_text(&"漢".repeat(12));
        assert_eq!(e.rows(20), 3);
        e.set_text("one\ntwo");
        assert_eq!(e.rows(20), 2);
    }
}
