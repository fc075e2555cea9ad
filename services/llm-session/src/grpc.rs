//! The gRPC adapter of llm-session: validates requests, calls the domain and maps
//! [`SessionError`] to `tonic::Status` exhaustively.

use std::pin::Pin;

use ploke_proto::session::v1::llm_session_server::LlmSession;
use ploke_proto::session::v1::{self as pb};
use ploke_proto::status::{invalid_argument, not_found, not_yet};
use tonic::{Request, Response, Status};

use crate::error::SessionError;
use crate::service::SessionService;

/// Longest user message accepted, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// The tonic service of llm-session.
#[derive(Debug, Clone)]
pub struct LlmSessionGrpc {
    service: SessionService,
}

impl LlmSessionGrpc {
    pub fn new(service: SessionService) -> Self {
        Self { service }
    }
}

fn to_status(method: &str, e: SessionError) -> Status {
    match e {
        SessionError::Workspace(w) => w.to_status(),
        e @ SessionError::UnknownProvider { .. } => invalid_argument("provider", e),
        SessionError::NoSuchSession(id) => not_found(format!("session {id}")),
        SessionError::NotYet(capability) => not_yet(method, capability),
    }
}

fn session_id(id: &str) -> Result<(), Status> {
    if id.trim().is_empty() {
        return Err(invalid_argument("session_id", "must not be empty"));
    }
    Ok(())
}

type EventStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::SessionEvent, Status>> + Send>>;

#[tonic::async_trait]
impl LlmSession for LlmSessionGrpc {
    async fn create_session(
        &self,
        request: Request<pb::CreateSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let r = request.into_inner();
        self.service
            .create(&r.workspace_root, &r.provider)
            .map_err(|e| to_status("CreateSession", e))?;
        Err(Status::internal("session creation produced no session"))
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let r = request.into_inner();
        session_id(&r.session_id)?;
        self.service
            .existing(&r.session_id)
            .map_err(|e| to_status("GetSession", e))?;
        Err(Status::internal("no session produced"))
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let r = request.into_inner();
        if r.limit > 1000 {
            return Err(invalid_argument(
                "limit",
                format!("must be between 1 and 1000 (0 = 50), got {}", r.limit),
            ));
        }
        self.service
            .list()
            .map_err(|e| to_status("ListSessions", e))?;
        Err(Status::internal("listing produced no answer"))
    }

    async fn send_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        let r = request.into_inner();
        session_id(&r.session_id)?;
        if r.content.trim().is_empty() {
            return Err(invalid_argument("content", "must not be empty"));
        }
        if r.content.len() > MAX_MESSAGE_BYTES {
            return Err(invalid_argument(
                "content",
                format!(
                    "must be at most {MAX_MESSAGE_BYTES} bytes, got {}",
                    r.content.len()
                ),
            ));
        }
        self.service
            .existing(&r.session_id)
            .map_err(|e| to_status("SendMessage", e))?;
        Err(Status::internal("no turn started"))
    }

    type StreamEventsStream = EventStream;

    async fn stream_events(
        &self,
        request: Request<pb::StreamEventsRequest>,
    ) -> Result<Response<Self::StreamEventsStream>, Status> {
        let r = request.into_inner();
        session_id(&r.session_id)?;
        self.service
            .existing(&r.session_id)
            .map_err(|e| to_status("StreamEvents", e))?;
        Err(Status::internal("no event stream produced"))
    }

    async fn cancel_turn(
        &self,
        request: Request<pb::CancelTurnRequest>,
    ) -> Result<Response<pb::CancelTurnResponse>, Status> {
        let r = request.into_inner();
        session_id(&r.session_id)?;
        self.service
            .existing(&r.session_id)
            .map_err(|e| to_status("CancelTurn", e))?;
        Err(Status::internal("cancel produced no answer"))
    }
}
