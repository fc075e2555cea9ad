//! A gateway whose upstreams are down reports them UNREACHABLE and fails forwarded calls with
//! UNAVAILABLE naming the service, instead of hanging or hiding the cause.

use std::time::Duration;

use ploke_proto::gateway::v1::gateway_client::GatewayClient;
use ploke_proto::gateway::v1::{GetSystemStatusRequest, ServingState};
use ploke_proto::rag::v1::IndexStatusRequest;
use ploke_runtime::config::{InternalConfig, LimitsConfig, UpstreamsConfig};
use ploke_runtime::shutdown::Shutdown;
use tonic::Code;

#[tokio::test]
async fn unreachable_upstreams_are_reported() {
    // Port 9 (discard) of three loopback addresses: nothing answers there, and no other
    // test's `127.0.0.1:0` can be handed it (a port bound and dropped could be).
    let dead: Vec<String> = (1..=3).map(|i| format!("http://127.0.0.{i}:9")).collect();
    let config = ploke_gateway::Config {
        upstreams: UpstreamsConfig {
            llm_session_url: dead[0].clone(),
            tool_executor_url: dead[1].clone(),
            rag_search_url: dead[2].clone(),
        },
        tokens: Vec::new(),
        admin_tokens: Vec::new(),
        tokens_file: None,
        principals_file: None,
        jwt: None,
        credentials_poll: Duration::from_secs(2),
        allow_unauthenticated: true,
        forward_timeout: Duration::from_secs(5),
        subscriber_buffer: 16,
        subscriber_grace: Duration::from_secs(1),
        limits: LimitsConfig::default(),
        internal: InternalConfig::default(),
        mcp_listen: None,
        mcp_max_result_tokens: 25_000,
        mcp_allowed_hosts: Vec::new(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = Shutdown::new();
    let task = tokio::spawn(ploke_gateway::serve(config, listener, shutdown.wait()));
    let mut client = GatewayClient::connect(url).await.unwrap();

    let status = client
        .get_system_status(GetSystemStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    let states: Vec<(String, i32)> = status
        .services
        .iter()
        .map(|s| (s.endpoint.clone(), s.state))
        .collect();
    assert_eq!(
        states,
        dead.iter()
            .map(|u| (u.clone(), ServingState::Unreachable as i32))
            .collect::<Vec<_>>()
    );
    // An unauthenticated (loopback) gateway's one caller is the admin principal `local`.
    assert_eq!(
        status.principal,
        Some(ploke_proto::common::v1::Principal {
            name: "local".into(),
            role: ploke_proto::common::v1::Role::Admin as i32,
            workspaces: vec!["*".into()],
            read_only: false,
        })
    );
    let s = client
        .index_status(IndexStatusRequest::default())
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::Unavailable);
    assert!(
        s.message().starts_with("rag-search is unavailable: "),
        "{}",
        s.message()
    );

    drop(client);
    shutdown.trigger();
    task.await.unwrap().unwrap();
}
