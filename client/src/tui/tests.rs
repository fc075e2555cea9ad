//! The TUI's views as TestBackend snapshots, and its keys.

use ploke_proto::common::v1::{Correlation, TokenUsage};
use ploke_proto::session::v1::*;
use ploke_proto::tools::v1::*;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::state::{Action, App, Key};
use super::view;

fn event(seq: u64, e: session_event::Event) -> SessionEvent {
    SessionEvent {
        seq,
        session_id: "0190f3a2-7c41-7000-8000-000000000001".into(),
        correlation: Some(Correlation {
            call_id: "call_1".into(),
            ..Default::default()
        }),
        at: None,
        event: Some(e),
    }
}

fn app() -> App {
    App {
        session_id: "0190f3a2-7c41-7000-8000-000000000001".into(),
        model: "openai/gpt-4.1-mini".into(),
        index: "ready, 42 items, hybrid".into(),
        ..App::default()
    }
}

fn screen(app: &App) -> String {
    let mut terminal = Terminal::new(TestBackend::new(100, 22)).unwrap();
    terminal.draw(|f| view::draw(f, app)).unwrap();
    terminal.backend().to_string()
}

fn turn_with_a_tool(app: &mut App) {
    use session_event::Event as E;
    app.apply(&event(
        1,
        E::UserMessage(UserMessage {
            content: "what does add return?".into(),
            client_request_id: String::new(),
        }),
    ));
    app.apply(&event(
        2,
        E::ToolCallRequested(ToolCallRequested {
            call_id: "call_1".into(),
            name: "read_file".into(),
            call: Some(ToolCall {
                args: Some(tool_call::Args::ReadFile(ReadFileArgs {
                    file: "src/lib.rs".into(),
                    start_line: None,
                    end_line: None,
                })),
            }),
        }),
    ));
    app.apply(&event(
        3,
        E::ToolCallCompleted(ToolCallCompleted {
            call_id: "call_1".into(),
            name: "read_file".into(),
            result: None,
            duration_ms: 3,
        }),
    ));
    app.apply(&event(
        4,
        E::AssistantDelta(AssistantDelta {
            text: "`add` returns ".into(),
        }),
    ));
    app.apply(&event(
        5,
        E::AssistantDelta(AssistantDelta {
            text: "`a + b`.".into(),
        }),
    ));
}

#[test]
fn conversation_tool_panel_and_status_bar() {
    let mut app = app();
    turn_with_a_tool(&mut app);
    app.apply(&event(
        6,
        session_event::Event::AssistantMessage(AssistantMessage {
            text: "`add` returns `a + b`.".into(),
            finish_reason: "stop".into(),
            usage: Some(TokenUsage {
                input_tokens: 300,
                output_tokens: 20,
                total_tokens: 320,
            }),
            model: "m".into(),
        }),
    ));
    app.apply(&event(
        7,
        session_event::Event::TurnCompleted(TurnCompleted::default()),
    ));
    // A replayed event after a reconnect changes nothing.
    app.apply(&event(
        5,
        session_event::Event::AssistantDelta(AssistantDelta { text: "dup".into() }),
    ));
    app.input = "and sub?".into();
    insta::assert_snapshot!(screen(&app));
}

#[test]
fn a_running_turn_and_a_lost_connection() {
    let mut app = app();
    turn_with_a_tool(&mut app);
    app.connection = "reconnecting (transport error)".into();
    insta::assert_snapshot!(screen(&app));
}

fn proposal() -> EditProposal {
    EditProposal {
        proposal_id: "edit-4a60ceae7fcc58034b72".into(),
        correlation: Some(Correlation { call_id: "call_2".into(), ..Default::default() }),
        tool_name: "apply_code_edit".into(),
        edits: vec![
            ProposedEdit { index: 0, file_path: "src/lib.rs".into(), summary: "replace crate::add".into(), unified_diff: String::new() },
            ProposedEdit { index: 1, file_path: "src/lib.rs".into(), summary: "search/replace in src/lib.rs".into(), unified_diff: String::new() },
        ],
        files: vec![FileDiff {
            file_path: "src/lib.rs".into(),
            unified_diff: "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n pub fn add(a: i32, b: i32) -> i32 {\n-    a + b\n+    a.wrapping_add(b)\n }\n".into(),
            base_hash: "h".into(),
            creates: false,
        }],
        state: ProposalState::Pending as i32,
        ..Default::default()
    }
}

#[test]
fn the_edit_approval_view_and_its_keys() {
    let mut app = app();
    turn_with_a_tool(&mut app);
    app.apply(&event(
        6,
        session_event::Event::EditProposed(EditProposed {
            proposal: Some(proposal()),
        }),
    ));
    assert_eq!(app.key(Key::Down), Action::None);
    assert_eq!(app.key(Key::Char(' ')), Action::None);
    insta::assert_snapshot!(screen(&app));
    // Edit 1 was unselected: approving applies edit 0 only.
    assert_eq!(
        app.key(Key::Char('a')),
        Action::Approve("edit-4a60ceae7fcc58034b72".into(), vec![0])
    );
    assert!(app.reviews.is_empty());
    app.apply(&event(
        7,
        session_event::Event::EditProposed(EditProposed {
            proposal: Some(proposal()),
        }),
    ));
    assert_eq!(
        app.key(Key::Char('d')),
        Action::Deny("edit-4a60ceae7fcc58034b72".into())
    );
}

#[test]
fn input_history_scrolling_and_turn_keys() {
    let mut app = app();
    for c in "first".chars() {
        app.key(Key::Char(c));
    }
    assert_eq!(app.key(Key::Enter), Action::Send("first".into()));
    app.apply(&event(
        1,
        session_event::Event::UserMessage(UserMessage {
            content: "first".into(),
            client_request_id: String::new(),
        }),
    ));
    // While the turn runs, Enter keeps the text and Esc cancels.
    app.key(Key::Char('x'));
    assert_eq!(app.key(Key::Enter), Action::None);
    assert_eq!(app.input, "x");
    assert_eq!(app.key(Key::Esc), Action::Cancel);
    app.apply(&event(
        2,
        session_event::Event::TurnFailed(TurnFailed {
            reason: TurnFailureReason::Cancelled as i32,
            message: "cancelled from the TUI".into(),
        }),
    ));
    assert!(!app.running);
    assert_eq!(
        app.entries.last().unwrap().text,
        "turn failed (cancelled): cancelled from the TUI"
    );
    app.input.clear();
    assert_eq!(app.key(Key::Up), Action::None);
    assert_eq!(app.input, "first");
    app.key(Key::Down);
    assert_eq!(app.input, "");
    app.key(Key::PageUp);
    assert_eq!(app.scroll, 10);
    app.key(Key::PageDown);
    assert_eq!(app.scroll, 0);
    assert_eq!(app.key(Key::CtrlC), Action::Quit);
}
