//! Running the model's tool calls through tool-executor: arguments parsed into typed calls with
//! the registry (a parse failure is a typed error the model reads), one ExecuteTool per call,
//! its progress, proposals and outcome recorded as events, the outcome rendered for the model.
//! An event that cannot be recorded ends the call (its ExecuteTool is dropped, which withdraws
//! a pending proposal) with the store's error, which fails the turn.

use std::time::{Duration, Instant};

use ploke_proto::common::v1::Correlation;
use ploke_proto::registry::ToolRegistry;
use ploke_proto::session::v1::{
    EditDecided, EditProposed, ToolCallCompleted, ToolCallFailed, ToolCallProgress,
    ToolCallRequested, session_event::Event,
};
use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_proto::tools::v1::{
    ExecuteToolRequest, ListToolsRequest, ProposalState, ToolCall, ToolError, ToolErrorCode,
    ToolResult, execute_tool_event, tool_call, tool_result,
};
use ploke_runtime::client::TracedChannel;
use tracing::Instrument;

use crate::events::EventLog;
use crate::provider::AssembledCall;
use crate::provider::wire::{FunctionSpec, ToolSpec};
use crate::store::StoreError;
use ploke_proto::tool_text as render;
use ploke_runtime::config::ToolResults;

/// tool-executor as the loop uses it.
#[derive(Debug, Clone)]
pub struct ToolRunner {
    client: ToolExecutorClient<TracedChannel>,
    registry: &'static ToolRegistry,
    timeout: Duration,
    format: ToolResults,
}

/// Where a call's events go.
#[derive(Debug, Clone)]
pub struct CallScope<'a> {
    /// The event log.
    pub log: &'a EventLog,
    /// Session id.
    pub session_id: &'a str,
    /// The step's correlation (call_id filled per call).
    pub correlation: Correlation,
    /// Workspace root.
    pub workspace_root: &'a str,
    /// The turn's user message.
    pub user_message: &'a str,
}

/// What a call produced for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The provider's call id.
    pub call_id: String,
    /// Tool message text.
    pub text: String,
    /// The typed result, when it succeeded.
    pub result: Option<ToolResult>,
}

impl ToolRunner {
    /// A runner over `channel`; `timeout` bounds read-only tools (edits wait for approval);
    /// the model reads results in `format`; replies may be up to `max_message_bytes`.
    pub fn new(
        channel: TracedChannel,
        registry: &'static ToolRegistry,
        (timeout, format): (Duration, ToolResults),
        max_message_bytes: usize,
    ) -> Self {
        Self {
            client: ToolExecutorClient::new(channel).max_decoding_message_size(max_message_bytes),
            registry,
            timeout,
            format,
        }
    }

    /// The tool message of a result.
    fn result_text(&self, result: &ToolResult) -> String {
        match self.format {
            ToolResults::Json => self
                .registry
                .model_json(result)
                .unwrap_or_else(|| render::result(result)),
            ToolResults::Text => render::result(result),
        }
    }

    /// The tool message of an error.
    fn error_text(&self, error: &ToolError) -> String {
        match self.format {
            ToolResults::Json => {
                serde_json::json!({ "error": render::error_json(error) }).to_string()
            }
            ToolResults::Text => render::error(error),
        }
    }

    /// The tools to offer the model.
    pub async fn definitions(&self) -> Result<Vec<ToolSpec>, String> {
        let listed = self
            .client
            .clone()
            .list_tools(ListToolsRequest {})
            .await
            .map_err(|s| format!("tool-executor: {}", s.message()))?
            .into_inner();
        listed
            .tools
            .into_iter()
            .map(|t| {
                let parameters = serde_json::from_str(&t.parameters_json_schema)
                    .map_err(|e| format!("tool {} has an invalid schema: {e}", t.name))?;
                Ok(ToolSpec {
                    kind: "function",
                    function: FunctionSpec {
                        name: t.name,
                        description: t.description,
                        parameters,
                    },
                })
            })
            .collect()
    }

    /// Runs one call the model asked for; every path ends with an event and a tool message,
    /// or with the error that kept the event from being recorded.
    pub async fn run(
        &self,
        scope: &CallScope<'_>,
        call: &AssembledCall,
    ) -> Result<CallOutcome, StoreError> {
        let started = Instant::now();
        let mut correlation = scope.correlation.clone();
        correlation.call_id = call.id.clone();
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = %format!("execute_tool {}", call.name),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %call.name,
            gen_ai.tool.call.id = %call.id,
            ploke.request_id = %correlation.request_id,
            ploke.parent_id = %correlation.parent_id,
            ploke.call_id = %call.id,
            enduser.id = %ploke_runtime::principal::owner_name(),
        );
        async {
            let typed = match self.registry.parse_call(&call.name, &call.arguments) {
                Ok(t) => t,
                Err(e) => {
                    return self
                        .failed(scope, &correlation, call, e.to_tool_error(), started, None)
                        .await;
                }
            };
            scope
                .log
                .append(
                    scope.session_id,
                    &correlation,
                    Event::ToolCallRequested(ToolCallRequested {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        call: Some(typed.clone()),
                    }),
                )
                .await?;
            self.execute(scope, &correlation, call, typed, started)
                .await
        }
        .instrument(span)
        .await
    }

    async fn execute(
        &self,
        scope: &CallScope<'_>,
        correlation: &Correlation,
        call: &AssembledCall,
        typed: ToolCall,
        started: Instant,
    ) -> Result<CallOutcome, StoreError> {
        let is_edit = matches!(
            typed.args,
            Some(tool_call::Args::ApplyCodeEdit(_) | tool_call::Args::CreateFile(_))
        );
        let request = ExecuteToolRequest {
            correlation: Some(correlation.clone()),
            workspace_root: scope.workspace_root.to_owned(),
            call: Some(typed),
            user_message: scope.user_message.to_owned(),
            // Edit tools wait for a decision under their own (approval) timeout.
            timeout_ms: if is_edit {
                0
            } else {
                self.timeout.as_millis() as u32
            },
        };
        let mut proposal_id: Option<String> = None;
        let run = async {
            let mut stream = self
                .client
                .clone()
                .execute_tool(request)
                .await
                .map_err(|s| Ended::Tool(call_failed(&s)))?
                .into_inner();
            loop {
                let next = match stream.message().await {
                    Ok(next) => next,
                    Err(s) => {
                        return Err(Ended::Tool(match &proposal_id {
                            Some(id) => still_pending(id, s.message()),
                            None => call_failed(&s),
                        }));
                    }
                };
                let Some(e) = next else { break };
                match e.event {
                    Some(execute_tool_event::Event::Progress(p)) => {
                        scope
                            .log
                            .append(
                                scope.session_id,
                                correlation,
                                Event::ToolCallProgress(ToolCallProgress {
                                    call_id: call.id.clone(),
                                    progress: Some(p),
                                }),
                            )
                            .await
                            .map_err(Ended::Store)?;
                    }
                    Some(execute_tool_event::Event::EditProposed(p)) => {
                        proposal_id = Some(p.proposal_id.clone());
                        scope
                            .log
                            .append(
                                scope.session_id,
                                correlation,
                                Event::EditProposed(EditProposed { proposal: Some(p) }),
                            )
                            .await
                            .map_err(Ended::Store)?;
                    }
                    Some(execute_tool_event::Event::Result(r)) => return Ok(r),
                    Some(execute_tool_event::Event::Error(e)) => return Err(Ended::Tool(e)),
                    None => {}
                }
            }
            Err(Ended::Tool(match &proposal_id {
                Some(id) => still_pending(id, "the call ended without an outcome"),
                None => ToolError {
                    code: ToolErrorCode::Internal as i32,
                    field: String::new(),
                    message: "tool-executor ended the call without an outcome".into(),
                    retry_hint: String::new(),
                },
            }))
        };
        // The ids travel as x-ploke-* metadata too (the client interceptor reads this scope).
        let run = ploke_runtime::correlation::scope(
            ploke_runtime::correlation::Correlation::from(correlation.clone()),
            run,
        );
        let outcome = if is_edit {
            run.await
        } else {
            // The tool stops itself at its timeout; this bounds a stuck connection.
            tokio::time::timeout(self.timeout + Duration::from_secs(5), run)
                .await
                .unwrap_or_else(|_| {
                    Err(Ended::Tool(ToolError {
                        code: ToolErrorCode::Timeout as i32,
                        field: String::new(),
                        message: format!("no answer within {} ms", self.timeout.as_millis() + 5000),
                        retry_hint: String::new(),
                    }))
                })
        };
        let outcome = match outcome {
            Ok(result) => Ok(result),
            Err(Ended::Tool(e)) => Err(e),
            // The ExecuteTool stream is gone (a pending proposal is withdrawn with it).
            Err(Ended::Store(e)) => return Err(e),
        };
        match outcome {
            Ok(result) => {
                if let Some(id) = &proposal_id {
                    decided(scope, correlation, id, Ok(&result)).await?;
                }
                let text = self.result_text(&result);
                scope
                    .log
                    .append(
                        scope.session_id,
                        correlation,
                        Event::ToolCallCompleted(ToolCallCompleted {
                            call_id: call.id.clone(),
                            name: call.name.clone(),
                            result: Some(result.clone()),
                            duration_ms: started.elapsed().as_millis() as u64,
                        }),
                    )
                    .await?;
                Ok(CallOutcome {
                    call_id: call.id.clone(),
                    text,
                    result: Some(result),
                })
            }
            Err(error) => {
                self.failed(scope, correlation, call, error, started, proposal_id)
                    .await
            }
        }
    }

    async fn failed(
        &self,
        scope: &CallScope<'_>,
        correlation: &Correlation,
        call: &AssembledCall,
        error: ToolError,
        started: Instant,
        proposal_id: Option<String>,
    ) -> Result<CallOutcome, StoreError> {
        if let Some(id) = &proposal_id {
            decided(scope, correlation, id, Err(&error)).await?;
        }
        let text = self.error_text(&error);
        tracing::info!(call_id = %call.id, tool = %call.name, code = error.code().as_str_name(), "tool call failed");
        scope
            .log
            .append(
                scope.session_id,
                correlation,
                Event::ToolCallFailed(ToolCallFailed {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    error: Some(error),
                    duration_ms: started.elapsed().as_millis() as u64,
                }),
            )
            .await?;
        Ok(CallOutcome {
            call_id: call.id.clone(),
            text,
            result: None,
        })
    }
}

/// Why a call ended without a result.
enum Ended {
    /// The tool (or tool-executor) failed: the model reads it.
    Tool(ToolError),
    /// An event could not be recorded: the turn fails.
    Store(StoreError),
}

/// The call's stream broke after its proposal was stored (the tool-executor replica died, a
/// connection dropped): the proposal's fate is not known here, and another replica can still
/// decide it, so the model is told it may still be pending rather than that it failed (it was
/// told "failed", and the edit was then applied).
fn still_pending(proposal_id: &str, why: &str) -> ToolError {
    ToolError {
        code: ToolErrorCode::Unavailable as i32,
        field: String::new(),
        message: format!(
            "the connection to tool-executor broke while proposal {proposal_id} waited for a \
             decision ({why}); it may still be pending"
        ),
        retry_hint: format!(
            "do not propose the same edit again; the user can see and decide {proposal_id} \
             with `ploke edits`"
        ),
    }
}

/// Records how an edit proposal ended.
async fn decided(
    scope: &CallScope<'_>,
    correlation: &Correlation,
    proposal_id: &str,
    outcome: Result<&ToolResult, &ToolError>,
) -> Result<(), StoreError> {
    let (state, applied, in_overlay, files_changed) = match outcome {
        Ok(ToolResult {
            result: Some(tool_result::Result::ApplyCodeEdit(o) | tool_result::Result::CreateFile(o)),
        }) => (
            o.state(),
            o.applied_edits.clone(),
            o.in_overlay,
            o.files_changed.clone(),
        ),
        Ok(_) => return Ok(()),
        Err(e) => (
            match e.code() {
                ToolErrorCode::Denied => ProposalState::Denied,
                ToolErrorCode::Stale => ProposalState::Stale,
                ToolErrorCode::Expired | ToolErrorCode::Cancelled => ProposalState::Expired,
                ToolErrorCode::Unavailable => ProposalState::Pending,
                _ => ProposalState::Failed,
            },
            Vec::new(),
            false,
            Vec::new(),
        ),
    };
    scope
        .log
        .append(
            scope.session_id,
            correlation,
            Event::EditDecided(EditDecided {
                proposal_id: proposal_id.to_owned(),
                state: state as i32,
                applied_edits: applied,
                in_overlay,
                files_changed,
            }),
        )
        .await
        .map(|_| ())
}

/// A failed call to tool-executor as the model reads it: by its gRPC code (a refused argument
/// is not an outage), naming the service.
fn call_failed(s: &tonic::Status) -> ToolError {
    let mut e = ploke_proto::status::tool_error(s);
    e.message = format!("tool-executor: {}", e.message);
    e
}
