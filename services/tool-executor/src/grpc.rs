//! The gRPC adapter of tool-executor: validates requests, calls the domain and maps
//! [`ToolError`] to `tonic::Status` exhaustively.

use std::pin::Pin;

use ploke_proto::status::{invalid_argument, not_found, not_yet};
use ploke_proto::tools::v1::tool_executor_server::ToolExecutor;
use ploke_proto::tools::v1::{self as pb};
use tonic::{Request, Response, Status};

use crate::error::ToolError;
use crate::service::ToolService;

/// The tonic service of tool-executor.
#[derive(Debug, Clone)]
pub struct ToolExecutorGrpc {
    service: ToolService,
}

impl ToolExecutorGrpc {
    pub fn new(service: ToolService) -> Self {
        Self { service }
    }
}

fn to_status(method: &str, e: ToolError) -> Status {
    match e {
        ToolError::Workspace(w) => w.to_status(),
        ToolError::NoSuchProposal(id) => not_found(format!("proposal {id}")),
        ToolError::NotYet(capability) => not_yet(method, capability),
    }
}

type EventStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::ExecuteToolEvent, Status>> + Send>>;

#[tonic::async_trait]
impl ToolExecutor for ToolExecutorGrpc {
    async fn list_tools(
        &self,
        _request: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        Ok(Response::new(pb::ListToolsResponse {
            tools: self.service.tools(),
        }))
    }

    type ExecuteToolStream = EventStream;

    async fn execute_tool(
        &self,
        request: Request<pb::ExecuteToolRequest>,
    ) -> Result<Response<Self::ExecuteToolStream>, Status> {
        let r = request.into_inner();
        let call_id = r
            .correlation
            .as_ref()
            .map(|c| c.call_id.as_str())
            .unwrap_or("");
        if call_id.is_empty() {
            return Err(invalid_argument("correlation.call_id", "must be set"));
        }
        let Some(call) = r.call.as_ref().filter(|c| c.args.is_some()) else {
            return Err(invalid_argument("call", "must hold one tool's arguments"));
        };
        self.service
            .execute(&r.workspace_root, call)
            .map_err(|e| to_status("ExecuteTool", e))?;
        Err(Status::internal("tool finished without a result stream"))
    }

    async fn list_edits(
        &self,
        request: Request<pb::ListEditsRequest>,
    ) -> Result<Response<pb::ListEditsResponse>, Status> {
        let r = request.into_inner();
        if r.limit > 1000 {
            return Err(invalid_argument(
                "limit",
                format!("must be between 1 and 1000 (0 = 100), got {}", r.limit),
            ));
        }
        self.service
            .list_edits()
            .map_err(|e| to_status("ListEdits", e))?;
        Err(Status::internal("listing produced no answer"))
    }

    async fn decide_edit(
        &self,
        request: Request<pb::DecideEditRequest>,
    ) -> Result<Response<pb::DecideEditResponse>, Status> {
        let r = request.into_inner();
        if r.proposal_id.trim().is_empty() {
            return Err(invalid_argument("proposal_id", "must not be empty"));
        }
        match pb::Decision::try_from(r.decision) {
            Ok(pb::Decision::Approve | pb::Decision::Deny) => {}
            Ok(pb::Decision::Unspecified) | Err(_) => {
                return Err(invalid_argument(
                    "decision",
                    "must be DECISION_APPROVE or DECISION_DENY",
                ));
            }
        }
        self.service
            .decide(&r.proposal_id)
            .map_err(|e| to_status("DecideEdit", e))?;
        Err(Status::internal("decision produced no answer"))
    }
}
