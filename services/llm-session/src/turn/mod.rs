//! One turn: the request loop against the provider. Each step fits the history, streams the
//! reply as deltas, runs the tool calls it asks for concurrently and appends their results in
//! the model's order, until the model answers without tools, a limit is hit (tool rounds, wall
//! time, output bytes), the provider keeps failing, storage fails or the turn is cancelled.
//! Every turn ends with `turn_completed` or `turn_failed`.

pub mod history;
mod request;
mod step;
pub mod tools;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ploke_proto::common::v1::TokenUsage;
use ploke_proto::session::v1::{TurnCompleted, TurnFailed, TurnFailureReason};
use ploke_runtime::config::SessionConfig;
use tokio_util::sync::CancellationToken;

use crate::events::EventLog;
use crate::provider::{Provider, ProviderError};
use crate::store::{SessionStore, StoreError};
use step::steps;
use tools::ToolRunner;

/// The text appended when a reply was cut at the length limit.
pub const CONTINUE_PROMPT: &str = "Continue exactly where you stopped.";

/// Tool calls of one model reply that run; the others are answered as not run (a reply of
/// thousands of calls would otherwise run them all at once).
pub const MAX_CALLS_PER_REPLY: usize = 32;

/// What every turn shares.
#[derive(Debug, Clone)]
pub struct TurnDeps {
    /// Event log.
    pub log: EventLog,
    /// Store (history).
    pub store: Arc<dyn SessionStore>,
    /// tool-executor.
    pub tools: ToolRunner,
    /// Behaviour.
    pub settings: SessionConfig,
}

/// One turn to run.
#[derive(Debug, Clone)]
pub struct TurnSpec {
    /// Session id.
    pub session_id: String,
    /// Workspace root.
    pub workspace_root: String,
    /// The provider.
    pub provider: Provider,
    /// Model id.
    pub model: String,
    /// The user message id.
    pub parent_id: String,
    /// Id of the first step.
    pub first_request_id: String,
    /// The user's message.
    pub user_message: String,
    /// Fires on CancelTurn.
    pub cancel: CancellationToken,
    /// Why it was cancelled (set before the token fires).
    pub cancel_reason: Arc<std::sync::Mutex<String>>,
    /// Set (before the token fires) when the service is shutting down.
    pub interrupted: Arc<std::sync::atomic::AtomicBool>,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEnd {
    /// Normally.
    Completed(TurnCompleted),
    /// Abnormally.
    Failed(TurnFailed),
}

enum StepError {
    Cancelled,
    TimeLimit(Duration),
    OutputLimit,
    MaxRounds(u32),
    Provider(ProviderError),
    Store(StoreError),
}

/// Adds `u` to `total`.
pub(crate) fn add_usage(total: &mut TokenUsage, u: &TokenUsage) {
    total.input_tokens += u.input_tokens;
    total.output_tokens += u.output_tokens;
    total.total_tokens += u.total_tokens;
}

fn system_prompt(root: &str) -> String {
    format!(
        "You are ploke, a coding assistant for the repository at {root}. Fetch the exact code \
         you need with the tools before answering (request_code_context, code_item_lookup, \
         search_code, read_file) and cite files by path. Propose changes with apply_code_edit \
         or create_file: they are applied only after the user approves them, and the tool result \
         says what happened. Be concise."
    )
}

/// Starts the counters of turns, sessions deleted and each of `providers`' requests at 0
/// (`record::from_zero`): every outcome a turn or a request can end with, every reason a
/// request is sent again.
pub fn count_from_zero<'a>(providers: impl IntoIterator<Item = &'a str>) {
    use ploke_runtime::metrics::record;
    record::from_zero(record::TURNS_STARTED, [Vec::new()]);
    let failures = (1..=i32::from(u8::MAX))
        .filter_map(|n| TurnFailureReason::try_from(n).ok())
        .map(|r| r.as_str_name().trim_start_matches("TURN_FAILURE_REASON_"));
    record::from_zero(
        record::TURNS_FINISHED,
        std::iter::once("COMPLETED")
            .chain(failures)
            .map(|outcome| vec![("outcome", outcome.to_owned())]),
    );
    record::from_zero(
        record::SESSIONS_DELETED,
        ["request", "retention"].map(|reason| vec![("reason", reason.to_owned())]),
    );
    for provider in providers {
        let each = |key: &'static str, values: &mut dyn Iterator<Item = &'static str>| {
            values
                .map(|v| vec![("provider", provider.to_owned()), (key, v.to_owned())])
                .collect::<Vec<_>>()
        };
        record::from_zero(
            record::PROVIDER_REQUESTS,
            each("outcome", &mut request::outcomes()),
        );
        record::from_zero(
            record::PROVIDER_RETRIES,
            each("reason", &mut request::retry_reasons()),
        );
    }
}

/// Runs the turn to its end and returns how it ended (the final event is the caller's to
/// append, so that it can be ordered with the session's state change).
pub async fn run(deps: &TurnDeps, spec: &TurnSpec, usage: &mut TokenUsage) -> TurnEnd {
    let started = Instant::now();
    ploke_runtime::metrics::record::turn_started();
    let mut rounds = 0u32;
    let max_time = Duration::from_secs(deps.settings.max_turn_secs);
    // Whichever ends first drops the others: a dropped step closes the provider's connection
    // and the in-flight ExecuteTool calls.
    let result = tokio::select! {
        r = steps(deps, spec, usage, &mut rounds) => r,
        () = spec.cancel.cancelled() => Err(StepError::Cancelled),
        () = tokio::time::sleep(max_time) => Err(StepError::TimeLimit(max_time)),
    };
    let (reason, message, calls) = match result {
        Ok(()) => {
            ploke_runtime::metrics::record::turn_finished("COMPLETED");
            return TurnEnd::Completed(TurnCompleted {
                rounds,
                usage: Some(*usage),
                duration_ms: started.elapsed().as_millis() as u64,
            });
        }
        Err(StepError::Cancelled) if spec.interrupted.load(std::sync::atomic::Ordering::SeqCst) => {
            (
                TurnFailureReason::Interrupted,
                "llm-session shut down while the turn ran".to_owned(),
                "cancelled by the user before it finished",
            )
        }
        Err(StepError::Cancelled) => {
            let reason = spec
                .cancel_reason
                .lock()
                .map(|r| r.clone())
                .unwrap_or_default();
            (
                TurnFailureReason::Cancelled,
                if reason.is_empty() {
                    "cancelled".to_owned()
                } else {
                    reason
                },
                "cancelled by the user before it finished",
            )
        }
        Err(StepError::TimeLimit(d)) => (
            TurnFailureReason::TimeLimit,
            format!(
                "the turn ran for its limit of {} s ([session] max_turn_secs)",
                d.as_secs()
            ),
            "not finished: the turn reached its time limit",
        ),
        Err(StepError::OutputLimit) => (
            TurnFailureReason::OutputLimit,
            format!(
                "the model streamed more than {} bytes in this turn ([session] max_turn_output_bytes)",
                deps.settings.max_turn_output_bytes
            ),
            "not run: the turn reached its output limit",
        ),
        Err(StepError::MaxRounds(n)) => (
            TurnFailureReason::MaxRounds,
            format!("the model still asked for tools after {n} tool rounds"),
            "",
        ),
        Err(StepError::Provider(e)) => (TurnFailureReason::Provider, e.to_string(), ""),
        Err(StepError::Store(e)) => (
            match e {
                StoreError::Unavailable(_) => TurnFailureReason::Storage,
                // The database answered, but not as this replica expects: a defect or another
                // writer, not an outage the operator can mend.
                StoreError::Db(_)
                | StoreError::Corrupt(_)
                | StoreError::NotNext { .. }
                | StoreError::Busy { .. }
                | StoreError::Deleted(_)
                | StoreError::Superseded { .. } => TurnFailureReason::Internal,
            },
            e.shown(),
            "not finished: the session store failed",
        ),
    };
    // Calls the model made but that never got an answer are closed in the history so that the
    // next turn's request is well-formed.
    if !calls.is_empty()
        && let Err(e) =
            history::answer_open_calls(&*deps.store, &spec.session_id, &spec.parent_id, calls).await
    {
        // The next turn answers them in its request (`history::close_open_calls`).
        tracing::warn!(session_id = %spec.session_id, parent_id = %spec.parent_id, error = %e, "the turn's open tool calls not closed in the history");
    }
    let label = reason
        .as_str_name()
        .trim_start_matches("TURN_FAILURE_REASON_");
    // What an operator needs to see without asking the user (the turn's span names the
    // session and the owner).
    match reason {
        TurnFailureReason::Cancelled | TurnFailureReason::Interrupted => {
            tracing::info!(reason = label, message = %message, "turn ended early");
        }
        _ => tracing::warn!(reason = label, message = %message, "turn failed"),
    }
    ploke_runtime::metrics::record::turn_finished(label);
    TurnEnd::Failed(TurnFailed {
        reason: reason as i32,
        message,
    })
}
