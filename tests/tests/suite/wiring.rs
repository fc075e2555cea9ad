//! All four services are healthy and every gateway RPC reaches the service that owns it.

use ploke_e2e::Sandbox;
use ploke_proto::gateway::v1::{GetSystemStatusRequest, ServingState};
use ploke_proto::rag::v1::{IndexState, IndexStatusRequest, SearchRequest};
use ploke_proto::session::v1::{CreateSessionRequest, GetSessionRequest};
use ploke_proto::status::field_violations;
use ploke_proto::tools::v1::{DecideEditRequest, Decision, ListEditsRequest, ListToolsRequest};
use ploke_runtime::ServiceKind;
use ploke_runtime::probe::{ReflectionVersion, health, reflected_services};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

#[tokio::test]
async fn all_four_services_are_healthy_and_reachable_through_the_gateway() {
    let sandbox = Sandbox::start().await.unwrap();
    for (kind, name) in [
        (ServiceKind::Gateway, "ploke.gateway.v1.Gateway"),
        (ServiceKind::LlmSession, "ploke.session.v1.LlmSession"),
        (ServiceKind::ToolExecutor, "ploke.tools.v1.ToolExecutor"),
        (ServiceKind::RagSearch, "ploke.rag.v1.RagSearch"),
    ] {
        assert_eq!(
            health(sandbox.channel(kind), name).await.unwrap(),
            ServingStatus::Serving,
            "{name}"
        );
        let listed = reflected_services(sandbox.channel(kind), ReflectionVersion::V1)
            .await
            .unwrap();
        // Every backend says why it is not serving; the gateway, open to its callers, does not.
        let mut expected = vec![
            "grpc.health.v1.Health".to_owned(),
            "grpc.reflection.v1.ServerReflection".to_owned(),
            "grpc.reflection.v1alpha.ServerReflection".to_owned(),
            name.to_owned(),
        ];
        if kind != ServiceKind::Gateway {
            expected.push("ploke.runtime.v1.Faults".to_owned());
        }
        expected.sort();
        assert_eq!(listed, expected, "{name}");
    }

    let status = sandbox
        .gateway()
        .get_system_status(GetSystemStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    let a = sandbox.addrs();
    let seen: Vec<(String, String, i32)> = status
        .services
        .iter()
        .map(|s| (s.service.clone(), s.endpoint.clone(), s.state))
        .collect();
    assert_eq!(
        seen,
        vec![
            (
                "ploke.session.v1.LlmSession".to_owned(),
                a.url(ServiceKind::LlmSession),
                ServingState::Serving as i32
            ),
            (
                "ploke.tools.v1.ToolExecutor".to_owned(),
                a.url(ServiceKind::ToolExecutor),
                ServingState::Serving as i32
            ),
            (
                "ploke.rag.v1.RagSearch".to_owned(),
                a.url(ServiceKind::RagSearch),
                ServingState::Serving as i32
            ),
        ]
    );
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn gateway_forwards_each_rpc_to_its_owner() {
    let sandbox = Sandbox::start().await.unwrap();
    let mut gw = sandbox.gateway();

    // rag-search answers: the Sandbox workspace is served, and indexed on its own at start.
    let status = gw
        .index_status(IndexStatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(
        [IndexState::Indexing as i32, IndexState::Ready as i32].contains(&status.state),
        "{status:?}"
    );
    assert_eq!(
        status.workspace_root,
        std::fs::canonicalize(sandbox.workspace_root())
            .unwrap()
            .display()
            .to_string()
    );
    // ... including its field-level validation, with details intact across the hop.
    let s = gw
        .search(SearchRequest {
            query: String::new(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::InvalidArgument);
    assert_eq!(
        field_violations(&s),
        vec![("query".to_owned(), "must not be empty".to_owned())]
    );
    // tool-executor.
    let listed = gw
        .list_edits(ListEditsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.proposals, vec![]);
    let s = gw
        .decide_edit(DecideEditRequest {
            proposal_id: "edit-nope".into(),
            decision: Decision::Approve as i32,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (Code::NotFound, "proposal edit-nope not found")
    );
    // llm-session.
    let s = gw
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (
            Code::FailedPrecondition,
            "no provider: configure [providers.NAME] in ploke.toml (and [session] default_provider), or name one in the request"
        )
    );
    let s = gw
        .get_session(GetSessionRequest {
            session_id: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (Code::NotFound, "session nope not found")
    );
    let s = gw
        .create_session(CreateSessionRequest {
            provider: "nobody".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (
            Code::InvalidArgument,
            "provider: provider `nobody` is not configured; configured: none"
        )
    );
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn correlation_metadata_reaches_the_gateway() {
    let sandbox = Sandbox::start().await.unwrap();
    let mut request = tonic::Request::new(GetSystemStatusRequest {});
    request
        .metadata_mut()
        .insert("x-ploke-session-id", "s-42".parse().unwrap());
    request
        .metadata_mut()
        .insert("x-ploke-parent-id", "p-7".parse().unwrap());
    let status = sandbox
        .gateway()
        .get_system_status(request)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status.correlation,
        Some(ploke_proto::common::v1::Correlation {
            session_id: "s-42".into(),
            parent_id: "p-7".into(),
            ..Default::default()
        })
    );
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn tool_executor_lists_the_eight_tools() {
    let sandbox = Sandbox::start().await.unwrap();
    let tools = sandbox
        .tools()
        .list_tools(ListToolsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tools;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "request_code_context",
            "get_file_metadata",
            "apply_code_edit",
            "read_file",
            "list_dir",
            "search_code",
            "code_item_lookup",
            "create_file",
        ]
    );
    sandbox.stop().await.unwrap();
}
