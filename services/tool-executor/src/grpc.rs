//! The gRPC adapter of tool-executor: validates requests, holds typed tool arguments to the
//! rules the model's JSON is parsed with, calls the domain and maps [`ExecutorError`] to
//! `tonic::Status` exhaustively.

use std::pin::Pin;
use std::time::Duration;

use ploke_proto::registry::{ToolRegistry, args_tool_name};
use ploke_proto::status::{at_most, id_text, invalid_argument, not_found};
use ploke_proto::tools::v1::tool_executor_server::ToolExecutor;
use ploke_proto::tools::v1::{self as pb};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::edits::{Decision, StoreError};
use crate::error::ExecutorError;
use crate::service::{ExecuteRequest, ToolService};
use crate::tools::ToolEvent;

/// Largest ListEdits limit.
const LIST_MAX: u32 = 1000;
/// Longest tool-call id (providers' ids run to ~40 bytes).
const MAX_CALL_ID: usize = 256;
/// Longest reason given with a decision.
const MAX_REASON: usize = 4096;
const LIST_DEFAULT: u32 = 100;

/// The tonic service of tool-executor.
#[derive(Debug, Clone)]
pub(crate) struct ToolExecutorGrpc {
    service: ToolService,
    /// The largest reply this service sends (`max_message_bytes`).
    max_reply_bytes: usize,
}

impl ToolExecutorGrpc {
    pub(crate) fn new(service: ToolService, max_reply_bytes: usize) -> Self {
        Self {
            service,
            max_reply_bytes,
        }
    }
}

/// Room kept in a reply for its framing and the fields around the proposals.
const REPLY_MARGIN: usize = 64 * 1024;

/// The newest proposals that fit in `max_bytes` once encoded, and whether any were left out.
fn fitting(
    mut proposals: Vec<pb::EditProposal>,
    max_bytes: usize,
) -> (Vec<pb::EditProposal>, bool) {
    let budget = max_bytes.saturating_sub(REPLY_MARGIN);
    let mut used = 0usize;
    let fit = proposals
        .iter()
        .take_while(|p| {
            let len = prost::Message::encoded_len(*p);
            // Its tag and length prefix.
            used += len + prost::length_delimiter_len(len) + 1;
            used <= budget
        })
        .count();
    let truncated = fit < proposals.len();
    proposals.truncate(fit);
    (proposals, truncated)
}

fn to_status(e: ExecutorError) -> Status {
    match e {
        ExecutorError::Workspace(w) => w.to_status(),
        ExecutorError::NoSuchProposal(id) => not_found(format!("proposal {id}")),
        e @ ExecutorError::NotPending { .. } => Status::failed_precondition(e.to_string()),
        e @ ExecutorError::BadEditIndex { .. } => invalid_argument("edit_indices", e),
        ExecutorError::Store(e @ StoreError::Unavailable(_)) => Status::unavailable(e.shown()),
        e @ ExecutorError::Store(_) => Status::internal(e.to_string()),
        ExecutorError::Denied(d) => d.to_status(),
        ExecutorError::Internal(m) => Status::internal(m),
    }
}

fn to_wire(event: ToolEvent) -> pb::ExecuteToolEvent {
    use pb::execute_tool_event::Event;
    let event = match event {
        ToolEvent::Progress(p) => Event::Progress(p),
        ToolEvent::EditProposed(p) => Event::EditProposed(*p),
        ToolEvent::Finished(outcome) => match *outcome {
            Ok(result) => Event::Result(result),
            Err(failure) => Event::Error(failure.into()),
        },
    };
    pb::ExecuteToolEvent { event: Some(event) }
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
        let correlation = r.correlation.unwrap_or_default();
        if correlation.call_id.trim().is_empty() {
            return Err(invalid_argument("correlation.call_id", "must be set"));
        }
        id_text("correlation.call_id", &correlation.call_id, MAX_CALL_ID)?;
        for (field, value) in [
            ("correlation.session_id", &correlation.session_id),
            ("correlation.request_id", &correlation.request_id),
            ("correlation.parent_id", &correlation.parent_id),
        ] {
            id_text(field, value, ploke_proto::status::MAX_ID_BYTES)?;
        }
        let Some(call) = r.call.and_then(|c| c.args) else {
            return Err(invalid_argument("call", "must hold one tool's arguments"));
        };
        // The same rules as the model's JSON arguments (counts, lengths, ranges): a refusal is
        // the tool's one `error` event, exactly what the model gets for those arguments.
        let registry = ToolRegistry::global().map_err(|e| Status::internal(e.to_string()))?;
        if let Err(e) = registry.check_args(&call) {
            tracing::info!(
                call_id = %correlation.call_id,
                tool = args_tool_name(&call),
                field = %e.field,
                error = %e.message,
                "tool arguments refused"
            );
            let refused = pb::ExecuteToolEvent {
                event: Some(pb::execute_tool_event::Event::Error(e.to_tool_error())),
            };
            return Ok(Response::new(Box::pin(tokio_stream::once(Ok(refused)))));
        }
        // A workspace added on rag-search a moment ago is learnt before the call resolves it.
        self.service.learn_workspace(&r.workspace_root).await;
        let rx = self
            .service
            .execute(ExecuteRequest {
                correlation,
                workspace_root: r.workspace_root,
                call,
                user_message: r.user_message,
                timeout: (r.timeout_ms > 0).then(|| Duration::from_millis(u64::from(r.timeout_ms))),
            })
            .map_err(to_status)?;
        let stream = ReceiverStream::new(rx).map(|e| Ok(to_wire(e)));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn list_edits(
        &self,
        request: Request<pb::ListEditsRequest>,
    ) -> Result<Response<pb::ListEditsResponse>, Status> {
        let r = request.into_inner();
        let limit = match r.limit {
            0 => LIST_DEFAULT,
            1..=LIST_MAX => r.limit,
            n => {
                return Err(invalid_argument(
                    "limit",
                    format!("must be between 1 and {LIST_MAX} (0 = {LIST_DEFAULT}), got {n}"),
                ));
            }
        };
        id_text(
            "session_id",
            &r.session_id,
            ploke_proto::status::MAX_ID_BYTES,
        )?;
        let mut states = Vec::with_capacity(r.states.len());
        for (i, s) in r.states.iter().enumerate() {
            match pb::ProposalState::try_from(*s) {
                Ok(pb::ProposalState::Unspecified) => {}
                Ok(state) => states.push(state),
                Err(_) => {
                    return Err(invalid_argument(
                        &format!("states[{i}]"),
                        format!("{s} is not a ProposalState"),
                    ));
                }
            }
        }
        let proposals = self
            .service
            .list_edits(&r.session_id, r.all_principals, &states, limit)
            .await
            .map_err(to_status)?;
        let (proposals, truncated) = fitting(proposals, self.max_reply_bytes);
        Ok(Response::new(pb::ListEditsResponse {
            proposals,
            truncated,
        }))
    }

    async fn decide_edit(
        &self,
        request: Request<pb::DecideEditRequest>,
    ) -> Result<Response<pb::DecideEditResponse>, Status> {
        let r = request.into_inner();
        let id = ploke_proto::status::id("proposal_id", &r.proposal_id)?;
        at_most("reason", &r.reason, MAX_REASON)?;
        let approve = match pb::Decision::try_from(r.decision) {
            Ok(pb::Decision::Approve) => true,
            Ok(pb::Decision::Deny) => false,
            Ok(pb::Decision::Unspecified) | Err(_) => {
                return Err(invalid_argument(
                    "decision",
                    "must be DECISION_APPROVE or DECISION_DENY",
                ));
            }
        };
        let decision = Decision {
            approve,
            edit_indices: r.edit_indices,
            reason: r.reason.clone(),
            by_policy: false,
        };
        let proposal = self.service.decide(id, decision).await.map_err(to_status)?;
        let deliveries = if proposal.in_overlay {
            self.service.delivery(id).await.map_err(to_status)?.1
        } else {
            Vec::new()
        };
        Ok(Response::new(pb::DecideEditResponse {
            proposal: Some(proposal),
            deliveries,
        }))
    }

    async fn get_edit_delivery(
        &self,
        request: Request<pb::GetEditDeliveryRequest>,
    ) -> Result<Response<pb::GetEditDeliveryResponse>, Status> {
        let r = request.into_inner();
        let id = ploke_proto::status::id("proposal_id", &r.proposal_id)?;
        let (proposal, deliveries) = self.service.delivery(id).await.map_err(to_status)?;
        Ok(Response::new(pb::GetEditDeliveryResponse {
            proposal: Some(proposal),
            deliveries,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proposal(id: &str, bytes: usize) -> pb::EditProposal {
        pb::EditProposal {
            proposal_id: id.into(),
            state_reason: "x".repeat(bytes),
            ..Default::default()
        }
    }

    #[test]
    fn a_listing_keeps_the_newest_proposals_that_fit_in_one_reply() {
        let mb = 1024 * 1024;
        let listed = vec![
            proposal("newest", 5 * mb),
            proposal("middle", 5 * mb),
            proposal("oldest", 5 * mb),
        ];
        let (kept, truncated) = fitting(listed.clone(), 16 * mb);
        assert_eq!(
            (
                kept.iter()
                    .map(|p| p.proposal_id.as_str())
                    .collect::<Vec<_>>(),
                truncated
            ),
            (vec!["newest", "middle", "oldest"], false)
        );
        let (kept, truncated) = fitting(listed.clone(), 12 * mb);
        assert_eq!(
            (
                kept.iter()
                    .map(|p| p.proposal_id.as_str())
                    .collect::<Vec<_>>(),
                truncated
            ),
            (vec!["newest", "middle"], true)
        );
        let reply = pb::ListEditsResponse {
            proposals: kept,
            truncated,
        };
        assert!(prost::Message::encoded_len(&reply) <= 12 * mb);
        // One too large for any reply leaves an empty page that says so.
        let (kept, truncated) = fitting(listed, 4 * mb);
        assert_eq!((kept.len(), truncated), (0, true));
    }
}
