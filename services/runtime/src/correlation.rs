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

    /// Reads the ids from HTTP headers (gRPC metadata); missing or non-ASCII values are empty.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let get = |k: &str| {
            headers
                .get(k)
                .and_then(|v| v.to_str().ok())
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

    /// Writes the non-empty ids into HTTP headers (gRPC metadata), replacing earlier values.
    pub fn write_headers(&self, headers: &mut HeaderMap) {
        for (key, value) in self.pairs() {
            if value.is_empty() {
                continue;
            }
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.insert(key, v);
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
