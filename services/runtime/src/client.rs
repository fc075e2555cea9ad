//! Outgoing calls: the client interceptor that injects W3C trace context, the current
//! correlation ids, the current principal and the internal token into every request, and lazily connecting channels to
//! upstream services.

use std::time::Duration;

use opentelemetry::propagation::{Injector, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::correlation;
use crate::internal::{self, InternalTokens};

/// Injects `traceparent`/`tracestate` of the current span, the current task's correlation
/// ids (explicit ids already on the request win), its principal and, between ploke services,
/// the internal token.
#[derive(Clone, Default)]
pub struct PropagateInterceptor {
    internal_token: Option<http::HeaderValue>,
}

impl std::fmt::Debug for PropagateInterceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PropagateInterceptor")
            .field(
                "internal_token",
                &self.internal_token.as_ref().map(|_| "***"),
            )
            .finish()
    }
}

impl PropagateInterceptor {
    /// Also sends the first of `tokens` as the internal token (nothing when there is none).
    pub fn with_internal(tokens: &InternalTokens) -> Self {
        Self {
            internal_token: tokens.outgoing().cloned(),
        }
    }
}

struct MetadataInjector<'a>(&'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (
            MetadataKey::from_bytes(key.as_bytes()),
            MetadataValue::try_from(value.as_str()),
        ) {
            self.0.insert(k, v);
        }
    }
}

impl tonic::service::Interceptor for PropagateInterceptor {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let cx = tracing::Span::current().context();
        TraceContextPropagator::new()
            .inject_context(&cx, &mut MetadataInjector(request.metadata_mut()));
        let mut headers = request.metadata().clone().into_headers();
        let explicit = correlation::Correlation::from_headers(&headers);
        let merged = explicit.or(&correlation::current());
        merged.write_headers(&mut headers);
        // The principal travels only as the task's current one: never from a caller's headers.
        headers.remove(crate::principal::HEADER);
        if let Some(principal) = crate::principal::current() {
            principal.write_headers(&mut headers);
        }
        if let Some(token) = &self.internal_token {
            headers.insert(internal::HEADER, token.clone());
        }
        *request.metadata_mut() = MetadataMap::from_headers(headers);
        Ok(request)
    }
}

/// A channel with trace and correlation propagation.
pub type TracedChannel = InterceptedService<Channel, PropagateInterceptor>;

/// An upstream URL could not be used.
#[derive(Debug, thiserror::Error)]
#[error("upstream URL `{url}`: {message}")]
pub struct ChannelError {
    /// The URL.
    pub url: String,
    /// Why.
    pub message: String,
}

/// A lazily connecting channel to `url` (connects on first use, reconnects after failures).
pub fn lazy_channel(url: &str) -> Result<Channel, ChannelError> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| ChannelError {
            url: url.to_owned(),
            message: e.to_string(),
        })?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true);
    Ok(endpoint.connect_lazy())
}

/// `channel` with [`PropagateInterceptor`].
pub fn traced(channel: Channel) -> TracedChannel {
    InterceptedService::new(channel, PropagateInterceptor::default())
}

/// `channel` with [`PropagateInterceptor`] sending the internal token of `tokens`: for calls
/// to another ploke service.
pub fn internal(channel: Channel, tokens: &InternalTokens) -> TracedChannel {
    InterceptedService::new(channel, PropagateInterceptor::with_internal(tokens))
}

/// A lazily connecting channel to the ploke service at `url`, with trace propagation and the
/// internal token.
pub fn internal_channel(url: &str, tokens: &InternalTokens) -> Result<TracedChannel, ChannelError> {
    Ok(internal(lazy_channel(url)?, tokens))
}

/// A lazily connecting channel to `url`, wrapped with [`PropagateInterceptor`].
pub fn traced_channel(url: &str) -> Result<TracedChannel, ChannelError> {
    Ok(traced(lazy_channel(url)?))
}
