//! A → B: the trace context and the correlation ids cross a service hop through the runtime's
//! client interceptor and server layer.

use opentelemetry::trace::{SpanKind, TraceContextExt as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::trace::SpanData;
use ploke_proto::common::v1::Correlation;
use ploke_proto::tools::v1::ListEditsRequest;
use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_runtime::client::traced_channel;
use ploke_runtime::config::LimitsConfig;
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::fixtures::{start, telemetry};

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv: &&KeyValue| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

#[tokio::test]
async fn b_server_span_is_in_a_trace_and_carries_correlation() {
    let (exporter, provider) = telemetry();

    let b = start(None, true, LimitsConfig::default()).await;
    let a = start(Some(&b.url), true, LimitsConfig::default()).await;

    let root = tracing::info_span!("test.root");
    let root_trace = root.context().span().span_context().trace_id();
    let correlation = ploke_runtime::Correlation {
        session_id: "sess-1".into(),
        request_id: "req-2".into(),
        parent_id: "par-3".into(),
        call_id: "call-4".into(),
    };
    let response = ploke_runtime::correlation::scope(correlation.clone(), async {
        let mut client = ToolExecutorClient::new(traced_channel(&a.url).unwrap());
        client.list_edits(ListEditsRequest::default()).await
    })
    .instrument(root.clone())
    .await
    .unwrap()
    .into_inner();
    drop(root);

    // B saw the correlation the test sent to A.
    assert_eq!(
        response.proposals[0].correlation,
        Some(Correlation {
            session_id: "sess-1".into(),
            request_id: "req-2".into(),
            parent_id: "par-3".into(),
            call_id: "call-4".into(),
        })
    );

    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let servers: Vec<&SpanData> = spans
        .iter()
        .filter(|s| {
            s.name == "ploke.tools.v1.ToolExecutor/ListEdits"
                && s.span_context.trace_id() == root_trace
        })
        .collect();
    assert_eq!(servers.len(), 2, "{spans:#?}");
    let a_span = servers
        .iter()
        .find(|s| {
            s.parent_span_id != servers[0].span_context.span_id()
                && s.parent_span_id != servers[1].span_context.span_id()
        })
        .unwrap();
    let b_span = servers
        .iter()
        .find(|s| s.parent_span_id == a_span.span_context.span_id())
        .expect("B's span is a child of A's span");
    for span in [a_span, b_span] {
        assert_eq!(span.span_context.trace_id(), root_trace);
        assert_eq!(span.span_kind, SpanKind::Server);
        assert_eq!(attr(span, "rpc.system"), Some(&Value::from("grpc")));
        assert_eq!(
            attr(span, "rpc.service"),
            Some(&Value::from("ploke.tools.v1.ToolExecutor"))
        );
        assert_eq!(attr(span, "rpc.method"), Some(&Value::from("ListEdits")));
        assert_eq!(attr(span, "ploke.session_id"), Some(&Value::from("sess-1")));
        assert_eq!(attr(span, "ploke.request_id"), Some(&Value::from("req-2")));
        assert_eq!(attr(span, "ploke.parent_id"), Some(&Value::from("par-3")));
        assert_eq!(attr(span, "ploke.call_id"), Some(&Value::from("call-4")));
    }

    a.shutdown.trigger();
    b.shutdown.trigger();
    a.task.await.unwrap().unwrap();
    b.task.await.unwrap().unwrap();
}
