//! What a key does: the edit review under way, the session picker, the input editor with its
//! history, scrolling, Ctrl-C (once cancels a running turn, twice quits) and the slash
//! commands, which never reach the model.

use super::state::{Action, App, PickerKind, Speaker};

/// A key, reduced to what the TUI uses; everything else is the editor's.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Key {
    /// A character typed with no modifier but Shift.
    Char(char),
    /// Enter (sends).
    Enter,
    /// Shift-Enter or Alt-Enter (a new line in the message).
    Newline,
    /// Backspace.
    Backspace,
    /// Escape.
    Esc,
    /// Up arrow.
    Up,
    /// Down arrow.
    Down,
    /// Page up.
    PageUp,
    /// Page down.
    PageDown,
    /// Ctrl-C.
    CtrlC,
    /// Tab.
    Tab,
    /// Text pasted at once (bracketed paste): inserted whole, newlines included.
    Paste(String),
    /// Any other key, for the editor (cursor movement, readline keys, …).
    Edit(ratatui_textarea::Input),
}

/// The slash commands, with what each does (`/help` prints this).
pub(crate) const COMMANDS: &[(&str, &str)] = &[
    ("/help", "this list, and the keys"),
    ("/clear", "start a new session (same workspace and model)"),
    (
        "/model [PROVIDER/]MODEL",
        "pick a configured model, or name one; starts a new session",
    ),
    (
        "/sessions",
        "pick a session of this workspace and resume it (d twice deletes one)",
    ),
    ("/edits", "the proposals waiting for your decision"),
    (
        "/workspace [NAME]",
        "the workspaces the gateway serves you, or move to one (a new session there)",
    ),
    (
        "/search QUERY",
        "what the index finds for QUERY, as the model's tools would (no model needed)",
    ),
    ("/quit", "leave (also /exit, or Ctrl-C twice)"),
];

/// The keys, for the welcome screen and `/help`.
pub(crate) const KEYS: &[(&str, &str)] = &[
    ("Enter", "send"),
    (
        "Alt-Enter / Shift-Enter",
        "new line (a paste is kept whole)",
    ),
    ("←→ Home End, Ctrl-A/E/U/W/K", "edit the message"),
    ("↑↓", "history (in a one-line message)"),
    ("PgUp PgDn", "scroll the conversation"),
    ("Esc / Ctrl-C", "cancel the turn (Ctrl-C twice quits)"),
];

impl App {
    /// Handles a key: edits the input, the review or the picker; returns what to do outside.
    pub(crate) fn key(&mut self, key: Key) -> Action {
        if key == Key::CtrlC {
            // Like any other key, it keeps a session asked to be deleted.
            if let Some(picker) = self.picker.as_mut() {
                picker.confirming = false;
            }
            return self.ctrl_c();
        }
        self.quit_armed = false;
        if self.picker.is_some() {
            return self.picker_key(key);
        }
        if !self.reviews.is_empty() {
            return self.review_key(key);
        }
        match key {
            Key::Enter => self.submit(),
            Key::Esc => {
                if self.running {
                    Action::Cancel
                } else {
                    Action::None
                }
            }
            Key::Up if self.editor.is_single_line() => {
                self.history_back();
                Action::None
            }
            Key::Down if self.editor.is_single_line() => {
                self.history_forward();
                Action::None
            }
            Key::PageUp => {
                self.scroll = self.scroll.saturating_add(10).min(self.max_scroll);
                Action::None
            }
            Key::PageDown => {
                self.scroll = self.scroll.saturating_sub(10);
                Action::None
            }
            Key::Tab => Action::None,
            Key::CtrlC => self.ctrl_c(),
            Key::Char(c) => {
                self.editor.insert_char(c);
                Action::None
            }
            Key::Newline => {
                self.editor.newline();
                Action::None
            }
            Key::Paste(text) => {
                self.editor.insert_str(&text);
                Action::None
            }
            Key::Backspace => {
                self.editor.backspace();
                Action::None
            }
            Key::Up => {
                self.editor.up();
                Action::None
            }
            Key::Down => {
                self.editor.down();
                Action::None
            }
            Key::Edit(input) => {
                self.editor.input(input);
                Action::None
            }
        }
    }

    /// Ctrl-C: cancels the running turn (once); else clears a typed message; else quits.
    /// A second Ctrl-C in a row always quits.
    fn ctrl_c(&mut self) -> Action {
        if self.quit_armed {
            return Action::Quit;
        }
        if self.running {
            self.quit_armed = true;
            self.notice = Some("cancelling the turn · Ctrl-C again quits".into());
            return Action::Cancel;
        }
        if !self.editor.is_empty() {
            self.quit_armed = true;
            self.editor.clear();
            self.notice = Some("message cleared · Ctrl-C again quits".into());
            return Action::None;
        }
        Action::Quit
    }

    fn submit(&mut self) -> Action {
        let text = self.editor.text();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Action::None;
        }
        if let Some(command) = trimmed.strip_prefix('/')
            && !command.starts_with('/')
        {
            self.editor.clear();
            self.history_pos = None;
            self.history.push(trimmed.to_owned());
            return self.command(command);
        }
        if self.running {
            self.system("a turn is running; wait, or press Esc to cancel it");
            return Action::None;
        }
        self.editor.clear();
        self.history_pos = None;
        self.history.push(trimmed.to_owned());
        // `//text` sends `/text`.
        let text = trimmed.strip_prefix('/').unwrap_or(trimmed);
        Action::Send(text.to_owned())
    }

    /// A slash command (without its `/`).
    fn command(&mut self, command: &str) -> Action {
        let (name, arg) = match command.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (command, ""),
        };
        match name {
            "help" | "?" => {
                self.system(&help_text());
                Action::None
            }
            "quit" | "exit" | "q" => Action::Quit,
            "clear" | "new" => Action::NewSession(None),
            "model" | "models" if arg.is_empty() => Action::ListModels,
            "model" | "models" => Action::SwitchModel(arg.to_owned()),
            "sessions" | "resume" if arg.is_empty() => Action::ListSessions,
            "sessions" | "resume" => Action::Resume(arg.to_owned()),
            "edits" => Action::ListEdits,
            "workspace" | "workspaces" if arg.is_empty() => Action::ListWorkspaces,
            "workspace" | "workspaces" => Action::SwitchWorkspace(arg.to_owned()),
            "search" | "find" if arg.is_empty() => {
                self.system("/search QUERY: words, names or `Type::method`; \"quoted text\" is found as written");
                Action::None
            }
            "search" | "find" => Action::Search(arg.to_owned()),
            _ => {
                self.system(&format!(
                    "unknown command /{name} (not sent to the model); /help lists the commands"
                ));
                Action::None
            }
        }
    }

    fn history_back(&mut self) {
        let pos = match self.history_pos {
            None => self.history.len().checked_sub(1),
            Some(p) => Some(p.saturating_sub(1)),
        };
        if let Some(p) = pos {
            self.history_pos = Some(p);
            self.editor.set_text(&self.history[p]);
        }
    }

    fn history_forward(&mut self) {
        match self.history_pos {
            Some(p) if p + 1 < self.history.len() => {
                self.history_pos = Some(p + 1);
                self.editor.set_text(&self.history[p + 1]);
            }
            Some(_) => {
                self.history_pos = None;
                self.editor.clear();
            }
            None => {}
        }
    }

    /// The service deleted `id`: its row leaves the `/sessions` picker, the cursor on the next.
    pub(crate) fn session_deleted(&mut self, id: &str) {
        if let Some(picker) = self.picker.as_mut()
            && picker.kind == PickerKind::Sessions
        {
            picker.rows.retain(|r| r.id != id);
            picker.cursor = picker.cursor.min(picker.rows.len().saturating_sub(1));
        }
    }

    fn picker_key(&mut self, key: Key) -> Action {
        let Some(picker) = self.picker.as_mut() else {
            return Action::None;
        };
        // Any key but a second `d` keeps the session asked about.
        let confirmed = std::mem::take(&mut picker.confirming);
        match key {
            Key::Char('d') if picker.kind == PickerKind::Sessions && !picker.rows.is_empty() => {
                if !confirmed {
                    picker.confirming = true;
                    return Action::None;
                }
                // The row goes once the service has deleted it ([`App::session_deleted`]).
                let cursor = picker.cursor.min(picker.rows.len() - 1);
                Action::DeleteSession(picker.rows[cursor].id.clone())
            }
            Key::Up | Key::Char('k') => {
                picker.cursor = picker.cursor.saturating_sub(1);
                Action::None
            }
            Key::Down | Key::Char('j') => {
                picker.cursor = (picker.cursor + 1).min(picker.rows.len().saturating_sub(1));
                Action::None
            }
            Key::Enter => {
                let chosen = picker.rows.get(picker.cursor).map(|s| s.id.clone());
                let kind = picker.kind;
                self.picker = None;
                match (kind, chosen) {
                    (_, None) => Action::None,
                    (PickerKind::Sessions, Some(id)) => Action::Resume(id),
                    (PickerKind::Models, Some(id)) => Action::SwitchModel(id),
                }
            }
            Key::Esc | Key::Char('q') => {
                self.picker = None;
                Action::None
            }
            _ => Action::None,
        }
    }

    fn review_key(&mut self, key: Key) -> Action {
        let Some(review) = self.reviews.front_mut() else {
            return Action::None;
        };
        let id = review.proposal.proposal_id.clone();
        match key {
            Key::Up | Key::Char('k') => {
                review.cursor = review.cursor.saturating_sub(1);
                Action::None
            }
            Key::Down | Key::Char('j') => {
                review.cursor = (review.cursor + 1).min(review.selected.len().saturating_sub(1));
                Action::None
            }
            Key::Char(' ') => {
                if let Some(s) = review.selected.get_mut(review.cursor) {
                    *s = !*s;
                }
                Action::None
            }
            Key::Char('a') | Key::Char('y') | Key::Enter => {
                let chosen: Vec<u32> = review
                    .selected
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| **s)
                    .map(|(i, _)| i as u32)
                    .collect();
                self.reviews.pop_front();
                if chosen.is_empty() {
                    Action::Deny(id)
                } else {
                    Action::Approve(id, chosen)
                }
            }
            Key::Char('d') | Key::Char('n') => {
                self.reviews.pop_front();
                Action::Deny(id)
            }
            Key::PageDown => {
                review.scroll = review.scroll.saturating_add(10);
                Action::None
            }
            Key::PageUp => {
                review.scroll = review.scroll.saturating_sub(10);
                Action::None
            }
            _ => Action::None,
        }
    }

    /// Adds a line from ploke itself to the conversation.
    pub(crate) fn system(&mut self, text: &str) {
        self.push(Speaker::System, text);
    }
}

/// `/help`: the commands and the keys.
pub(crate) fn help_text() -> String {
    let mut text = String::from("commands:\n");
    for (c, what) in COMMANDS {
        text.push_str(&format!("  {c:<26} {what}\n"));
    }
    text.push_str("keys:\n");
    for (k, what) in KEYS {
        text.push_str(&format!("  {k:<26} {what}\n"));
    }
    text.push_str("a message starting with // is sent with one /");
    text
}
