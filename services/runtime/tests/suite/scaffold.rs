//! The server scaffold: health follows readiness, reflection lists the services in both
//! protocol versions, shutdown drains and returns.

use ploke_runtime::config::LimitsConfig;
use ploke_runtime::probe::{ReflectionVersion, health, reflected_services};
use tonic_health::pb::health_check_response::ServingStatus;

use super::fixtures::{channel, start, telemetry};

#[tokio::test]
async fn health_is_not_serving_until_the_service_is_ready() {
    telemetry();
    let server = start(None, false, LimitsConfig::default()).await;
    let ch = channel(&server.url).await;
    assert_eq!(
        health(ch.clone(), "").await.unwrap(),
        ServingStatus::NotServing
    );
    assert_eq!(
        health(ch.clone(), "ploke.tools.v1.ToolExecutor")
            .await
            .unwrap(),
        ServingStatus::NotServing
    );
    server.readiness.set_serving().await;
    assert_eq!(
        health(ch.clone(), "").await.unwrap(),
        ServingStatus::Serving
    );
    assert_eq!(
        health(ch.clone(), "ploke.tools.v1.ToolExecutor")
            .await
            .unwrap(),
        ServingStatus::Serving
    );
    let unknown = health(ch, "no.such.Service").await.unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    server.shutdown.trigger();
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn reflection_lists_services_in_v1_and_v1alpha() {
    telemetry();
    let server = start(None, true, LimitsConfig::default()).await;
    let expected = vec![
        "grpc.health.v1.Health".to_owned(),
        "grpc.reflection.v1.ServerReflection".to_owned(),
        "grpc.reflection.v1alpha.ServerReflection".to_owned(),
        "ploke.tools.v1.ToolExecutor".to_owned(),
    ];
    for version in [ReflectionVersion::V1, ReflectionVersion::V1Alpha] {
        let names = reflected_services(channel(&server.url).await, version)
            .await
            .unwrap();
        assert_eq!(names, expected, "{version:?}");
    }
    server.shutdown.trigger();
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_reports_not_serving_and_returns() {
    telemetry();
    let limits = LimitsConfig {
        drain_seconds: 5,
        ..LimitsConfig::default()
    };
    let server = start(None, true, limits).await;
    let ch = channel(&server.url).await;
    assert_eq!(
        health(ch.clone(), "").await.unwrap(),
        ServingStatus::Serving
    );
    server.shutdown.trigger();
    server.task.await.unwrap().unwrap();
    // The listener is closed: a fresh connection is refused.
    let refused = tonic::transport::Endpoint::from_shared(server.url.clone())
        .unwrap()
        .connect()
        .await;
    assert!(refused.is_err());
}
