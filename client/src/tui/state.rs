//! What the TUI shows, as plain data: the conversation, the tool calls, the edit proposals
//! waiting for a decision, the session picker, the status line (index progress, notices) and
//! the input editor with its history. Session events fold into it with [`App::apply`]; keys
//! turn into [`Action`]s with [`App::key`] (keys.rs).

use std::collections::VecDeque;

use ploke_proto::session::v1::{SessionEvent, session_event::Event};
use ploke_proto::tools::v1::EditProposal;

/// Who said a line of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Speaker {
    /// The user.
    User,
    /// The model.
    Assistant,
    /// ploke itself (notices, failures).
    System,
}

/// One entry of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Who.
    pub speaker: Speaker,
    /// Text (grows while streaming).
    pub text: String,
}

/// Where a tool call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallState {
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
pub(crate) struct Call {
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
pub(crate) struct Review {
    /// The proposal.
    pub proposal: EditProposal,
    /// Per edit: selected to apply.
    pub selected: Vec<bool>,
    /// The edit under the cursor.
    pub cursor: usize,
    /// Lines of the diff scrolled past.
    pub scroll: u16,
}

/// One choice of a picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PickerRow {
    /// What choosing it acts on: a session id, or `PROVIDER/MODEL`.
    pub id: String,
    /// One line: for a session its short id, model, size and title.
    pub label: String,
}

/// What a picker chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PickerKind {
    /// `/sessions`: a session to resume.
    Sessions,
    /// `/model`: a model for a new session.
    Models,
}

/// The `/sessions` or `/model` picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Picker {
    /// What it chooses.
    pub kind: PickerKind,
    /// The choices (sessions newest first; models by provider).
    pub rows: Vec<PickerRow>,
    /// The one under the cursor.
    pub cursor: usize,
    /// `/sessions`: the row under the cursor asks to be deleted (`d` once; `d` again deletes).
    pub confirming: bool,
}

/// Indexing under way, for the status bar's gauge.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Indexing {
    /// Phase (`scanning`, `parsing`, `embedding`, …).
    pub phase: String,
    /// Items done and known so far, for the current phase.
    pub done: u64,
    /// Total for the phase (0 = not known yet).
    pub total: u64,
    /// Items in the index so far (tools answer from these).
    pub items: u64,
    /// Seconds left, when the service can say.
    pub eta_seconds: Option<u64>,
}

/// What a key asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
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
    /// Start a new session: same provider and model, or these (provider, model).
    NewSession(Option<(String, String)>),
    /// Show the `/model` picker.
    ListModels,
    /// Start a new session with this model: `PROVIDER/MODEL`, or a model of the current
    /// provider.
    SwitchModel(String),
    /// Show the `/sessions` picker.
    ListSessions,
    /// Resume this session (an id or a unique prefix of one).
    Resume(String),
    /// Delete this session (chosen in the `/sessions` picker, confirmed).
    DeleteSession(String),
    /// Show the proposals waiting for a decision.
    ListEdits,
    /// Show what the index finds for this query (no model needed).
    Search(String),
    /// List the workspaces the gateway serves the caller.
    ListWorkspaces,
    /// Move to this workspace (a name or a root): a new session there.
    SwitchWorkspace(String),
}

/// The whole TUI state.
#[derive(Debug, Clone, Default)]
pub(crate) struct App {
    /// Session id.
    pub session_id: String,
    /// Provider/model.
    pub model: String,
    /// The session's workspace (proposals of other sessions there are shown too).
    pub workspace_root: String,
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
    /// A notice for the status bar (a warning of the services, what Ctrl-C did, …).
    pub notice: Option<String>,
    /// Indexing under way.
    pub indexing: Option<Indexing>,
    /// The message being written.
    pub editor: super::editor::Editor,
    /// Ctrl-C was pressed once: the next one quits.
    pub quit_armed: bool,
    /// The `/sessions` or `/model` picker, while open.
    pub picker: Option<Picker>,
    /// Spinner frame (advanced while a turn runs).
    pub tick: usize,
    /// The furthest the conversation can scroll up (set after each draw).
    pub max_scroll: u16,
    /// The model's entries rendered from markdown, by entry index, with the text they were
    /// rendered from: a redraw (a spinner tick) re-renders only what changed.
    pub rendered: std::cell::RefCell<Vec<Option<(String, ratatui::text::Text<'static>)>>>,
    /// Sent messages, oldest first.
    pub history: Vec<String>,
    /// Position while browsing the history.
    pub history_pos: Option<usize>,
    /// Lines scrolled up from the bottom of the conversation.
    pub scroll: u16,
}

impl App {
    /// Folds one event in; events at or below `last_seq` are ignored (a resumed stream).
    pub(crate) fn apply(&mut self, event: &SessionEvent) {
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
                // A line's worth of a wide terminal; the panel fits it to its width.
                let args = crate::describe::fit(&crate::describe::call_args(r.call.as_ref()), 200);
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
                    if p.by_policy {
                        let files: Vec<&str> =
                            p.files.iter().map(|f| f.file_path.as_str()).collect();
                        self.push(
                            Speaker::System,
                            &format!(
                                "{} ({}) is decided by the deployment's auto_approve policy: \
                                 nothing to review",
                                p.proposal_id,
                                files.join(", ")
                            ),
                        );
                        return;
                    }
                    if let Some(call) = self.calls.iter_mut().rev().find(|c| {
                        c.id == p
                            .correlation
                            .as_ref()
                            .map(|c| c.call_id.clone())
                            .unwrap_or_default()
                    }) {
                        call.state = CallState::AwaitingApproval;
                    }
                    self.review(p.clone());
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

    /// Queues `proposal` for review unless it already is.
    pub(crate) fn review(&mut self, proposal: EditProposal) {
        // The deployment's policy decides it; a person's decision would race the policy's.
        if proposal.by_policy {
            return;
        }
        if self
            .reviews
            .iter()
            .any(|r| r.proposal.proposal_id == proposal.proposal_id)
        {
            return;
        }
        self.reviews.push_back(Review {
            selected: vec![true; proposal.edits.len()],
            proposal,
            cursor: 0,
            scroll: 0,
        });
    }

    /// Folds in the proposals waiting anywhere (newest first, as listed): those of this
    /// workspace join the review queue, whichever client made them; those of other sessions
    /// no longer waiting leave it (this session's leave with its events).
    pub(crate) fn pending(
        &mut self,
        listed: Vec<EditProposal>,
        current_session: Option<&str>,
        decided_here: &std::collections::HashSet<String>,
    ) {
        let waiting: Vec<EditProposal> = listed
            .into_iter()
            .filter(|p| p.workspace_root == self.workspace_root)
            .filter(|p| !decided_here.contains(&p.proposal_id))
            .collect();
        self.reviews.retain(|r| {
            let session = r
                .proposal
                .correlation
                .as_ref()
                .map(|c| c.session_id.as_str());
            (session.is_some() && session == current_session)
                || waiting
                    .iter()
                    .any(|p| p.proposal_id == r.proposal.proposal_id)
        });
        for p in waiting.into_iter().rev() {
            self.review(p);
        }
    }

    /// Forgets the conversation (another session is shown next).
    pub(crate) fn reset_conversation(&mut self) {
        self.entries.clear();
        self.rendered.borrow_mut().clear();
        self.calls.clear();
        self.reviews.clear();
        self.running = false;
        self.tokens = 0;
        self.last_seq = 0;
        self.scroll = 0;
    }

    pub(super) fn push(&mut self, speaker: Speaker, text: &str) {
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
}
