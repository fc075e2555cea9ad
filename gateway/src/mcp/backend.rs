//! What the MCP server calls: the gateway's own RPCs, reached in the gateway's process (the
//! `/mcp` endpoint, as the authenticated principal) or over gRPC (`ploke mcp`, with the
//! caller's token). Either way every call goes through the gateway's checks and audit trail.

use std::future::Future;
use std::pin::Pin;

use futures::Stream;
use ploke_proto::gateway::v1::gateway_server::Gateway;
use ploke_proto::rag::v1 as rag;
use ploke_proto::tools::v1 as tools;
use ploke_runtime::principal::{self, Principal};
use tonic::{Request, Status};
use tracing::Instrument as _;

use crate::grpc::GatewayGrpc;

/// A boxed backend call.
pub type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T, Status>> + Send + 'a>>;

/// The events of one tool call.
pub type ToolEvents = Pin<Box<dyn Stream<Item = Result<tools::ExecuteToolEvent, Status>> + Send>>;

/// Who an MCP request is for and the trace it continues.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// The principal the HTTP endpoint authenticated; `None` over gRPC (the token travels).
    pub principal: Option<Principal>,
    /// The request's `_meta.traceparent`.
    pub traceparent: Option<String>,
    /// The request's `_meta.tracestate`.
    pub tracestate: Option<String>,
}

impl Caller {
    /// The span a call runs in: a child of the caller's trace when it sent one.
    pub fn span(&self, name: &'static str) -> tracing::Span {
        let span = tracing::info_span!("mcp", otel.name = name, enduser.id = tracing::field::Empty);
        if let Some(p) = &self.principal {
            span.record("enduser.id", p.name.as_str());
        }
        if let Some(tp) = &self.traceparent {
            ploke_runtime::trace_context::set_remote_parent(&span, tp, self.tracestate.as_deref());
        }
        span
    }
}

/// The gateway RPCs the MCP server uses.
pub trait Backend: Send + Sync + 'static {
    /// The tool catalogue the caller may use.
    fn list_tools<'a>(&'a self, caller: &'a Caller) -> Call<'a, Vec<tools::ToolDefinition>>;
    /// Runs one tool.
    fn execute_tool<'a>(
        &'a self,
        caller: &'a Caller,
        request: tools::ExecuteToolRequest,
    ) -> Call<'a, ToolEvents>;
    /// Decides a staged edit.
    fn decide_edit<'a>(
        &'a self,
        caller: &'a Caller,
        request: tools::DecideEditRequest,
    ) -> Call<'a, tools::DecideEditResponse>;
    /// The workspaces the caller may use.
    fn list_workspaces<'a>(&'a self, caller: &'a Caller) -> Call<'a, Vec<rag::Workspace>>;
    /// One page of a workspace's indexed files.
    fn list_files<'a>(
        &'a self,
        caller: &'a Caller,
        request: rag::ListFilesRequest,
    ) -> Call<'a, rag::ListFilesResponse>;
    /// A workspace's index state.
    fn index_status<'a>(
        &'a self,
        caller: &'a Caller,
        request: rag::IndexStatusRequest,
    ) -> Call<'a, rag::IndexStatusResponse>;
}

/// The gateway's RPCs in its own process, run as the caller's principal.
#[derive(Debug, Clone)]
pub struct InProcess {
    grpc: GatewayGrpc,
}

impl InProcess {
    pub(crate) fn new(grpc: GatewayGrpc) -> Self {
        Self { grpc }
    }

    fn run<'a, T: Send + 'a>(
        caller: &'a Caller,
        name: &'static str,
        fut: impl Future<Output = Result<T, Status>> + Send + 'a,
    ) -> Call<'a, T> {
        let span = caller.span(name);
        Box::pin(principal::scope(caller.principal.clone(), fut).instrument(span))
    }
}

impl Backend for InProcess {
    fn list_tools<'a>(&'a self, caller: &'a Caller) -> Call<'a, Vec<tools::ToolDefinition>> {
        Self::run(caller, "tools/list", async move {
            let r = self
                .grpc
                .list_tools(Request::new(tools::ListToolsRequest {}))
                .await?;
            Ok(r.into_inner().tools)
        })
    }

    fn execute_tool<'a>(
        &'a self,
        caller: &'a Caller,
        request: tools::ExecuteToolRequest,
    ) -> Call<'a, ToolEvents> {
        Self::run(caller, "tools/call", async move {
            let r = self.grpc.execute_tool(Request::new(request)).await?;
            Ok(Box::pin(r.into_inner()) as ToolEvents)
        })
    }

    fn decide_edit<'a>(
        &'a self,
        caller: &'a Caller,
        request: tools::DecideEditRequest,
    ) -> Call<'a, tools::DecideEditResponse> {
        Self::run(caller, "decide_edit", async move {
            Ok(self
                .grpc
                .decide_edit(Request::new(request))
                .await?
                .into_inner())
        })
    }

    fn list_workspaces<'a>(&'a self, caller: &'a Caller) -> Call<'a, Vec<rag::Workspace>> {
        Self::run(caller, "list_workspaces", async move {
            let r = self
                .grpc
                .list_workspaces(Request::new(rag::ListWorkspacesRequest {}))
                .await?;
            Ok(r.into_inner().workspaces)
        })
    }

    fn list_files<'a>(
        &'a self,
        caller: &'a Caller,
        request: rag::ListFilesRequest,
    ) -> Call<'a, rag::ListFilesResponse> {
        Self::run(caller, "resources/list", async move {
            Ok(self
                .grpc
                .list_files(Request::new(request))
                .await?
                .into_inner())
        })
    }

    fn index_status<'a>(
        &'a self,
        caller: &'a Caller,
        request: rag::IndexStatusRequest,
    ) -> Call<'a, rag::IndexStatusResponse> {
        Self::run(caller, "index_status", async move {
            Ok(self
                .grpc
                .index_status(Request::new(request))
                .await?
                .into_inner())
        })
    }
}
