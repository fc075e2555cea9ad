//! W3C trace context that arrives or leaves outside gRPC metadata: an MCP request carries its
//! caller's `traceparent`/`tracestate` in `_meta`, and the calls made for it continue that trace.
//! (gRPC hops use [`crate::TraceLayer`] and [`crate::client::PropagateInterceptor`].)

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C header of the parent span.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C header of vendor trace state.
pub const TRACESTATE: &str = "tracestate";

struct Pair<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

impl Extractor for Pair<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => Some(self.traceparent),
            TRACESTATE => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE]
    }
}

struct Headers<'a>(&'a mut http::HeaderMap);

impl Injector for Headers<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(k, v);
        }
    }
}

/// Makes `span` a child of the span `traceparent` names (an invalid one is ignored). Without an
/// OpenTelemetry layer there is nothing to parent, which is fine.
pub fn set_remote_parent(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    let cx = TraceContextPropagator::new().extract(&Pair {
        traceparent,
        tracestate,
    });
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// Writes `span`'s trace context into `headers`; `false` when it has none (no OpenTelemetry
/// layer is installed).
pub fn inject(span: &tracing::Span, headers: &mut http::HeaderMap) -> bool {
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return false;
    }
    TraceContextPropagator::new().inject_context(&cx, &mut Headers(headers));
    headers.contains_key(TRACEPARENT)
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";

    #[test]
    fn a_span_continues_the_remote_trace_and_passes_it_on() {
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("mcp");
            set_remote_parent(&span, PARENT, Some("vendor=1"));
            let mut headers = http::HeaderMap::new();
            assert!(inject(&span, &mut headers));
            let sent = headers[TRACEPARENT].to_str().unwrap();
            // Same trace, a new parent (this span), still sampled.
            assert!(
                sent.starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
                "{sent}"
            );
            assert!(!sent.contains("00f067aa0ba902b7"), "{sent}");
            assert_eq!(headers[TRACESTATE], "vendor=1");
            // Garbage is not a parent: the span starts its own trace.
            let other = tracing::info_span!("mcp");
            set_remote_parent(&other, "not a traceparent", None);
            let mut headers = http::HeaderMap::new();
            assert!(inject(&other, &mut headers));
            assert!(
                !headers[TRACEPARENT]
                    .to_str()
                    .unwrap()
                    .contains("0af7651916cd")
            );
        });
        // Without an OpenTelemetry layer nothing is written.
        let span = tracing::info_span!("plain");
        assert!(!inject(&span, &mut http::HeaderMap::new()));
    }
}
