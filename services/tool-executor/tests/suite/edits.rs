//! Staged edits: proposals with diffs, approval (whole or per edit), denial, stale files,
//! expiry, auto-approve, create_file, parallel proposals, and the index refresh after apply.

use ploke_proto::common::v1::ItemKind;
use ploke_proto::rag::v1::{LookupItemRequest, lookup_item_request};
use ploke_proto::tools::v1::*;

use super::{Harness, code, edit_call, finish, replace_item, request, search_replace};

fn applied(event: execute_tool_event::Event) -> EditOutcome {
    match event {
        execute_tool_event::Event::Result(ToolResult {
            result: Some(tool_result::Result::ApplyCodeEdit(o) | tool_result::Result::CreateFile(o)),
        }) => o,
        other => panic!("expected an edit outcome, got {other:?}"),
    }
}

fn failed(event: execute_tool_event::Event) -> ToolError {
    match event {
        execute_tool_event::Event::Error(e) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn approved_edits_of_one_file_are_applied_together_and_reindexed() {
    let h = Harness::start().await;
    let before = h.read("src/lib.rs");
    let (proposal, stream) = h
        .propose(
            "req-1",
            "call-1",
            edit_call(vec![
                search_replace("src/lib.rs", "    41\n", "    42\n"),
                replace_item(
                    "crate::Config::shout",
                    "    pub fn shout_loudly(&self) -> String {\n        format!(\"{}!\", self.name.to_uppercase())\n    }\n",
                ),
            ]),
        )
        .await;
    assert_eq!(proposal.state(), ProposalState::Pending);
    assert_eq!(proposal.tool_name, "apply_code_edit");
    assert_eq!(
        proposal
            .edits
            .iter()
            .map(|e| (e.index, e.file_path.as_str(), e.summary.as_str()))
            .collect::<Vec<_>>(),
        vec![
            (0, "src/lib.rs", "search/replace in src/lib.rs"),
            (1, "src/lib.rs", "replace crate::Config::shout")
        ]
    );
    assert_eq!(proposal.files.len(), 1);
    let file = &proposal.files[0];
    assert_eq!(
        file.base_hash,
        blake3::hash(before.as_bytes()).to_hex().to_string()
    );
    assert!(!file.creates);
    insta::assert_snapshot!("two_edits_one_file_diff", file.unified_diff);
    // Nothing is written before the decision.
    assert_eq!(h.read("src/lib.rs"), before);

    let pending = h
        .tools
        .clone()
        .list_edits(ListEditsRequest {
            session_id: "session-1".into(),
            states: vec![ProposalState::Pending as i32],
            limit: 0,
            all_principals: false,
        })
        .await
        .unwrap()
        .into_inner()
        .proposals;
    assert_eq!(pending, vec![proposal.clone()]);
    assert!(!proposal.by_policy, "a person decides it: {proposal:?}");

    let decided = h
        .decide(&proposal.proposal_id, Decision::Approve, &[])
        .await;
    assert_eq!(
        (decided.state(), decided.applied_edits.clone()),
        (ProposalState::Applied, vec![0, 1])
    );
    let outcome = applied(finish(stream).await);
    assert_eq!(
        outcome,
        EditOutcome {
            proposal_id: proposal.proposal_id.clone(),
            state: ProposalState::Applied as i32,
            applied_edits: vec![0, 1],
            files_changed: vec!["src/lib.rs".into()],
            message: "applied 2 edit(s)".into(),
            in_overlay: false,
        }
    );
    let after = h.read("src/lib.rs");
    assert!(
        after.contains("    42\n")
            && after.contains("fn shout_loudly")
            && !after.contains("fn shout(")
    );
    // The index was refreshed: the new method is found, the old one is gone.
    let lookup = |name: &str| LookupItemRequest {
        target: Some(lookup_item_request::Target::Name(name.into())),
        kind: ItemKind::Method as i32,
        ..Default::default()
    };
    let found = h
        .rag
        .clone()
        .lookup_item(lookup("shout_loudly"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(found.items[0].canon_path, "crate::Config::shout_loudly");
    assert!(
        h.rag
            .clone()
            .lookup_item(lookup("shout"))
            .await
            .unwrap()
            .into_inner()
            .items
            .is_empty()
    );
    h.stop().await;
}

#[tokio::test]
async fn chosen_edits_are_applied_and_the_rest_denied() {
    let h = Harness::start().await;
    let (p, stream) = h
        .propose(
            "req-1",
            "call-1",
            edit_call(vec![
                search_replace("src/lib.rs", "    41\n", "    42\n"),
                search_replace("src/net.rs", "!addr.is_empty()", "addr.contains(':')"),
            ]),
        )
        .await;
    assert_eq!(
        p.files
            .iter()
            .map(|f| f.file_path.as_str())
            .collect::<Vec<_>>(),
        vec!["src/lib.rs", "src/net.rs"]
    );
    let decided = h.decide(&p.proposal_id, Decision::Deny, &[0]).await;
    assert_eq!(
        (decided.state(), decided.applied_edits.clone()),
        (ProposalState::Applied, vec![1])
    );
    let outcome = applied(finish(stream).await);
    assert_eq!(outcome.files_changed, vec!["src/net.rs".to_owned()]);
    assert_eq!(outcome.message, "applied edits [1]; edits [0] were denied");
    assert!(h.read("src/lib.rs").contains("    41\n"));
    assert!(h.read("src/net.rs").contains("addr.contains(':')"));
    h.stop().await;
}

#[tokio::test]
async fn denied_edits_write_nothing_and_tell_the_model() {
    let h = Harness::start().await;
    let before = h.read("src/lib.rs");
    let (p, stream) = h
        .propose(
            "req-1",
            "call-1",
            edit_call(vec![search_replace("src/lib.rs", "41", "42")]),
        )
        .await;
    let decided = h
        .tools
        .clone()
        .decide_edit(DecideEditRequest {
            proposal_id: p.proposal_id.clone(),
            decision: Decision::Deny as i32,
            edit_indices: vec![],
            reason: "keep the answer at 41".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .proposal
        .unwrap();
    assert_eq!(
        (decided.state(), decided.state_reason.as_str()),
        (ProposalState::Denied, "keep the answer at 41")
    );
    let e = failed(finish(stream).await);
    assert_eq!(code(&e), ToolErrorCode::Denied);
    assert!(e.message.contains("keep the answer at 41"), "{e:?}");
    assert_eq!(h.read("src/lib.rs"), before);
    h.stop().await;
}

#[tokio::test]
async fn a_file_changed_after_the_proposal_makes_it_stale_and_untouched() {
    let h = Harness::start().await;
    let (p, stream) = h
        .propose(
            "req-1",
            "call-1",
            edit_call(vec![search_replace("src/lib.rs", "41", "42")]),
        )
        .await;
    let users = h
        .read("src/lib.rs")
        .replace("pub fn helper", "pub fn helper_renamed");
    std::fs::write(h.path("src/lib.rs"), &users).unwrap();
    let decided = h.decide(&p.proposal_id, Decision::Approve, &[]).await;
    assert_eq!(decided.state(), ProposalState::Stale);
    assert_eq!(
        decided.state_reason,
        "src/lib.rs changed since the proposal was made; nothing was written"
    );
    let e = failed(finish(stream).await);
    assert_eq!(code(&e), ToolErrorCode::Stale);
    assert_eq!(h.read("src/lib.rs"), users);
    h.stop().await;
}

#[tokio::test]
async fn a_read_only_file_is_refused_when_proposed_and_when_approved() {
    use std::os::unix::fs::PermissionsExt as _;
    let h = Harness::start().await;
    let before = h.read("src/lib.rs");
    let lock = |mode| {
        std::fs::set_permissions(h.path("src/lib.rs"), std::fs::Permissions::from_mode(mode))
            .unwrap()
    };
    // Read-only before: the model is told at once, and nothing is staged.
    lock(0o444);
    let e = h
        .err(edit_call(vec![search_replace("src/lib.rs", "41", "42")]))
        .await;
    assert_eq!(
        (
            code(&e),
            e.field.as_str(),
            e.message.as_str(),
            e.retry_hint.as_str()
        ),
        (
            ToolErrorCode::PermissionDenied,
            "edits[0].search_replace.file_path",
            "src/lib.rs is read-only (mode 444)",
            "edit another file, or ask the user to make this one writable"
        )
    );
    // Made read-only while the proposal waits: approving it writes nothing and says why.
    lock(0o644);
    let (p, stream) = h
        .propose(
            "req-1",
            "call-1",
            edit_call(vec![search_replace("src/lib.rs", "41", "42")]),
        )
        .await;
    lock(0o444);
    let decided = h.decide(&p.proposal_id, Decision::Approve, &[]).await;
    assert_eq!(
        (decided.state(), decided.state_reason.as_str()),
        (
            ProposalState::Failed,
            "src/lib.rs is read-only (mode 444); nothing was written: make it writable (chmod \
             u+w) to edit it"
        )
    );
    let e = failed(finish(stream).await);
    assert!(e.message.contains("is read-only"), "{e:?}");
    assert_eq!(h.read("src/lib.rs"), before);
    let mode = std::fs::metadata(h.path("src/lib.rs"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o444);
    h.stop().await;
}

#[tokio::test]
async fn an_undo_record_that_cannot_be_written_leaves_the_proposal_pending() {
    let h = Harness::start().await;
    let before = h.read("src/lib.rs");
    let (p, stream) = h
        .propose(
            "req-1",
            "call-1",
            edit_call(vec![search_replace("src/lib.rs", "41", "42")]),
        )
        .await;
    // Where the undo records go cannot hold one (as a full or read-only data dir).
    let undo = h.undo_dir();
    let _ = std::fs::remove_dir_all(&undo);
    std::fs::write(&undo, "not a directory").unwrap();
    let refused = h
        .tools
        .clone()
        .decide_edit(DecideEditRequest {
            proposal_id: p.proposal_id.clone(),
            decision: Decision::Approve as i32,
            edit_indices: vec![],
            reason: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("could not be written")
            && refused.message().contains("nothing was written"),
        "{}",
        refused.message()
    );
    assert_eq!(h.read("src/lib.rs"), before);
    // Once the data dir takes it again, the same decision applies.
    std::fs::remove_file(&undo).unwrap();
    let decided = h.decide(&p.proposal_id, Decision::Approve, &[]).await;
    assert_eq!(decided.state(), ProposalState::Applied);
    assert!(h.read("src/lib.rs").contains("42"));
    applied(finish(stream).await);
    h.stop().await;
}

#[tokio::test]
async fn no_decision_within_the_timeout_expires_the_proposal() {
    let h = Harness::start().await;
    let mut req = request(
        "req-1",
        "call-1",
        edit_call(vec![search_replace("src/lib.rs", "41", "42")]),
    );
    req.timeout_ms = 300;
    let events = h.events_with(req).await;
    assert!(
        matches!(events[0], execute_tool_event::Event::EditProposed(_)),
        "{events:?}"
    );
    let e = failed(events.last().cloned().unwrap());
    assert_eq!(code(&e), ToolErrorCode::Expired);
    let listed = h
        .tools
        .clone()
        .list_edits(ListEditsRequest {
            states: vec![ProposalState::Expired as i32],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .proposals;
    assert_eq!(listed.len(), 1);
    let err = h
        .tools
        .clone()
        .decide_edit(DecideEditRequest {
            proposal_id: listed[0].proposal_id.clone(),
            decision: Decision::Approve as i32,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert!(h.read("src/lib.rs").contains("41"));
    h.stop().await;
}

#[tokio::test]
async fn auto_approve_applies_at_once_after_reporting_the_proposal() {
    let h = Harness::auto_approving().await;
    let events = h
        .events(
            "call-1",
            edit_call(vec![search_replace("src/lib.rs", "    41\n", "    42\n")]),
        )
        .await;
    assert_eq!(events.len(), 2, "{events:?}");
    // Announced as the policy's to decide, so that no client asks a person about it.
    let execute_tool_event::Event::EditProposed(proposed) = &events[0] else {
        panic!("{events:?}");
    };
    assert_eq!(
        (proposed.state(), proposed.by_policy),
        (ProposalState::Pending, true)
    );
    let outcome = applied(events[1].clone());
    assert_eq!(
        outcome.message,
        "applied 1 edit(s): applied by the auto_approve policy"
    );
    assert!(h.read("src/lib.rs").contains("    42\n"));
    h.stop().await;
}

#[tokio::test]
async fn parallel_proposals_of_one_request_never_collide() {
    let h = Harness::start().await;
    let a = h.propose(
        "req-1",
        "call-a",
        edit_call(vec![search_replace("src/lib.rs", "41", "42")]),
    );
    let b = h.propose(
        "req-1",
        "call-b",
        edit_call(vec![search_replace("src/net.rs", "!addr", "addr")]),
    );
    let ((pa, sa), (pb, sb)) = tokio::join!(a, b);
    assert_ne!(pa.proposal_id, pb.proposal_id);
    assert_eq!(pa.correlation.as_ref().unwrap().call_id, "call-a");
    assert_eq!(pb.correlation.as_ref().unwrap().call_id, "call-b");
    let (da, db) = tokio::join!(
        h.decide(&pa.proposal_id, Decision::Approve, &[]),
        h.decide(&pb.proposal_id, Decision::Approve, &[])
    );
    assert_eq!(
        (da.state(), db.state()),
        (ProposalState::Applied, ProposalState::Applied)
    );
    applied(finish(sa).await);
    applied(finish(sb).await);
    assert!(
        h.read("src/lib.rs").contains("42") && h.read("src/net.rs").contains("    addr.is_empty()")
    );
    h.stop().await;
}

#[tokio::test]
async fn a_retried_call_finds_its_proposal_again() {
    let h = Harness::auto_approving().await;
    let call = edit_call(vec![search_replace("src/lib.rs", "    41\n", "    43\n")]);
    let first = applied(h.events("call-1", call.clone()).await.pop().unwrap());
    // The same (request_id, call_id) again: the stored outcome, not a second write (which
    // would fail: the search text is gone).
    let again = applied(h.events("call-1", call).await.pop().unwrap());
    assert_eq!(first, again);
    h.stop().await;
}

#[tokio::test]
async fn create_file_makes_parents_and_respects_on_exists() {
    let h = Harness::auto_approving().await;
    let create = |path: &str, on_exists: Option<OnExists>| {
        tool_call::Args::CreateFile(CreateFileArgs {
            file_path: path.into(),
            content: "pub fn made() {}\n".into(),
            on_exists: on_exists.map(|o| o as i32),
        })
    };
    let events = h.events("call-0", create("src/new/deep.rs", None)).await;
    let execute_tool_event::Event::EditProposed(p) = &events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(
        p.files[0].unified_diff,
        "--- /dev/null\n+++ b/src/new/deep.rs\n@@ -0,0 +1 @@\n+pub fn made() {}\n"
    );
    assert!(p.files[0].creates);
    assert_eq!(
        applied(events[1].clone()).files_changed,
        vec!["src/new/deep.rs".to_owned()]
    );
    assert_eq!(h.read("src/new/deep.rs"), "pub fn made() {}\n");

    let e = h.err(create("src/net.rs", None)).await;
    assert_eq!(
        (code(&e), e.field.as_str()),
        (ToolErrorCode::AlreadyExists, "file_path")
    );
    let events = h
        .events("call-2", create("src/net.rs", Some(OnExists::Overwrite)))
        .await;
    applied(events.last().cloned().unwrap());
    assert_eq!(h.read("src/net.rs"), "pub fn made() {}\n");
    h.stop().await;
}

#[tokio::test]
async fn bad_edits_are_typed_errors_naming_the_edit() {
    let h = Harness::start().await;
    let cases = [
        (
            vec![search_replace("src/lib.rs", "Config", "Settings")],
            ToolErrorCode::AmbiguousMatch,
            "edits[0].search_replace.search",
        ),
        (
            vec![search_replace("src/lib.rs", "no such text", "x")],
            ToolErrorCode::NoMatch,
            "edits[0].search_replace.search",
        ),
        (
            vec![search_replace("src/missing.rs", "a", "b")],
            ToolErrorCode::NotFound,
            "edits[0].search_replace.file_path",
        ),
        (
            vec![
                search_replace("src/lib.rs", "41", "42"),
                search_replace("src/lib.rs", "    41\n", "    7\n"),
            ],
            ToolErrorCode::InvalidArgument,
            "edits[1]",
        ),
        (
            vec![replace_item("crate::nope", "fn x() {}")],
            ToolErrorCode::NotFound,
            "edits[0].replace_item.canon_path",
        ),
        (
            vec![search_replace("src/lib.rs", "41", "41")],
            ToolErrorCode::InvalidArgument,
            "edits[0].search_replace.replace",
        ),
        (vec![], ToolErrorCode::MissingField, "edits"),
    ];
    for (edits, want, field) in cases {
        let e = h.err(edit_call(edits.clone())).await;
        assert_eq!(
            (code(&e), e.field.as_str()),
            (want, field),
            "{edits:?}: {e:?}"
        );
    }
    let e = h
        .err(edit_call(vec![search_replace(
            "src/lib.rs",
            "Config",
            "Settings",
        )]))
        .await;
    assert!(e.message.contains("occurs 5 times"), "{e:?}");
    let listed = h
        .tools
        .clone()
        .list_edits(ListEditsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .proposals;
    assert!(listed.is_empty(), "failed plans stage nothing: {listed:?}");
    h.stop().await;
}

#[tokio::test]
async fn a_trait_impl_method_is_replaced_by_its_canonical_path() {
    let h = Harness::auto_approving().await;
    let canon = "crate::<Config as std::fmt::Display>::fmt";
    let new = "    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {\n        write!(f, \"config {}\", self.name)\n    }";
    let events = h
        .events("call-1", edit_call(vec![replace_item(canon, new)]))
        .await;
    applied(events.last().cloned().unwrap());
    let text = h.read("src/lib.rs");
    assert!(
        text.contains("write!(f, \"config {}\", self.name)\n    }\n}\n"),
        "{text}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_crlf_file_is_searched_and_edited_with_its_own_line_ends() {
    let h = Harness::auto_approving().await;
    // A model writes "\n" between lines; the file has "\r\n".
    let crlf = |s: &str| s.replace('\n', "\r\n");
    std::fs::write(
        h.path("src/win.rs"),
        crlf("fn a() {\n    1\n}\n\nfn b() {}\n"),
    )
    .unwrap();
    let events = h
        .events(
            "call-1",
            edit_call(vec![search_replace(
                "src/win.rs",
                "fn a() {\n    1\n}\n",
                "fn a() {\n    let x = 1;\n    x\n}\n",
            )]),
        )
        .await;
    applied(events.last().cloned().unwrap());
    assert_eq!(
        h.read("src/win.rs"),
        crlf("fn a() {\n    let x = 1;\n    x\n}\n\nfn b() {}\n")
    );

    // An item replaced by its path: the new code takes the file's line ends too (the index
    // saw the file with "\n"; the edit refreshes it first).
    std::fs::write(h.path("src/net.rs"), crlf(super::NET_RS)).unwrap();
    let new = "pub fn connect_socket(addr: &str) -> bool {\n    addr.contains(':')\n}";
    let events = h
        .events(
            "call-2",
            edit_call(vec![replace_item("crate::net::connect_socket", new)]),
        )
        .await;
    applied(events.last().cloned().unwrap());
    assert_eq!(h.read("src/net.rs"), crlf(&format!("{new}\n")));
    h.stop().await;
}

#[tokio::test]
async fn a_file_of_mixed_line_ends_is_searched_as_written() {
    let h = Harness::auto_approving().await;
    // Mostly CRLF, one region of LF lines: a search of that region as written still matches.
    let text = "a\r\nb\r\nc\nd\ne\r\n";
    std::fs::write(h.path("src/mixed.txt"), text).unwrap();
    let events = h
        .events(
            "call-1",
            edit_call(vec![search_replace("src/mixed.txt", "c\nd\n", "c\nD\n")]),
        )
        .await;
    applied(events.last().cloned().unwrap());
    assert_eq!(h.read("src/mixed.txt"), "a\r\nb\r\nc\nD\ne\r\n");
    h.stop().await;
}
