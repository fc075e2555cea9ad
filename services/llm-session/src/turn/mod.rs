//! One turn: the request loop against the provider. Each step fits the history, streams the
//! reply as deltas, runs the tool calls it asks for concurrently and appends their results in
//! the model's order, until the model answers without tools, a limit is hit, the provider keeps
//! failing or the turn is cancelled. Every turn ends with `turn_completed` or `turn_failed`.

pub mod history;
mod render;
pub mod tools;

use std::sync::Arc;
use std::time::Instant;

use ploke_proto::common::v1::{Correlation, TokenUsage};
use ploke_proto::session::v1::{
    AssistantDelta, AssistantMessage, Notice, NoticeLevel, TurnCompleted, TurnFailed,
    TurnFailureReason, session_event::Event,
};
use ploke_proto::tools::v1::tool_result;
use ploke_runtime::config::{AutoContext, SessionConfig};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::events::EventLog;
use crate::provider::wire::{ChatMessage, ChatRequest, StreamOptions, ToolSpec};
use crate::provider::{AssembledCall, Completion, Provider, ProviderError, StreamItem};
use crate::store::{SessionStore, StoredMessage};
use history::TokenCounter;
use tools::{CallOutcome, CallScope, ToolRunner};

/// The text appended when a reply was cut at the length limit.
pub const CONTINUE_PROMPT: &str = "Continue exactly where you stopped.";

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
    MaxRounds(u32),
    Provider(ProviderError),
    Store(String),
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

/// Runs the turn to its end and returns how it ended (the final event is the caller's to
/// append, so that it can be ordered with the session's state change).
pub async fn run(deps: &TurnDeps, spec: &TurnSpec, usage: &mut TokenUsage) -> TurnEnd {
    let started = Instant::now();
    let mut rounds = 0u32;
    let result = tokio::select! {
        r = steps(deps, spec, usage, &mut rounds) => r,
        () = spec.cancel.cancelled() => Err(StepError::Cancelled),
    };
    match result {
        Ok(()) => TurnEnd::Completed(TurnCompleted {
            rounds,
            usage: Some(*usage),
            duration_ms: started.elapsed().as_millis() as u64,
        }),
        Err(StepError::Cancelled) => {
            // Calls the model made but that never got an answer are closed in the history so
            // that the next turn's request is well-formed.
            let _ = history::answer_open_calls(
                &*deps.store,
                &spec.session_id,
                &spec.parent_id,
                "cancelled by the user before it finished",
            )
            .await;
            if spec.interrupted.load(std::sync::atomic::Ordering::SeqCst) {
                return TurnEnd::Failed(TurnFailed {
                    reason: TurnFailureReason::Interrupted as i32,
                    message: "llm-session shut down while the turn ran".to_owned(),
                });
            }
            let reason = spec
                .cancel_reason
                .lock()
                .map(|r| r.clone())
                .unwrap_or_default();
            TurnEnd::Failed(TurnFailed {
                reason: TurnFailureReason::Cancelled as i32,
                message: if reason.is_empty() {
                    "cancelled".to_owned()
                } else {
                    reason
                },
            })
        }
        Err(StepError::MaxRounds(n)) => TurnEnd::Failed(TurnFailed {
            reason: TurnFailureReason::MaxRounds as i32,
            message: format!("the model still asked for tools after {n} tool rounds"),
        }),
        Err(StepError::Provider(e)) => TurnEnd::Failed(TurnFailed {
            reason: TurnFailureReason::Provider as i32,
            message: e.to_string(),
        }),
        Err(StepError::Store(e)) => TurnEnd::Failed(TurnFailed {
            reason: TurnFailureReason::Internal as i32,
            message: e,
        }),
    }
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
    let notice = |correlation: Correlation, level: NoticeLevel, text: String| async move {
        let _ = deps
            .log
            .append(
                &spec.session_id,
                &correlation,
                Event::Notice(Notice {
                    level: level as i32,
                    text,
                }),
            )
            .await;
    };
    let mut tools: Vec<ToolSpec> = Vec::new();
    if model_cfg.as_ref().and_then(|m| m.supports_tools) != Some(false) {
        match deps.tools.definitions().await {
            Ok(t) => tools = t,
            Err(e) => {
                notice(
                    correlation.clone(),
                    NoticeLevel::Warn,
                    format!("tools unavailable: {e}"),
                )
                .await;
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
        let (message, parts) = auto_context(deps, spec, &correlation).await;
        if let Some(m) = message {
            system.push(m);
        }
        auto = parts;
    }
    let mut tool_rounds = 0u32;
    let mut continued = false;
    loop {
        let history = deps
            .store
            .messages(&spec.session_id)
            .await
            .map_err(|e| StepError::Store(e.to_string()))?;
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
            .map_err(|e| StepError::Store(e.to_string()))?;
        let completion = request(deps, spec, &correlation, &fitted.messages, &mut tools).await?;
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
        deps.log
            .append(
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
            )
            .await
            .map_err(|e| StepError::Store(e.to_string()))?;
        let calls = with_ids(&completion.tool_calls, &correlation.request_id);
        let assistant = ChatMessage {
            role: "assistant".into(),
            content: (!completion.text.is_empty() || calls.is_empty())
                .then(|| completion.text.clone()),
            tool_calls: calls.iter().map(AssembledCall::to_wire).collect(),
            tool_call_id: None,
        };
        remember(deps, spec, vec![assistant]).await?;
        if !calls.is_empty() {
            if tool_rounds >= s.max_tool_rounds {
                let text = format!(
                    "not run: the turn reached its limit of {} tool rounds",
                    s.max_tool_rounds
                );
                history::answer_open_calls(&*deps.store, &spec.session_id, &spec.parent_id, &text)
                    .await
                    .map_err(|e| StepError::Store(e.to_string()))?;
                return Err(StepError::MaxRounds(s.max_tool_rounds));
            }
            tool_rounds += 1;
            let scope = call_scope(deps, spec, &correlation);
            let outcomes: Vec<CallOutcome> =
                futures::future::join_all(calls.iter().map(|c| deps.tools.run(&scope, c))).await;
            let messages = outcomes
                .iter()
                .map(|o| ChatMessage::tool(&o.call_id, o.text.clone()))
                .collect();
            remember(deps, spec, messages).await?;
            correlation.request_id = uuid::Uuid::now_v7().to_string();
            continue;
        }
        if completion.finish_reason == "length" && !continued {
            continued = true;
            notice(
                correlation.clone(),
                NoticeLevel::Info,
                "the reply reached the length limit; asking the model to continue".into(),
            )
            .await;
            remember(deps, spec, vec![ChatMessage::text("user", CONTINUE_PROMPT)]).await?;
            correlation.request_id = uuid::Uuid::now_v7().to_string();
            continue;
        }
        return Ok(());
    }
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
        .ok()
        .flatten()
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
        .map_err(|e| StepError::Store(e.to_string()))
}

/// One provider request with retries: 429 / 5xx / transport errors up to `provider_tries`
/// with exponential backoff and jitter (Retry-After honoured); a refusal of tools once more
/// without them.
async fn request(
    deps: &TurnDeps,
    spec: &TurnSpec,
    correlation: &Correlation,
    messages: &[ChatMessage],
    tools: &mut Vec<ToolSpec>,
) -> Result<Completion, StepError> {
    let s = &deps.settings;
    let tries = s.provider_tries.max(1);
    let mut attempt = 1;
    loop {
        match attempt_once(deps, spec, correlation, messages, tools).await {
            Ok(c) => return Ok(c),
            Err(StepError::Provider(e)) if e.no_tool_support() && !tools.is_empty() => {
                tools.clear();
                append_notice(
                    deps,
                    spec,
                    correlation,
                    NoticeLevel::Warn,
                    format!(
                        "model {} does not accept tools ({e}); answering without tools",
                        spec.model
                    ),
                )
                .await;
            }
            Err(StepError::Provider(e)) if e.retryable() && attempt < tries => {
                let delay = ploke_runtime::retry::backoff(
                    s.retry_base_ms,
                    s.retry_max_ms,
                    attempt,
                    e.retry_after(),
                );
                append_notice(
                    deps,
                    spec,
                    correlation,
                    NoticeLevel::Warn,
                    format!(
                        "{e}; retrying in {:.1} s (try {} of {tries})",
                        delay.as_secs_f64(),
                        attempt + 1
                    ),
                )
                .await;
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

async fn append_notice(
    deps: &TurnDeps,
    spec: &TurnSpec,
    correlation: &Correlation,
    level: NoticeLevel,
    text: String,
) {
    let _ = deps
        .log
        .append(
            &spec.session_id,
            correlation,
            Event::Notice(Notice {
                level: level as i32,
                text,
            }),
        )
        .await;
}

async fn attempt_once(
    deps: &TurnDeps,
    spec: &TurnSpec,
    correlation: &Correlation,
    messages: &[ChatMessage],
    tools: &[ToolSpec],
) -> Result<Completion, StepError> {
    let span = tracing::info_span!(
        "chat",
        otel.name = %format!("chat {}", spec.model),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = %spec.provider.name,
        gen_ai.request.model = %spec.model,
        gen_ai.conversation.id = %spec.session_id,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.response.finish_reasons = tracing::field::Empty,
        ploke.request_id = %correlation.request_id,
        ploke.parent_id = %correlation.parent_id,
    );
    let recorder = span.clone();
    async {
        let request = ChatRequest {
            model: &spec.model,
            messages,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            tools: (!tools.is_empty()).then_some(tools),
            tool_choice: (!tools.is_empty()).then_some("auto"),
            provider: spec.provider.config().preferences.as_ref(),
        };
        let mut stream = spec
            .provider
            .start(&request)
            .await
            .map_err(StepError::Provider)?;
        loop {
            match stream.next().await.map_err(StepError::Provider)? {
                Some(StreamItem::Delta(text)) => {
                    deps.log
                        .append(
                            &spec.session_id,
                            correlation,
                            Event::AssistantDelta(AssistantDelta { text }),
                        )
                        .await
                        .map_err(|e| StepError::Store(e.to_string()))?;
                }
                Some(StreamItem::Done(c)) => {
                    if let Some(u) = c.usage {
                        recorder.record("gen_ai.usage.input_tokens", u.prompt_tokens);
                        recorder.record("gen_ai.usage.output_tokens", u.completion_tokens);
                    }
                    recorder.record("gen_ai.response.finish_reasons", c.finish_reason.as_str());
                    return Ok(c);
                }
                None => return Err(StepError::Provider(ProviderError::Truncated)),
            }
        }
    }
    .instrument(span)
    .await
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
) -> (
    Option<ChatMessage>,
    Vec<ploke_proto::tools::v1::ContextSnippet>,
) {
    let call = AssembledCall {
        id: format!("auto-context-{}", spec.parent_id),
        name: "request_code_context".into(),
        arguments: serde_json::json!({ "search_term": spec.user_message }).to_string(),
    };
    let scope = call_scope(deps, spec, correlation);
    let outcome = deps.tools.run(&scope, &call).await;
    match outcome.result.and_then(|r| r.result) {
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
    }
}
