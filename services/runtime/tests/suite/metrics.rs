//! Metrics by scraping: nothing is served until asked; then one endpoint per process answers
//! `GET /metrics` with the RPCs counted by service, method and gRPC code (streams at their
//! end), latency histograms with their buckets, and the blocking pool's gauges.
//!
//! The recorder is global to the process, so this is one test: only it starts the endpoint,
//! and it asserts only counts no other test of this binary adds to (ListTools, DecideEdit,
//! ExecuteTool answered OK), so the values are exact.

use std::net::SocketAddr;
use std::time::Duration;

use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_proto::tools::v1::{DecideEditRequest, ExecuteToolRequest, ListToolsRequest};
use ploke_runtime::blocking::{BlockingError, BlockingPool, PoolSize};
use ploke_runtime::config::LimitsConfig;
use ploke_runtime::metrics::{self, MetricsError};
use ploke_runtime::server::ServiceHost;
use ploke_runtime::testing::{metric, scrape};
use tokio_stream::StreamExt as _;

use super::fixtures::{channel, start, telemetry};

const TOOLS: &str = "ploke.tools.v1.ToolExecutor";

fn rpc<'a>(method: &'a str, code: &'a str) -> [(&'a str, &'a str); 3] {
    [("service", TOOLS), ("method", method), ("code", code)]
}

#[tokio::test]
async fn rpcs_tools_and_pools_are_scraped_from_one_endpoint_per_process() {
    telemetry();
    let server = start(None, true, LimitsConfig::default()).await;
    let mut client = ToolExecutorClient::new(channel(&server.url).await);

    // Not asked: calls are answered and nothing is recorded or bound.
    client
        .list_tools(ListToolsRequest::default())
        .await
        .unwrap();
    assert_eq!(metrics::serving(), None);
    assert!(metrics::render().is_none());

    // One endpoint per process: the same address again is the same endpoint.
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let addr = metrics::serve(any).unwrap();
    assert_ne!(addr.port(), 0);
    assert_eq!(metrics::serve(any).unwrap(), addr);
    assert_eq!(metrics::serve(addr).unwrap(), addr);
    assert_eq!(metrics::serving(), Some(addr));
    let elsewhere: SocketAddr = "127.0.0.1:1".parse().unwrap();
    assert!(matches!(
        metrics::serve(elsewhere),
        Err(MetricsError::Elsewhere { serving, requested }) if serving == addr && requested == elsewhere
    ));

    // One OK unary call, two INVALID_ARGUMENT ones, one server stream read to its end.
    client
        .list_tools(ListToolsRequest::default())
        .await
        .unwrap();
    for _ in 0..2 {
        let status = client
            .decide_edit(DecideEditRequest::default())
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
    }
    let mut stream = client
        .execute_tool(ExecuteToolRequest {
            workspace_root: "stream".to_owned(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut events = 0;
    while let Some(event) = stream.next().await {
        event.unwrap();
        events += 1;
    }
    assert_eq!(events, 2);

    let scraped = scrape(addr, "/metrics").await.unwrap();
    assert_eq!(scraped.status, 200);
    assert!(
        scraped
            .content_type
            .starts_with("text/plain; version=0.0.4"),
        "{}",
        scraped.content_type
    );
    let body = &scraped.body;
    // Said from the start, whatever has been answered.
    assert_eq!(
        metric(
            body,
            "ploke_build_info",
            &[
                ("version", env!("CARGO_PKG_VERSION")),
                ("commit", ploke_runtime::build::COMMIT)
            ]
        ),
        Some(1.0),
        "{body}"
    );
    let requests = "ploke_rpc_requests_total";
    assert_eq!(metric(body, requests, &rpc("ListTools", "OK")), Some(1.0));
    assert_eq!(
        metric(body, requests, &rpc("DecideEdit", "INVALID_ARGUMENT")),
        Some(2.0),
        "{body}"
    );
    assert_eq!(metric(body, requests, &rpc("DecideEdit", "OK")), None);
    assert_eq!(metric(body, requests, &rpc("ExecuteTool", "OK")), Some(1.0));
    assert!(body.contains("# TYPE ploke_rpc_requests_total counter"));
    assert!(body.contains("# TYPE ploke_rpc_duration_seconds histogram"));

    // The latency histogram: every bucket, cumulative, ending at +Inf with the count.
    let duration = "ploke_rpc_duration_seconds";
    let bucket = |le: &str| {
        let [s, m, c] = rpc("DecideEdit", "INVALID_ARGUMENT");
        metric(body, &format!("{duration}_bucket"), &[s, m, c, ("le", le)])
    };
    for le in metrics::SECONDS_BUCKETS {
        assert!(
            bucket(&le.to_string()).is_some(),
            "no bucket le={le}: {body}"
        );
    }
    assert_eq!(bucket("+Inf"), Some(2.0));
    assert_eq!(bucket("10"), Some(2.0), "a rejected call takes under 10 s");
    assert_eq!(
        metric(
            body,
            &format!("{duration}_count"),
            &rpc("DecideEdit", "INVALID_ARGUMENT")
        ),
        Some(2.0)
    );
    let sum = metric(body, &format!("{duration}_sum"), &rpc("ExecuteTool", "OK"));
    assert!(sum.is_some_and(|s| s > 0.0 && s < 10.0), "{sum:?}");
    assert_eq!(
        metric(
            body,
            "ploke_rpc_in_flight",
            &[("service", TOOLS), ("method", "ListTools")]
        ),
        Some(0.0)
    );

    // A path naming no method of this server counts as unknown, whatever it says.
    let made_up = "/made.up.v1.Service/Call";
    let status = super::transport::raw(&channel(&server.url).await, made_up, &[], false).await;
    assert_eq!(status.code(), tonic::Code::Unimplemented);
    let body = &scrape(addr, "/metrics").await.unwrap().body;
    assert_eq!(
        metric(
            body,
            requests,
            &[
                ("service", "unknown"),
                ("method", "unknown"),
                ("code", "UNIMPLEMENTED")
            ]
        ),
        Some(1.0)
    );
    assert!(!body.contains("made.up"), "{body}");

    // Anything but /metrics is not found.
    assert_eq!(scrape(addr, "/").await.unwrap().status, 404);

    // The blocking pool reports under its server's service name once watched.
    let host = ServiceHost::new(LimitsConfig::default(), &["t.v1.Metrics"]).await;
    let pool = BlockingPool::new(PoolSize::new(1, 20));
    let _watch = pool.watch(host.readiness(), Duration::from_secs(60));
    // Its refusals are counted from 0 before the first one.
    let svc = [("service", "t.v1.Metrics")];
    // A health fault is a gauge an alert can watch: 1 while raised, 0 once it clears.
    let fault = [("service", "t.v1.Metrics"), ("fault", "storage")];
    host.readiness()
        .set_fault("storage", Some("disk full".into()))
        .await;
    let body = scrape(addr, "/metrics").await.unwrap().body;
    assert_eq!(
        metric(&body, "ploke_health_fault", &fault),
        Some(1.0),
        "{body}"
    );
    host.readiness().set_fault("storage", None).await;
    // A degrading fault has a gauge of its own.
    let degraded = [("service", "t.v1.Metrics"), ("fault", "index_storage")];
    host.readiness()
        .set_degraded("index_storage", Some("disk full".into()))
        .await;
    let body = scrape(addr, "/metrics").await.unwrap().body;
    assert_eq!(
        (
            metric(&body, "ploke_health_degraded", &degraded),
            metric(&body, "ploke_health_fault", &fault)
        ),
        (Some(1.0), Some(0.0)),
        "{body}"
    );
    host.readiness().set_degraded("index_storage", None).await;
    let body = scrape(addr, "/metrics").await.unwrap().body;
    assert_eq!(
        metric(&body, "ploke_health_degraded", &degraded),
        Some(0.0),
        "{body}"
    );
    assert_eq!(
        metric(&body, "ploke_blocking_pool_rejected_total", &svc),
        Some(0.0),
        "{body}"
    );
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let stuck = {
        let pool = pool.clone();
        tokio::spawn(async move {
            pool.run(move || {
                started_tx.send(()).unwrap();
                held.recv()
            })
            .await
        })
    };
    started.await.unwrap();
    assert!(matches!(
        pool.run(|| ()).await,
        Err(BlockingError::Saturated { .. })
    ));
    let body = scrape(addr, "/metrics").await.unwrap().body;
    assert_eq!(metric(&body, "ploke_blocking_pool_size", &svc), Some(1.0));
    assert_eq!(metric(&body, "ploke_blocking_pool_busy", &svc), Some(1.0));
    assert_eq!(metric(&body, "ploke_blocking_pool_queued", &svc), Some(0.0));
    assert_eq!(
        metric(&body, "ploke_blocking_pool_rejected_total", &svc),
        Some(1.0)
    );
    release.send(()).unwrap();
    assert_eq!(stuck.await.unwrap(), Ok(Ok(())));
    let body = scrape(addr, "/metrics").await.unwrap().body;
    assert_eq!(metric(&body, "ploke_blocking_pool_busy", &svc), Some(0.0));

    server.shutdown.trigger();
    server.task.await.unwrap().unwrap();
}
