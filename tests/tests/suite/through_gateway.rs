//! Whole turns through the gateway: retrieval feeding an answer, edits approved and denied,
//! reconnects that resume exactly, several subscribers, and a slow subscriber cut off and
//! resumed.

use ploke_e2e::fake_provider::Reply;
use ploke_proto::rag::v1::{SearchRequest, Strategy};
use ploke_proto::session::v1::*;
use ploke_proto::tools::v1::{DecideEditRequest, Decision};
use tonic::Code;

use super::session::{chat_with, kinds, messages};

async fn gateway_events(
    c: &super::session::Chat,
    after_seq: u64,
) -> tonic::Streaming<SessionEvent> {
    c.sandbox
        .gateway()
        .stream_events(StreamEventsRequest {
            session_id: c.session_id.clone(),
            after_seq,
            no_follow: false,
        })
        .await
        .unwrap()
        .into_inner()
}

async fn send(c: &super::session::Chat, text: &str) -> SendMessageResponse {
    c.sandbox
        .gateway()
        .send_message(SendMessageRequest {
            session_id: c.session_id.clone(),
            content: text.into(),
            client_request_id: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
}

fn is_end(e: &SessionEvent) -> bool {
    matches!(
        e.event,
        Some(session_event::Event::TurnCompleted(_) | session_event::Event::TurnFailed(_))
    )
}

async fn until_end(stream: &mut tonic::Streaming<SessionEvent>) -> Vec<SessionEvent> {
    let mut out = Vec::new();
    while let Some(e) = stream.message().await.unwrap() {
        let end = is_end(&e);
        out.push(e);
        if end {
            break;
        }
    }
    out
}

#[tokio::test]
async fn an_answer_is_built_from_retrieved_code() {
    let c = chat_with(|_| {}).await;
    c.fake.push([
        Reply::tool_calls(&[(
            "call_1",
            "request_code_context",
            r#"{"search_term": "add two numbers"}"#,
        )]),
        Reply::text(&["`add` returns `a + b`."]),
    ]);
    let mut events = gateway_events(&c, 0).await;
    send(&c, "how are numbers added?").await;
    let all = until_end(&mut events).await;
    assert!(matches!(
        all.last().unwrap().event,
        Some(session_event::Event::TurnCompleted(_))
    ));
    let tool = messages(&c.requests()[1])
        .into_iter()
        .find(|m| m.0 == "tool")
        .unwrap()
        .1;
    let root = c.sandbox.workspace_root().canonicalize().unwrap();
    let context: serde_json::Value = serde_json::from_str(&tool).unwrap();
    let part = &context["parts"][0];
    let snippet = part["snippet"].as_str().unwrap_or_default();
    assert!(
        snippet.starts_with(&format!("<code=\"{}/src/lib.rs\" #0:", root.display()))
            && snippet.contains("a + b"),
        "{tool}"
    );
    // Each part names its item.
    assert_eq!(
        (&part["name"], &part["kind"]),
        (&serde_json::json!("add"), &serde_json::json!("function")),
        "{tool}"
    );
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn an_approved_edit_changes_the_file_and_the_index_a_denied_one_nothing() {
    let c = chat_with(|_| {}).await;
    let edit = r#"{"edits": [{"replace_item": {"canon_path": "crate::add", "new_code": "pub fn add(a: i32, b: i32) -> i32 {\n    a.wrapping_add(b)\n}"}}]}"#;
    c.fake.push([
        Reply::tool_calls(&[("call_1", "apply_code_edit", edit)]),
        Reply::text(&["Done."]),
    ]);
    let mut events = gateway_events(&c, 0).await;
    send(&c, "make add wrap").await;
    let proposal = loop {
        let e = events.message().await.unwrap().unwrap();
        if let Some(session_event::Event::EditProposed(p)) = e.event {
            break p.proposal.unwrap();
        }
    };
    assert!(
        proposal.files[0]
            .unified_diff
            .contains("+    a.wrapping_add(b)")
    );
    c.sandbox
        .gateway()
        .decide_edit(DecideEditRequest {
            proposal_id: proposal.proposal_id,
            decision: Decision::Approve as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    let rest = until_end(&mut events).await;
    assert!(kinds(&rest).contains(&"edit_decided"));
    let root = c.sandbox.workspace_root().to_owned();
    assert!(
        std::fs::read_to_string(root.join("src/lib.rs"))
            .unwrap()
            .contains("a.wrapping_add(b)")
    );
    let hits = c
        .sandbox
        .gateway()
        .search(SearchRequest {
            query: "wrapping_add".into(),
            strategy: Strategy::Bm25 as i32,
            top_k: 5,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .hits;
    assert_eq!(hits[0].part.as_ref().unwrap().canon_path, "crate::add");

    // Now a denial: the file stays, the model is told.
    let before = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let edit2 = r#"{"edits": [{"search_replace": {"file_path": "src/lib.rs", "search": "wrapping_add", "replace": "saturating_add"}}]}"#;
    c.fake.push([
        Reply::tool_calls(&[("call_2", "apply_code_edit", edit2)]),
        Reply::text(&["Understood."]),
    ]);
    let sent = send(&c, "now saturate").await;
    let mut events = gateway_events(&c, sent.seq).await;
    let proposal = loop {
        let e = events.message().await.unwrap().unwrap();
        if let Some(session_event::Event::EditProposed(p)) = e.event {
            break p.proposal.unwrap();
        }
    };
    c.sandbox
        .gateway()
        .decide_edit(DecideEditRequest {
            proposal_id: proposal.proposal_id,
            decision: Decision::Deny as i32,
            reason: "keep wrapping".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    until_end(&mut events).await;
    assert_eq!(
        std::fs::read_to_string(root.join("src/lib.rs")).unwrap(),
        before
    );
    let told = messages(c.requests().last().unwrap())
        .into_iter()
        .rfind(|m| m.0 == "tool")
        .unwrap()
        .1;
    let error = &serde_json::from_str::<serde_json::Value>(&told).unwrap()["error"];
    assert!(
        error["code"] == "DENIED"
            && error["message"]
                .as_str()
                .unwrap_or_default()
                .contains("keep wrapping"),
        "{told}"
    );
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn reconnecting_subscribers_get_the_rest_exactly_once() {
    let c = chat_with(|_| {}).await;
    c.fake.push([
        Reply::tool_calls(&[("call_1", "list_dir", "{}")]),
        Reply::text(&["a", "b", "c", "d"]),
    ]);
    let mut first = gateway_events(&c, 0).await;
    let mut second = gateway_events(&c, 0).await;
    send(&c, "go").await;
    // The first client reads three events and disconnects.
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(first.message().await.unwrap().unwrap());
    }
    drop(first);
    let all_second = until_end(&mut second).await;
    let mut resumed = gateway_events(&c, got.last().unwrap().seq).await;
    got.extend(until_end(&mut resumed).await);
    assert_eq!(got, all_second);
    let seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_slow_subscriber_is_cut_off_and_resumes_while_others_and_the_turn_go_on() {
    let c = chat_with(|c| {
        // Bigger than a replay burst (500), far smaller than the turn; no grace, so the cut
        // does not depend on timing.
        c.gateway.subscriber_buffer = 600;
        c.gateway.subscriber_grace_ms = 0;
    })
    .await;
    // 3,000 deltas of 1 kB: far more than the HTTP/2 buffers between the gateway and a client
    // that does not read, so its relay buffer fills.
    let pieces: Vec<String> = (0..3000)
        .map(|i| format!("{i:>5} {}", "x".repeat(1000)))
        .collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    c.fake.push([Reply::text(&pieces)]);
    // Its own connection: HTTP/2 flow control is per connection.
    let mut slow = c
        .sandbox
        .gateway_on_new_connection()
        .await
        .unwrap()
        .stream_events(StreamEventsRequest {
            session_id: c.session_id.clone(),
            after_seq: 0,
            no_follow: false,
        })
        .await
        .unwrap()
        .into_inner();
    let mut fast = gateway_events(&c, 0).await;
    send(&c, "talk a lot").await;
    let everything = until_end(&mut fast).await;
    assert_eq!(everything.len(), 3004);
    // Only now does the slow one read: what was buffered, then RESOURCE_EXHAUSTED.
    let mut got = Vec::new();
    let status = loop {
        match slow.message().await {
            Ok(Some(e)) => got.push(e),
            Ok(None) => panic!("the slow subscriber was not cut off"),
            Err(s) => break s,
        }
    };
    assert_eq!(status.code(), Code::ResourceExhausted);
    let last = got.last().map_or(0, |e| e.seq);
    assert!(
        status
            .message()
            .ends_with(&format!("resume with after_seq = {last}")),
        "{status:?}"
    );
    let mut resumed = gateway_events(&c, last).await;
    got.extend(until_end(&mut resumed).await);
    assert_eq!(got, everything);
    c.sandbox.stop().await.unwrap();
}
