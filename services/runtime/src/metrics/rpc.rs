//! RPC metrics, recorded by a tower layer of the shared server stack for every call:
//! `ploke_rpc_requests_total` and `ploke_rpc_duration_seconds` by `service`, `method` and
//! `code`, and `ploke_rpc_in_flight` by `service` and `method`.
//!
//! `code` is the gRPC status name (`OK`, `INVALID_ARGUMENT`, …) the caller receives. A call is
//! counted when its status is known: at the response headers for a trailers-only answer
//! (every error before the first message, so unary errors), otherwise when the trailers pass,
//! i.e. at the end of a server stream; the duration runs until then. A stream the caller drops
//! before its trailers counts as `CANCELLED`. Paths that name no method of the server's
//! services count under `service="unknown", method="unknown"`, so made-up paths cannot grow
//! the label set.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use http::{HeaderMap, Request, Response};
use http_body::{Body, Frame, SizeHint};
use metrics::{counter, gauge, histogram};

use super::record::{RPC_DURATION, RPC_IN_FLIGHT, RPC_REQUESTS};

/// gRPC status names by code number.
const CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The status name in `headers` (`grpc-status`), if there is one.
fn code_of(headers: &HeaderMap) -> Option<&'static str> {
    let value = headers.get("grpc-status")?;
    let code = value.to_str().ok()?.trim().parse::<usize>().ok();
    Some(
        code.and_then(|c| CODE_NAMES.get(c).copied())
            .unwrap_or("UNKNOWN"),
    )
}

type Labels = (Arc<str>, Arc<str>);

/// The layer: labels calls by the methods of the services it is told about.
#[derive(Debug, Clone)]
pub struct RpcMetricsLayer {
    known: Arc<HashMap<String, Labels>>,
    unknown: Labels,
}

impl RpcMetricsLayer {
    /// A layer for a server serving `services` (full names), whose methods it finds in
    /// `descriptor_sets` (encoded `FileDescriptorSet`s).
    pub fn new(services: &[&str], descriptor_sets: &[&[u8]]) -> Self {
        let mut known = HashMap::new();
        for set in descriptor_sets {
            let Ok(pool) = prost_reflect::DescriptorPool::decode(*set) else {
                continue;
            };
            for name in services {
                let Some(service) = pool.get_service_by_name(name) else {
                    continue;
                };
                let service_label: Arc<str> = Arc::from(*name);
                for method in service.methods() {
                    known.insert(
                        format!("/{name}/{}", method.name()),
                        (service_label.clone(), Arc::from(method.name())),
                    );
                }
            }
        }
        let unknown: Arc<str> = Arc::from("unknown");
        Self {
            known: Arc::new(known),
            unknown: (unknown.clone(), unknown),
        }
    }
}

impl<S> tower_layer::Layer<S> for RpcMetricsLayer {
    type Service = RpcMetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RpcMetricsService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`RpcMetricsLayer`].
#[derive(Debug, Clone)]
pub struct RpcMetricsService<S> {
    inner: S,
    layer: RpcMetricsLayer,
}

/// One call being measured; counted once, when finished or dropped.
#[derive(Debug)]
struct Call {
    labels: Option<Labels>,
    started: Instant,
}

impl Call {
    /// A measured call; `None` labels (nothing counted) while the process records nothing.
    fn start(labels: Option<Labels>) -> Self {
        if let Some((service, method)) = &labels {
            gauge!(RPC_IN_FLIGHT, "service" => service.clone(), "method" => method.clone())
                .increment(1.0);
        }
        Self {
            labels,
            started: Instant::now(),
        }
    }

    fn finish(&mut self, code: &'static str) {
        let Some((service, method)) = self.labels.take() else {
            return;
        };
        gauge!(RPC_IN_FLIGHT, "service" => service.clone(), "method" => method.clone())
            .decrement(1.0);
        let labels = [
            ("service", metrics::SharedString::from(service)),
            ("method", method.into()),
            ("code", code.into()),
        ];
        counter!(RPC_REQUESTS, &labels).increment(1);
        histogram!(RPC_DURATION, &labels).record(self.started.elapsed().as_secs_f64());
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.finish("CANCELLED");
    }
}

impl<S, B, ResB> tower_service::Service<Request<B>> for RpcMetricsService<S>
where
    S: tower_service::Service<Request<B>, Response = Response<ResB>>,
    S::Future: Send + 'static,
{
    type Response = Response<MeteredBody<ResB>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let labels = super::enabled().then(|| {
            self.layer
                .known
                .get(req.uri().path())
                .unwrap_or(&self.layer.unknown)
                .clone()
        });
        let mut call = Call::start(labels);
        let fut = self.inner.call(req);
        Box::pin(async move {
            match fut.await {
                Ok(response) => {
                    let call = match code_of(response.headers()) {
                        // Trailers-only: the status is final now.
                        Some(code) => {
                            call.finish(code);
                            None
                        }
                        None => Some(call),
                    };
                    Ok(response.map(|inner| MeteredBody { inner, call }))
                }
                Err(e) => {
                    call.finish("UNKNOWN");
                    Err(e)
                }
            }
        })
    }
}

pin_project_lite::pin_project! {
    /// A response body that finishes its call's metrics when the trailers pass.
    #[derive(Debug)]
    pub struct MeteredBody<B> {
        #[pin]
        inner: B,
        call: Option<Call>,
    }
}

impl<B: Body> Body for MeteredBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let polled = ready!(this.inner.poll_frame(cx));
        if let Some(call) = this.call.as_mut() {
            match &polled {
                Some(Ok(frame)) => {
                    if let Some(code) = frame.trailers_ref().and_then(code_of) {
                        call.finish(code);
                    }
                }
                // A body that fails or ends without a status reaches the caller as an error.
                Some(Err(_)) | None => call.finish("UNKNOWN"),
            }
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_follow_the_grpc_codes() {
        let mut headers = HeaderMap::new();
        assert_eq!(code_of(&headers), None);
        headers.insert("grpc-status", http::HeaderValue::from_static("3"));
        assert_eq!(code_of(&headers), Some("INVALID_ARGUMENT"));
        headers.insert("grpc-status", http::HeaderValue::from_static("16"));
        assert_eq!(code_of(&headers), Some("UNAUTHENTICATED"));
        headers.insert("grpc-status", http::HeaderValue::from_static("99"));
        assert_eq!(code_of(&headers), Some("UNKNOWN"));
    }

    #[test]
    fn only_served_methods_get_their_own_labels() {
        let layer = RpcMetricsLayer::new(
            &["ploke.rag.v1.RagSearch"],
            &[ploke_proto::FILE_DESCRIPTOR_SET],
        );
        let search = layer.known.get("/ploke.rag.v1.RagSearch/Search");
        assert_eq!(
            search.map(|(s, m)| (&**s, &**m)),
            Some(("ploke.rag.v1.RagSearch", "Search"))
        );
        assert!(layer.known.get("/ploke.rag.v1.RagSearch/Nope").is_none());
        assert!(
            layer
                .known
                .keys()
                .all(|k| k.starts_with("/ploke.rag.v1.RagSearch/"))
        );
    }
}
