//! The server layer every ploke server runs: extracts W3C trace context and the `x-ploke-*`
//! correlation ids from each request, opens the gRPC server span (`{package}.{Service}/{Method}`)
//! as a child of the caller's span, and runs the handler with the correlation as the task's
//! current one so that outgoing calls carry it on.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::{Instrument, field::Empty};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::correlation::{self, Correlation};

/// Tower layer that traces and correlates every gRPC request.
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceLayer;

impl<S> tower_layer::Layer<S> for TraceLayer {
    type Service = TraceService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TraceService { inner }
    }
}

/// The service of [`TraceLayer`].
#[derive(Debug, Clone)]
pub struct TraceService<S> {
    inner: S,
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// `/ploke.rag.v1.RagSearch/Search` → (`ploke.rag.v1.RagSearch`, `Search`).
fn split_path(path: &str) -> (&str, &str) {
    let trimmed = path.trim_start_matches('/');
    trimmed.split_once('/').unwrap_or((trimmed, ""))
}

impl<S, B, ResB> tower_service::Service<Request<B>> for TraceService<S>
where
    S: tower_service::Service<Request<B>, Response = Response<ResB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let (service, method) = split_path(req.uri().path());
        let name = format!("{service}/{method}");
        let correlation = Correlation::from_headers(req.headers());
        let parent = TraceContextPropagator::new().extract(&HeaderExtractor(req.headers()));
        let span = tracing::info_span!(
            "grpc.server",
            otel.name = %name,
            otel.kind = "server",
            rpc.system = "grpc",
            rpc.service = %service,
            rpc.method = %method,
            ploke.session_id = Empty,
            ploke.request_id = Empty,
            ploke.parent_id = Empty,
            ploke.call_id = Empty,
            enduser.id = Empty,
            rpc.grpc.status_code = Empty,
        );
        for (field, value) in [
            ("ploke.session_id", &correlation.session_id),
            ("ploke.request_id", &correlation.request_id),
            ("ploke.parent_id", &correlation.parent_id),
            ("ploke.call_id", &correlation.call_id),
        ] {
            if !value.is_empty() {
                span.record(field, value.as_str());
            }
        }
        // Without an OpenTelemetry layer there is nothing to parent; that is fine.
        let _ = span.set_parent(parent);
        let fut = {
            let _enter = span.enter();
            self.inner.call(req)
        };
        let recorder = span.clone();
        Box::pin(
            correlation::scope(correlation, async move {
                let response = fut.await;
                if let Ok(resp) = &response {
                    // Unary errors and trailers-only responses carry the status in headers.
                    let code = resp
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<i64>().ok())
                        .unwrap_or(0);
                    recorder.record("rpc.grpc.status_code", code);
                }
                response
            })
            .instrument(span),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::split_path;

    #[test]
    fn splits_grpc_paths() {
        assert_eq!(
            split_path("/ploke.rag.v1.RagSearch/Search"),
            ("ploke.rag.v1.RagSearch", "Search")
        );
        assert_eq!(split_path("/odd"), ("odd", ""));
    }
}
