//! tool-executor's domain: the catalogue, running one tool call (timeouts, cancellation,
//! progress, exactly one outcome) and the edit RPCs. Nothing here knows gRPC.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ploke_proto::common::v1::Correlation;
use ploke_proto::registry::{ToolRegistry, tool_name};
use ploke_proto::tools::v1::{
    EditProposal, ProposalState, SideEffect, ToolDefinition, ToolErrorCode, ToolResult, tool_call,
    tool_result,
};
use ploke_runtime::blocking::BlockingPool;
use ploke_runtime::workspaces::Workspaces;
use ploke_runtime::{correlation, principal};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::edits::{Decision, EditCall, Edits};
use crate::error::ExecutorError;
use crate::failure::ToolFailure;
use crate::rag::Rag;
use crate::tools::{self, Limits, Progress, ReadContext, ToolEvent};

/// Events buffered per call before progress reports are dropped.
const EVENT_BUFFER: usize = 32;

/// One tool call to run.
#[derive(Debug, Clone)]
pub struct ExecuteRequest {
    /// The turn and call; `call_id` is set.
    pub correlation: Correlation,
    /// Requested workspace root (empty = default).
    pub workspace_root: String,
    /// The call.
    pub call: tool_call::Args,
    /// The turn's user message.
    pub user_message: String,
    /// Timeout for the tool's work; `None` = the tool's default.
    pub timeout: Option<Duration>,
}

/// The tool-executor domain service.
#[derive(Debug, Clone)]
pub struct ToolService {
    workspaces: Workspaces,
    registry: &'static ToolRegistry,
    rag: Rag,
    limits: Limits,
    edits: Edits,
    pool: BlockingPool,
    overlays: crate::overlay::Overlays,
    /// Whether a session's files are its overlay over the workspace (a shared deployment).
    session_overlays: bool,
}

impl ToolService {
    /// A service over `workspaces` calling rag-search through `rag`, staging edits in `edits`,
    /// running file work on `pool`.
    pub fn new(
        workspaces: Workspaces,
        registry: &'static ToolRegistry,
        rag: Rag,
        limits: Limits,
        edits: Edits,
        pool: BlockingPool,
    ) -> Self {
        Self {
            workspaces,
            registry,
            overlays: crate::overlay::Overlays::new(rag.clone()),
            session_overlays: false,
            rag,
            limits,
            edits,
            pool,
        }
    }

    /// Reads every session's files through its overlay (a shared deployment, where approved
    /// edits land in the overlay too: `[tool_executor] apply_to = "overlay"`).
    pub fn with_session_overlays(mut self, on: bool) -> Self {
        self.session_overlays = on;
        self
    }

    /// Asks rag-search about a workspace root not served here yet (added there at run time),
    /// so that the call naming it resolves; an unknown root stays unknown.
    pub async fn learn_workspace(&self, requested: &str) {
        let _known = self.workspaces.resolve_current(requested).await;
    }

    /// The pool file work runs on.
    pub fn pool(&self) -> &BlockingPool {
        &self.pool
    }

    /// Every tool.
    pub fn tools(&self) -> Vec<ToolDefinition> {
        let mut tools = self.registry.definitions();
        // A read-only principal (or a turn acting for one) is offered only what it may run.
        if principal::current().is_some_and(|p| p.read_only) {
            tools.retain(|t| t.side_effect() == SideEffect::ReadOnly);
        }
        tools
    }

    /// Starts one call. The receiver yields progress, at most one `EditProposed`, then exactly
    /// one `Finished`. Dropping the receiver cancels the call's work.
    pub fn execute(
        &self,
        request: ExecuteRequest,
    ) -> Result<mpsc::Receiver<ToolEvent>, ExecutorError> {
        let root = self.workspaces.resolve(&request.workspace_root)?;
        let (tx, rx) = mpsc::channel(EVENT_BUFFER);
        let name = tool_name(&ploke_proto::tools::v1::ToolCall {
            args: Some(request.call.clone()),
        })
        .unwrap_or("unknown");
        // The gateway refuses these too; a caller that reaches this service another way (with
        // the internal token and a read-only principal) is refused here all the same.
        if self.registry.get(name).map(|t| t.side_effect()) != Some(SideEffect::ReadOnly) {
            principal::require_writer(name)?;
        }
        let default_ms = self
            .registry
            .get(name)
            .map(|t| t.definition().default_timeout_ms)
            .unwrap_or(30_000);
        let timeout = request
            .timeout
            .unwrap_or(Duration::from_millis(u64::from(default_ms)));
        let c = &request.correlation;
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = %format!("execute_tool {name}"),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = name,
            gen_ai.tool.call.id = %c.call_id,
            ploke.session_id = %c.session_id,
            ploke.request_id = %c.request_id,
            ploke.parent_id = %c.parent_id,
            ploke.call_id = %c.call_id,
            enduser.id = %principal::owner_name(),
        );
        let scope =
            correlation::Correlation::from(request.correlation.clone()).or(&correlation::current());
        let service = self.clone();
        tokio::spawn(correlation::scope(
            scope,
            principal::scope(
                principal::current(),
                service
                    .run(root, request, name, timeout, tx)
                    .instrument(span),
            ),
        ));
        Ok(rx)
    }

    async fn run(
        self,
        root: PathBuf,
        request: ExecuteRequest,
        name: &'static str,
        timeout: Duration,
        tx: mpsc::Sender<ToolEvent>,
    ) {
        let started = Instant::now();
        let cancel = CancellationToken::new();
        let progress = Progress::new(tx.clone());
        let call_id = request.correlation.call_id.clone();
        let is_edit = matches!(
            request.call,
            tool_call::Args::ApplyCodeEdit(_) | tool_call::Args::CreateFile(_)
        );
        let work = self.work(root, request, timeout, cancel.clone(), progress);
        tokio::pin!(work);
        let outcome = if is_edit {
            // The approval wait has its own timeout inside.
            tokio::select! {
                r = &mut work => Some(r),
                () = tx.closed() => None,
            }
        } else {
            tokio::select! {
                r = &mut work => Some(r),
                () = tokio::time::sleep(timeout) => Some(Err(timed_out(timeout))),
                () = tx.closed() => None,
            }
        };
        cancel.cancel();
        let elapsed = started.elapsed();
        let ms = elapsed.as_millis() as u64;
        let label = match &outcome {
            None => "CANCELLED",
            Some(Ok(_)) => "OK",
            Some(Err(e)) => error_outcome(e.code),
        };
        ploke_runtime::metrics::record::tool_call(name, label, elapsed);
        match outcome {
            None => tracing::info!(
                call_id,
                tool = name,
                ms,
                "tool call cancelled by the caller"
            ),
            Some(outcome) => {
                match &outcome {
                    Ok(_) => tracing::info!(call_id, tool = name, ms, "tool finished"),
                    Err(e) => tracing::info!(call_id, tool = name, ms, error = %e, "tool failed"),
                }
                let _ = tx.send(ToolEvent::Finished(Box::new(outcome))).await;
            }
        }
    }

    async fn work(
        &self,
        root: PathBuf,
        request: ExecuteRequest,
        timeout: Duration,
        cancel: CancellationToken,
        progress: Progress,
    ) -> Result<ToolResult, ToolFailure> {
        use tool_call::Args;
        let session = request.correlation.session_id.clone();
        // In a shared deployment the tools that read files see the session's overlay
        // (rag-search answers the others for the session itself).
        let view = match &request.call {
            Args::ReadFile(_)
            | Args::ListDir(_)
            | Args::SearchCode(_)
            | Args::GetFileMetadata(_)
            | Args::ApplyCodeEdit(_)
            | Args::CreateFile(_)
                if self.session_overlays =>
            {
                self.overlays.view(&root, &session).await?
            }
            Args::ReadFile(_)
            | Args::ListDir(_)
            | Args::SearchCode(_)
            | Args::GetFileMetadata(_)
            | Args::ApplyCodeEdit(_)
            | Args::CreateFile(_)
            | Args::RequestCodeContext(_)
            | Args::CodeItemLookup(_) => None,
        };
        match request.call {
            call @ (tool_call::Args::ApplyCodeEdit(_) | tool_call::Args::CreateFile(_)) => {
                let is_create = matches!(call, tool_call::Args::CreateFile(_));
                let outcome = self
                    .edits
                    .stage_and_wait(EditCall {
                        root,
                        correlation: request.correlation,
                        args: call,
                        wait: request.timeout.map(|_| timeout),
                        progress,
                        view,
                    })
                    .await?;
                let result = if is_create {
                    tool_result::Result::CreateFile(outcome)
                } else {
                    tool_result::Result::ApplyCodeEdit(outcome)
                };
                Ok(ToolResult {
                    result: Some(result),
                })
            }
            call => {
                let ctx = ReadContext {
                    root,
                    limits: self.limits,
                    rag: self.rag.clone(),
                    user_message: request.user_message,
                    cancel,
                    progress,
                    pool: self.pool.clone(),
                    session,
                    view,
                };
                tools::run_read_only(ctx, call).await
            }
        }
    }

    /// Proposals, newest first: the caller's own, or (admins) every principal's.
    pub async fn list_edits(
        &self,
        session_id: &str,
        all_principals: bool,
        states: &[ProposalState],
        limit: u32,
    ) -> Result<Vec<EditProposal>, ExecutorError> {
        self.edits
            .list(session_id, all_principals, states, limit)
            .await
    }

    /// The files an applied proposal delivered to its session's overlay, with the proposal.
    pub async fn delivery(
        &self,
        proposal_id: &str,
    ) -> Result<(EditProposal, Vec<ploke_proto::tools::v1::FileDelivery>), ExecutorError> {
        self.edits.delivery(proposal_id).await
    }

    /// Decides a pending proposal. The decision runs in a task of its own, so that it goes to
    /// its end (files written, the outcome recorded, the waiting tool call told, the index
    /// refreshed) even when its caller goes away midway: a client's deadline never leaves an
    /// applied proposal whose tool call waits on until it expires.
    pub async fn decide(
        &self,
        proposal_id: &str,
        decision: Decision,
    ) -> Result<EditProposal, ExecutorError> {
        if decision.approve {
            principal::require_writer("approving an edit")?;
        }
        let edits = self.edits.clone();
        let id = proposal_id.to_owned();
        let principal = ploke_runtime::principal::current();
        let decided = async move { edits.decide(&id, decision).await };
        tokio::spawn(ploke_runtime::principal::scope(principal, decided).in_current_span())
            .await
            .map_err(|e| ExecutorError::Internal(format!("deciding {proposal_id}: {e}")))?
    }
}

fn timed_out(timeout: Duration) -> ToolFailure {
    ToolFailure::new(
        ToolErrorCode::Timeout,
        "",
        format!(
            "the tool ran longer than its {} ms timeout and was stopped",
            timeout.as_millis()
        ),
    )
    .hint("narrow the request (a path, a literal pattern, a smaller budget) and retry")
}

/// The `outcome` label of a tool call that failed with `code`: its name without the prefix.
fn error_outcome(code: ToolErrorCode) -> &'static str {
    code.as_str_name().trim_start_matches("TOOL_ERROR_CODE_")
}

/// Starts the tool-call counter of every tool in `registry` and every outcome at 0, so that the
/// first failure of a kind is seen by `rate()` like the next ones (`record::from_zero`).
pub fn count_tool_calls_from_zero(registry: &ToolRegistry) {
    let outcomes: Vec<&'static str> = ["OK", "CANCELLED"]
        .into_iter()
        .chain(
            (1..=i32::from(u8::MAX))
                .filter_map(|n| ToolErrorCode::try_from(n).ok())
                .map(error_outcome),
        )
        .collect();
    ploke_runtime::metrics::record::from_zero(
        ploke_runtime::metrics::record::TOOL_CALLS,
        registry.tools().iter().flat_map(|tool| {
            outcomes.iter().map(|outcome| {
                vec![
                    ("tool", tool.name().to_owned()),
                    ("outcome", (*outcome).to_owned()),
                ]
            })
        }),
    );
}
