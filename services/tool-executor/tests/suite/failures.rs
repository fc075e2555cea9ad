//! Failure paths: RPC validation, decisions on the wrong proposals, a failure between two file
//! writes, timeouts, and proposals that survive a restart.

use std::sync::Arc;

use ploke_proto::status::field_violations;
use ploke_proto::tools::v1::*;
use ploke_tool_executor::edits::FaultHook;
use tonic::Code;

use super::{Harness, Options, code, edit_call, finish, request, search_replace};

#[tokio::test]
async fn execute_tool_refuses_malformed_requests_with_the_field() {
    let h = Harness::start().await;
    let args = tool_call::Args::ListDir(ListDirArgs::default());
    let mut no_call_id = request("r", "", args.clone());
    no_call_id.correlation.as_mut().unwrap().call_id = String::new();
    let mut no_call = request("r", "c", args.clone());
    no_call.call = None;
    let mut unknown_root = request("r", "c", args.clone());
    unknown_root.workspace_root = "/definitely/not/served".into();
    let mut relative_root = request("r", "c", args);
    relative_root.workspace_root = "relative".into();
    for (req, want, field) in [
        (
            no_call_id,
            Code::InvalidArgument,
            Some("correlation.call_id"),
        ),
        (no_call, Code::InvalidArgument, Some("call")),
        (unknown_root, Code::NotFound, None),
        (relative_root, Code::InvalidArgument, Some("workspace_root")),
    ] {
        let status = h.tools.clone().execute_tool(req).await.unwrap_err();
        assert_eq!(status.code(), want, "{status:?}");
        if let Some(field) = field {
            assert_eq!(field_violations(&status)[0].0, field);
        }
    }
    h.stop().await;
}

#[tokio::test]
async fn decisions_on_unknown_decided_or_out_of_range_proposals_are_refused() {
    let h = Harness::start().await;
    let decide = |id: &str, decision: Decision, indices: Vec<u32>| DecideEditRequest {
        proposal_id: id.into(),
        decision: decision as i32,
        edit_indices: indices,
        reason: String::new(),
    };
    let mut tools = h.tools.clone();
    let e = tools
        .decide_edit(decide("edit-nope", Decision::Approve, vec![]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let e = tools
        .decide_edit(decide("", Decision::Approve, vec![]))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), field_violations(&e)[0].0.as_str()),
        (Code::InvalidArgument, "proposal_id")
    );
    let e = tools
        .decide_edit(decide("x", Decision::Unspecified, vec![]))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), field_violations(&e)[0].0.as_str()),
        (Code::InvalidArgument, "decision")
    );

    let (p, stream) = h
        .propose(
            "req-1",
            "call-1",
            edit_call(vec![search_replace("src/lib.rs", "41", "42")]),
        )
        .await;
    let e = tools
        .decide_edit(decide(&p.proposal_id, Decision::Approve, vec![3]))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), field_violations(&e)[0].0.as_str()),
        (Code::InvalidArgument, "edit_indices")
    );
    tools
        .decide_edit(decide(&p.proposal_id, Decision::Deny, vec![]))
        .await
        .unwrap();
    let e = tools
        .decide_edit(decide(&p.proposal_id, Decision::Approve, vec![]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert_eq!(
        e.message(),
        format!(
            "proposal {} is denied (denied by the user); only a pending proposal can be decided",
            p.proposal_id
        )
    );
    finish(stream).await;
    let e = tools
        .list_edits(ListEditsRequest {
            limit: 1001,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), field_violations(&e)[0].0.as_str()),
        (Code::InvalidArgument, "limit")
    );
    h.stop().await;
}

#[tokio::test]
async fn a_failure_between_two_file_writes_restores_both_files() {
    let fault = FaultHook(Arc::new(|i| {
        if i == 1 {
            Err(std::io::Error::other("injected: disk full"))
        } else {
            Ok(())
        }
    }));
    let h = Harness::start_with(Options {
        fault: Some(fault),
        ..Options::default()
    })
    .await;
    let (lib, net) = (h.read("src/lib.rs"), h.read("src/net.rs"));
    let (p, stream) = h
        .propose(
            "req-1",
            "call-1",
            edit_call(vec![
                search_replace("src/lib.rs", "41", "42"),
                search_replace("src/net.rs", "!addr", "addr"),
            ]),
        )
        .await;
    let decided = h.decide(&p.proposal_id, Decision::Approve, &[]).await;
    assert_eq!(decided.state(), ProposalState::Failed);
    assert_eq!(
        decided.state_reason,
        "writing src/net.rs failed (injected: disk full); every file was restored"
    );
    assert_eq!((h.read("src/lib.rs"), h.read("src/net.rs")), (lib, net));
    let leftovers: Vec<String> = std::fs::read_dir(h.path("src"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        leftovers.len(),
        2,
        "no temporary files are left: {leftovers:?}"
    );
    let execute_tool_event::Event::Error(e) = finish(stream).await else {
        panic!()
    };
    assert_eq!(code(&e), ToolErrorCode::Internal);
    assert!(e.message.contains("every file was restored"));
    h.stop().await;
}

#[tokio::test]
async fn a_failed_applys_undo_record_outlives_a_restart_and_a_denied_ones_does_not() {
    // A failed proposal keeps the record its failed restore pointed the user to; any other
    // decided proposal's leftover record goes.
    let fault = FaultHook(Arc::new(|_| {
        Err(std::io::Error::other("injected: disk full"))
    }));
    let mut h = Harness::start_with(Options {
        fault: Some(fault),
        ..Options::default()
    })
    .await;
    let (failed, stream) = h
        .propose(
            "req-1",
            "call-1",
            edit_call(vec![search_replace("src/lib.rs", "41", "42")]),
        )
        .await;
    let decided = h.decide(&failed.proposal_id, Decision::Approve, &[]).await;
    assert_eq!(decided.state(), ProposalState::Failed);
    finish(stream).await;
    let (denied, stream) = h
        .propose(
            "req-1",
            "call-2",
            edit_call(vec![search_replace("src/net.rs", "!addr", "addr")]),
        )
        .await;
    h.decide(&denied.proposal_id, Decision::Deny, &[]).await;
    finish(stream).await;
    let undo = h.undo_dir();
    let record = |id: &str| undo.join(format!("{id}.json"));
    for id in [&failed.proposal_id, &denied.proposal_id] {
        std::fs::write(record(id), r#"{"files": []}"#).unwrap();
    }
    h.restart_tools().await;
    // Answered once the store is open and its records looked at.
    h.tools
        .clone()
        .list_edits(ListEditsRequest::default())
        .await
        .unwrap();
    assert_eq!(
        (
            record(&failed.proposal_id).exists(),
            record(&denied.proposal_id).exists()
        ),
        (true, false)
    );
    h.stop().await;
}

#[tokio::test]
async fn pending_proposals_survive_a_restart_and_can_be_decided_after_it() {
    let mut h = Harness::start().await;
    let (p, stream) = h
        .propose(
            "req-1",
            "call-1",
            edit_call(vec![search_replace("src/net.rs", "!addr", "addr")]),
        )
        .await;
    h.restart_tools().await;
    // Shutting down ends the waiting call with a readable error; the proposal stays pending.
    let execute_tool_event::Event::Error(e) = finish(stream).await else {
        panic!()
    };
    assert_eq!(code(&e), ToolErrorCode::Unavailable);
    assert!(
        e.retry_hint.contains("same request_id and call_id"),
        "{e:?}"
    );
    let listed = h
        .tools
        .clone()
        .list_edits(ListEditsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .proposals;
    assert_eq!(listed, vec![p.clone()]);
    // Calling again with the same ids (and arguments) resumes the wait; the decision reaches it.
    let (again, stream) = h
        .propose(
            "req-1",
            "call-1",
            edit_call(vec![search_replace("src/net.rs", "!addr", "addr")]),
        )
        .await;
    assert_eq!(again, p);
    let decided = h.decide(&p.proposal_id, Decision::Approve, &[]).await;
    assert_eq!(decided.state(), ProposalState::Applied);
    let execute_tool_event::Event::Result(_) = finish(stream).await else {
        panic!()
    };
    assert!(h.read("src/net.rs").contains("    addr.is_empty()"));
    h.stop().await;
}

#[tokio::test]
async fn a_slow_tool_is_stopped_at_its_timeout() {
    let h = Harness::start().await;
    for i in 0..3000 {
        let dir = h.path(&format!("gen/d{}", i % 30));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("f{i}.rs")),
            "fn generated() {}\n".repeat(50),
        )
        .unwrap();
    }
    let mut req = request(
        "req-1",
        "call-1",
        tool_call::Args::SearchCode(SearchCodeArgs {
            pattern: "no(thing)+ here".into(),
            ..Default::default()
        }),
    );
    req.timeout_ms = 1;
    let events = h.events_with(req).await;
    let Some(execute_tool_event::Event::Error(e)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(code(e), ToolErrorCode::Timeout);
    assert!(e.message.contains("1 ms"), "{e:?}");
    h.stop().await;
}
