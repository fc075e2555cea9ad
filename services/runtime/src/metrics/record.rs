//! The domain metrics every service reports, named and labelled in one place: each function
//! here is one line at its call site. Until [`super::serve`] ran they return at once.
//! `docs/runtime.md` ("Metrics") lists them all.

use std::time::Duration;

use metrics::{counter, gauge, histogram};

use crate::server::Impact;

/// Calls answered, by `service`, `method` and `code` (counter).
pub const RPC_REQUESTS: &str = "ploke_rpc_requests_total";
/// Call latency, by `service`, `method` and `code` (histogram, seconds).
pub const RPC_DURATION: &str = "ploke_rpc_duration_seconds";
/// Calls in progress, by `service` and `method` (gauge).
pub const RPC_IN_FLIGHT: &str = "ploke_rpc_in_flight";
/// Tool calls finished, by `tool` and `outcome` (counter).
pub const TOOL_CALLS: &str = "ploke_tool_calls_total";
/// Tool call latency, by `tool` and `outcome` (histogram, seconds).
pub const TOOL_DURATION: &str = "ploke_tool_call_duration_seconds";
/// Provider HTTP requests, by `provider` and `outcome` (counter).
pub const PROVIDER_REQUESTS: &str = "ploke_provider_requests_total";
/// Provider requests retried, by `provider` and `reason` (counter).
pub const PROVIDER_RETRIES: &str = "ploke_provider_retries_total";
/// Tokens the provider reported, by `provider` and `kind` (counter).
pub const PROVIDER_TOKENS: &str = "ploke_provider_tokens_total";
/// Turns started (counter).
pub const TURNS_STARTED: &str = "ploke_turns_started_total";
/// Turns finished, by `outcome` (counter).
pub const TURNS_FINISHED: &str = "ploke_turns_finished_total";
/// Sessions deleted, by `reason` (`request`, `retention`) (counter).
pub const SESSIONS_DELETED: &str = "ploke_sessions_deleted_total";
/// Live event-stream subscribers, by `service` (gauge).
pub const EVENT_SUBSCRIBERS: &str = "ploke_event_subscribers";
/// Items in a workspace's index, by `workspace` (gauge).
pub const INDEX_ITEMS: &str = "ploke_index_items";
/// Index runs, by `kind` (histogram, seconds).
pub const INDEX_DURATION: &str = "ploke_index_duration_seconds";
/// Blocking-pool slots, by `service` (gauge).
pub const POOL_SIZE: &str = "ploke_blocking_pool_size";
/// Blocking-pool slots taken, by `service` (gauge).
pub const POOL_BUSY: &str = "ploke_blocking_pool_busy";
/// Callers waiting for a blocking-pool slot, by `service` (gauge).
pub const POOL_QUEUED: &str = "ploke_blocking_pool_queued";
/// Callers turned away by a saturated blocking pool, by `service` (counter).
pub const POOL_REJECTED: &str = "ploke_blocking_pool_rejected_total";

/// Whether a health fault that holds the service NOT_SERVING is raised, by `service` and
/// `fault` (gauge, 1 or 0).
pub const HEALTH_FAULT: &str = "ploke_health_fault";

/// 1 while a fault degrades a service that still serves (an index that cannot be written while
/// searches answer), else 0, by `service` and `fault` (gauge).
pub const HEALTH_DEGRADED: &str = "ploke_health_degraded";

/// 1, with the process's `version`: a scrape of a process that has answered nothing yet
/// still says what runs there, and which replicas an upgrade has reached (gauge).
pub const BUILD_INFO: &str = "ploke_build_info";

/// Registers help texts and units (called once, when the recorder is installed).
pub(super) fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        RPC_REQUESTS,
        "gRPC calls answered, by service, method and status code"
    );
    describe_histogram!(
        RPC_DURATION,
        Unit::Seconds,
        "gRPC call latency until the status (streams: until the stream ends)"
    );
    describe_gauge!(RPC_IN_FLIGHT, "gRPC calls in progress");
    describe_counter!(
        SESSIONS_DELETED,
        "sessions deleted, on request or by retention"
    );
    describe_counter!(TOOL_CALLS, "tool calls finished, by tool and outcome");
    describe_histogram!(TOOL_DURATION, Unit::Seconds, "tool call latency");
    describe_counter!(
        PROVIDER_REQUESTS,
        "requests to model providers, by provider and outcome"
    );
    describe_counter!(PROVIDER_RETRIES, "provider requests sent again");
    describe_counter!(
        PROVIDER_TOKENS,
        "tokens the provider reported, by kind (prompt, completion)"
    );
    describe_counter!(TURNS_STARTED, "user turns started");
    describe_counter!(TURNS_FINISHED, "user turns finished, by outcome");
    describe_gauge!(EVENT_SUBSCRIBERS, "live session event streams");
    describe_gauge!(INDEX_ITEMS, "code items in a workspace's index");
    describe_histogram!(
        INDEX_DURATION,
        Unit::Seconds,
        "index runs: full builds and refreshes"
    );
    describe_gauge!(
        HEALTH_FAULT,
        "1 while a health fault holds the service NOT_SERVING (storage, blocking_pool, ...), else 0"
    );
    describe_gauge!(
        HEALTH_DEGRADED,
        "1 while a fault degrades a service that still serves (index_storage: searches answer from the last committed index), else 0"
    );
    describe_gauge!(
        BUILD_INFO,
        "1, labelled with the version this process runs and the commit it was built from"
    );
    describe_gauge!(POOL_SIZE, "blocking worker slots");
    describe_gauge!(POOL_BUSY, "blocking worker slots taken");
    describe_gauge!(POOL_QUEUED, "callers waiting for a blocking worker slot");
    describe_counter!(
        POOL_REJECTED,
        "callers turned away because every blocking worker slot stayed busy"
    );
}

/// Makes each series of counter `name` present at 0 now: `series` is one label set each
/// (an empty one for a counter without labels). A counter whose series first appears at 1 loses that
/// increment to PromQL's `rate()` and `increase()`, so a service calls this at start with the
/// label values it knows it will use (the rare outcomes an alert watches most of all). A
/// series already counting keeps its value.
pub fn from_zero(
    name: &'static str,
    series: impl IntoIterator<Item = Vec<(&'static str, String)>>,
) {
    if !super::enabled() {
        return;
    }
    for labels in series {
        let labels: Vec<metrics::Label> = labels
            .into_iter()
            .map(|(key, value)| metrics::Label::new(key, value))
            .collect();
        counter!(name, labels).increment(0);
    }
}

/// A tool call of `tool` ended with `outcome` (`OK`, `CANCELLED`, or the tool error code's
/// name without its `TOOL_ERROR_CODE_` prefix) after `elapsed`.
pub fn tool_call(tool: &'static str, outcome: &'static str, elapsed: Duration) {
    if !super::enabled() {
        return;
    }
    let labels = [("tool", tool), ("outcome", outcome)];
    counter!(TOOL_CALLS, &labels).increment(1);
    histogram!(TOOL_DURATION, &labels).record(elapsed.as_secs_f64());
}

/// One request to `provider` ended with `outcome` (`ok`, `http_429`, `http_5xx`, `timeout`,
/// `error`, …: the caller's word).
pub fn provider_request(provider: &str, outcome: &'static str) {
    if !super::enabled() {
        return;
    }
    counter!(PROVIDER_REQUESTS, "provider" => provider.to_owned(), "outcome" => outcome)
        .increment(1);
}

/// A request to `provider` is sent again because of `reason`.
pub fn provider_retry(provider: &str, reason: &'static str) {
    if !super::enabled() {
        return;
    }
    counter!(PROVIDER_RETRIES, "provider" => provider.to_owned(), "reason" => reason).increment(1);
}

/// `provider` reported using `prompt` input and `completion` output tokens.
pub fn provider_tokens(provider: &str, prompt: u64, completion: u64) {
    if !super::enabled() {
        return;
    }
    counter!(PROVIDER_TOKENS, "provider" => provider.to_owned(), "kind" => "prompt")
        .increment(prompt);
    counter!(PROVIDER_TOKENS, "provider" => provider.to_owned(), "kind" => "completion")
        .increment(completion);
}

/// A user turn started.
pub fn turn_started() {
    if !super::enabled() {
        return;
    }
    counter!(TURNS_STARTED).increment(1);
}

/// A user turn ended with `outcome`: `COMPLETED`, or the failure reason's name without its
/// `TURN_FAILURE_REASON_` prefix (`CANCELLED`, `PROVIDER`, `TIME_LIMIT`, …).
pub fn turn_finished(outcome: &'static str) {
    if !super::enabled() {
        return;
    }
    counter!(TURNS_FINISHED, "outcome" => outcome).increment(1);
}

/// A session was deleted: on request (DeleteSession) or by `[session] retention_days`.
pub fn session_deleted(reason: &'static str) {
    if !super::enabled() {
        return;
    }
    counter!(SESSIONS_DELETED, "reason" => reason).increment(1);
}

/// Counts one live event stream of `service` (`llm-session`, `gateway`) for as long as the
/// guard lives.
#[derive(Debug)]
pub struct Subscriber(Option<&'static str>);

impl Subscriber {
    /// A stream opened.
    pub fn open(service: &'static str) -> Self {
        if !super::enabled() {
            return Self(None);
        }
        gauge!(EVENT_SUBSCRIBERS, "service" => service).increment(1.0);
        Self(Some(service))
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        if let Some(service) = self.0 {
            gauge!(EVENT_SUBSCRIBERS, "service" => service).decrement(1.0);
        }
    }
}

/// The index of `workspace` now holds `items` items.
pub fn index_items(workspace: &std::path::Path, items: u64) {
    if !super::enabled() {
        return;
    }
    gauge!(INDEX_ITEMS, "workspace" => workspace.display().to_string()).set(items as f64);
}

/// An index run of `kind` (`full`, `refresh`) took `elapsed`.
pub fn index_run(kind: &'static str, elapsed: Duration) {
    if !super::enabled() {
        return;
    }
    histogram!(INDEX_DURATION, "kind" => kind).record(elapsed.as_secs_f64());
}

/// The blocking pool of `service` has `size` slots, `busy` taken, `queued` callers waiting.
pub fn pool_state(service: &str, size: usize, busy: usize, queued: usize) {
    if !super::enabled() {
        return;
    }
    gauge!(POOL_SIZE, "service" => service.to_owned()).set(size as f64);
    gauge!(POOL_BUSY, "service" => service.to_owned()).set(busy as f64);
    gauge!(POOL_QUEUED, "service" => service.to_owned()).set(queued as f64);
}

/// The health fault `fault` of `service` is raised (`true`) or cleared: [`HEALTH_FAULT`] for one
/// that stops the service, [`HEALTH_DEGRADED`] for one that degrades it.
pub fn health_fault(service: &str, fault: &'static str, impact: Impact, raised: bool) {
    if !super::enabled() {
        return;
    }
    let name = match impact {
        Impact::NotServing => HEALTH_FAULT,
        Impact::Degraded => HEALTH_DEGRADED,
    };
    gauge!(name, "service" => service.to_owned(), "fault" => fault).set(if raised {
        1.0
    } else {
        0.0
    });
}

/// The process runs `version` built from `commit` ([`BUILD_INFO`]).
pub fn build_info(version: &'static str, commit: &'static str) {
    gauge!(BUILD_INFO, "version" => version, "commit" => commit).set(1.0);
}

/// The blocking pool of `service` turned a caller away.
pub fn pool_rejected(service: &str) {
    if !super::enabled() {
        return;
    }
    counter!(POOL_REJECTED, "service" => service.to_owned()).increment(1);
}
