//! A tool-executor that breaks off an edit call after staging its proposal (its replica died,
//! the connection dropped): the proposal's fate is unknown to llm-session and another replica
//! can still decide it, so the model is told it may still be pending — not that it failed.

use std::pin::Pin;

use ploke_e2e::fake_provider::{FakeProvider, Reply};
use ploke_proto::registry::ToolRegistry;
use ploke_proto::session::v1::llm_session_client::LlmSessionClient;
use ploke_proto::session::v1::*;
use ploke_proto::tools::v1::tool_executor_server::{ToolExecutor, ToolExecutorServer};
use ploke_proto::tools::v1::{
    DecideEditRequest, DecideEditResponse, EditProposal, ExecuteToolEvent, ExecuteToolRequest,
    GetEditDeliveryRequest, GetEditDeliveryResponse, ListEditsRequest, ListEditsResponse,
    ListToolsRequest, ListToolsResponse, ProposalState, ToolErrorCode, execute_tool_event,
};
use ploke_runtime::config::PlokeConfig;
use ploke_runtime::shutdown::Shutdown;
use tonic::{Request, Response, Status};

/// Stages a proposal for every call, then its stream breaks.
struct BreaksAfterProposing;

type Events = Pin<Box<dyn futures::Stream<Item = Result<ExecuteToolEvent, Status>> + Send>>;

#[tonic::async_trait]
impl ToolExecutor for BreaksAfterProposing {
    async fn list_tools(
        &self,
        _: Request<ListToolsRequest>,
    ) -> Result<Response<ListToolsResponse>, Status> {
        Ok(Response::new(ListToolsResponse {
            tools: ToolRegistry::global().unwrap().definitions(),
        }))
    }

    type ExecuteToolStream = Events;

    async fn execute_tool(
        &self,
        _: Request<ExecuteToolRequest>,
    ) -> Result<Response<Events>, Status> {
        let proposed = ExecuteToolEvent {
            event: Some(execute_tool_event::Event::EditProposed(EditProposal {
                proposal_id: "edit-0123456789abcdef0123".into(),
                state: ProposalState::Pending as i32,
                ..Default::default()
            })),
        };
        let broken = Status::internal("h2 protocol error: error reading a body from connection");
        Ok(Response::new(Box::pin(futures::stream::iter([
            Ok(proposed),
            Err(broken),
        ]))))
    }

    async fn list_edits(
        &self,
        _: Request<ListEditsRequest>,
    ) -> Result<Response<ListEditsResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn decide_edit(
        &self,
        _: Request<DecideEditRequest>,
    ) -> Result<Response<DecideEditResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn get_edit_delivery(
        &self,
        _: Request<GetEditDeliveryRequest>,
    ) -> Result<Response<GetEditDeliveryResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}

#[tokio::test]
async fn an_edit_call_broken_off_after_its_proposal_leaves_it_pending_for_the_model() {
    let tools = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tools_url = format!("http://{}", tools.local_addr().unwrap());
    let stop_tools = Shutdown::new();
    let tools_task = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ToolExecutorServer::new(BreaksAfterProposing))
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(tools),
                stop_tools.wait(),
            ),
    );
    let fake = FakeProvider::start().await.unwrap();
    let mut provider = fake.provider_config(Some(16_000));
    provider.api_key_env = Some(super::KEY_ENV.into());
    let workspace = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut config = ploke_llm_session::Config::from(&PlokeConfig::default());
    config.workspaces = vec![workspace.path().to_owned()];
    config.data_dir = data.path().to_owned();
    config.tool_executor_url = tools_url.clone();
    config.rag_search_url = tools_url;
    config.providers = std::collections::BTreeMap::from([("fake".to_owned(), provider)]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = Shutdown::new();
    let session_task = tokio::spawn(ploke_llm_session::serve(config, listener, stop.wait()));
    let mut client = LlmSessionClient::connect(url).await.unwrap();
    let session = client
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner();
    let create = r#"{"file_path": "src/new.rs", "content": "pub fn n() {}\n"}"#;
    fake.push([
        Reply::tool_calls(&[("call_1", "create_file", create)]),
        Reply::text(&["I will wait for your decision."]),
    ]);
    let sent = client
        .send_message(SendMessageRequest {
            session_id: session.session_id.clone(),
            content: "add src/new.rs".into(),
            client_request_id: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut stream = client
        .stream_events(StreamEventsRequest {
            session_id: session.session_id.clone(),
            after_seq: sent.seq - 1,
            no_follow: false,
        })
        .await
        .unwrap()
        .into_inner();
    let mut events = Vec::new();
    while let Some(e) = stream.message().await.unwrap() {
        let end = matches!(
            e.event,
            Some(session_event::Event::TurnCompleted(_) | session_event::Event::TurnFailed(_))
        );
        events.push(e.event.unwrap());
        if end {
            break;
        }
    }
    let decided = events
        .iter()
        .find_map(|e| match e {
            session_event::Event::EditDecided(d) => Some(d.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(
        (decided.proposal_id.as_str(), decided.state()),
        ("edit-0123456789abcdef0123", ProposalState::Pending)
    );
    let failed = events
        .iter()
        .find_map(|e| match e {
            session_event::Event::ToolCallFailed(f) => f.error.clone(),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(failed.code(), ToolErrorCode::Unavailable);
    assert_eq!(
        failed.message,
        "the connection to tool-executor broke while proposal edit-0123456789abcdef0123 waited \
         for a decision (h2 protocol error: error reading a body from connection); it may still \
         be pending"
    );
    // What the model read of it says the same.
    let told = serde_json::to_string(&fake.received()[1].body["messages"]).unwrap();
    assert!(told.contains("it may still be pending"), "{told}");
    assert!(matches!(
        events.last(),
        Some(session_event::Event::TurnCompleted(_))
    ));
    drop(stream);
    stop.trigger();
    session_task.await.unwrap().unwrap();
    stop_tools.trigger();
    tools_task.await.unwrap().unwrap();
}
