//! Edits from MCP clients wait for a person: the client's own user by elicitation (inline over
//! a legacy session, or as an `input_required` round on 2026-07-28), or anyone with `ploke
//! edits` / `DecideEdit` while the call waits and says so in its progress. Cancelling the call
//! withdraws the pending edit.

use ploke_proto::tools::v1::{DecideEditRequest, Decision, ListEditsRequest, ProposalState};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ElicitResult, ElicitationAction,
};
use rmcp::service::PeerRequestOptions;
use serde_json::json;

use super::{ALICE, Deployment, Era, TestClient, args, connect, deployment};

fn edit() -> CallToolRequestParams {
    CallToolRequestParams::new("apply_code_edit").with_arguments(args(json!({
        "edits": [{"search_replace": {
            "file_path": "src/lib.rs",
            "search": "a + b",
            "replace": "a.wrapping_add(b)"
        }}]
    })))
}

fn lib_rs(d: &Deployment) -> String {
    std::fs::read_to_string(d.sandbox.workspace_root().join("src/lib.rs")).unwrap()
}

async fn proposals(d: &Deployment) -> Vec<ploke_proto::tools::v1::EditProposal> {
    d.sandbox
        .gateway_with_token(Some(ALICE))
        .list_edits(ListEditsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .proposals
}

#[tokio::test]
async fn the_clients_user_approves_an_edit_in_both_eras() {
    for era in [Era::Modern, Era::Legacy] {
        let d = deployment(|_| {}).await;
        let answer = ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({"decision": "approve"}));
        let (client, _progress) = TestClient::new(era, Some(answer));
        let asked = client.asked.clone();
        let mcp = connect(&d.url(), ALICE, client).await;
        let r = mcp.call_tool(edit()).await.unwrap();
        assert_eq!(r.is_error, Some(false), "{era:?}: {r:?}");
        let s = r.structured_content.unwrap();
        assert_eq!(
            (&s["state"], &s["files_changed"], &s["applied_edits"]),
            (&json!("applied"), &json!(["src/lib.rs"]), &json!([0]))
        );
        assert!(lib_rs(&d).contains("a.wrapping_add(b)"));
        // The user saw the diff and the other way to decide.
        let asked = asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "{era:?}");
        assert!(
            asked[0].contains("-    a + b\n+    a.wrapping_add(b)")
                && asked[0].contains("ploke edits approve"),
            "{}",
            asked[0]
        );
        // The same proposal `ploke edits` shows, the caller's own.
        let p = proposals(&d).await;
        assert_eq!(p.len(), 1);
        assert_eq!(
            (p[0].state(), p[0].owner.as_str(), p[0].decided_by.as_str()),
            (ProposalState::Applied, "alice", "alice")
        );
        mcp.cancel().await.unwrap();
        d.sandbox.stop().await.unwrap();
    }
}

#[tokio::test]
async fn under_auto_approve_the_clients_user_is_not_asked() {
    for era in [Era::Modern, Era::Legacy] {
        let d = deployment(|c| c.tool_executor.auto_approve = true).await;
        // A user who would decline: never asked, since the deployment's policy decides.
        let (client, _progress) =
            TestClient::new(era, Some(ElicitResult::new(ElicitationAction::Decline)));
        let asked = client.asked.clone();
        let mcp = connect(&d.url(), ALICE, client).await;
        let r = mcp.call_tool(edit()).await.unwrap();
        assert_eq!(r.is_error, Some(false), "{era:?}: {r:?}");
        let s = r.structured_content.unwrap();
        assert_eq!(
            (&s["state"], &s["message"]),
            (
                &json!("applied"),
                &json!("applied 1 edit(s): applied by the auto_approve policy")
            ),
            "{era:?}"
        );
        assert!(asked.lock().unwrap().is_empty(), "{era:?}");
        assert!(lib_rs(&d).contains("a.wrapping_add(b)"));
        mcp.cancel().await.unwrap();
        d.sandbox.stop().await.unwrap();
    }
}

#[tokio::test]
async fn a_declined_edit_is_denied_and_nothing_is_written() {
    for era in [Era::Modern, Era::Legacy] {
        let d = deployment(|_| {}).await;
        let (client, _progress) =
            TestClient::new(era, Some(ElicitResult::new(ElicitationAction::Decline)));
        let mcp = connect(&d.url(), ALICE, client).await;
        let r = mcp.call_tool(edit()).await.unwrap();
        assert_eq!(r.is_error, Some(true));
        let s = r.structured_content.unwrap();
        assert_eq!(s["code"], "DENIED", "{era:?}: {s}");
        assert!(
            s["message"]
                .as_str()
                .unwrap()
                .ends_with("declined in ploke-test"),
            "{s}"
        );
        assert_eq!(lib_rs(&d), ploke_e2e::LIB_RS);
        mcp.cancel().await.unwrap();
        d.sandbox.stop().await.unwrap();
    }
}

#[tokio::test]
async fn without_elicitation_the_call_waits_for_a_decision_made_elsewhere() {
    let d = deployment(|_| {}).await;
    let (client, mut progress) = TestClient::new(Era::Modern, None);
    let mcp = connect(&d.url(), ALICE, client).await;
    let peer = mcp.peer().clone();
    let call = tokio::spawn(async move { peer.call_tool(edit()).await });
    // The call says what it waits for.
    let waiting = progress.recv().await.unwrap();
    let note = waiting.message.unwrap();
    let id = proposals(&d).await[0].proposal_id.clone();
    assert_eq!(
        note,
        format!(
            "waiting for a person to decide proposal {id}: `ploke edits approve {id}` or `ploke edits deny {id}`"
        )
    );
    d.sandbox
        .gateway_with_token(Some(ALICE))
        .decide_edit(DecideEditRequest {
            proposal_id: id.clone(),
            decision: Decision::Approve as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    let r = call.await.unwrap().unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(r.structured_content.unwrap()["proposal_id"], id.as_str());
    assert!(lib_rs(&d).contains("a.wrapping_add(b)"));
    mcp.cancel().await.unwrap();
    d.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn cancelling_the_call_withdraws_the_pending_edit() {
    let d = deployment(|_| {}).await;
    let (client, mut progress) = TestClient::new(Era::Modern, None);
    let mcp = connect(&d.url(), ALICE, client).await;
    let handle = mcp
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(edit())),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    progress.recv().await.unwrap();
    assert_eq!(proposals(&d).await[0].state(), ProposalState::Pending);
    handle
        .cancel(Some("the user pressed Esc".into()))
        .await
        .unwrap();
    // The tool stops: tool-executor sees its call end and withdraws the proposal.
    let p = ploke_e2e::wait::poll(|| async {
        let p = proposals(&d).await.remove(0);
        if p.state() == ProposalState::Pending {
            Err("the proposal stayed pending".to_owned())
        } else {
            Ok(p)
        }
    })
    .await;
    assert_eq!(
        (p.state(), p.state_reason.as_str()),
        (
            ProposalState::Expired,
            "the tool call was cancelled before a decision"
        )
    );
    assert_eq!(lib_rs(&d), ploke_e2e::LIB_RS);
    mcp.cancel().await.unwrap();
    d.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn in_a_shared_deployment_an_approved_edit_is_delivered_not_written_on_the_server() {
    let d = deployment(|c| {
        c.tool_executor.apply_to = ploke_runtime::config::ApplyTo::Overlay;
    })
    .await;
    let answer =
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "approve"}));
    let mcp = connect(
        &d.url(),
        ALICE,
        TestClient::new(Era::Modern, Some(answer)).0,
    )
    .await;
    let r = mcp.call_tool(edit()).await.unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let s = r.structured_content.unwrap();
    assert_eq!(
        (&s["state"], &s["in_overlay"]),
        (&json!("applied"), &json!(true))
    );
    // The served tree is the team's: untouched. The developer fetches the files
    // (`ploke edits fetch ID` writes them into their checkout).
    assert_eq!(lib_rs(&d), ploke_e2e::LIB_RS);
    let delivery = d
        .sandbox
        .gateway_with_token(Some(ALICE))
        .get_edit_delivery(ploke_proto::tools::v1::GetEditDeliveryRequest {
            proposal_id: s["proposal_id"].as_str().unwrap().to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(delivery.deliveries.len(), 1);
    assert_eq!(delivery.deliveries[0].file_path, "src/lib.rs");
    assert!(
        String::from_utf8(delivery.deliveries[0].content.clone())
            .unwrap()
            .contains("a.wrapping_add(b)")
    );
    mcp.cancel().await.unwrap();
    // Another MCP session of the same developer (a restarted client) edits in the same
    // overlay: one per principal, not one per MCP session (or per stateless request), which
    // used up the developer's overlays.
    let answer =
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "approve"}));
    let again = connect(
        &d.url(),
        ALICE,
        TestClient::new(Era::Modern, Some(answer)).0,
    )
    .await;
    let create = CallToolRequestParams::new("create_file").with_arguments(args(json!({
        "file_path": "src/more.rs",
        "content": "pub fn more() {}\n"
    })));
    let r = again.call_tool(create).await.unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let sessions: std::collections::BTreeSet<String> = proposals(&d)
        .await
        .into_iter()
        .map(|p| p.correlation.unwrap_or_default().session_id)
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    again.cancel().await.unwrap();
    d.sandbox.stop().await.unwrap();
}
