//! The gRPC adapter of llm-session: validates requests, calls the domain and maps
//! [`SessionError`] to `tonic::Status` exhaustively.

use std::pin::Pin;

use ploke_proto::session::v1::llm_session_server::LlmSession;
use ploke_proto::session::v1::{self as pb};
use ploke_proto::status::{at_most, id_text, invalid_argument, not_found};
use ploke_runtime::principal;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::error::SessionError;
use crate::service::{NewSession, SessionService};
use crate::store::{PageCursor, StoreError};

/// Longest client_request_id accepted.
const MAX_CLIENT_REQUEST_ID: usize = 200;
/// Longest session title.
const MAX_TITLE: usize = 500;
/// Longest provider or model name (model ids run to ~100 bytes: `accounts/…/models/…`).
const MAX_NAME: usize = 256;

/// The tonic service of llm-session.
#[derive(Debug, Clone)]
pub(crate) struct LlmSessionGrpc {
    service: SessionService,
}

impl LlmSessionGrpc {
    pub(crate) fn new(service: SessionService) -> Self {
        Self { service }
    }
}

fn to_status(e: SessionError) -> Status {
    match e {
        SessionError::Workspace(w) => w.to_status(),
        e @ SessionError::UnknownProvider { .. } => invalid_argument("provider", e),
        e @ SessionError::NoProvider => Status::failed_precondition(e.to_string()),
        e @ SessionError::ProviderUnusable { .. } => Status::failed_precondition(e.to_string()),
        e @ SessionError::NoModel(_) => invalid_argument("model", e),
        SessionError::NoSuchSession(id) => not_found(format!("session {id}")),
        SessionError::Denied(d) => d.to_status(),
        e @ SessionError::Busy { .. } => Status::failed_precondition(e.to_string()),
        SessionError::Store(e) => store_status(&e, principal::sees_internals()),
        e @ SessionError::Task(_) => Status::internal(e.to_string()),
    }
}

/// UNAVAILABLE while storage is broken (the message names storage, and why only to a caller
/// who sees `internals`), INTERNAL otherwise.
fn store_status(e: &StoreError, internals: bool) -> Status {
    match e {
        StoreError::Unavailable(_) => Status::unavailable(e.shown_to(internals)),
        StoreError::Db(_) | StoreError::Corrupt(_) | StoreError::NotNext { .. } => {
            Status::internal(e.to_string())
        }
        StoreError::Busy { .. } => Status::failed_precondition(e.to_string()),
        StoreError::Superseded { .. } => Status::aborted(e.to_string()),
        StoreError::Deleted(_) => Status::not_found(e.to_string()),
    }
}

fn session_id(id: &str) -> Result<&str, Status> {
    ploke_proto::status::id("session_id", id)
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
        at_most("title", &r.title, MAX_TITLE)?;
        at_most("provider", r.provider.trim(), MAX_NAME)?;
        at_most("model", r.model.trim(), MAX_NAME)?;
        let session = self
            .service
            .create(NewSession {
                workspace_root: r.workspace_root,
                provider: r.provider.trim().to_owned(),
                model: r.model.trim().to_owned(),
                title: r.title,
            })
            .await
            .map_err(to_status)?;
        Ok(Response::new(session))
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let r = request.into_inner();
        let id = session_id(&r.session_id)?;
        Ok(Response::new(
            self.service.get(id).await.map_err(to_status)?,
        ))
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let r = request.into_inner();
        let limit = match r.limit {
            0 => 50,
            1..=1000 => r.limit,
            n => {
                return Err(invalid_argument(
                    "limit",
                    format!("must be between 1 and 1000 (0 = 50), got {n}"),
                ));
            }
        };
        let page = if r.page_token.is_empty() {
            None
        } else {
            Some(PageCursor::parse(&r.page_token).ok_or_else(|| {
                invalid_argument("page_token", "is not a token this service issued")
            })?)
        };
        let (sessions, next_page_token) = self
            .service
            .list(&r.workspace_root, r.all_principals, limit, page.as_ref())
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListSessionsResponse {
            sessions,
            next_page_token,
        }))
    }

    async fn send_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        let r = request.into_inner();
        let id = session_id(&r.session_id)?;
        if r.content.trim().is_empty() {
            return Err(invalid_argument("content", "must not be empty"));
        }
        let max = self.service.bounds().user_message;
        if r.content.len() > max {
            return Err(invalid_argument(
                "content",
                format!("must be at most {max} bytes, got {}", r.content.len()),
            ));
        }
        id_text(
            "client_request_id",
            &r.client_request_id,
            MAX_CLIENT_REQUEST_ID,
        )?;
        let response = self
            .service
            .send(id, &r.content, r.client_request_id.trim())
            .await
            .map_err(to_status)?;
        Ok(Response::new(response))
    }

    type StreamEventsStream = EventStream;

    async fn stream_events(
        &self,
        request: Request<pb::StreamEventsRequest>,
    ) -> Result<Response<Self::StreamEventsStream>, Status> {
        let r = request.into_inner();
        let id = session_id(&r.session_id)?;
        let rx = self
            .service
            .events(id, r.after_seq, !r.no_follow)
            .await
            .map_err(to_status)?;
        // Errors come after this call returned, outside its principal: decided now.
        let internals = principal::sees_internals();
        let stream =
            ReceiverStream::new(rx).map(move |e| e.map_err(|e| store_status(&e, internals)));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn cancel_turn(
        &self,
        request: Request<pb::CancelTurnRequest>,
    ) -> Result<Response<pb::CancelTurnResponse>, Status> {
        let r = request.into_inner();
        let id = session_id(&r.session_id)?;
        let (cancelled, parent_id) = self
            .service
            .cancel(id, &r.reason)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::CancelTurnResponse {
            cancelled,
            parent_id,
        }))
    }

    async fn delete_session(
        &self,
        request: Request<pb::DeleteSessionRequest>,
    ) -> Result<Response<pb::DeleteSessionResponse>, Status> {
        let r = request.into_inner();
        let id = session_id(&r.session_id)?;
        let events = self.service.delete(id).await.map_err(to_status)?;
        Ok(Response::new(pb::DeleteSessionResponse { events }))
    }

    async fn list_models(
        &self,
        _request: Request<pb::ListModelsRequest>,
    ) -> Result<Response<pb::ListModelsResponse>, Status> {
        Ok(Response::new(self.service.models()))
    }
}
