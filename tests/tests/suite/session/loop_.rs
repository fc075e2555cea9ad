//! The request loop: tool calls (one, parallel answered out of order, unknown, malformed,
//! timed out), the tool-round limit, `length` → continue, and cancelling mid-stream.

use ploke_e2e::fake_provider::Reply;
use ploke_proto::session::v1::*;
use ploke_proto::tools::v1::{DecideEditRequest, Decision, ToolErrorCode, tool_result};
use serde_json::json;

use super::{assert_completed, chat, chat_with, failure, kinds, messages, notices};

#[tokio::test]
async fn one_tool_call_then_an_answer_built_from_its_result() {
    let c = chat().await;
    c.fake.push([
        Reply::tool_calls(&[(
            "call_1",
            "read_file",
            r#"{"file": "src/lib.rs", "start_line": 2}"#,
        )]),
        Reply::text(&["`add` ", "returns a + b."]),
    ]);
    let events = c.turn("what does add return?").await;
    assert_eq!(
        kinds(&events),
        vec![
            "user_message",
            "context_plan",
            "assistant_message",
            "tool_call_requested",
            "tool_call_completed",
            "context_plan",
            "assistant_delta",
            "assistant_message",
            "turn_completed",
        ]
    );
    // Seqs are dense from 1.
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=events.len() as u64).collect::<Vec<_>>()
    );
    let Some(session_event::Event::ToolCallCompleted(done)) = &events[4].event else {
        panic!()
    };
    assert_eq!(done.call_id, "call_1");
    let Some(tool_result::Result::ReadFile(read)) =
        done.result.as_ref().and_then(|r| r.result.clone())
    else {
        panic!()
    };
    assert_eq!(
        read.content,
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
    );
    // Every event of the step carries the ids of the turn; the tool events their call id.
    let parent = events[0].correlation.as_ref().unwrap().parent_id.clone();
    assert!(
        events
            .iter()
            .all(|e| e.correlation.as_ref().unwrap().parent_id == parent)
    );
    assert_eq!(events[3].correlation.as_ref().unwrap().call_id, "call_1");
    let first_step = events[1].correlation.as_ref().unwrap().request_id.clone();
    assert_eq!(
        events[3].correlation.as_ref().unwrap().request_id,
        first_step
    );
    assert_ne!(
        events[5].correlation.as_ref().unwrap().request_id,
        first_step
    );

    let requests = c.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body["stream"], true);
    assert_eq!(requests[0].body["stream_options"]["include_usage"], true);
    assert_eq!(requests[0].body["tools"].as_array().unwrap().len(), 8);
    let second = messages(&requests[1]);
    assert_eq!(second[1], ("user".into(), "what does add return?".into()));
    assert_eq!(second[2], ("assistant".into(), "read_file#call_1".into()));
    assert_eq!(second[3].0, "tool");
    // The model reads the typed result as JSON (`[session] tool_results`, default "json").
    let read: serde_json::Value = serde_json::from_str(&second[3].1).unwrap();
    assert_eq!(
        (
            &read["file_path"],
            &read["start_line"],
            &read["end_line"],
            &read["total_lines"]
        ),
        (&json!("src/lib.rs"), &json!(2), &json!(4), &json!(4)),
        "{read}"
    );
    assert!(
        read.get("file_hash").is_none(),
        "hashes only confuse a model: {read}"
    );
    assert_eq!(requests[1].body["messages"][3]["tool_call_id"], "call_1");
    let Some(session_event::Event::TurnCompleted(end)) = &events.last().unwrap().event else {
        panic!()
    };
    assert_eq!(end.rounds, 2);
    assert_eq!(end.usage.unwrap().input_tokens, 300);
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn parallel_calls_answered_out_of_order_reach_the_model_in_its_order() {
    let c = chat().await;
    c.fake.push([
        Reply::tool_calls(&[
            (
                "call_a",
                "create_file",
                r#"{"file_path": "src/new.rs", "content": "pub fn new() {}\n"}"#,
            ),
            ("call_b", "read_file", r#"{"file": "src/lib.rs"}"#),
        ]),
        Reply::text(&["done"]),
    ]);
    let sent = c.send("add a file").await;
    // call_b finishes while call_a waits for approval.
    let mut stream = c.events(sent.seq - 1, true).await;
    let mut seen = Vec::new();
    let (mut proposal, mut b_done) = (None, None);
    while proposal.is_none() || b_done.is_none() {
        let e = stream.message().await.unwrap().unwrap();
        match &e.event {
            Some(session_event::Event::EditProposed(p)) => proposal = p.proposal.clone(),
            Some(session_event::Event::ToolCallCompleted(d)) => b_done = Some(d.call_id.clone()),
            _ => {}
        }
        seen.push(e);
    }
    let (proposal, b_done) = (proposal.unwrap(), b_done.unwrap());
    assert_eq!(b_done, "call_b");
    c.sandbox
        .tools()
        .decide_edit(DecideEditRequest {
            proposal_id: proposal.proposal_id.clone(),
            decision: Decision::Approve as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    let rest = c.until_turn_end(seen.last().unwrap().seq).await;
    assert!(kinds(&rest).contains(&"edit_decided"), "{:?}", kinds(&rest));
    let d = rest
        .iter()
        .find_map(|e| match &e.event {
            Some(session_event::Event::EditDecided(d)) => Some(d.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(d.state(), ploke_proto::tools::v1::ProposalState::Applied);
    assert_eq!(
        std::fs::read_to_string(c.sandbox.workspace_root().join("src/new.rs")).unwrap(),
        "pub fn new() {}\n"
    );
    let second = messages(&c.requests()[1]);
    let tools: Vec<&str> = second
        .iter()
        .filter(|m| m.0 == "tool")
        .map(|m| m.1.as_str())
        .collect();
    let json = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap();
    assert_eq!(json(tools[0])["state"], "applied", "{tools:?}");
    assert_eq!(
        (&json(tools[1])["file_path"], &json(tools[1])["end_line"]),
        (&json!("src/lib.rs"), &json!(4)),
        "{tools:?}"
    );
    assert_eq!(
        c.requests()[1].body["messages"][3]["tool_call_id"],
        "call_a"
    );
    assert_eq!(
        c.requests()[1].body["messages"][4]["tool_call_id"],
        "call_b"
    );
    c.sandbox.stop().await.unwrap();
}

fn failed_call(events: &[SessionEvent]) -> ToolCallFailed {
    events
        .iter()
        .find_map(|e| match &e.event {
            Some(session_event::Event::ToolCallFailed(f)) => Some(f.clone()),
            _ => None,
        })
        .unwrap()
}

#[tokio::test]
async fn unknown_tools_and_malformed_arguments_are_errors_the_model_reads() {
    let c = chat().await;
    c.fake.push([
        Reply::tool_calls(&[
            ("call_1", "delete_everything", "{}"),
            (
                "call_2",
                "read_file",
                r#"{"file": "src/lib.rs", "start_line": "#,
            ),
            ("call_3", "read_file", r#"{"path": "src/lib.rs"}"#),
        ]),
        Reply::text(&["sorry"]),
    ]);
    let events = c.turn("break things").await;
    let failed: Vec<(String, ToolErrorCode, String)> = events
        .iter()
        .filter_map(|e| match &e.event {
            Some(session_event::Event::ToolCallFailed(f)) => {
                let err = f.error.clone().unwrap();
                Some((f.call_id.clone(), err.code(), err.field.clone()))
            }
            _ => None,
        })
        .collect();
    let mut failed = failed;
    failed.sort();
    assert_eq!(
        failed,
        vec![
            ("call_1".into(), ToolErrorCode::UnknownTool, String::new()),
            ("call_2".into(), ToolErrorCode::BadJson, String::new()),
            ("call_3".into(), ToolErrorCode::UnknownField, "path".into()),
        ]
    );
    assert_eq!(failed_call(&events).name, "delete_everything");
    let tools: Vec<String> = messages(&c.requests()[1])
        .into_iter()
        .filter(|m| m.0 == "tool")
        .map(|m| m.1)
        .collect();
    let error = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap()["error"].clone();
    assert_eq!(error(&tools[0])["code"], "UNKNOWN_TOOL", "{tools:?}");
    assert_eq!(error(&tools[1])["code"], "BAD_JSON", "{tools:?}");
    assert_eq!(
        (&error(&tools[2])["code"], &error(&tools[2])["field"]),
        (&json!("UNKNOWN_FIELD"), &json!("path")),
        "{tools:?}"
    );
    assert!(matches!(
        events.last().unwrap().event,
        Some(session_event::Event::TurnCompleted(_))
    ));
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_tool_past_its_timeout_fails_with_timeout() {
    let c = chat_with(|c| c.session.tool_timeout_ms = 1).await;
    let root = c.sandbox.workspace_root().to_owned();
    for i in 0..400 {
        std::fs::write(
            root.join(format!("gen{i}.txt")),
            "nothing to see\n".repeat(200),
        )
        .unwrap();
    }
    c.fake.push([
        Reply::tool_calls(&[("call_1", "search_code", r#"{"pattern": "(a|b)+c\\d{3}"}"#)]),
        Reply::text(&["too slow"]),
    ]);
    let events = c.turn("search").await;
    let f = failed_call(&events);
    assert_eq!(f.error.unwrap().code(), ToolErrorCode::Timeout);
    assert!(matches!(
        events.last().unwrap().event,
        Some(session_event::Event::TurnCompleted(_))
    ));
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn the_turn_stops_at_the_tool_round_limit() {
    let c = chat_with(|c| c.session.max_tool_rounds = 2).await;
    let list = || Reply::tool_calls(&[("call_x", "list_dir", "{}")]);
    c.fake.push([list(), list(), list()]);
    let events = c.turn("loop forever").await;
    let f = failure(&events);
    assert_eq!(f.reason(), TurnFailureReason::MaxRounds);
    assert_eq!(c.requests().len(), 3);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e.event, Some(session_event::Event::ToolCallCompleted(_))))
            .count(),
        2
    );
    // The history stays well-formed: the unrun calls are answered.
    c.fake.push([Reply::text(&["ok"])]);
    let next = c.turn("stop").await;
    assert!(matches!(
        next.last().unwrap().event,
        Some(session_event::Event::TurnCompleted(_))
    ));
    let last = messages(c.requests().last().unwrap());
    assert!(
        last.iter()
            .any(|m| m.0 == "tool" && m.1.contains("limit of 2 tool rounds")),
        "{last:?}"
    );
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_reply_cut_at_length_is_continued_once() {
    let c = chat().await;
    c.fake.push([
        Reply::text_with_finish(&["The first half"], "length"),
        Reply::text(&[" and the rest."]),
    ]);
    let events = c.turn("explain").await;
    let Some(session_event::Event::TurnCompleted(end)) = &events.last().unwrap().event else {
        panic!("{:?}", kinds(&events))
    };
    assert_eq!(end.rounds, 2);
    let second = messages(&c.requests()[1]);
    assert_eq!(
        second[second.len() - 2],
        ("assistant".into(), "The first half".into())
    );
    assert_eq!(
        second.last().unwrap(),
        &(
            "user".to_owned(),
            "Continue exactly where you stopped.".to_owned()
        )
    );
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_reply_still_cut_after_continuing_or_empty_ends_the_turn_with_a_warning() {
    let c = chat().await;
    // Cut twice: continued once, then the turn ends and says the answer is cut short.
    c.fake.push([
        Reply::text_with_finish(&["The first half"], "length"),
        Reply::text_with_finish(&[" and more"], "length"),
    ]);
    let events = c.turn("explain everything").await;
    assert_completed(&events);
    assert_eq!(
        notices(&events),
        [
            "the reply reached the length limit; asking the model to continue",
            "the reply reached the length limit again and is cut short: ask for less at a time",
        ]
    );
    let warning = events.iter().rev().find_map(|e| match &e.event {
        Some(session_event::Event::Notice(n)) => Some(n.level()),
        _ => None,
    });
    assert_eq!(warning, Some(NoticeLevel::Warn));
    // An empty reply (nothing but whitespace) is not taken for an answer.
    c.fake.push([Reply::text(&["  ", "\n"])]);
    let events = c.turn("and now?").await;
    assert!(matches!(
        events.last().unwrap().event,
        Some(session_event::Event::TurnCompleted(_))
    ));
    assert_eq!(
        notices(&events),
        ["the model's reply was empty (finish reason \"stop\"): ask again, or try another model"]
    );
    // A whole answer has no notice.
    c.fake.push([Reply::text(&["All done."])]);
    assert_eq!(notices(&c.turn("thanks").await), Vec::<String>::new());
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn cancel_mid_stream_aborts_the_http_stream_and_fails_the_turn() {
    let c = chat().await;
    c.fake
        .push([Reply::text(&["Thinking", " hard", " forever"]).hold_after(2)]);
    let sent = c.send("take your time").await;
    let mut stream = c.events(sent.seq - 1, true).await;
    loop {
        let e = stream.message().await.unwrap().unwrap();
        if matches!(e.event, Some(session_event::Event::AssistantDelta(_))) {
            break;
        }
    }
    // A second message while the turn runs is refused.
    let busy = c
        .client()
        .send_message(SendMessageRequest {
            session_id: c.session_id.clone(),
            content: "hello?".into(),
            client_request_id: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(busy.code(), tonic::Code::FailedPrecondition);
    let cancelled = c
        .client()
        .cancel_turn(CancelTurnRequest {
            session_id: c.session_id.clone(),
            reason: "user pressed Esc".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (cancelled.cancelled, cancelled.parent_id.as_str()),
        (true, sent.parent_id.as_str())
    );
    c.fake.disconnected().await;
    let events = c.until_turn_end(sent.seq).await;
    let f = failure(&events);
    assert_eq!(
        (f.reason(), f.message.as_str()),
        (TurnFailureReason::Cancelled, "user pressed Esc")
    );
    let again = c
        .client()
        .cancel_turn(CancelTurnRequest {
            session_id: c.session_id.clone(),
            reason: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!again.cancelled);
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn light_auto_context_adds_retrieved_code_before_the_first_call() {
    let c = chat_with(|c| c.session.auto_context = ploke_runtime::config::AutoContext::Light).await;
    c.fake.push([Reply::text(&["It adds."])]);
    let events = c.turn("what does add do with two numbers").await;
    let plan = events
        .iter()
        .find_map(|e| match &e.event {
            Some(session_event::Event::ContextPlan(p)) => Some(p.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(plan.auto_context[0].canon_path, "crate::add");
    assert!(plan.auto_context_tokens > 0);
    assert_eq!(
        (
            plan.context_window,
            plan.reply_reserve,
            plan.tokenizer.as_str()
        ),
        (16_000, 4096, "chars/4")
    );
    let sent = messages(&c.requests()[0]);
    assert_eq!(sent[1].0, "system");
    assert!(
        sent[1].1.contains("pub fn add(a: i32, b: i32)"),
        "{:?}",
        sent[1]
    );
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn tool_results_as_text_when_configured() {
    let c = chat_with(|c| c.session.tool_results = ploke_runtime::config::ToolResults::Text).await;
    c.fake.push([
        Reply::tool_calls(&[
            (
                "call_1",
                "read_file",
                r#"{"file": "src/lib.rs", "start_line": 2}"#,
            ),
            ("call_2", "read_file", r#"{"file": "src/missing.rs"}"#),
        ]),
        Reply::text(&["ok"]),
    ]);
    c.turn("what does add return?").await;
    let tools: Vec<String> = messages(&c.requests()[1])
        .into_iter()
        .filter(|m| m.0 == "tool")
        .map(|m| m.1)
        .collect();
    assert!(
        tools[0].starts_with("src/lib.rs lines 2-4 of 4 (blake3 "),
        "{tools:?}"
    );
    assert!(
        tools[1].starts_with("error NOT_FOUND in `file`"),
        "{tools:?}"
    );
    c.sandbox.stop().await.unwrap();
}
