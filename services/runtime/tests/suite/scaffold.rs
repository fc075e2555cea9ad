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

/// A fault that stops the service turns health NOT_SERVING; one that only degrades it leaves
/// it SERVING; both are listed with what they do, and one clearing never hides the other.
#[tokio::test]
async fn a_degrading_fault_keeps_serving_and_a_stopping_one_does_not() {
    use ploke_runtime::server::{Impact, RaisedFault};
    telemetry();
    let server = start(None, false, LimitsConfig::default()).await;
    let ch = channel(&server.url).await;
    let r = &server.readiness;
    r.set_serving().await;
    r.set_degraded("index_storage", Some("disk full".into()))
        .await;
    assert_eq!(
        health(ch.clone(), "").await.unwrap(),
        ServingStatus::Serving
    );
    r.set_fault("storage", Some("database gone".into())).await;
    assert_eq!(
        health(ch.clone(), "").await.unwrap(),
        ServingStatus::NotServing
    );
    assert_eq!(
        r.faults(),
        [
            RaisedFault {
                name: "index_storage",
                reason: "disk full".into(),
                impact: Impact::Degraded,
            },
            RaisedFault {
                name: "storage",
                reason: "database gone".into(),
                impact: Impact::NotServing,
            },
        ]
    );
    r.set_fault("storage", None).await;
    assert_eq!(
        health(ch.clone(), "").await.unwrap(),
        ServingStatus::Serving
    );
    r.set_degraded("index_storage", None).await;
    assert_eq!(r.faults(), []);
    assert_eq!(health(ch, "").await.unwrap(), ServingStatus::Serving);
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
        "ploke.runtime.v1.Faults".to_owned(),
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

/// Reads HTTP/2 frames from `stream` until a GOAWAY (frame type 0x7) arrives, the stream
/// closes or `within` passes; true if a GOAWAY arrived.
async fn goaway_within(stream: &mut tokio::net::TcpStream, within: std::time::Duration) -> bool {
    use tokio::io::AsyncReadExt as _;
    let mut buf = Vec::new();
    let mut at = 0;
    let deadline = tokio::time::Instant::now() + within;
    loop {
        while at + 9 <= buf.len() {
            if buf[at + 3] == 0x7 {
                return true;
            }
            let len = usize::from(buf[at]) << 16
                | usize::from(buf[at + 1]) << 8
                | usize::from(buf[at + 2]);
            at += 9 + len;
        }
        let mut chunk = [0u8; 4096];
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return false,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// An HTTP/2 client connection: the preface and an empty SETTINGS frame.
async fn h2_connect(url: &str) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt as _;
    let mut stream = tokio::net::TcpStream::connect(url.trim_start_matches("http://"))
        .await
        .unwrap();
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    stream
}

#[tokio::test]
async fn max_connection_age_closes_connections_gracefully_and_clients_reconnect() {
    telemetry();
    // Off by default: an idle connection stays open.
    let server = start(None, true, LimitsConfig::default()).await;
    let mut conn = h2_connect(&server.url).await;
    assert!(!goaway_within(&mut conn, std::time::Duration::from_millis(1500)).await);
    drop(conn);
    server.shutdown.trigger();
    server.task.await.unwrap().unwrap();

    // With an age, the server says GOAWAY once the connection is that old ...
    let limits = LimitsConfig {
        max_connection_age_secs: 1,
        ..LimitsConfig::default()
    };
    let server = start(None, true, limits).await;
    let mut conn = h2_connect(&server.url).await;
    assert!(goaway_within(&mut conn, std::time::Duration::from_secs(10)).await);
    drop(conn);
    // ... and a tonic client just reconnects: calls before and after the age both work.
    let ch = channel(&server.url).await;
    assert_eq!(health_retried(&ch).await, ServingStatus::Serving);
    let mut conn = h2_connect(&server.url).await;
    assert!(goaway_within(&mut conn, std::time::Duration::from_secs(10)).await);
    drop(conn);
    assert_eq!(health_retried(&ch).await, ServingStatus::Serving);
    server.shutdown.trigger();
    server.task.await.unwrap().unwrap();
}

/// A health check as a gRPC client with transparent retry makes it: a call that races the
/// GOAWAY of an aged connection is refused before the server saw it (`CANCELLED` or
/// `UNAVAILABLE`, nothing ran) and goes again on the new connection.
async fn health_retried(ch: &tonic::transport::Channel) -> ServingStatus {
    for _ in 0..2 {
        match health(ch.clone(), "").await {
            Ok(status) => return status,
            Err(s) => assert!(
                matches!(s.code(), tonic::Code::Cancelled | tonic::Code::Unavailable),
                "{s:?}"
            ),
        }
    }
    health(ch.clone(), "").await.unwrap()
}
