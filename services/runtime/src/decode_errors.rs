//! A request body that is not the message its method expects is the caller's fault: tonic's
//! codec answers INTERNAL (the gRPC spec's code for a response the client cannot decode); this
//! layer turns that answer into INVALID_ARGUMENT. Every ploke RPC decodes its one request
//! before the handler runs, so a decode failure is always a trailers-only response whose
//! status comes from tonic's decoder; handlers never produce these messages themselves (the
//! gateway rewords an upstream's undecodable answer, see [`is_decode_failure`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use tonic::{Code, Status};

/// What tonic's decoder says: prost's error, a body that ends inside a message, no message.
const DECODE_FAILURES: [&str; 3] = [
    "failed to decode Protobuf message",
    "Unexpected EOF decoding stream",
    "Missing request message",
];

/// Whether `status` is tonic's report of a message that did not decode.
pub fn is_decode_failure(status: &Status) -> bool {
    status.code() == Code::Internal
        && DECODE_FAILURES
            .iter()
            .any(|m| status.message().starts_with(m))
}

/// Tower layer that answers undecodable requests with INVALID_ARGUMENT.
#[derive(Debug, Clone, Copy, Default)]
pub struct DecodeErrorLayer;

impl<S> tower_layer::Layer<S> for DecodeErrorLayer {
    type Service = DecodeErrorService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DecodeErrorService { inner }
    }
}

/// The service of [`DecodeErrorLayer`].
#[derive(Debug, Clone)]
pub struct DecodeErrorService<S> {
    inner: S,
}

/// `response` with its INVALID_ARGUMENT status when its (trailers-only) status is a decode
/// failure of the request of `path`.
fn rewrite<B>(path: &str, mut response: Response<B>) -> Response<B> {
    let Some(status) = Status::from_header_map(response.headers()) else {
        return response;
    };
    if !is_decode_failure(&status) {
        return response;
    }
    let invalid = Status::invalid_argument(format!(
        "the request is not a valid message for {path}: {}",
        status.message()
    ));
    let headers = response.headers_mut();
    for key in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
        headers.remove(key);
    }
    if invalid.add_header(headers).is_err() {
        // The message could not be encoded (it cannot fail for this text); keep the original.
        let _ = status.add_header(headers);
    }
    response
}

impl<S, B, ResB> tower_service::Service<Request<B>> for DecodeErrorService<S>
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
        let path = req.uri().path().to_owned();
        let fut = self.inner.call(req);
        Box::pin(async move { Ok(rewrite(&path, fut.await?)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: Status) -> Response<()> {
        status.into_http()
    }

    fn status_of(r: &Response<()>) -> (Code, String) {
        let s = Status::from_header_map(r.headers()).unwrap();
        (s.code(), s.message().to_owned())
    }

    #[test]
    fn decode_failures_become_invalid_argument_others_pass() {
        let path = "/ploke.rag.v1.RagSearch/Search";
        let r = rewrite(
            path,
            answer(Status::internal(
                "failed to decode Protobuf message: invalid wire type value: 7",
            )),
        );
        assert_eq!(
            status_of(&r),
            (
                Code::InvalidArgument,
                "the request is not a valid message for /ploke.rag.v1.RagSearch/Search: \
                 failed to decode Protobuf message: invalid wire type value: 7"
                    .to_owned()
            )
        );
        assert_eq!(r.headers().get_all("grpc-status").iter().count(), 1);
        for other in [
            Status::internal("index corrupt: failed to decode Protobuf message"),
            Status::invalid_argument("query: must not be empty"),
            Status::unavailable("failed to decode Protobuf message"),
        ] {
            let r = rewrite(path, answer(other.clone()));
            assert_eq!(status_of(&r), (other.code(), other.message().to_owned()));
        }
        let ok = Response::new(());
        assert!(rewrite(path, ok).headers().is_empty());
    }
}
