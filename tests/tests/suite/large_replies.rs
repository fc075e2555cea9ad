//! Replies above tonic's default limit (4 MiB) and within the services' own (16 MiB) pass every
//! hop: a `create_file` of a million characters (2 MiB of UTF-8) is a proposal carrying its
//! content and its diff, relayed by the gateway to the caller, listed, approved and written.

use ploke_e2e::Sandbox;
use ploke_proto::tools::v1::{
    CreateFileArgs, DecideEditRequest, Decision, ListEditsRequest, ProposalState,
    execute_tool_event, tool_call, tool_result,
};

/// As large as the tool's schema lets content be: 1,048,576 characters.
fn content() -> String {
    "é".repeat(1 << 20)
}

#[tokio::test]
async fn a_proposal_larger_than_4_mib_goes_through_the_gateway_listed_approved_and_written() {
    let sandbox = Sandbox::start().await.unwrap();
    let limit = 16 * 1024 * 1024;
    let gateway = || sandbox.gateway().max_decoding_message_size(limit);
    // No session: a script's or an MCP client's call.
    let request = ploke_e2e::tool_request(
        "",
        "call_large",
        tool_call::Args::CreateFile(CreateFileArgs {
            file_path: "big/accents.txt".into(),
            content: content(),
            on_exists: None,
        }),
    );
    let mut call = gateway().execute_tool(request).await.unwrap().into_inner();
    let execute_tool_event::Event::EditProposed(proposal) =
        ploke_e2e::next_tool_event(&mut call).await
    else {
        panic!("expected a proposal")
    };
    let encoded = prost::Message::encoded_len(&proposal);
    assert!(encoded > 4 << 20, "the proposal is {encoded} bytes");

    let listed = gateway()
        .list_edits(ListEditsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        listed
            .proposals
            .iter()
            .map(|p| (p.proposal_id.as_str(), p.state()))
            .collect::<Vec<_>>(),
        vec![(proposal.proposal_id.as_str(), ProposalState::Pending)]
    );

    let decided = gateway()
        .decide_edit(DecideEditRequest {
            proposal_id: proposal.proposal_id.clone(),
            decision: Decision::Approve as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        decided.proposal.map(|p| p.state()),
        Some(ProposalState::Applied)
    );
    let execute_tool_event::Event::Result(result) = ploke_e2e::next_tool_event(&mut call).await
    else {
        panic!("expected the outcome")
    };
    let Some(tool_result::Result::CreateFile(outcome)) = result.result else {
        panic!("{:?}", result.result)
    };
    assert_eq!(outcome.state(), ProposalState::Applied);
    assert_eq!(
        std::fs::read_to_string(sandbox.workspace_root().join("big/accents.txt")).unwrap(),
        content()
    );
    sandbox.stop().await.unwrap();
}
