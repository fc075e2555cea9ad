//! Service-to-service authentication in the embedded deployment (`ploke up`, which the Sandbox
//! runs): zero configuration, a random internal token per process, backends that refuse direct
//! calls without it while health stays open, and the gateway that reaches them with it.

use std::time::Duration;

use ploke_e2e::Sandbox;
use ploke_proto::gateway::v1::gateway_client::GatewayClient;
use ploke_proto::gateway::v1::{GetSystemStatusRequest, ServingState};
use ploke_proto::rag::v1::IndexStatusRequest;
use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::session::v1::ListSessionsRequest;
use ploke_proto::session::v1::llm_session_client::LlmSessionClient;
use ploke_proto::tools::v1::ListToolsRequest;
use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_runtime::ServiceKind;
use ploke_runtime::config::{InternalConfig, LimitsConfig, Secret};
use ploke_runtime::internal::HEADER;
use ploke_runtime::probe::health;
use ploke_runtime::shutdown::Shutdown;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tonic_health::pb::health_check_response::ServingStatus;

/// Sends its token as the internal token.
#[derive(Clone)]
struct Token(String);

impl Interceptor for Token {
    fn call(&mut self, mut r: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        r.metadata_mut().insert(HEADER, self.0.parse().unwrap());
        Ok(r)
    }
}

fn with_token(channel: Channel, token: &str) -> Authed {
    InterceptedService::new(channel, Token(token.to_owned()))
}

type Authed = InterceptedService<Channel, Token>;

/// One cheap call to `kind` over `channel`.
async fn call<C>(kind: ServiceKind, channel: C) -> Result<(), Status>
where
    C: tonic::client::GrpcService<tonic::body::Body> + Clone + Send + 'static,
    C::Error: Into<tonic::codegen::StdError>,
    C::ResponseBody: tonic::codegen::Body<Data = tonic::codegen::Bytes> + Send + 'static,
    <C::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    match kind {
        ServiceKind::RagSearch => RagSearchClient::new(channel)
            .index_status(IndexStatusRequest::default())
            .await
            .map(|_| ()),
        ServiceKind::ToolExecutor => ToolExecutorClient::new(channel)
            .list_tools(ListToolsRequest {})
            .await
            .map(|_| ()),
        ServiceKind::LlmSession => LlmSessionClient::new(channel)
            .list_sessions(ListSessionsRequest::default())
            .await
            .map(|_| ()),
        ServiceKind::Gateway => GatewayClient::new(channel)
            .get_system_status(GetSystemStatusRequest {})
            .await
            .map(|_| ()),
    }
}

fn token(sandbox: &Sandbox) -> String {
    let t = sandbox.internal_tokens().outgoing().unwrap();
    t.to_str().unwrap().to_owned()
}

const BACKENDS: [(ServiceKind, &str); 3] = [
    (ServiceKind::RagSearch, "ploke.rag.v1.RagSearch"),
    (ServiceKind::ToolExecutor, "ploke.tools.v1.ToolExecutor"),
    (ServiceKind::LlmSession, "ploke.session.v1.LlmSession"),
];

#[tokio::test]
async fn the_embedded_backends_take_direct_calls_only_with_the_process_token() {
    let sandbox = Sandbox::start().await.unwrap();
    // Zero configuration gave the deployment a random 64-hex-digit token.
    let secret = token(&sandbox);
    assert_eq!(secret.len(), 64, "{secret}");
    assert!(secret.chars().all(|c| c.is_ascii_hexdigit()));
    for (kind, name) in BACKENDS {
        let raw = sandbox.channel(kind);
        let missing = call(kind, raw.clone()).await.unwrap_err();
        assert_eq!(
            (missing.code(), missing.message()),
            (
                Code::Unauthenticated,
                "missing internal token (x-ploke-internal-token): this backend answers other \
                 ploke services only; clients call the gateway"
            ),
            "{name}"
        );
        let wrong = with_token(raw.clone(), "0000000000000000000000000000");
        let s = call(kind, wrong).await.unwrap_err();
        assert_eq!(
            (s.code(), s.message()),
            (
                Code::Unauthenticated,
                "invalid internal token (x-ploke-internal-token)"
            ),
            "{name}"
        );
        call(kind, sandbox.internal(kind)).await.unwrap();
        assert_eq!(
            health(raw, name).await.unwrap(),
            ServingStatus::Serving,
            "{name}"
        );
    }
    // The gateway is the door: bearer auth for clients, the internal token to the backends.
    let bearer = InterceptedService::new(
        sandbox.gateway_channel(),
        ploke_e2e::BearerToken(ploke_e2e::TOKEN.into()),
    );
    call(ServiceKind::Gateway, bearer).await.unwrap();
    let no_bearer = call(ServiceKind::Gateway, sandbox.gateway_channel())
        .await
        .unwrap_err();
    assert_eq!(no_bearer.code(), Code::Unauthenticated);
    sandbox
        .gateway()
        .index_status(IndexStatusRequest::default())
        .await
        .unwrap();

    // Another deployment on this machine has another token: neither can call the other.
    let other = Sandbox::start().await.unwrap();
    assert_ne!(token(&other), secret);
    let s = call(
        ServiceKind::ToolExecutor,
        with_token(other.channel(ServiceKind::ToolExecutor), &secret),
    )
    .await
    .unwrap_err();
    assert_eq!(s.code(), Code::Unauthenticated);
    other.stop().await.unwrap();
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_configured_internal_token_is_used_instead_of_a_random_one() {
    const CONFIGURED: &str = "configured-internal-token-0001";
    let sandbox = Sandbox::start_with(|c| c.internal.tokens = vec![Secret::new(CONFIGURED)])
        .await
        .unwrap();
    assert_eq!(token(&sandbox), CONFIGURED);
    let direct = with_token(sandbox.channel(ServiceKind::RagSearch), CONFIGURED);
    call(ServiceKind::RagSearch, direct).await.unwrap();
    sandbox
        .gateway()
        .index_status(IndexStatusRequest::default())
        .await
        .unwrap();
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_gateway_with_another_internal_token_says_the_deployment_is_misconfigured() {
    let sandbox = Sandbox::start().await.unwrap();
    let a = sandbox.addrs();
    let mut config = ploke_gateway::Config::from(&ploke_runtime::PlokeConfig::default());
    config.upstreams.rag_search_url = a.url(ServiceKind::RagSearch);
    config.upstreams.tool_executor_url = a.url(ServiceKind::ToolExecutor);
    config.upstreams.llm_session_url = a.url(ServiceKind::LlmSession);
    config.allow_unauthenticated = true;
    config.forward_timeout = Duration::from_secs(10);
    config.limits = LimitsConfig::default();
    config.internal = InternalConfig {
        tokens: vec![Secret::new("not-the-deployments-token")],
        ..InternalConfig::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = Shutdown::new();
    let task = tokio::spawn(ploke_gateway::serve(config, listener, shutdown.wait()));
    let mut gateway = GatewayClient::connect(url).await.unwrap();
    let s = gateway
        .index_status(IndexStatusRequest::default())
        .await
        .unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (
            Code::Internal,
            "rag-search refused the gateway's internal token (invalid internal token \
             (x-ploke-internal-token)); the services of this deployment are configured with \
             different internal tokens"
        )
    );
    // Health needs no token, so each upstream is asked for a call behind its token too: the
    // status says none of them takes this gateway's (it said SERVING while every call failed).
    let status = gateway
        .get_system_status(GetSystemStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    let seen: Vec<(String, ServingState, String)> = status
        .services
        .iter()
        .map(|s| (s.service.clone(), s.state(), s.message.clone()))
        .collect();
    let refused = |service: &str| {
        (
            service.to_owned(),
            ServingState::NotServing,
            "refuses this gateway's internal token (invalid internal token \
             (x-ploke-internal-token)); the services of this deployment are configured with \
             different internal tokens"
                .to_owned(),
        )
    };
    assert_eq!(
        seen,
        vec![
            refused("ploke.session.v1.LlmSession"),
            refused("ploke.tools.v1.ToolExecutor"),
            refused("ploke.rag.v1.RagSearch"),
        ]
    );
    // The deployment's own gateway sees them serving.
    let status = sandbox
        .gateway()
        .get_system_status(GetSystemStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(
        status
            .services
            .iter()
            .all(|s| s.state() == ServingState::Serving && s.message.is_empty()),
        "{status:?}"
    );
    shutdown.trigger();
    task.await.unwrap().unwrap();
    sandbox.stop().await.unwrap();
}

/// A read-only principal is refused edits by tool-executor itself, not only by the gateway: a
/// caller holding the internal token (another service, a script beside the deployment) cannot
/// stage or approve one in its name; its read-only tools still run.
#[tokio::test]
async fn tool_executor_refuses_edits_to_a_read_only_principal_whoever_forwards_them() {
    use ploke_proto::tools::v1::{CreateFileArgs, ReadFileArgs, execute_tool_event, tool_call};
    use ploke_runtime::principal::{self, Principal, Role};
    let sandbox = Sandbox::start().await.unwrap();
    std::fs::write(sandbox.workspace_root().join("notes.rs"), "pub fn n() {}\n").unwrap();
    let carol = Principal {
        name: "carol".into(),
        role: Role::User,
        workspaces: vec!["*".into()],
        read_only: true,
    };
    let create = ploke_e2e::tool_request(
        "",
        "call_create",
        tool_call::Args::CreateFile(CreateFileArgs {
            file_path: "src/made.rs".into(),
            content: "pub fn made() {}\n".into(),
            on_exists: None,
        }),
    );
    let mut tools = sandbox.tools();
    let refused = principal::scope(Some(carol.clone()), tools.execute_tool(create))
        .await
        .unwrap_err();
    assert_eq!(
        (refused.code(), refused.message()),
        (
            Code::PermissionDenied,
            "create_file changes files; carol may run read-only tools only"
        )
    );
    let approve = ploke_proto::tools::v1::DecideEditRequest {
        proposal_id: "edit-0123".into(),
        decision: ploke_proto::tools::v1::Decision::Approve as i32,
        ..Default::default()
    };
    let refused = principal::scope(Some(carol.clone()), tools.decide_edit(approve))
        .await
        .unwrap_err();
    assert_eq!(
        (refused.code(), refused.message()),
        (
            Code::PermissionDenied,
            "approving an edit changes files; carol may run read-only tools only"
        )
    );
    let read = ploke_e2e::tool_request(
        "",
        "call_read",
        tool_call::Args::ReadFile(ReadFileArgs {
            file: "notes.rs".into(),
            ..Default::default()
        }),
    );
    let mut stream = principal::scope(Some(carol), tools.execute_tool(read))
        .await
        .unwrap()
        .into_inner();
    let execute_tool_event::Event::Result(result) = ploke_e2e::next_tool_event(&mut stream).await
    else {
        panic!("expected the file")
    };
    assert!(
        format!("{result:?}").contains("pub fn n() {}"),
        "{result:?}"
    );
    assert!(!sandbox.workspace_root().join("src/made.rs").exists());
    sandbox.stop().await.unwrap();
}
