//! Correlation ids of a user turn (`x-ploke-session-id`, `x-ploke-request-id`,
//! `x-ploke-parent-id`, `x-ploke-call-id`): the task-local that carries them through a
//! handler, and their encoding as gRPC metadata / HTTP headers.

use std::future::Future;

use http::{HeaderMap, HeaderValue};

/// Metadata key of the session id.
pub const SESSION_ID: &str = "x-ploke-session-id";
/// Metadata key of the request (LLM step) id.
pub const REQUEST_ID: &str = "x-ploke-request-id";
/// Metadata key of the parent (user message) id.
pub const PARENT_ID: &str = "x-ploke-parent-id";
/// Metadata key of the tool-call id.
pub const CALL_ID: &str = "x-ploke-call-id";
/// Longest correlation id taken from a caller (the services' own ids are uuids; an id field of
/// a request is refused past the same length).
pub const MAX_ID_BYTES: usize = 128;

/// The correlation ids of the current turn; empty strings are "not known".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Correlation {
    /// Session id.
    pub session_id: String,
    /// LLM request step id.
    pub request_id: String,
    /// User message id.
    pub parent_id: String,
    /// Tool-call id.
    pub call_id: String,
}

tokio::task_local! {
    static CURRENT: Correlation;
}

impl Correlation {
    /// Whether no id is set.
    pub fn is_empty(&self) -> bool {
        self.session_id.is_empty()
            && self.request_id.is_empty()
            && self.parent_id.is_empty()
            && self.call_id.is_empty()
    }

    fn pairs(&self) -> [(&'static str, &str); 4] {
        [
            (SESSION_ID, &self.session_id),
            (REQUEST_ID, &self.request_id),
            (PARENT_ID, &self.parent_id),
            (CALL_ID, &self.call_id),
        ]
    }

    /// Reads the ids from HTTP headers (gRPC metadata); missing, non-ASCII and longer than
    /// [`MAX_ID_BYTES`] values are empty (a caller's 15 kB id was logged on every line and
    /// forwarded until a backend refused the headers).
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let get = |k: &str| {
            headers
                .get(k)
                .and_then(|v| v.to_str().ok())
                .filter(|v| v.len() <= MAX_ID_BYTES)
                .map(str::to_owned)
                .unwrap_or_default()
        };
        Self {
            session_id: get(SESSION_ID),
            request_id: get(REQUEST_ID),
            parent_id: get(PARENT_ID),
            call_id: get(CALL_ID),
        }
    }

    /// Writes the ids into HTTP headers (gRPC metadata), replacing earlier values; an empty id
    /// removes its header (one [`Correlation::from_headers`] refused goes no further).
    pub fn write_headers(&self, headers: &mut HeaderMap) {
        for (key, value) in self.pairs() {
            match HeaderValue::from_str(value) {
                Ok(v) if !value.is_empty() => {
                    headers.insert(key, v);
                }
                Ok(_) | Err(_) => {
                    headers.remove(key);
                }
            }
        }
    }

    /// Fills the empty ids of `self` from `other`.
    pub fn or(mut self, other: &Correlation) -> Self {
        let fill = |a: &mut String, b: &str| {
            if a.is_empty() {
                b.clone_into(a);
            }
        };
        fill(&mut self.session_id, &other.session_id);
        fill(&mut self.request_id, &other.request_id);
        fill(&mut self.parent_id, &other.parent_id);
        fill(&mut self.call_id, &other.call_id);
        self
    }
}

impl From<ploke_proto::common::v1::Correlation> for Correlation {
    fn from(c: ploke_proto::common::v1::Correlation) -> Self {
        Self {
            session_id: c.session_id,
            request_id: c.request_id,
            parent_id: c.parent_id,
            call_id: c.call_id,
        }
    }
}

impl From<Correlation> for ploke_proto::common::v1::Correlation {
    fn from(c: Correlation) -> Self {
        Self {
            session_id: c.session_id,
            request_id: c.request_id,
            parent_id: c.parent_id,
            call_id: c.call_id,
        }
    }
}

/// The correlation of the running task (set by the server layer or [`scope`]); empty outside.
pub fn current() -> Correlation {
    CURRENT.try_with(Clone::clone).unwrap_or_default()
}

/// Runs `fut` with `correlation` as the current one; outgoing calls made inside carry it.
pub async fn scope<F: Future>(correlation: Correlation, fut: F) -> F::Output {
    CURRENT.scope(correlation, fut).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_skip_empty() {
        let c = Correlation {
            session_id: "s1".into(),
            request_id: "r1".into(),
            parent_id: String::new(),
            call_id: "call_9".into(),
        };
        let mut headers = HeaderMap::new();
        c.write_headers(&mut headers);
        assert_eq!(headers.len(), 3);
        assert!(headers.get(PARENT_ID).is_none());
        assert_eq!(Correlation::from_headers(&headers), c);
    }

    #[test]
    fn an_id_longer_than_the_limit_is_not_taken_nor_passed_on() {
        let mut headers = HeaderMap::new();
        headers.insert(
            REQUEST_ID,
            HeaderValue::from_str(&"r".repeat(15_800)).unwrap(),
        );
        headers.insert(SESSION_ID, HeaderValue::from_str(&"s".repeat(128)).unwrap());
        let read = Correlation::from_headers(&headers);
        assert_eq!(
            read,
            Correlation {
                session_id: "s".repeat(128),
                ..Default::default()
            }
        );
        // Written back over the caller's headers (as the client interceptor does), the refused
        // id is gone.
        read.write_headers(&mut headers);
        assert!(headers.get(REQUEST_ID).is_none());
        assert_eq!(headers.len(), 1);
    }

    #[tokio::test]
    async fn scope_sets_current_and_or_fills_gaps() {
        assert!(current().is_empty());
        let c = Correlation {
            session_id: "s".into(),
            ..Default::default()
        };
        let seen = scope(c.clone(), async { current() }).await;
        assert_eq!(seen, c);
        let filled = Correlation {
            call_id: "x".into(),
            ..Default::default()
        }
        .or(&c);
        assert_eq!(
            filled,
            Correlation {
                session_id: "s".into(),
                call_id: "x".into(),
                ..Default::default()
            }
        );
    }
}
