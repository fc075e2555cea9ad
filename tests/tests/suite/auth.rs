//! The gateway refuses calls without a valid bearer token, before forwarding anything; health
//! and reflection stay open for probes.

use ploke_e2e::Sandbox;
use ploke_proto::gateway::v1::GetSystemStatusRequest;
use ploke_proto::gateway::v1::gateway_client::GatewayClient;
use ploke_runtime::probe::health;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

#[tokio::test]
async fn missing_or_wrong_token_is_unauthenticated() {
    let sandbox = Sandbox::start().await.unwrap();
    let s = GatewayClient::new(sandbox.gateway_channel())
        .get_system_status(GetSystemStatusRequest {})
        .await
        .unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (Code::Unauthenticated, "missing bearer token")
    );
    let s = sandbox
        .gateway_with_token(Some("wrong"))
        .get_system_status(GetSystemStatusRequest {})
        .await
        .unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (Code::Unauthenticated, "invalid bearer token")
    );
    assert_eq!(
        health(sandbox.gateway_channel(), "ploke.gateway.v1.Gateway")
            .await
            .unwrap(),
        ServingStatus::Serving
    );
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_gateway_without_tokens_refuses_everything_and_says_why() {
    let sandbox = Sandbox::start_with(|c| c.gateway.tokens.clear())
        .await
        .unwrap();
    let s = sandbox
        .gateway()
        .get_system_status(GetSystemStatusRequest {})
        .await
        .unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (
            Code::Unauthenticated,
            "the gateway has no credentials configured (principals_file, PLOKE_GATEWAY_TOKENS or [gateway.jwt])"
        )
    );
    sandbox.stop().await.unwrap();
}
