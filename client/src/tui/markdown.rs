//! The model's markdown as styled lines (`pulldown-cmark` events → ratatui spans): headings,
//! emphasis, inline code, lists, quotes, links, rules, and fenced code highlighted by its
//! language. Unfinished markdown (a reply still streaming) renders as far as it goes.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};

use crate::highlight::Highlighter;

pub(crate) use crate::highlight::diff_lines as diff;

/// Renders `markdown`.
pub(crate) fn render(markdown: &str) -> Text<'static> {
    let mut r = Renderer::default();
    for event in Parser::new_ext(markdown, Options::ENABLE_STRIKETHROUGH) {
        r.event(event);
    }
    r.flush();
    // No trailing blank line: the conversation adds its own between entries.
    while r.lines.last().is_some_and(|l| l.spans.is_empty()) {
        r.lines.pop();
    }
    Text::from(r.lines)
}

#[derive(Default)]
struct Renderer {
    lines: Vec<Line<'static>>,
    current: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// One entry per open list: the next number (ordered) or `None` (bullets).
    lists: Vec<Option<u64>>,
    quote: usize,
    code: Option<Highlighter>,
    link: Option<String>,
    /// Indent of continuation lines inside a list item.
    indent: usize,
    /// The current line starts a list item (its marker is on it: no indent).
    item_start: bool,
}

impl Renderer {
    fn style(&self) -> Style {
        self.styles
            .iter()
            .fold(Style::default(), |acc, s| acc.patch(*s))
    }

    fn prefix(&self) -> Vec<Span<'static>> {
        let mut spans = Vec::new();
        if self.quote > 0 {
            spans.push(Span::styled(
                "▌ ".repeat(self.quote),
                Style::default().fg(Color::DarkGray),
            ));
        }
        spans
    }

    fn text(&mut self, text: &str) {
        let style = self.style();
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                self.flush();
            }
            if !part.is_empty() {
                self.current.push(Span::styled(part.to_owned(), style));
            }
        }
    }

    /// Ends the current line (if anything is on it).
    fn flush(&mut self) {
        if self.current.is_empty() {
            return;
        }
        let mut spans = self.prefix();
        if self.indent > 0 && !self.item_start {
            spans.push(Span::raw(" ".repeat(self.indent)));
        }
        self.item_start = false;
        spans.append(&mut self.current);
        self.lines.push(Line::from(spans));
    }

    fn blank(&mut self) {
        self.flush();
        if self.lines.last().is_some_and(|l| !l.spans.is_empty()) && self.lists.is_empty() {
            self.lines.push(Line::from(""));
        }
    }

    fn event(&mut self, event: Event<'_>) {
        if let Some(highlighter) = self.code.as_mut() {
            match event {
                Event::Text(t) => {
                    for line in t.lines() {
                        let mut spans = vec![Span::styled("  ", Style::default())];
                        spans.extend(highlighter.line(line));
                        self.lines.push(Line::from(spans));
                    }
                    return;
                }
                Event::End(TagEnd::CodeBlock) => {
                    self.code = None;
                    self.blank();
                    return;
                }
                _ => {}
            }
        }
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(c) => self.current.push(Span::styled(
                c.into_string(),
                Style::default().fg(Color::Yellow),
            )),
            Event::SoftBreak => self.current.push(Span::raw(" ")),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.flush();
                self.lines.push(Line::from(Span::styled(
                    "─".repeat(40),
                    Style::default().fg(Color::DarkGray),
                )));
            }
            Event::TaskListMarker(done) => {
                self.current
                    .push(Span::raw(if done { "[x] " } else { "[ ] " }))
            }
            Event::Html(h) | Event::InlineHtml(h) => self.text(&h),
            Event::InlineMath(m) | Event::DisplayMath(m) => self.text(&m),
            Event::FootnoteReference(f) => self.text(&format!("[{f}]")),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Heading { level, .. } => {
                self.blank();
                let style = match level {
                    HeadingLevel::H1 => Style::default()
                        .fg(Color::Magenta)
                        .add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
                    HeadingLevel::H2 => Style::default()
                        .fg(Color::Magenta)
                        .add_modifier(Modifier::BOLD),
                    _ => Style::default().add_modifier(Modifier::BOLD),
                };
                self.styles.push(style);
            }
            Tag::Paragraph => {}
            Tag::BlockQuote(_) => {
                self.flush();
                self.quote += 1;
            }
            Tag::CodeBlock(kind) => {
                self.flush();
                let language = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split([',', ' ']).next().unwrap_or("").to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some(Highlighter::new(&language));
            }
            Tag::List(start) => {
                self.flush();
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => "• ".to_owned(),
                };
                self.indent = depth * 2 + marker.chars().count();
                self.item_start = true;
                self.current
                    .push(Span::raw(format!("{}{}", "  ".repeat(depth), marker)));
            }
            Tag::Emphasis => self
                .styles
                .push(Style::default().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self
                .styles
                .push(Style::default().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self
                .styles
                .push(Style::default().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } => {
                self.link = Some(dest_url.into_string());
                self.styles.push(
                    Style::default()
                        .fg(Color::Blue)
                        .add_modifier(Modifier::UNDERLINED),
                );
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.blank();
            }
            TagEnd::Paragraph => self.blank(),
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote = self.quote.saturating_sub(1);
                self.blank();
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.indent = 0;
                    self.blank();
                }
            }
            TagEnd::Item => self.flush(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.styles.pop();
            }
            TagEnd::Link => {
                self.styles.pop();
                if let Some(url) = self.link.take() {
                    self.current.push(Span::styled(
                        format!(" ({url})"),
                        Style::default().fg(Color::DarkGray),
                    ));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    fn plain(text: &ratatui::text::Text) -> Vec<String> {
        text.lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn headings_lists_emphasis_code_and_links() {
        let md = "# Title\n\nSome *soft* and **strong** text with `code`.\n\n- one\n- two\n  1. nested\n\n> quoted\n\n```rust\nfn main() {}\n```\n\nsee [docs](https://example.com)";
        let text = super::render(md);
        assert_eq!(
            plain(&text),
            vec![
                "Title",
                "",
                "Some soft and strong text with code.",
                "",
                "• one",
                "• two",
                "  1. nested",
                "",
                "▌ quoted",
                "",
                "  fn main() {}",
                "",
                "see docs (https://example.com)",
            ]
        );
        use ratatui::style::Modifier;
        let strong = &text.lines[2].spans[3];
        assert_eq!(strong.content, "strong");
        assert!(strong.style.add_modifier.contains(Modifier::BOLD));
        // The code block is highlighted: more than one colour on `fn main() {}`.
        assert!(text.lines[10].spans.len() > 2, "{:?}", text.lines[10]);
    }

    #[test]
    fn an_unfinished_reply_renders_as_far_as_it_goes() {
        let text = super::render("Here:\n\n```python\ndef f():\n    return 1");
        assert_eq!(
            plain(&text),
            vec!["Here:", "", "  def f():", "      return 1"]
        );
    }
}
