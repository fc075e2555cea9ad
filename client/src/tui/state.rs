//! What the TUI shows, as plain data: the conversation, the tool calls, the edit proposals
//! waiting for a decision, the status line and the input line with its history. Session
//! events fold into it with [`App::apply`]; keys turn into [`Action`]s with [`App::key`].

use std::collections::VecDeque;

use ploke_proto::session::v1::{SessionEvent, session_event::Event};
use ploke_proto::tools::v1::EditProposal;

/// Who said a line of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    /// The user.
    User,
    /// The model.
    Assistant,
    /// ploke itself (notices, failures).
    System,
}

/// One entry of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Who.
    pub speaker: Speaker,
    /// Text (grows while streaming).
    pub text: String,
}

/// Where a tool call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallState {
    /// Running.
    Running,
    /// Waiting for an edit decision.
    AwaitingApproval,
    /// Finished.
    Done,
    /// Failed.
    Failed,
}

/// One tool call in the panel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Provider call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Short argument summary.
    pub args: String,
    /// State.
    pub state: CallState,
    /// Milliseconds, once finished.
    pub duration_ms: Option<u64>,
}

/// A proposal under review, with the edits the user keeps selected.
#[derive(Debug, Clone, PartialEq)]
pub struct Review {
    /// The proposal.
    pub proposal: EditProposal,
    /// Per edit: selected to apply.
    pub selected: Vec<bool>,
    /// The edit under the cursor.
    pub cursor: usize,
}

/// What a key asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing to do outside the state.
    None,
    /// Send a message.
    Send(String),
    /// Approve these edits of a proposal (the others are denied).
    Approve(String, Vec<u32>),
    /// Deny a whole proposal.
    Deny(String),
    /// Cancel the running turn.
    Cancel,
    /// Leave.
    Quit,
}

/// A key, reduced to what the TUI uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A character.
    Char(char),
    /// Enter.
    Enter,
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
}

/// The whole TUI state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct App {
    /// Session id.
    pub session_id: String,
    /// Provider/model.
    pub model: String,
    /// Index state text.
    pub index: String,
    /// Conversation.
    pub entries: Vec<Entry>,
    /// Tool calls, newest last.
    pub calls: Vec<Call>,
    /// Proposals waiting for a decision, oldest first.
    pub reviews: VecDeque<Review>,
    /// Whether a turn is running.
    pub running: bool,
    /// Tokens used.
    pub tokens: u64,
    /// Last seq seen (reconnects resume after it).
    pub last_seq: u64,
    /// Connection state text (empty when connected).
    pub connection: String,
    /// The input line.
    pub input: String,
    /// Sent messages, oldest first.
    pub history: Vec<String>,
    /// Position while browsing the history.
    pub history_pos: Option<usize>,
    /// Lines scrolled up from the bottom of the conversation.
    pub scroll: u16,
}

impl App {
    /// Folds one event in; events at or below `last_seq` are ignored (a resumed stream).
    pub fn apply(&mut self, event: &SessionEvent) {
        if event.seq <= self.last_seq {
            return;
        }
        self.last_seq = event.seq;
        let Some(e) = &event.event else { return };
        match e {
            Event::UserMessage(m) => {
                self.running = true;
                self.push(Speaker::User, &m.content);
            }
            Event::AssistantDelta(d) => match self.entries.last_mut() {
                Some(last) if last.speaker == Speaker::Assistant => last.text.push_str(&d.text),
                _ => self.push(Speaker::Assistant, &d.text),
            },
            Event::AssistantMessage(m) => {
                if let Some(u) = &m.usage {
                    self.tokens += u64::from(u.input_tokens) + u64::from(u.output_tokens);
                }
                // A step whose text did not stream (or was replaced after a retry).
                let streamed = matches!(self.entries.last(), Some(l) if l.speaker == Speaker::Assistant && l.text == m.text);
                if !m.text.is_empty() && !streamed {
                    match self.entries.last_mut() {
                        Some(last) if last.speaker == Speaker::Assistant => {
                            last.text = m.text.clone()
                        }
                        _ => self.push(Speaker::Assistant, &m.text),
                    }
                }
            }
            Event::ToolCallRequested(r) => {
                let args = crate::describe::call_args(r.call.as_ref())
                    .chars()
                    .take(60)
                    .collect();
                self.calls.push(Call {
                    id: r.call_id.clone(),
                    name: r.name.clone(),
                    args,
                    state: CallState::Running,
                    duration_ms: None,
                });
            }
            Event::ToolCallCompleted(c) => {
                self.finish_call(&c.call_id, &c.name, CallState::Done, c.duration_ms)
            }
            Event::ToolCallFailed(f) => {
                self.finish_call(&f.call_id, &f.name, CallState::Failed, f.duration_ms)
            }
            Event::EditProposed(p) => {
                if let Some(p) = &p.proposal {
                    if let Some(call) = self.calls.iter_mut().rev().find(|c| {
                        c.id == p
                            .correlation
                            .as_ref()
                            .map(|c| c.call_id.clone())
                            .unwrap_or_default()
                    }) {
                        call.state = CallState::AwaitingApproval;
                    }
                    self.reviews.push_back(Review {
                        proposal: p.clone(),
                        selected: vec![true; p.edits.len()],
                        cursor: 0,
                    });
                }
            }
            Event::EditDecided(d) => self
                .reviews
                .retain(|r| r.proposal.proposal_id != d.proposal_id),
            Event::Notice(n) => self.push(Speaker::System, &n.text),
            Event::TurnCompleted(_) => self.running = false,
            Event::TurnFailed(f) => {
                self.running = false;
                let reason = crate::describe::turn_failure(f.reason);
                self.push(
                    Speaker::System,
                    &format!("turn failed ({reason}): {}", f.message),
                );
            }
            Event::ToolCallProgress(_) | Event::ContextPlan(_) => {}
        }
    }

    fn push(&mut self, speaker: Speaker, text: &str) {
        self.entries.push(Entry {
            speaker,
            text: text.to_owned(),
        });
        self.scroll = 0;
    }

    fn finish_call(&mut self, id: &str, name: &str, state: CallState, ms: u64) {
        match self.calls.iter_mut().rev().find(|c| c.id == id) {
            Some(c) => {
                c.state = state;
                c.duration_ms = Some(ms);
            }
            None => self.calls.push(Call {
                id: id.to_owned(),
                name: name.to_owned(),
                args: String::new(),
                state,
                duration_ms: Some(ms),
            }),
        }
    }

    /// Handles a key: edits the input or the review under way; returns what to do outside.
    pub fn key(&mut self, key: Key) -> Action {
        if key == Key::CtrlC {
            return Action::Quit;
        }
        if let Some(review) = self.reviews.front_mut() {
            let id = review.proposal.proposal_id.clone();
            return match key {
                Key::Up | Key::Char('k') => {
                    review.cursor = review.cursor.saturating_sub(1);
                    Action::None
                }
                Key::Down | Key::Char('j') => {
                    review.cursor =
                        (review.cursor + 1).min(review.selected.len().saturating_sub(1));
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
                _ => Action::None,
            };
        }
        match key {
            Key::Char(c) => {
                self.input.push(c);
                Action::None
            }
            Key::Backspace => {
                self.input.pop();
                Action::None
            }
            Key::Enter => {
                let text = std::mem::take(&mut self.input);
                self.history_pos = None;
                match text.trim() {
                    "" => Action::None,
                    "/quit" | "/exit" => Action::Quit,
                    _ if self.running => {
                        self.input = text;
                        self.push(
                            Speaker::System,
                            "a turn is running; wait, or press Esc to cancel it",
                        );
                        Action::None
                    }
                    t => {
                        self.history.push(t.to_owned());
                        Action::Send(t.to_owned())
                    }
                }
            }
            Key::Esc => {
                if self.running {
                    Action::Cancel
                } else {
                    Action::None
                }
            }
            Key::Up => {
                let pos = match self.history_pos {
                    None => self.history.len().checked_sub(1),
                    Some(p) => Some(p.saturating_sub(1)),
                };
                if let Some(p) = pos {
                    self.history_pos = Some(p);
                    self.input = self.history[p].clone();
                }
                Action::None
            }
            Key::Down => {
                match self.history_pos {
                    Some(p) if p + 1 < self.history.len() => {
                        self.history_pos = Some(p + 1);
                        self.input = self.history[p + 1].clone();
                    }
                    Some(_) => {
                        self.history_pos = None;
                        self.input.clear();
                    }
                    None => {}
                }
                Action::None
            }
            Key::PageUp => {
                self.scroll = self.scroll.saturating_add(10);
                Action::None
            }
            Key::PageDown => {
                self.scroll = self.scroll.saturating_sub(10);
                Action::None
            }
            Key::Tab => Action::None,
            Key::CtrlC => Action::Quit,
        }
    }
}
