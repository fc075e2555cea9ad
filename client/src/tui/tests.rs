//! The TUI's views as TestBackend snapshots, and its keys.

use ploke_proto::common::v1::{Correlation, TokenUsage};
use ploke_proto::session::v1::*;
use ploke_proto::tools::v1::*;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::keys::Key;
use super::state::{Action, App};
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
    terminal
        .draw(|f| {
            view::draw(f, app);
        })
        .unwrap();
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
    app.editor.set_text("and sub?");
    insta::assert_snapshot!(screen(&app));
}

#[test]
fn a_tool_call_in_chinese_is_cut_by_the_cells_it_takes() {
    use session_event::Event as E;
    let mut app = app();
    let query = "查找所有处理用户登录失败并返回错误信息的函数以及它们的调用者";
    app.apply(&event(
        1,
        E::ToolCallRequested(ToolCallRequested {
            call_id: "call_1".into(),
            name: "request_code_context".into(),
            call: Some(ToolCall {
                args: Some(tool_call::Args::RequestCodeContext(
                    ploke_proto::tools::v1::RequestCodeContextArgs {
                        search_term: Some(query.into()),
                        ..Default::default()
                    },
                )),
            }),
        }),
    ));
    let shown = screen(&app);
    // The panel's line of arguments ends in `…` inside the border, the query's end cut off.
    let args = shown
        .lines()
        .find(|l| l.contains("查找"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(args.contains("…") && !args.contains("调用者"), "{args}");
    insta::assert_snapshot!(shown);
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
fn a_proposal_the_policy_decides_is_told_not_reviewed() {
    let mut app = app();
    turn_with_a_tool(&mut app);
    let mut by_policy = proposal();
    by_policy.by_policy = true;
    app.apply(&event(
        6,
        session_event::Event::EditProposed(EditProposed {
            proposal: Some(by_policy.clone()),
        }),
    ));
    assert!(app.reviews.is_empty());
    assert_eq!(
        app.entries.last().unwrap().text,
        "edit-4a60ceae7fcc58034b72 (src/lib.rs) is decided by the deployment's auto_approve \
         policy: nothing to review"
    );
    // Nor does it join the queue when listed as pending by another client's view.
    app.review(by_policy);
    assert!(app.reviews.is_empty());
    assert_eq!(app.key(Key::Char('a')), Action::None);
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
    assert_eq!(app.editor.text(), "x");
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
    app.editor.clear();
    assert_eq!(app.key(Key::Up), Action::None);
    assert_eq!(app.editor.text(), "first");
    app.key(Key::Down);
    assert_eq!(app.editor.text(), "");
    app.max_scroll = 25;
    app.key(Key::PageUp);
    assert_eq!(app.scroll, 10);
    app.key(Key::PageDown);
    assert_eq!(app.scroll, 0);
    assert_eq!(app.key(Key::CtrlC), Action::Quit);
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        assert_eq!(app.key(Key::Char(c)), Action::None);
    }
}

fn edit(key: ratatui_textarea::Key, ctrl: bool) -> Key {
    Key::Edit(ratatui_textarea::Input {
        key,
        ctrl,
        alt: false,
        shift: false,
    })
}

#[test]
fn slash_commands_never_reach_the_model() {
    let mut app = app();
    let mut command = |text: &str| {
        typed(&mut app, text);
        app.key(Key::Enter)
    };
    assert_eq!(command("/quit"), Action::Quit);
    assert_eq!(command("/exit"), Action::Quit);
    assert_eq!(command("/clear"), Action::NewSession(None));
    assert_eq!(
        command("/model openai/gpt-4.1"),
        Action::SwitchModel("openai/gpt-4.1".into())
    );
    assert_eq!(command("/model"), Action::ListModels);
    assert_eq!(command("/sessions"), Action::ListSessions);
    assert_eq!(
        command("/resume 0190f3a2-7c41"),
        Action::Resume("0190f3a2-7c41".into())
    );
    assert_eq!(command("/edits"), Action::ListEdits);
    assert_eq!(command("/workspace"), Action::ListWorkspaces);
    assert_eq!(
        command("/workspace  billing "),
        Action::SwitchWorkspace("billing".into())
    );
    assert_eq!(
        command("/search  `Config::load` settings "),
        Action::Search("`Config::load` settings".into())
    );
    assert_eq!(command("/find retry"), Action::Search("retry".into()));
    assert_eq!(
        command("//etc/hosts is what?"),
        Action::Send("/etc/hosts is what?".into())
    );
    assert_eq!(command("/frobnicate now"), Action::None);
    assert_eq!(command("/help"), Action::None);
    assert_eq!(command("/search"), Action::None);
    let said: Vec<&str> = app.entries.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(
        said[0],
        "unknown command /frobnicate (not sent to the model); /help lists the commands"
    );
    assert_eq!(said[1], super::keys::help_text());
    assert!(said[1].contains("/sessions") && said[1].contains("Alt-Enter"));
    assert!(said[1].contains("/search QUERY") && said[1].contains("/workspace [NAME]"));
    assert_eq!(
        said[2],
        "/search QUERY: words, names or `Type::method`; \"quoted text\" is found as written"
    );
    assert_eq!(said.len(), 3);
    assert!(app.editor.is_empty());
}

#[test]
fn ctrl_c_cancels_the_turn_then_quits_and_clears_a_message_first() {
    let mut app = app();
    app.running = true;
    assert_eq!(app.key(Key::CtrlC), Action::Cancel);
    assert_eq!(
        app.notice.as_deref(),
        Some("cancelling the turn · Ctrl-C again quits")
    );
    assert_eq!(app.key(Key::CtrlC), Action::Quit);

    let mut app = super::tests::app();
    typed(&mut app, "half a thought");
    assert_eq!(app.key(Key::CtrlC), Action::None);
    assert!(app.editor.is_empty());
    // Any other key in between disarms it.
    typed(&mut app, "x");
    assert_eq!(app.key(Key::CtrlC), Action::None);
    assert_eq!(app.key(Key::CtrlC), Action::Quit);

    // Idle with nothing typed: one Ctrl-C quits.
    assert_eq!(super::tests::app().key(Key::CtrlC), Action::Quit);
}

#[test]
fn a_paste_stays_whole_and_newlines_need_alt_enter() {
    let mut app = app();
    assert_eq!(
        app.key(Key::Paste("first line\r\nsecond line".into())),
        Action::None
    );
    assert_eq!(app.editor.text(), "first line\nsecond line");
    assert_eq!(app.key(Key::Newline), Action::None);
    typed(&mut app, "third");
    // ↑ moves within a multi-line message instead of recalling history.
    assert_eq!(app.key(Key::Up), Action::None);
    assert_eq!(app.editor.text(), "first line\nsecond line\nthird");
    assert_eq!(
        app.key(Key::Enter),
        Action::Send("first line\nsecond line\nthird".into())
    );
}

#[test]
fn readline_keys_move_and_delete() {
    use ratatui_textarea::Key as K;
    let mut app = app();
    typed(&mut app, "world");
    app.key(edit(K::Home, false));
    typed(&mut app, "hello ");
    assert_eq!(app.editor.text(), "hello world");
    app.key(edit(K::End, false));
    app.key(edit(K::Left, false));
    app.key(edit(K::Left, false));
    typed(&mut app, "_");
    assert_eq!(app.editor.text(), "hello wor_ld");
    app.key(edit(K::Char('e'), true));
    app.key(edit(K::Char('w'), true));
    assert_eq!(app.editor.text(), "hello ");
    app.key(edit(K::Char('u'), true));
    assert_eq!(app.editor.text(), "");
    app.key(edit(K::Char('z'), true));
    assert_eq!(app.editor.text(), "hello ");
}

#[test]
fn scrolling_stops_at_the_top() {
    let mut app = app();
    for i in 0..40 {
        app.system(&format!("line {i}"));
    }
    let mut terminal = Terminal::new(TestBackend::new(100, 22)).unwrap();
    let mut max = 0;
    terminal
        .draw(|f| {
            max = view::draw(f, &app);
        })
        .unwrap();
    // 40 entries, each a line and a blank one, in 16 rows of conversation (22 less the
    // input box, the status bar and the borders).
    assert_eq!(max, 80 - 16);
    app.max_scroll = max;
    for _ in 0..20 {
        app.key(Key::PageUp);
    }
    assert_eq!(app.scroll, max);
}

#[test]
fn the_welcome_screen_the_gauge_and_a_notice() {
    let mut app = app();
    app.indexing = Some(super::state::Indexing {
        phase: "embedding".into(),
        done: 1200,
        total: 4000,
        items: 4000,
        eta_seconds: Some(75),
    });
    app.notice = Some("warning: file skipped path=src/big.rs".into());
    insta::assert_snapshot!(screen(&app));
}

#[test]
fn markdown_and_a_highlighted_diff_on_screen() {
    let mut app = app();
    app.apply(&event(
        1,
        session_event::Event::AssistantDelta(AssistantDelta {
            text: "## Plan\n\n1. read **add**\n2. change it:\n\n```rust\nfn add() {}\n```\n\nA long sentence that has to wrap at a word boundary because the conversation column is narrow.".into(),
        }),
    ));
    insta::assert_snapshot!(screen(&app));
}

/// The terminal library draws no tab: Go's indentation, in a reply and in an edit's diff,
/// is shown as spaces.
#[test]
fn tabs_show_as_indentation_in_replies_and_diffs() {
    let mut app = app();
    app.apply(&event(
        1,
        session_event::Event::AssistantDelta(AssistantDelta {
            text: "```go\nfunc main() {\n\tif ok {\n\t\tprintln(1)\n\t}\n}\n```\nsee\tthis".into(),
        }),
    ));
    let shown = screen(&app);
    for line in [
        "func main() {",
        "    if ok {",
        "        println(1)",
        "see    this",
    ] {
        assert!(shown.contains(line), "{line:?} not in\n{shown}");
    }
    let mut tabbed = proposal();
    tabbed.files[0].unified_diff =
        "--- a/main.go\n+++ b/main.go\n@@ -1,2 +1,2 @@\n func main() {\n-\tprintln(1)\n+\tprintln(2)\n".into();
    app.apply(&event(
        2,
        session_event::Event::EditProposed(EditProposed {
            proposal: Some(tabbed),
        }),
    ));
    let shown = screen(&app);
    assert!(shown.contains("+    println(2)"), "{shown}");
    assert!(shown.contains("-    println(1)"), "{shown}");
}

#[test]
fn proposals_from_other_clients_join_the_queue_and_leave_when_decided_elsewhere() {
    let mut app = app();
    app.workspace_root = "/repo".into();
    let mut other = proposal();
    other.workspace_root = "/repo".into();
    other.correlation = Some(Correlation {
        session_id: "another-session".into(),
        ..Default::default()
    });
    let mut elsewhere = proposal();
    elsewhere.proposal_id = "edit-of-another-workspace".into();
    elsewhere.workspace_root = "/other".into();
    let none = std::collections::HashSet::new();
    app.pending(vec![other.clone(), elsewhere], Some("this-session"), &none);
    assert_eq!(app.reviews.len(), 1);
    assert_eq!(app.reviews[0].proposal.proposal_id, other.proposal_id);
    // Listed again: not queued twice.
    app.pending(vec![other.clone()], Some("this-session"), &none);
    assert_eq!(app.reviews.len(), 1);
    // Decided by someone else: gone.
    app.pending(Vec::new(), Some("this-session"), &none);
    assert!(app.reviews.is_empty());
    // Decided here: not brought back by a list taken before the decision landed.
    let decided: std::collections::HashSet<String> = [other.proposal_id.clone()].into();
    app.pending(vec![other], Some("this-session"), &decided);
    assert!(app.reviews.is_empty());
}

fn configured() -> ListModelsResponse {
    ListModelsResponse {
        providers: vec![
            ProviderInfo {
                name: "ollama".into(),
                default_model: "qwen3:8b".into(),
                models: vec![],
                unusable_reason: String::new(),
            },
            ProviderInfo {
                name: "openrouter".into(),
                default_model: "openai/gpt-4.1-mini".into(),
                models: vec![
                    ModelInfo {
                        id: "openai/gpt-4.1-mini".into(),
                        context_window: Some(1_047_576),
                        supports_tools: Some(true),
                    },
                    ModelInfo {
                        id: "deepseek/deepseek-r1".into(),
                        context_window: Some(163_840),
                        supports_tools: Some(false),
                    },
                ],
                unusable_reason: "environment variable OPENROUTER_API_KEY is not set".into(),
            },
        ],
        default_provider: "openrouter".into(),
    }
}

#[test]
fn the_model_picker_lists_every_configured_model_and_starts_on_the_current_one() {
    let mut app = app();
    app.model = "openrouter/openai/gpt-4.1-mini".into();
    app.picker = Some(super::tasks::model_picker(
        &configured(),
        "openrouter/openai/gpt-4.1-mini",
    ));
    insta::assert_snapshot!(screen(&app));
    assert_eq!(app.key(Key::Down), Action::None);
    assert_eq!(
        app.key(Key::Enter),
        Action::SwitchModel("openrouter/deepseek/deepseek-r1".into())
    );
    assert_eq!(app.picker, None);
    // A model named by hand is listed first, as the current one.
    let picker = super::tasks::model_picker(&configured(), "ollama/qwen3:32b");
    assert_eq!(
        (
            picker.rows[0].label.as_str(),
            picker.cursor,
            picker.rows.len()
        ),
        ("● ollama/qwen3:32b · not in the configuration", 0, 4)
    );
}

#[test]
fn a_session_is_deleted_from_the_picker_with_d_twice_and_any_other_key_keeps_it() {
    use super::state::{Picker, PickerKind, PickerRow};
    let mut app = app();
    let row = |id: &str| PickerRow {
        id: id.into(),
        label: format!("{id}  fake/m  4 events  what is {id}?"),
    };
    app.picker = Some(Picker {
        kind: PickerKind::Sessions,
        rows: vec![row("s-one"), row("s-two"), row("s-three")],
        cursor: 0,
        confirming: false,
    });
    let ids = |app: &App| -> (Vec<String>, usize, bool) {
        let p = app.picker.as_ref().unwrap();
        (
            p.rows.iter().map(|r| r.id.clone()).collect(),
            p.cursor,
            p.confirming,
        )
    };
    // `d` asks; moving away, or Ctrl-C, keeps the session.
    assert_eq!(app.key(Key::Char('d')), Action::None);
    assert!(ids(&app).2);
    assert_eq!(app.key(Key::Down), Action::None);
    assert_eq!(
        ids(&app),
        (
            vec!["s-one".into(), "s-two".into(), "s-three".into()],
            1,
            false
        )
    );
    assert_eq!(app.key(Key::Char('d')), Action::None);
    app.key(Key::CtrlC);
    assert!(!ids(&app).2);
    // `d` twice asks the service to delete the one under the cursor.
    assert_eq!(app.key(Key::Char('d')), Action::None);
    insta::assert_snapshot!(screen(&app));
    assert_eq!(
        app.key(Key::Char('d')),
        Action::DeleteSession("s-two".into())
    );
    // Its row goes once the service has deleted it; the cursor stays on the next.
    assert_eq!(ids(&app).0.len(), 3);
    app.session_deleted("s-two");
    assert_eq!(
        ids(&app),
        (vec!["s-one".into(), "s-three".into()], 1, false)
    );
    app.session_deleted("s-three");
    app.session_deleted("s-one");
    assert_eq!(ids(&app), (vec![], 0, false));
    // Nothing left: `d` does nothing.
    assert_eq!(app.key(Key::Char('d')), Action::None);
    assert_eq!(app.key(Key::Char('d')), Action::None);
    assert_eq!(app.key(Key::Esc), Action::None);
    assert_eq!(app.picker, None);
}

#[test]
fn a_named_model_resolves_against_the_configured_providers() {
    use super::tasks::resolve_model;
    let listed = configured();
    let pair = |p: &str, m: &str| Ok((p.to_owned(), m.to_owned()));
    // A configured provider's prefix names the provider; the rest (slashes and all) the model.
    assert_eq!(
        resolve_model(
            &listed,
            "openrouter/anthropic/claude-sonnet-4",
            Some("ollama")
        ),
        pair("openrouter", "anthropic/claude-sonnet-4")
    );
    // Otherwise it is a model of the current provider, or of the default one.
    assert_eq!(
        resolve_model(&listed, "qwen3:32b", Some("ollama")),
        pair("ollama", "qwen3:32b")
    );
    assert_eq!(
        resolve_model(&listed, "openai/gpt-4.1", None),
        pair("openrouter", "openai/gpt-4.1")
    );
    let none = ListModelsResponse::default();
    assert_eq!(
        resolve_model(&none, "gpt-4.1", None),
        Err("name the provider: /model PROVIDER/MODEL (configured: none)".to_owned())
    );
}

#[test]
fn a_session_of_another_workspace_becomes_the_tuis_and_says_the_checkout_stays_out() {
    let checkout = ploke_client::checkout::Checkout {
        root: "/home/dev/api".into(),
        workspace_root: "/repos/api".into(),
    };
    let session = |root: &str| Session {
        session_id: format!("session-of-{root}"),
        workspace_root: root.into(),
        provider: "fake".into(),
        model: "m".into(),
        ..Default::default()
    };
    let mut app = app();
    super::show(&mut app, &session("/repos/api"), Some(&checkout));
    assert_eq!(app.workspace_root, "/repos/api");
    assert_eq!(app.entries.len(), 0);
    super::show(&mut app, &session("/repos/web"), Some(&checkout));
    assert_eq!(app.workspace_root, "/repos/web");
    let said: Vec<&str> = app.entries.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(
        said,
        vec![
            "your changes are not sent to this session, nor are its approved edits written into \
             your files: it is over workspace /repos/web, and this checkout (/home/dev/api) \
             stands for /repos/api"
        ]
    );
    // Services of this checkout itself (no shared gateway): nothing to say.
    super::show(&mut app, &session("/repos/web"), None);
    assert_eq!(app.entries.len(), 0);
}

#[test]
fn workspace_lists_the_served_workspaces_and_names_one() {
    use ploke_proto::rag::v1::{GitSource, Workspace};
    let served = [
        Workspace {
            workspace_root: "/srv/api".into(),
            name: "api".into(),
            ..Default::default()
        },
        Workspace {
            workspace_root: "/srv/.ploke/repos/billing-1a2b".into(),
            name: "billing".into(),
            git: Some(GitSource {
                url: "https://git.example.com/team/billing.git".into(),
                branch: "main".into(),
            }),
            ..Default::default()
        },
    ];
    assert_eq!(
        super::tasks::workspaces_text(&served, "/srv/api"),
        "workspaces (* this one; /workspace NAME moves to another):\n\
         * api (/srv/api)\n  \
         billing (/srv/.ploke/repos/billing-1a2b, from https://git.example.com/team/billing.git)"
    );
    assert_eq!(
        super::tasks::workspaces_text(&[], "/srv/api"),
        "the gateway lists no workspace; this one is /srv/api"
    );
    let named = |n: &str| super::tasks::workspace_named(&served, n).map_err(|e| e.to_string());
    assert_eq!(
        named("billing"),
        Ok("/srv/.ploke/repos/billing-1a2b".into())
    );
    assert_eq!(named("/srv/api/"), Ok("/srv/api".into()));
    assert_eq!(
        named("docs"),
        Err("/workspace docs: the gateway serves you no such workspace (yours: api (/srv/api), \
             billing (/srv/.ploke/repos/billing-1a2b, from https://git.example.com/team/billing.git))"
            .into())
    );
}

#[test]
fn a_long_one_line_message_shows_every_row_it_wraps_to() {
    let mut app = app();
    let message = "please look at the retry policy of the client and tell me why a request that \
                   timed out is sent again even when it was not idempotent, and where to fix it";
    app.editor.set_text(message);
    let screen = screen(&app);
    // Every word is on the screen, the last ones too (the box grew to hold them).
    for word in ["please", "idempotent,", "where", "fix", "it"] {
        assert!(screen.contains(word), "{word}\n{screen}");
    }
}
