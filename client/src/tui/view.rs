//! Drawing the TUI: the conversation (markdown, word-wrapped) and the tool-call panel side by
//! side — the edit-approval view or the session picker take the conversation's place while
//! open —, the input editor (it grows with the message) and the status bar (session, model,
//! tokens, index or its progress gauge, a spinner, notices).

use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::keys::KEYS;
use super::markdown;
use super::state::{App, CallState, Indexing, Picker, PickerKind, Review, Speaker};

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// Draws `app` on the whole frame; returns how far the conversation can scroll up.
pub(crate) fn draw(frame: &mut Frame, app: &App) -> u16 {
    // The box's inside is the frame's width less its two borders.
    let inside = frame.area().width.saturating_sub(2);
    let input_rows = app.editor.rows(inside).clamp(1, 8) as u16 + 2;
    let notice_rows = u16::from(app.notice.is_some());
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Min(5),
            Constraint::Length(input_rows),
            Constraint::Length(notice_rows),
            Constraint::Length(1),
        ])
        .split(frame.area());
    let cols = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(65), Constraint::Percentage(35)])
        .split(rows[0]);
    let mut max_scroll = 0;
    match (&app.picker, app.reviews.front()) {
        (Some(picker), _) => draw_picker(frame, cols[0], picker),
        (None, Some(review)) => draw_review(frame, cols[0], review, app.reviews.len()),
        (None, None) if app.entries.is_empty() => draw_welcome(frame, cols[0]),
        (None, None) => max_scroll = draw_conversation(frame, cols[0], app),
    }
    draw_calls(frame, cols[1], app);
    draw_input(frame, rows[1], app);
    if let Some(notice) = &app.notice {
        frame.render_widget(
            Paragraph::new(format!(" {notice}")).style(Style::default().fg(Color::Yellow)),
            rows[2],
        );
    }
    draw_status(frame, rows[3], app);
    max_scroll
}

fn draw_welcome(frame: &mut Frame, area: Rect) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let dim = Style::default().fg(Color::DarkGray);
    let mut lines = vec![
        Line::from(Span::styled("ploke — ask about your code", bold)),
        Line::from(""),
        Line::from(
            "The model reads your repository through typed tools (search, code context, \
             files) and proposes edits; nothing is written until you approve it here.",
        ),
        Line::from(""),
    ];
    for (key, what) in KEYS {
        lines.push(Line::from(vec![
            Span::styled(format!("{key:<28} "), Style::default().fg(Color::Cyan)),
            Span::raw(*what),
        ]));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        "/help lists the commands: /clear /model /sessions /edits /quit",
        dim,
    )));
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" conversation "),
        ),
        area,
    );
}

/// The conversation as styled lines (markdown for the model's text).
fn conversation(app: &App) -> Text<'static> {
    let mut text = Text::default();
    let mut rendered = app.rendered.borrow_mut();
    rendered.resize(app.entries.len(), None);
    for (e, cached) in app.entries.iter().zip(rendered.iter_mut()) {
        match e.speaker {
            Speaker::User => {
                let style = Style::default()
                    .fg(Color::Cyan)
                    .add_modifier(Modifier::BOLD);
                for (i, l) in e.text.split('\n').enumerate() {
                    let prefix = if i == 0 { "you› " } else { "     " };
                    text.lines
                        .push(Line::from(Span::styled(format!("{prefix}{l}"), style)));
                }
            }
            Speaker::Assistant => {
                // Rendered again only when the text changed (it grows while streaming).
                if cached.as_ref().is_none_or(|(from, _)| *from != e.text) {
                    *cached = Some((e.text.clone(), markdown::render(&e.text)));
                }
                if let Some((_, t)) = cached.as_ref() {
                    text.lines.extend(t.lines.iter().cloned());
                }
            }
            Speaker::System => {
                let style = Style::default().fg(Color::Yellow);
                for (i, l) in e.text.split('\n').enumerate() {
                    let prefix = if i == 0 { "! " } else { "  " };
                    text.lines
                        .push(Line::from(Span::styled(format!("{prefix}{l}"), style)));
                }
            }
        }
        text.lines.push(Line::from(""));
    }
    expand_tabs(&mut text.lines);
    text
}

/// Columns a tab takes on screen.
const TAB_WIDTH: usize = 4;

/// Tabs as spaces: the terminal library draws no tab at all, so Go's or a Makefile's
/// indentation (in a reply or in an edit's diff) would vanish.
fn expand_tabs(lines: &mut [Line<'static>]) {
    for span in lines.iter_mut().flat_map(|l| l.spans.iter_mut()) {
        if span.content.contains('\t') {
            span.content = span.content.replace('\t', &" ".repeat(TAB_WIDTH)).into();
        }
    }
}

fn draw_conversation(frame: &mut Frame, area: Rect, app: &App) -> u16 {
    let inner_width = area.width.saturating_sub(2);
    let height = area.height.saturating_sub(2) as usize;
    let paragraph = Paragraph::new(conversation(app)).wrap(Wrap { trim: false });
    let total = paragraph.line_count(inner_width);
    let max_scroll = total.saturating_sub(height);
    let scroll = (app.scroll as usize).min(max_scroll);
    let top = max_scroll - scroll;
    let title = if scroll > 0 {
        format!(" conversation (scrolled {scroll} lines up · PgDn back) ")
    } else {
        " conversation ".to_owned()
    };
    frame.render_widget(
        paragraph
            .scroll((u16::try_from(top).unwrap_or(u16::MAX), 0))
            .block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
    u16::try_from(max_scroll).unwrap_or(u16::MAX)
}

fn draw_picker(frame: &mut Frame, area: Rect, picker: &Picker) {
    let (empty, title) = match picker.kind {
        PickerKind::Sessions if picker.confirming => (
            "no other sessions in this workspace",
            " delete ✗ and its events? d again · other keys keep it ",
        ),
        PickerKind::Sessions => (
            "no other sessions in this workspace",
            " sessions · ↑↓ choose · Enter resume · d delete · Esc close ",
        ),
        PickerKind::Models => (
            "no model provider is configured (`ploke config` shows what is read)",
            " models · ↑↓ choose · Enter new session · Esc close ",
        ),
    };
    let mut lines = Vec::new();
    if picker.rows.is_empty() {
        lines.push(Line::from(empty));
    }
    for (i, s) in picker.rows.iter().enumerate() {
        let style = if i == picker.cursor {
            Style::default().add_modifier(Modifier::REVERSED)
        } else {
            Style::default()
        };
        let label = if picker.confirming && i == picker.cursor {
            format!("✗ {}", s.label)
        } else {
            s.label.clone()
        };
        lines.push(Line::from(Span::styled(label, style)));
    }
    let height = area.height.saturating_sub(2) as usize;
    let top = picker.cursor.saturating_sub(height.saturating_sub(1));
    frame.render_widget(
        Paragraph::new(lines)
            .scroll((u16::try_from(top).unwrap_or(u16::MAX), 0))
            .block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

fn draw_review(frame: &mut Frame, area: Rect, review: &Review, waiting: usize) {
    let p = &review.proposal;
    let mut lines: Vec<Line> = vec![
        Line::from(Span::styled(
            format!(
                "{} wants to change {} file(s) · {}",
                p.tool_name,
                p.files.len(),
                p.proposal_id
            ),
            Style::default().add_modifier(Modifier::BOLD),
        )),
        Line::from(""),
    ];
    for (i, e) in p.edits.iter().enumerate() {
        let mark = if review.selected.get(i).copied().unwrap_or(false) {
            "[x]"
        } else {
            "[ ]"
        };
        let cursor = if i == review.cursor { "›" } else { " " };
        lines.push(Line::from(format!(
            "{cursor} {mark} {}: {}",
            e.index, e.summary
        )));
    }
    lines.push(Line::from(""));
    for f in &p.files {
        lines.extend(markdown::diff(&f.file_path, &f.unified_diff));
    }
    expand_tabs(&mut lines);
    let more = if waiting > 1 {
        format!(" · {} more waiting", waiting - 1)
    } else {
        String::new()
    };
    let title = format!(
        " edit proposal · a/Enter apply selected · d deny · space toggle · ↑↓ move · PgUp/PgDn scroll{more} "
    );
    frame.render_widget(
        Paragraph::new(lines)
            .scroll((review.scroll, 0))
            .block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

fn draw_calls(frame: &mut Frame, area: Rect, app: &App) {
    let height = area.height.saturating_sub(2) as usize;
    let mut lines: Vec<Line> = Vec::new();
    for c in &app.calls {
        let (mark, color) = match c.state {
            CallState::Running => ("…", Color::Yellow),
            CallState::AwaitingApproval => ("?", Color::Magenta),
            CallState::Done => ("✓", Color::Green),
            CallState::Failed => ("✗", Color::Red),
        };
        let time = c
            .duration_ms
            .map(|ms| format!(" {ms} ms"))
            .unwrap_or_default();
        lines.push(Line::from(vec![
            Span::styled(format!("{mark} "), Style::default().fg(color)),
            Span::styled(
                c.name.clone(),
                Style::default().add_modifier(Modifier::BOLD),
            ),
            Span::raw(time),
        ]));
        if !c.args.is_empty() {
            let width = area.width.saturating_sub(4) as usize;
            lines.push(Line::from(format!(
                "  {}",
                crate::describe::fit(&c.args, width)
            )));
        }
    }
    let start = lines.len().saturating_sub(height);
    frame.render_widget(
        Paragraph::new(lines[start..].to_vec())
            .block(Block::default().borders(Borders::ALL).title(" tool calls ")),
        area,
    );
}

fn draw_input(frame: &mut Frame, area: Rect, app: &App) {
    let title = if app.running {
        " message · Esc cancel the turn · Ctrl-C twice quit "
    } else {
        " message · Enter send · Alt-Enter newline · ↑↓ history · PgUp/PgDn scroll · /help "
    };
    let block = Block::default().borders(Borders::ALL).title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    frame.render_widget(app.editor.widget(), inner);
}

/// The indexing gauge: phase, a bar, counts and what is left.
pub(crate) fn gauge(i: &Indexing) -> String {
    const CELLS: u64 = 10;
    let filled = (i.done.min(i.total) * CELLS)
        .checked_div(i.total)
        .unwrap_or(0) as usize;
    let bar = format!(
        "{}{}",
        "█".repeat(filled),
        "░".repeat(CELLS as usize - filled)
    );
    let counts = if i.total > 0 {
        format!("{}/{}", i.done, i.total)
    } else {
        i.done.to_string()
    };
    let eta = i
        .eta_seconds
        .map(|s| format!(" ~{}", human_seconds(s)))
        .unwrap_or_default();
    format!(
        "indexing: {} {bar} {counts}{eta} ({} items searchable)",
        i.phase, i.items
    )
}

fn human_seconds(s: u64) -> String {
    if s >= 60 {
        format!("{}m{:02}s left", s / 60, s % 60)
    } else {
        format!("{s}s left")
    }
}

fn draw_status(frame: &mut Frame, area: Rect, app: &App) {
    let session: String = app.session_id.chars().take(13).collect();
    let mut parts = Vec::new();
    if app.running {
        parts.push(format!("{} working", SPINNER[app.tick % SPINNER.len()]));
    }
    if !app.connection.is_empty() {
        parts.push(app.connection.clone());
    }
    match &app.indexing {
        Some(i) => parts.push(gauge(i)),
        None => parts.push(format!("index: {}", app.index)),
    }
    if session.is_empty() {
        parts.push("no session".into());
    } else {
        parts.push(format!("session {session}"));
        parts.push(app.model.clone());
        parts.push(format!("{} tokens", app.tokens));
    }
    frame.render_widget(
        Paragraph::new(format!(" {}", parts.join(" · ")))
            .style(Style::default().bg(Color::Blue).fg(Color::White)),
        area,
    );
}
