//! The gateway over gRPC as the MCP server's backend (`ploke mcp`): every call carries the
//! developer's token, and the MCP request's trace context goes on as `traceparent`.

use ploke_gateway::mcp::backend::{Backend, Call, Caller, ToolEvents};
use ploke_proto::rag::v1 as rag;
use ploke_proto::tools::v1 as tools;
use tonic::Request;
use tonic::metadata::MetadataValue;

use crate::gateway::Gateway;

/// A gateway reached over gRPC.
#[derive(Debug, Clone)]
pub struct Remote {
    gateway: Gateway,
}

impl Remote {
    /// Calls through `gateway`.
    pub fn new(gateway: Gateway) -> Self {
        Self { gateway }
    }
}

/// `message` with the caller's trace: this process's span when it exports traces, else the
/// `traceparent` the MCP client sent, as it was.
fn traced<T>(caller: &Caller, name: &'static str, message: T) -> Request<T> {
    let mut request = Request::new(message);
    let span = caller.span(name);
    let mut headers = http::HeaderMap::new();
    if ploke_runtime::trace_context::inject(&span, &mut headers) {
        for key in [
            ploke_runtime::trace_context::TRACEPARENT,
            ploke_runtime::trace_context::TRACESTATE,
        ] {
            if let Some(v) = headers
                .get(key)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| MetadataValue::try_from(v).ok())
            {
                request.metadata_mut().insert(key, v);
            }
        }
        return request;
    }
    for (key, value) in [
        (
            ploke_runtime::trace_context::TRACEPARENT,
            &caller.traceparent,
        ),
        (ploke_runtime::trace_context::TRACESTATE, &caller.tracestate),
    ] {
        if let Some(v) = value
            .as_deref()
            .and_then(|v| MetadataValue::try_from(v).ok())
        {
            request.metadata_mut().insert(key, v);
        }
    }
    request
}

impl Backend for Remote {
    fn list_tools<'a>(&'a self, caller: &'a Caller) -> Call<'a, Vec<tools::ToolDefinition>> {
        let mut g = self.gateway.clone();
        Box::pin(async move {
            let r = g
                .list_tools(traced(caller, "tools/list", tools::ListToolsRequest {}))
                .await?;
            Ok(r.into_inner().tools)
        })
    }

    fn execute_tool<'a>(
        &'a self,
        caller: &'a Caller,
        request: tools::ExecuteToolRequest,
    ) -> Call<'a, ToolEvents> {
        let mut g = self.gateway.clone();
        Box::pin(async move {
            let r = g
                .execute_tool(traced(caller, "tools/call", request))
                .await?;
            Ok(Box::pin(r.into_inner()) as ToolEvents)
        })
    }

    fn decide_edit<'a>(
        &'a self,
        caller: &'a Caller,
        request: tools::DecideEditRequest,
    ) -> Call<'a, tools::DecideEditResponse> {
        let mut g = self.gateway.clone();
        Box::pin(async move {
            Ok(g.decide_edit(traced(caller, "decide_edit", request))
                .await?
                .into_inner())
        })
    }

    fn list_workspaces<'a>(&'a self, caller: &'a Caller) -> Call<'a, Vec<rag::Workspace>> {
        let mut g = self.gateway.clone();
        Box::pin(async move {
            let r = g
                .list_workspaces(traced(
                    caller,
                    "list_workspaces",
                    rag::ListWorkspacesRequest {},
                ))
                .await?;
            Ok(r.into_inner().workspaces)
        })
    }

    fn list_files<'a>(
        &'a self,
        caller: &'a Caller,
        request: rag::ListFilesRequest,
    ) -> Call<'a, rag::ListFilesResponse> {
        let mut g = self.gateway.clone();
        Box::pin(async move {
            Ok(g.list_files(traced(caller, "resources/list", request))
                .await?
                .into_inner())
        })
    }

    fn index_status<'a>(
        &'a self,
        caller: &'a Caller,
        request: rag::IndexStatusRequest,
    ) -> Call<'a, rag::IndexStatusResponse> {
        let mut g = self.gateway.clone();
        Box::pin(async move {
            Ok(g.index_status(traced(caller, "index_status", request))
                .await?
                .into_inner())
        })
    }
}
