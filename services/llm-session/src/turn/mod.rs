//! One turn: the request loop against the provider. Each step fits the history, streams the
//! reply as deltas, runs the tool calls it asks for concurrently and appends their results in
//! the model's order, until the model answers without tools, a limit is hit (tool rounds, wall
//! time, output bytes), the provider keeps failing, storage fails or the turn is cancelled.
//! Every turn ends with `turn_completed` or `turn_failed`.

pub mod history;
mod request;
pub mod tools;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ploke_proto::common::v1::{Correlation, TokenUsage};
use ploke_proto::session::v1::{
    AssistantMessage, NoticeLevel, TurnCompleted, TurnFailed, TurnFailureReason,
    session_event::Event,
};
use ploke_proto::tools::v1::tool_result;
use ploke_runtime::config::{AutoContext, SessionConfig};
use tokio_util::sync::CancellationToken;

use crate::events::EventLog;
use crate::provider::wire::{ChatMessage, ToolSpec};
use crate::provider::{AssembledCall, Provider, ProviderError};
use crate::store::{Effects, SessionStore, StoreError, StoredMessage};
use history::TokenCounter;
use request::{OutputBudget, append_notice, request};
use tools::{CallOutcome, CallScope, ToolRunner};

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
                _ => TurnFailureReason::Internal,
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

async fn steps(
    deps: &TurnDeps,
    spec: &TurnSpec,
    usage: &mut TokenUsage,
    rounds: &mut u32,
) -> Result<(), StepError> {
    let s = &deps.settings;
    let model_cfg = spec
        .provider
        .config()
        .models
        .iter()
        .find(|m| m.id == spec.model)
        .cloned();
    let window = model_cfg
        .as_ref()
        .and_then(|m| m.context_window)
        .unwrap_or(s.default_context_window);
    let counter = TokenCounter::for_model(&spec.model);
    let mut correlation = Correlation {
        session_id: spec.session_id.clone(),
        request_id: spec.first_request_id.clone(),
        parent_id: spec.parent_id.clone(),
        call_id: String::new(),
    };
    let mut tools: Vec<ToolSpec> = Vec::new();
    if model_cfg.as_ref().and_then(|m| m.supports_tools) != Some(false) {
        match deps.tools.definitions().await {
            Ok(t) => tools = t,
            Err(e) => {
                append_notice(
                    deps,
                    spec,
                    &correlation,
                    NoticeLevel::Warn,
                    format!("tools unavailable: {e}"),
                )
                .await?;
            }
        }
    }
    let tools_tokens: u32 = tools
        .iter()
        .map(|t| counter.count(&serde_json::to_string(t).unwrap_or_default()))
        .sum();
    let mut system = vec![ChatMessage::text(
        "system",
        system_prompt(&spec.workspace_root),
    )];
    let mut auto = Vec::new();
    if s.auto_context == AutoContext::Light {
        let (message, parts) = auto_context(deps, spec, &correlation).await?;
        if let Some(m) = message {
            system.push(m);
        }
        auto = parts;
    }
    let mut tool_rounds = 0u32;
    let mut continued = false;
    let mut budget = OutputBudget {
        limit: s.max_turn_output_bytes,
        used: 0,
    };
    loop {
        let mut history = deps
            .store
            .messages(&spec.session_id)
            .await
            .map_err(StepError::Store)?;
        history::close_open_calls(&mut history);
        let mut fitted = history::fit(
            &counter,
            &system,
            &history,
            &spec.parent_id,
            if tools.is_empty() { 0 } else { tools_tokens },
            window,
            s.reply_reserve_tokens,
        );
        if *rounds == 0 {
            fitted.plan.auto_context_tokens = auto
                .iter()
                .map(|p: &ploke_proto::tools::v1::ContextSnippet| counter.count(&p.snippet))
                .sum();
            fitted.plan.auto_context = std::mem::take(&mut auto);
        }
        deps.log
            .append(
                &spec.session_id,
                &correlation,
                Event::ContextPlan(fitted.plan),
            )
            .await
            .map_err(StepError::Store)?;
        let completion = request(
            deps,
            spec,
            &correlation,
            &fitted.messages,
            &mut tools,
            &mut budget,
        )
        .await?;
        *rounds += 1;
        let (input, output) = completion
            .usage
            .map_or((0, 0), |u| (u.prompt_tokens, u.completion_tokens));
        let step_usage = TokenUsage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
        };
        add_usage(usage, &step_usage);
        let calls = with_ids(&completion.tool_calls, &correlation.request_id);
        let assistant = ChatMessage {
            role: "assistant".into(),
            content: (!completion.text.is_empty() || calls.is_empty())
                .then(|| completion.text.clone()),
            tool_calls: calls.iter().map(AssembledCall::to_wire).collect(),
            tool_call_id: None,
        };
        // The event (bounded) and the history message (whole) commit together.
        deps.log
            .append_with(
                &spec.session_id,
                &correlation,
                Event::AssistantMessage(AssistantMessage {
                    text: completion.text.clone(),
                    finish_reason: completion.finish_reason.clone(),
                    usage: Some(step_usage),
                    model: if completion.model.is_empty() {
                        spec.model.clone()
                    } else {
                        completion.model.clone()
                    },
                }),
                |_| Effects {
                    messages: vec![assistant],
                    ..Effects::default()
                },
            )
            .await
            .map_err(StepError::Store)?;
        if !calls.is_empty() {
            if tool_rounds >= s.max_tool_rounds {
                let text = format!(
                    "not run: the turn reached its limit of {} tool rounds",
                    s.max_tool_rounds
                );
                history::answer_open_calls(&*deps.store, &spec.session_id, &spec.parent_id, &text)
                    .await
                    .map_err(StepError::Store)?;
                return Err(StepError::MaxRounds(s.max_tool_rounds));
            }
            tool_rounds += 1;
            tool_round(deps, spec, &correlation, &calls).await?;
            correlation.request_id = uuid::Uuid::now_v7().to_string();
            continue;
        }
        if completion.finish_reason == "length" && !continued {
            continued = true;
            append_notice(
                deps,
                spec,
                &correlation,
                NoticeLevel::Info,
                "the reply reached the length limit; asking the model to continue".into(),
            )
            .await?;
            remember(deps, spec, vec![ChatMessage::text("user", CONTINUE_PROMPT)]).await?;
            correlation.request_id = uuid::Uuid::now_v7().to_string();
            continue;
        }
        // The turn ends here; a reply a user would take for whole when it is not says so.
        if let Some(text) = incomplete(&completion.text, &completion.finish_reason) {
            append_notice(deps, spec, &correlation, NoticeLevel::Warn, text).await?;
        }
        return Ok(());
    }
}

/// Why a turn's last reply (no tool calls) is not a whole answer, when it is not: empty, or
/// cut at the length limit even after the model was asked once to continue.
fn incomplete(text: &str, finish_reason: &str) -> Option<String> {
    if text.trim().is_empty() {
        let why = match finish_reason {
            "" => "no finish reason".to_owned(),
            r => format!("finish reason {r:?}"),
        };
        return Some(format!(
            "the model's reply was empty ({why}): ask again, or try another model"
        ));
    }
    (finish_reason == "length").then(|| {
        "the reply reached the length limit again and is cut short: ask for less at a time"
            .to_owned()
    })
}

/// One tool round: the reply's calls run concurrently (at most [`MAX_CALLS_PER_REPLY`]; the
/// others are answered "not run", with a notice), and their answers go into the history in the
/// order the model sent the calls. A call whose events cannot be recorded fails the step; the
/// others are dropped (their ExecuteTool calls cancelled).
async fn tool_round(
    deps: &TurnDeps,
    spec: &TurnSpec,
    correlation: &Correlation,
    calls: &[AssembledCall],
) -> Result<(), StepError> {
    let scope = call_scope(deps, spec, correlation);
    let (run, over) = calls.split_at(calls.len().min(MAX_CALLS_PER_REPLY));
    if !over.is_empty() {
        append_notice(
            deps,
            spec,
            correlation,
            NoticeLevel::Warn,
            format!(
                "the model asked for {} tool calls in one reply; the first {MAX_CALLS_PER_REPLY} ran",
                calls.len()
            ),
        )
        .await?;
    }
    let outcomes: Vec<CallOutcome> =
        futures::future::try_join_all(run.iter().map(|c| deps.tools.run(&scope, c)))
            .await
            .map_err(StepError::Store)?;
    let not_run = format!(
        "not run: at most {MAX_CALLS_PER_REPLY} tool calls run per reply; ask for this one \
         again in your next reply if you still need it"
    );
    let messages = outcomes
        .iter()
        .map(|o| ChatMessage::tool(&o.call_id, o.text.clone()))
        .chain(
            over.iter()
                .map(|c| ChatMessage::tool(&c.id, not_run.clone())),
        )
        .collect();
    remember(deps, spec, messages).await
}

/// Tool calls with an id each (some servers send none).
fn with_ids(calls: &[AssembledCall], request_id: &str) -> Vec<AssembledCall> {
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut c = c.clone();
            if c.id.is_empty() {
                c.id = format!(
                    "call_{}_{i}",
                    &request_id[request_id.len().saturating_sub(8)..]
                );
            }
            c
        })
        .collect()
}

async fn remember(
    deps: &TurnDeps,
    spec: &TurnSpec,
    messages: Vec<ChatMessage>,
) -> Result<(), StepError> {
    let seq = deps
        .store
        .get_session(&spec.session_id)
        .await
        .map_err(StepError::Store)?
        .map_or(0, |s| s.last_seq);
    let stored: Vec<StoredMessage> = messages
        .into_iter()
        .map(|message| StoredMessage {
            seq,
            parent_id: spec.parent_id.clone(),
            message,
        })
        .collect();
    deps.store
        .append_messages(&spec.session_id, &stored)
        .await
        .map_err(StepError::Store)
}

/// The scope tool calls of this turn run in.
fn call_scope<'a>(
    deps: &'a TurnDeps,
    spec: &'a TurnSpec,
    correlation: &Correlation,
) -> CallScope<'a> {
    CallScope {
        log: &deps.log,
        session_id: &spec.session_id,
        correlation: correlation.clone(),
        workspace_root: &spec.workspace_root,
        user_message: &spec.user_message,
    }
}

/// The `light` auto-context: one request_code_context for the user's message.
async fn auto_context(
    deps: &TurnDeps,
    spec: &TurnSpec,
    correlation: &Correlation,
) -> Result<
    (
        Option<ChatMessage>,
        Vec<ploke_proto::tools::v1::ContextSnippet>,
    ),
    StepError,
> {
    let call = AssembledCall {
        id: format!("auto-context-{}", spec.parent_id),
        name: "request_code_context".into(),
        arguments: serde_json::json!({ "search_term": spec.user_message }).to_string(),
    };
    let scope = call_scope(deps, spec, correlation);
    let outcome = deps
        .tools
        .run(&scope, &call)
        .await
        .map_err(StepError::Store)?;
    Ok(match outcome.result.and_then(|r| r.result) {
        Some(tool_result::Result::RequestCodeContext(c)) if !c.parts.is_empty() => (
            Some(ChatMessage::text(
                "system",
                format!(
                    "Code that may be relevant to the user's message:\n{}",
                    outcome.text
                ),
            )),
            c.parts,
        ),
        _ => (None, Vec::new()),
    })
}
