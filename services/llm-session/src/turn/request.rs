//! One provider request of a step, with retries: 429 / 5xx / transport errors up to
//! `provider_tries` with exponential backoff and jitter (Retry-After honoured); a refusal of
//! tools once more without them. Text streams into bounded `assistant_delta` events; the bytes
//! the model streams count against the turn's output budget, retried attempts included.

use ploke_proto::common::v1::Correlation;
use ploke_proto::session::v1::{Notice, NoticeLevel, session_event::Event};
use tracing::Instrument;

use super::{StepError, TurnDeps, TurnSpec};
use crate::provider::wire::{ChatMessage, ChatRequest, StreamOptions, ToolSpec};
use crate::provider::{Completion, ProviderError, StreamItem};
use ploke_runtime::metrics::record;

/// What the model may still stream in this turn.
#[derive(Debug, Clone, Copy)]
pub(super) struct OutputBudget {
    /// `[session] max_turn_output_bytes`.
    pub limit: u64,
    /// Streamed so far.
    pub used: u64,
}

impl OutputBudget {
    fn left(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
}

fn provider_error(e: ProviderError) -> StepError {
    match e {
        ProviderError::OutputLimit(_) => StepError::OutputLimit,
        e => StepError::Provider(e),
    }
}

/// The step's completion, after retries.
pub(super) async fn request(
    deps: &TurnDeps,
    spec: &TurnSpec,
    correlation: &Correlation,
    messages: &[ChatMessage],
    tools: &mut Vec<ToolSpec>,
    budget: &mut OutputBudget,
) -> Result<Completion, StepError> {
    let s = &deps.settings;
    let tries = s.provider_tries.max(1);
    let mut attempt = 1;
    loop {
        let attempt_result = attempt_once(deps, spec, correlation, messages, tools, budget).await;
        record::provider_request(&spec.provider.name, outcome(&attempt_result));
        match attempt_result {
            Ok(c) => return Ok(c),
            Err(StepError::Provider(e)) if e.no_tool_support() && !tools.is_empty() => {
                tools.clear();
                record::provider_retry(&spec.provider.name, "no_tool_support");
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
                .await?;
            }
            Err(StepError::Provider(e)) if e.retryable() && attempt < tries => {
                let delay = ploke_runtime::retry::backoff(
                    s.retry_base_ms,
                    s.retry_max_ms,
                    attempt,
                    e.retry_after(),
                );
                record::provider_retry(&spec.provider.name, failure(&e));
                tracing::warn!(
                    provider = %spec.provider.name,
                    model = %spec.model,
                    attempt,
                    delay_ms = delay.as_millis() as u64,
                    error = %e,
                    "provider request failed, retrying"
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
                .await?;
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(e) => {
                if let StepError::Provider(p) = &e {
                    tracing::warn!(
                        provider = %spec.provider.name,
                        model = %spec.model,
                        attempt,
                        error = %p,
                        "provider request failed"
                    );
                }
                return Err(e);
            }
        }
    }
}

/// The `outcome` label of one provider request.
fn outcome(result: &Result<Completion, StepError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(StepError::Provider(e)) => failure(e),
        Err(StepError::OutputLimit) => "output_limit",
        // Ended on this side (the turn cancelled or out of time, the session store failing):
        // nothing the provider did, so no provider alert counts it.
        Err(
            StepError::Store(_)
            | StepError::Cancelled
            | StepError::TimeLimit(_)
            | StepError::MaxRounds(_),
        ) => "aborted",
    }
}

/// Every label [`failure`] gives.
const FAILURES: [&str; 10] = [
    "http_429",
    "http_5xx",
    "http_4xx",
    "transport",
    "idle",
    "truncated",
    "protocol",
    "in_stream",
    "missing_key",
    "output_limit",
];

/// Every `outcome` [`outcome`] gives a provider request: its counters start at 0.
pub(super) fn outcomes() -> impl Iterator<Item = &'static str> {
    ["ok"].into_iter().chain(FAILURES).chain(["aborted"])
}

/// Every `reason` a provider request is sent again for: [`failure`]'s labels, or a refusal of
/// tools.
pub(super) fn retry_reasons() -> impl Iterator<Item = &'static str> {
    ["no_tool_support"].into_iter().chain(FAILURES)
}

/// The label of a provider failure (also a retry's `reason`).
fn failure(e: &ProviderError) -> &'static str {
    match e {
        ProviderError::Status { status: 429, .. } => "http_429",
        ProviderError::Status { status: 500.., .. } => "http_5xx",
        ProviderError::Status { .. } => "http_4xx",
        ProviderError::Transport(_) => "transport",
        ProviderError::Idle(_) => "idle",
        ProviderError::Truncated => "truncated",
        ProviderError::Protocol(_) => "protocol",
        ProviderError::InStream { .. } => "in_stream",
        ProviderError::MissingKey(_) => "missing_key",
        ProviderError::OutputLimit(_) => "output_limit",
    }
}

/// Records a notice; a notice that cannot be recorded fails the step.
pub(super) async fn append_notice(
    deps: &TurnDeps,
    spec: &TurnSpec,
    correlation: &Correlation,
    level: NoticeLevel,
    text: String,
) -> Result<(), StepError> {
    deps.log
        .append(
            &spec.session_id,
            correlation,
            Event::Notice(Notice {
                level: level as i32,
                text,
            }),
        )
        .await
        .map(|_| ())
        .map_err(StepError::Store)
}

async fn attempt_once(
    deps: &TurnDeps,
    spec: &TurnSpec,
    correlation: &Correlation,
    messages: &[ChatMessage],
    tools: &[ToolSpec],
    budget: &mut OutputBudget,
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
        enduser.id = %ploke_runtime::principal::owner_name(),
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
        stream.limit_output(budget.left());
        let result = async {
            // Text is written while the next fragments are read: small ones that arrive during
            // a write go out together (up to 1 KiB) in the next one. One write per fragment
            // capped a replica at ~1,000 fragments/s for all its turns; under load a write
            // now carries many model tokens.
            let mut deltas = Deltas::default();
            loop {
                let item = tokio::select! {
                    biased;
                    written = deltas.written(), if deltas.writing() => {
                        written.map_err(StepError::Store)?;
                        deltas.next(deps, spec, correlation);
                        continue;
                    }
                    item = stream.next() => item,
                };
                let item = match item {
                    Ok(item) => item,
                    Err(e) => {
                        // What was received is recorded before the failure is.
                        deltas
                            .flush(deps, spec, correlation)
                            .await
                            .map_err(StepError::Store)?;
                        return Err(provider_error(e));
                    }
                };
                match item {
                    Some(StreamItem::Delta(text)) => {
                        deltas.push(text);
                        if !deltas.writing() {
                            deltas.next(deps, spec, correlation);
                        }
                    }
                    Some(StreamItem::Done(c)) => {
                        deltas
                            .flush(deps, spec, correlation)
                            .await
                            .map_err(StepError::Store)?;
                        if let Some(u) = c.usage {
                            record::provider_tokens(
                                &spec.provider.name,
                                u64::from(u.prompt_tokens),
                                u64::from(u.completion_tokens),
                            );
                            recorder.record("gen_ai.usage.input_tokens", u.prompt_tokens);
                            recorder.record("gen_ai.usage.output_tokens", u.completion_tokens);
                        }
                        recorder.record("gen_ai.response.finish_reasons", c.finish_reason.as_str());
                        return Ok(c);
                    }
                    None => {
                        deltas
                            .flush(deps, spec, correlation)
                            .await
                            .map_err(StepError::Store)?;
                        return Err(StepError::Provider(ProviderError::Truncated));
                    }
                }
            }
        }
        .await;
        budget.used += stream.output_bytes();
        // Dropping the stream here closes the provider's connection whatever the outcome.
        result
    }
    .instrument(span)
    .await
}

type Write<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<(), crate::store::StoreError>> + Send + 'a>,
>;

/// Largest text that fragments are merged into while a write runs (a fragment larger by
/// itself stays one event).
const MERGE_MAX: usize = 1024;

/// Streamed text on its way to the event log: at most one write at a time, and the text that
/// came meanwhile, small fragments merged.
#[derive(Default)]
struct Deltas<'a> {
    waiting: std::collections::VecDeque<String>,
    write: Option<Write<'a>>,
}

impl<'a> Deltas<'a> {
    fn push(&mut self, text: String) {
        match self.waiting.back_mut() {
            Some(last) if last.len() + text.len() <= MERGE_MAX => last.push_str(&text),
            _ => self.waiting.push_back(text),
        }
    }

    fn writing(&self) -> bool {
        self.write.is_some()
    }

    /// The running write's end (only polled while [`Self::writing`]).
    async fn written(&mut self) -> Result<(), crate::store::StoreError> {
        let result = match self.write.as_mut() {
            Some(w) => w.await,
            None => Ok(()),
        };
        self.write = None;
        result
    }

    /// Starts writing the first text that waits, if any does.
    fn next(&mut self, deps: &'a TurnDeps, spec: &'a TurnSpec, correlation: &'a Correlation) {
        let Some(text) = self.waiting.pop_front() else {
            return;
        };
        self.write = Some(Box::pin(async move {
            deps.log
                .append_text(&spec.session_id, correlation, &text)
                .await
        }));
    }

    /// Finishes the running write and writes everything that waits.
    async fn flush(
        &mut self,
        deps: &'a TurnDeps,
        spec: &'a TurnSpec,
        correlation: &'a Correlation,
    ) -> Result<(), crate::store::StoreError> {
        self.written().await?;
        while !self.waiting.is_empty() {
            self.next(deps, spec, correlation);
            self.written().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lists whose counters start at 0 hold every label a request can be counted with.
    #[test]
    fn every_outcome_and_retry_reason_is_listed() {
        let errors = [
            ProviderError::Status {
                url: String::new(),
                status: 429,
                retry_after: None,
                body: String::new(),
            },
            ProviderError::Status {
                url: String::new(),
                status: 503,
                retry_after: None,
                body: String::new(),
            },
            ProviderError::Status {
                url: String::new(),
                status: 400,
                retry_after: None,
                body: String::new(),
            },
            ProviderError::Transport(String::new()),
            ProviderError::Idle(1),
            ProviderError::Truncated,
            ProviderError::Protocol(String::new()),
            ProviderError::InStream {
                url: String::new(),
                message: String::new(),
                retryable: true,
            },
            ProviderError::MissingKey(String::new()),
            ProviderError::OutputLimit(1),
        ];
        let mut failures: Vec<&str> = errors.iter().map(failure).collect();
        failures.dedup();
        assert_eq!(
            failures.len(),
            errors.len(),
            "one label per kind of failure"
        );
        let outcomes: Vec<&str> = outcomes().collect();
        let reasons: Vec<&str> = retry_reasons().collect();
        for label in &failures {
            assert!(outcomes.contains(label), "{label}");
            assert!(reasons.contains(label), "{label}");
        }
        assert!(outcomes.contains(&outcome(&Err(StepError::OutputLimit))));
        assert_eq!(outcome(&Err(StepError::Cancelled)), "aborted");
        assert_eq!(
            outcome(&Err(StepError::Store(crate::store::StoreError::Deleted(
                "s".into()
            )))),
            "aborted"
        );
        assert_eq!(outcomes.len(), failures.len() + 2, "ok and aborted besides");
        assert_eq!(reasons.len(), failures.len() + 1, "no_tool_support besides");
    }
}
