//! One `tools/call`: the arguments parsed by the registry (a typed error naming the field when
//! they do not fit), the call run through the gateway's `ExecuteTool` with its own request and
//! call ids, the client's session and trace, its progress forwarded as MCP progress, an edit
//! held for a person's decision, and the outcome returned as a result. Cancelling the request
//! drops the call, which stops the tool (a pending edit is withdrawn).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures::StreamExt as _;
use ploke_proto::common::v1::Correlation;
use ploke_proto::registry::{ArgErrorKind, ToolRegistry};
use ploke_proto::tools::v1::{
    EditProposal, ExecuteToolRequest, ToolError, ToolErrorCode, execute_tool_event, tool_call,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitResult, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{Peer, RequestContext, ServiceError};
use rmcp::{ErrorData, RoleServer};

use super::approval::{self, Answer, Ask, Resume};
use super::backend::{Caller, ToolEvents};
use super::{McpServer, client_name, tools};

/// How often a call waiting for a decision says so.
const HEARTBEAT: Duration = Duration::from_secs(10);

type Elicitation = Pin<Box<dyn Future<Output = Result<ElicitResult, ServiceError>> + Send>>;

/// MCP progress of one request (nothing is sent without a progress token).
struct Progress {
    token: Option<ProgressToken>,
    peer: Peer<RoleServer>,
    sent: f64,
}

impl Progress {
    async fn send(&mut self, done: u64, total: u64, message: String) {
        let Some(token) = self.token.clone() else {
            return;
        };
        // Progress must grow with every notification, even when the tool's does not.
        self.sent = (self.sent + 1.0).max(done as f64);
        let mut p = ProgressNotificationParam::new(token, self.sent).with_message(message);
        if total as f64 >= self.sent {
            p = p.with_total(total as f64);
        }
        if let Err(e) = self.peer.notify_progress(p).await {
            tracing::debug!(error = %e, "mcp progress not sent");
        }
    }
}

fn failed(e: &ToolError) -> Result<CallToolResponse, ErrorData> {
    Ok(tools::error(e).into())
}

/// Runs `tools/call`.
pub(super) async fn call_tool(
    server: &McpServer,
    params: CallToolRequestParams,
    ctx: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let caller = server.caller(&ctx)?;
    let registry = ToolRegistry::global()
        .map_err(|e| ErrorData::internal_error(format!("tool registry: {e}"), None))?;
    let arguments = serde_json::Value::Object(params.arguments.clone().unwrap_or_default());
    let mut call = match registry.parse_call(&params.name, &arguments.to_string()) {
        Ok(c) => c,
        Err(e) if e.kind == ArgErrorKind::UnknownTool => {
            return Err(ErrorData::invalid_params(e.to_string(), None));
        }
        Err(e) => return failed(&e.to_tool_error()),
    };
    // Context the client could not take whole is not worth retrieving.
    if let Some(tool_call::Args::RequestCodeContext(a)) = &mut call.args
        && let Some(budget) = a.token_budget.as_mut()
    {
        *budget = (*budget).min((server.options.max_result_tokens / 2).max(64));
    }
    let requested = server.requested_workspace(&ctx);
    let workspace_root = match server.workspace_root(&caller, requested.as_deref()).await {
        Ok(root) => root,
        Err(s) => return failed(&tools::status_error(&s)),
    };
    let resume = params
        .request_state
        .as_deref()
        .map(Resume::decode)
        .transpose()?;
    let correlation = Correlation {
        session_id: super::MCP_SESSION.to_owned(),
        request_id: resume.as_ref().map_or_else(
            || uuid::Uuid::now_v7().to_string(),
            |r| r.request_id.clone(),
        ),
        call_id: resume
            .as_ref()
            .map_or_else(|| uuid::Uuid::now_v7().to_string(), |r| r.call_id.clone()),
        ..Correlation::default()
    };
    let ask = match &resume {
        // The answer of an `input_required` round: decide, then take the outcome.
        Some(r) => {
            let answer = params
                .input_responses
                .as_ref()
                .map_or(Answer::Undecided, |i| {
                    Answer::from_responses(i, &client_name(&ctx))
                });
            if let Err(s) =
                approval::decide(server.backend.as_ref(), &caller, &r.proposal_id, answer).await
            {
                return failed(&tools::status_error(&s));
            }
            Ask::Wait
        }
        None => approval::how_to_ask(&ctx),
    };
    let request = ExecuteToolRequest {
        correlation: Some(correlation),
        workspace_root,
        call: Some(call),
        user_message: String::new(),
        timeout_ms: 0,
    };
    let events = match server.backend.execute_tool(&caller, request).await {
        Ok(events) => events,
        Err(s) => return failed(&tools::status_error(&s)),
    };
    run(server, &caller, &ctx, events, ask).await
}

/// Waits on `f` if there is one.
async fn maybe(f: &mut Option<Elicitation>) -> Result<ElicitResult, ServiceError> {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

fn waiting_note(p: &EditProposal) -> String {
    format!(
        "waiting for a person to decide proposal {id}: `ploke edits approve {id}` or `ploke edits deny {id}`",
        id = p.proposal_id
    )
}

/// Follows the call's events to its outcome.
async fn run(
    server: &McpServer,
    caller: &Caller,
    ctx: &RequestContext<RoleServer>,
    mut events: ToolEvents,
    ask: Ask,
) -> Result<CallToolResponse, ErrorData> {
    use execute_tool_event::Event;
    let max_tokens = server.options.max_result_tokens;
    let mut progress = Progress {
        token: ctx.meta.get_progress_token(),
        peer: ctx.peer.clone(),
        sent: 0.0,
    };
    let mut waiting: Option<EditProposal> = None;
    let mut inline: Option<Elicitation> = None;
    let mut beat = tokio::time::interval(HEARTBEAT);
    beat.reset();
    loop {
        tokio::select! {
            () = ctx.ct.cancelled() => {
                return failed(&ToolError {
                    code: ToolErrorCode::Cancelled as i32,
                    message: "the client cancelled the call".to_owned(),
                    ..ToolError::default()
                });
            }
            event = events.next() => match event {
                None => {
                    return failed(&ToolError {
                        code: ToolErrorCode::Internal as i32,
                        message: "the tool's stream ended without an outcome".to_owned(),
                        ..ToolError::default()
                    });
                }
                Some(Err(s)) => return failed(&tools::status_error(&s)),
                Some(Ok(e)) => match e.event {
                    Some(Event::Progress(p)) => progress.send(p.done, p.total, p.message).await,
                    // The deployment's auto_approve policy decides it: nobody is asked (an
                    // answer would race the policy's decision); the outcome follows.
                    Some(Event::EditProposed(p)) if p.by_policy => {}
                    Some(Event::EditProposed(p)) => {
                        match ask {
                            Ask::InputRequired => {
                                let resume = Resume {
                                    request_id: p.correlation.clone().unwrap_or_default().request_id,
                                    call_id: p.correlation.clone().unwrap_or_default().call_id,
                                    proposal_id: p.proposal_id.clone(),
                                };
                                let asking = approval::input_required(&p, &resume)?;
                                // The call stays open so the proposal stays pending until the
                                // client answers (or it expires); its outcome is taken by the
                                // retry.
                                tokio::spawn(async move { while events.next().await.is_some() {} });
                                return Ok(asking.into());
                            }
                            Ask::Inline => {
                                let peer = ctx.peer.clone();
                                let params = approval::elicitation(&p)?;
                                inline = Some(Box::pin(async move {
                                    peer.create_elicitation(params).await
                                }));
                            }
                            Ask::Wait => {}
                        }
                        progress.send(0, 0, waiting_note(&p)).await;
                        waiting = Some(p);
                    }
                    Some(Event::Result(r)) => return Ok(tools::result(&r, max_tokens).into()),
                    Some(Event::Error(e)) => return failed(&e),
                    None => {}
                },
            },
            answer = maybe(&mut inline) => {
                inline = None;
                let Some(p) = &waiting else { continue };
                match answer {
                    Ok(r) => {
                        let answer = Answer::from_result(&r, &client_name(ctx));
                        if let Err(s) =
                            approval::decide(server.backend.as_ref(), caller, &p.proposal_id, answer).await
                        {
                            return failed(&tools::status_error(&s));
                        }
                    }
                    Err(e) => tracing::info!(error = %e, proposal_id = p.proposal_id, "mcp elicitation failed; waiting for ploke edits"),
                }
            }
            _ = beat.tick(), if waiting.is_some() => {
                if let Some(p) = &waiting {
                    progress.send(0, 0, waiting_note(p)).await;
                }
            }
        }
    }
}
