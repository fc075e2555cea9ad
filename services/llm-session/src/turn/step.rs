//! The steps of one turn: what the turn prepares once (the model's window and tokenizer, the
//! tool definitions, the system prompt and the `light` auto-context), then per step the
//! history fitted and its plan reported, the provider's reply recorded, and what the reply
//! asks for next (a tool round, a continuation, or the end).

use ploke_proto::common::v1::{Correlation, TokenUsage};
use ploke_proto::session::v1::{AssistantMessage, NoticeLevel, session_event::Event};
use ploke_proto::tools::v1::{ContextSnippet, tool_result};
use ploke_runtime::config::AutoContext;

use super::history::{self, TokenCounter};
use super::request::{OutputBudget, append_notice, request};
use super::tools::{CallOutcome, CallScope};
use super::{CONTINUE_PROMPT, MAX_CALLS_PER_REPLY, StepError, TurnDeps, TurnSpec, add_usage};
use crate::provider::wire::{ChatMessage, ToolSpec};
use crate::provider::{AssembledCall, Completion};
use crate::store::{Effects, StoredMessage};

/// Runs steps until the model answers without tools (`Ok`) or the turn cannot go on;
/// `rounds` counts the provider requests made, `usage` adds up theirs.
pub(super) async fn steps(
    deps: &TurnDeps,
    spec: &TurnSpec,
    usage: &mut TokenUsage,
    rounds: &mut u32,
) -> Result<(), StepError> {
    let mut turn = Turn::prepare(deps, spec).await?;
    loop {
        let messages = turn.fitted(*rounds == 0).await?;
        let completion = request(
            deps,
            spec,
            &turn.correlation,
            &messages,
            &mut turn.tools,
            &mut turn.budget,
        )
        .await?;
        *rounds += 1;
        let calls = turn.record_reply(&completion, usage).await?;
        match turn.after_reply(&completion, &calls).await? {
            Next::Step => turn.correlation.request_id = uuid::Uuid::now_v7().to_string(),
            Next::Done => return Ok(()),
        }
    }
}

/// What a reply leaves the turn to do.
enum Next {
    /// Ask the provider again (the tools answered, or the model continues a cut reply).
    Step,
    /// The model answered.
    Done,
}

/// What a turn keeps from one step to the next.
struct Turn<'a> {
    deps: &'a TurnDeps,
    spec: &'a TurnSpec,
    counter: TokenCounter,
    /// The model's context window, in tokens.
    window: u32,
    /// The tools offered (none when the model cannot call them or tool-executor is away).
    tools: Vec<ToolSpec>,
    tools_tokens: u32,
    system: Vec<ChatMessage>,
    /// The `light` auto-context's snippets, reported with the first step's plan.
    auto: Vec<ContextSnippet>,
    /// The current step's ids.
    correlation: Correlation,
    budget: OutputBudget,
    tool_rounds: u32,
    /// Whether the model was asked once to continue a reply cut at the length limit.
    continued: bool,
}

impl<'a> Turn<'a> {
    async fn prepare(deps: &'a TurnDeps, spec: &'a TurnSpec) -> Result<Self, StepError> {
        let s = &deps.settings;
        let model_cfg = spec
            .provider
            .config()
            .models
            .iter()
            .find(|m| m.id == spec.model)
            .cloned();
        let counter = TokenCounter::for_model(&spec.model);
        let correlation = Correlation {
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
                    let text = format!("tools unavailable: {e}");
                    append_notice(deps, spec, &correlation, NoticeLevel::Warn, text).await?;
                }
            }
        }
        let tools_tokens = tools
            .iter()
            .map(|t| counter.count(&serde_json::to_string(t).unwrap_or_default()))
            .sum();
        let mut system = vec![ChatMessage::text(
            "system",
            super::system_prompt(&spec.workspace_root),
        )];
        let mut auto = Vec::new();
        if s.auto_context == AutoContext::Light {
            let (message, parts) = auto_context(deps, spec, &correlation).await?;
            system.extend(message);
            auto = parts;
        }
        Ok(Self {
            deps,
            spec,
            window: model_cfg
                .and_then(|m| m.context_window)
                .unwrap_or(s.default_context_window),
            counter,
            tools,
            tools_tokens,
            system,
            auto,
            correlation,
            budget: OutputBudget {
                limit: s.max_turn_output_bytes,
                used: 0,
            },
            tool_rounds: 0,
            continued: false,
        })
    }

    /// The messages of this step's request: the history fitted into the window, its plan
    /// reported (with the auto-context on the `first` step).
    async fn fitted(&mut self, first: bool) -> Result<Vec<ChatMessage>, StepError> {
        let (deps, spec) = (self.deps, self.spec);
        let mut history = deps
            .store
            .messages(&spec.session_id)
            .await
            .map_err(StepError::Store)?;
        history::close_open_calls(&mut history);
        let tools_tokens = if self.tools.is_empty() {
            0
        } else {
            self.tools_tokens
        };
        let mut fitted = history::fit(
            &self.counter,
            &self.system,
            &history,
            &spec.parent_id,
            tools_tokens,
            self.window,
            deps.settings.reply_reserve_tokens,
        );
        if first {
            fitted.plan.auto_context_tokens = self
                .auto
                .iter()
                .map(|p| self.counter.count(&p.snippet))
                .sum();
            fitted.plan.auto_context = std::mem::take(&mut self.auto);
        }
        deps.log
            .append(
                &spec.session_id,
                &self.correlation,
                Event::ContextPlan(fitted.plan),
            )
            .await
            .map_err(StepError::Store)?;
        Ok(fitted.messages)
    }

    /// Records the reply (its event, bounded, and its history message, whole, in one commit)
    /// and adds its usage; returns its tool calls, each with an id.
    async fn record_reply(
        &self,
        completion: &Completion,
        usage: &mut TokenUsage,
    ) -> Result<Vec<AssembledCall>, StepError> {
        let (input, output) = completion
            .usage
            .map_or((0, 0), |u| (u.prompt_tokens, u.completion_tokens));
        let step_usage = TokenUsage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
        };
        add_usage(usage, &step_usage);
        let calls = with_ids(&completion.tool_calls, &self.correlation.request_id);
        let assistant = ChatMessage {
            role: "assistant".into(),
            content: (!completion.text.is_empty() || calls.is_empty())
                .then(|| completion.text.clone()),
            tool_calls: calls.iter().map(AssembledCall::to_wire).collect(),
            tool_call_id: None,
        };
        let model = if completion.model.is_empty() {
            self.spec.model.clone()
        } else {
            completion.model.clone()
        };
        self.deps
            .log
            .append_with(
                &self.spec.session_id,
                &self.correlation,
                Event::AssistantMessage(AssistantMessage {
                    text: completion.text.clone(),
                    finish_reason: completion.finish_reason.clone(),
                    usage: Some(step_usage),
                    model,
                }),
                |_| Effects {
                    messages: vec![assistant],
                    ..Effects::default()
                },
            )
            .await
            .map_err(StepError::Store)?;
        Ok(calls)
    }

    /// What the reply asks for: its tool calls run (within `max_tool_rounds`), a reply cut at
    /// the length limit continued once, else the end (with a notice when the reply is not a
    /// whole answer).
    async fn after_reply(
        &mut self,
        completion: &Completion,
        calls: &[AssembledCall],
    ) -> Result<Next, StepError> {
        let (deps, spec) = (self.deps, self.spec);
        if !calls.is_empty() {
            let max = deps.settings.max_tool_rounds;
            if self.tool_rounds >= max {
                let text = format!("not run: the turn reached its limit of {max} tool rounds");
                history::answer_open_calls(&*deps.store, &spec.session_id, &spec.parent_id, &text)
                    .await
                    .map_err(StepError::Store)?;
                return Err(StepError::MaxRounds(max));
            }
            self.tool_rounds += 1;
            tool_round(deps, spec, &self.correlation, calls).await?;
            return Ok(Next::Step);
        }
        if completion.finish_reason == "length" && !self.continued {
            self.continued = true;
            let text = "the reply reached the length limit; asking the model to continue";
            append_notice(
                deps,
                spec,
                &self.correlation,
                NoticeLevel::Info,
                text.into(),
            )
            .await?;
            remember(deps, spec, vec![ChatMessage::text("user", CONTINUE_PROMPT)]).await?;
            return Ok(Next::Step);
        }
        // A reply a user would take for whole when it is not says so.
        if let Some(text) = incomplete(&completion.text, &completion.finish_reason) {
            append_notice(deps, spec, &self.correlation, NoticeLevel::Warn, text).await?;
        }
        Ok(Next::Done)
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
