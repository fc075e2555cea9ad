//! Forwarding helpers: a deadline on every unary call, and upstream transport failures named
//! after the service that failed.

use std::time::Duration;

use ploke_runtime::decode_errors::is_decode_failure;
use ploke_runtime::text::shown;
use tonic::{Code, Request, Status};

/// A request for an upstream with the gateway's deadline (or the caller's, if shorter: tonic
/// propagates the caller's `grpc-timeout` into the handler only as metadata, so the smaller
/// of the two is applied here).
pub(crate) fn with_deadline<T>(message: T, timeout: Duration) -> Request<T> {
    let mut request = Request::new(message);
    request.set_timeout(timeout);
    request
}

/// Names the upstream in transport-level failures; an upstream refusing the gateway's internal
/// token is the deployment's fault (INTERNAL), not the caller's; an answer the gateway could not
/// decode is INTERNAL worded so that it is never taken for the caller's undecodable request.
/// Every other status passes unchanged.
pub(crate) fn upstream_status(service: &str, status: Status) -> Status {
    let message = shown(status.message());
    match status.code() {
        Code::Unavailable => Status::unavailable(format!("{service} is unavailable: {message}")),
        Code::DeadlineExceeded => {
            Status::deadline_exceeded(format!("{service} did not answer in time: {message}"))
        }
        Code::Unauthenticated => Status::internal(format!(
            "{service} refused the gateway's internal token ({message}); the services of this \
             deployment are configured with different internal tokens"
        )),
        Code::Internal if is_decode_failure(&status) => Status::internal(format!(
            "{service} answered with a message the gateway cannot decode ({message})"
        )),
        _ => status,
    }
}
