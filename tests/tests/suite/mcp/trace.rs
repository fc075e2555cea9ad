//! The W3C trace context an MCP request carries in `_meta.traceparent` continues through the
//! gateway into tool-executor: the tool's server span is in the caller's trace.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt as _;

use super::{Era, alice, args, deployment};

const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";

#[tokio::test]
async fn the_requests_trace_context_reaches_the_tool() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    // As in session/spans.rs: a second dispatcher keeps callsite interest from being cached
    // as `never` by sibling tests without a subscriber.
    let _anchor = tracing::Dispatch::new(tracing_subscriber::registry());
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test"))),
    );
    tracing::callsite::rebuild_interest_cache();
    let d = deployment(|_| {}).await;
    let client = alice(&d, Era::Modern).await;
    let mut params =
        CallToolRequestParams::new("read_file").with_arguments(args(json!({"file": "src/lib.rs"})));
    let mut meta = RequestMetaObject::new();
    meta.0
        .set_traceparent(format!("00-{TRACE_ID}-00f067aa0ba902b7-01"));
    params.meta = Some(meta);
    let r = client.call_tool(params).await.unwrap();
    assert_eq!(r.is_error, Some(false));
    client.cancel().await.unwrap();
    d.sandbox.stop().await.unwrap();
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let tool = spans
        .iter()
        .find(|s| s.name.ends_with("ToolExecutor/ExecuteTool"))
        .unwrap_or_else(|| panic!("{:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>()));
    assert_eq!(tool.span_context.trace_id().to_string(), TRACE_ID);
}
