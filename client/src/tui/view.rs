//! Drawing the TUI: the conversation and the tool-call panel side by side (the edit-approval
//! view takes the conversation's place while a proposal waits), the input line and the status
//! bar.

use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::state::{App, CallState, Review, Speaker};

/// Draws `app` on the whole frame.
pub fn draw(frame: &mut Frame, app: &App) {
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Min(5),
            Constraint::Length(3),
            Constraint::Length(1),
        ])
        .split(frame.area());
    let cols = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(65), Constraint::Percentage(35)])
        .split(rows[0]);
    match app.reviews.front() {
        Some(review) => draw_review(frame, cols[0], review),
        None => draw_conversation(frame, cols[0], app),
    }
    draw_calls(frame, cols[1], app);
    draw_input(frame, rows[1], app);
    draw_status(frame, rows[2], app);
}

/// Splits `text` into lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out = Vec::new();
    for raw in text.split('\n') {
        let chars: Vec<char> = raw.chars().collect();
        if chars.is_empty() {
            out.push(String::new());
        }
        for chunk in chars.chunks(width) {
            out.push(chunk.iter().collect());
        }
    }
    out
}

fn draw_conversation(frame: &mut Frame, area: Rect, app: &App) {
    let inner_width = area.width.saturating_sub(2) as usize;
    let mut lines: Vec<Line> = Vec::new();
    for e in &app.entries {
        let (prefix, style) = match e.speaker {
            Speaker::User => (
                "you› ",
                Style::default()
                    .fg(Color::Cyan)
                    .add_modifier(Modifier::BOLD),
            ),
            Speaker::Assistant => ("", Style::default()),
            Speaker::System => ("! ", Style::default().fg(Color::Yellow)),
        };
        for (i, l) in wrap(&format!("{prefix}{}", e.text), inner_width)
            .into_iter()
            .enumerate()
        {
            let _ = i;
            lines.push(Line::from(Span::styled(l, style)));
        }
        lines.push(Line::from(""));
    }
    let height = area.height.saturating_sub(2) as usize;
    let bottom = lines.len().saturating_sub(app.scroll as usize);
    let top = bottom.saturating_sub(height);
    let visible: Vec<Line> = lines[top..bottom].to_vec();
    let title = if app.scroll > 0 {
        format!(" conversation (scrolled {} lines up) ", app.scroll)
    } else {
        " conversation ".to_owned()
    };
    frame.render_widget(
        Paragraph::new(visible).block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

fn draw_review(frame: &mut Frame, area: Rect, review: &Review) {
    let p = &review.proposal;
    let mut lines: Vec<Line> = vec![
        Line::from(Span::styled(
            format!("{} wants to change {} file(s):", p.tool_name, p.files.len()),
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
        for l in f.unified_diff.lines() {
            let style = if l.starts_with("+++") || l.starts_with("---") {
                Style::default().add_modifier(Modifier::BOLD)
            } else if l.starts_with('+') {
                Style::default().fg(Color::Green)
            } else if l.starts_with('-') {
                Style::default().fg(Color::Red)
            } else if l.starts_with("@@") {
                Style::default().fg(Color::Cyan)
            } else {
                Style::default()
            };
            lines.push(Line::from(Span::styled(l.to_owned(), style)));
        }
    }
    let title = " edit proposal · a/Enter apply selected · d deny · space toggle · ↑↓ move ";
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)),
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
                c.args.chars().take(width).collect::<String>()
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
        " message · Esc cancel the turn · Ctrl-C quit "
    } else {
        " message · Enter send · ↑↓ history · PgUp/PgDn scroll · Ctrl-C quit "
    };
    frame.render_widget(
        Paragraph::new(format!("› {}", app.input))
            .block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

fn draw_status(frame: &mut Frame, area: Rect, app: &App) {
    let session: String = app.session_id.chars().take(13).collect();
    let mut parts = vec![
        format!("session {session}"),
        app.model.clone(),
        format!("{} tokens", app.tokens),
        format!("index: {}", app.index),
    ];
    if app.running {
        parts.push("working…".into());
    }
    if !app.connection.is_empty() {
        parts.push(app.connection.clone());
    }
    frame.render_widget(
        Paragraph::new(format!(" {}", parts.join(" · ")))
            .style(Style::default().bg(Color::Blue).fg(Color::White)),
        area,
    );
}
