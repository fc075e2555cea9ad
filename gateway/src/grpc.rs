//! The Gateway service: forwards each RPC to its upstream and reports system status.

use std::pin::Pin;
use std::time::{Duration, Instant};

use ploke_proto::gateway::v1::gateway_server::Gateway;
use ploke_proto::gateway::v1::{GetSystemStatusRequest, ServiceStatus, ServingState, SystemStatus};
use ploke_proto::rag::v1 as rag;
use ploke_proto::session::v1 as session;
use ploke_proto::tools::v1 as tools;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;

use ploke_runtime::auth::Caller;

use crate::forward::{upstream_status, with_deadline};
use crate::upstreams::Upstreams;

/// A `workspace_root` too long for any service is refused here, before it is sent on.
fn check_root(workspace_root: &str) -> Result<(), Status> {
    ploke_runtime::workspaces::Workspaces::check_length(workspace_root).map_err(|e| e.to_status())
}

/// Refuses a call that needs an admin token to a caller without one.
fn admin_only<T>(request: &Request<T>, rpc: &str) -> Result<(), Status> {
    match request.extensions().get::<Caller>() {
        Some(Caller { admin: true }) => Ok(()),
        Some(Caller { admin: false }) | None => Err(Status::permission_denied(format!(
            "{rpc} needs an admin token (PLOKE_GATEWAY_ADMIN_TOKENS)"
        ))),
    }
}

/// Deadline of a forwarded AddWorkspace (a clone runs up to 600 s on rag-search).
const ADD_WORKSPACE_TIMEOUT: Duration = Duration::from_secs(630);

const SESSIONS: &str = "llm-session";
const TOOLS: &str = "tool-executor";
const RAG: &str = "rag-search";

/// The tonic service of the gateway.
#[derive(Debug, Clone)]
pub struct GatewayGrpc {
    upstreams: Upstreams,
    timeout: Duration,
    subscriber_buffer: usize,
    subscriber_grace: Duration,
}

impl GatewayGrpc {
    pub fn new(
        upstreams: Upstreams,
        timeout: Duration,
        subscriber_buffer: usize,
        subscriber_grace: Duration,
    ) -> Self {
        Self {
            upstreams,
            timeout,
            subscriber_buffer,
            subscriber_grace,
        }
    }
}

type Boxed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

macro_rules! unary {
    ($self:ident, $request:ident, $client:ident, $method:ident, $name:expr) => {{
        let mut client = $self.upstreams.$client.clone();
        client
            .$method(with_deadline($request.into_inner(), $self.timeout))
            .await
            .map(|r| Response::new(r.into_inner()))
            .map_err(|s| upstream_status($name, s))
    }};
}

#[tonic::async_trait]
impl Gateway for GatewayGrpc {
    async fn create_session(
        &self,
        request: Request<session::CreateSessionRequest>,
    ) -> Result<Response<session::Session>, Status> {
        check_root(&request.get_ref().workspace_root)?;
        unary!(self, request, sessions, create_session, SESSIONS)
    }

    async fn get_session(
        &self,
        request: Request<session::GetSessionRequest>,
    ) -> Result<Response<session::Session>, Status> {
        unary!(self, request, sessions, get_session, SESSIONS)
    }

    async fn list_sessions(
        &self,
        request: Request<session::ListSessionsRequest>,
    ) -> Result<Response<session::ListSessionsResponse>, Status> {
        check_root(&request.get_ref().workspace_root)?;
        unary!(self, request, sessions, list_sessions, SESSIONS)
    }

    async fn send_message(
        &self,
        request: Request<session::SendMessageRequest>,
    ) -> Result<Response<session::SendMessageResponse>, Status> {
        unary!(self, request, sessions, send_message, SESSIONS)
    }

    type StreamEventsStream = Boxed<session::SessionEvent>;

    async fn stream_events(
        &self,
        request: Request<session::StreamEventsRequest>,
    ) -> Result<Response<Self::StreamEventsStream>, Status> {
        let mut client = self.upstreams.sessions.clone();
        let r = request.into_inner();
        let after_seq = r.after_seq;
        let stream = client
            .stream_events(r)
            .await
            .map_err(|s| upstream_status(SESSIONS, s))?
            .into_inner();
        Ok(Response::new(crate::relay::relay(
            stream,
            self.subscriber_buffer,
            self.subscriber_grace,
            after_seq,
        )))
    }

    async fn cancel_turn(
        &self,
        request: Request<session::CancelTurnRequest>,
    ) -> Result<Response<session::CancelTurnResponse>, Status> {
        unary!(self, request, sessions, cancel_turn, SESSIONS)
    }

    async fn list_edits(
        &self,
        request: Request<tools::ListEditsRequest>,
    ) -> Result<Response<tools::ListEditsResponse>, Status> {
        unary!(self, request, tools, list_edits, TOOLS)
    }

    async fn decide_edit(
        &self,
        request: Request<tools::DecideEditRequest>,
    ) -> Result<Response<tools::DecideEditResponse>, Status> {
        unary!(self, request, tools, decide_edit, TOOLS)
    }

    async fn search(
        &self,
        request: Request<rag::SearchRequest>,
    ) -> Result<Response<rag::SearchResponse>, Status> {
        check_root(&request.get_ref().workspace_root)?;
        unary!(self, request, rag, search, RAG)
    }

    async fn add_workspace(
        &self,
        request: Request<rag::AddWorkspaceRequest>,
    ) -> Result<Response<rag::Workspace>, Status> {
        admin_only(&request, "AddWorkspace")?;
        // A clone may take minutes: the deadline is rag-search's own git limit and a margin.
        let mut client = self.upstreams.rag.clone();
        client
            .add_workspace(with_deadline(request.into_inner(), ADD_WORKSPACE_TIMEOUT))
            .await
            .map(|r| Response::new(r.into_inner()))
            .map_err(|s| upstream_status(RAG, s))
    }

    async fn list_workspaces(
        &self,
        request: Request<rag::ListWorkspacesRequest>,
    ) -> Result<Response<rag::ListWorkspacesResponse>, Status> {
        unary!(self, request, rag, list_workspaces, RAG)
    }

    async fn remove_workspace(
        &self,
        request: Request<rag::RemoveWorkspaceRequest>,
    ) -> Result<Response<rag::RemoveWorkspaceResponse>, Status> {
        admin_only(&request, "RemoveWorkspace")?;
        check_root(&request.get_ref().workspace_root)?;
        unary!(self, request, rag, remove_workspace, RAG)
    }

    async fn index_status(
        &self,
        request: Request<rag::IndexStatusRequest>,
    ) -> Result<Response<rag::IndexStatusResponse>, Status> {
        check_root(&request.get_ref().workspace_root)?;
        unary!(self, request, rag, index_status, RAG)
    }

    type IndexWorkspaceStream = Boxed<rag::IndexProgress>;

    async fn index_workspace(
        &self,
        request: Request<rag::IndexWorkspaceRequest>,
    ) -> Result<Response<Self::IndexWorkspaceStream>, Status> {
        check_root(&request.get_ref().workspace_root)?;
        let mut client = self.upstreams.rag.clone();
        let stream = client
            .index_workspace(request.into_inner())
            .await
            .map_err(|s| upstream_status(RAG, s))?
            .into_inner();
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_system_status(
        &self,
        _request: Request<GetSystemStatusRequest>,
    ) -> Result<Response<SystemStatus>, Status> {
        let probes = self.upstreams.all.iter().map(|u| async move {
            let started = Instant::now();
            let probe = tokio::time::timeout(
                Duration::from_secs(2),
                ploke_runtime::probe::health(u.channel.clone(), u.service),
            )
            .await;
            let latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            let (state, message) = match probe {
                Ok(Ok(ServingStatus::Serving)) => (ServingState::Serving, String::new()),
                Ok(Ok(other)) => (ServingState::NotServing, format!("{other:?}")),
                Ok(Err(status)) => (ServingState::Unreachable, status.message().to_owned()),
                Err(_) => (
                    ServingState::Unreachable,
                    "health check timed out after 2 s".to_owned(),
                ),
            };
            ServiceStatus {
                service: u.service.to_owned(),
                endpoint: u.url.clone(),
                state: state as i32,
                message,
                latency_us,
            }
        });
        let services = futures::future::join_all(probes).await;
        Ok(Response::new(SystemStatus {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            services,
            correlation: Some(ploke_runtime::correlation::current().into()),
        }))
    }
}
