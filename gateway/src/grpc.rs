//! The Gateway service: forwards each RPC to its upstream and reports system status.

use std::pin::Pin;
use std::time::Duration;

use ploke_proto::gateway::v1::gateway_server::Gateway;
use ploke_proto::gateway::v1::{GetSystemStatusRequest, SystemStatus};
use ploke_proto::rag::v1 as rag;
use ploke_proto::session::v1 as session;
use ploke_proto::tools::v1 as tools;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use ploke_runtime::principal;
use ploke_runtime::text::shown;

use crate::audit::{Subject, audited};
use crate::forward::{upstream_status, with_deadline};
use crate::upstreams::Upstreams;

/// A `workspace_root` too long for any service is refused here, before it is sent on.
fn check_root(workspace_root: &str) -> Result<(), Status> {
    ploke_runtime::workspaces::Workspaces::check_length(workspace_root).map_err(|e| e.to_status())
}

/// Refuses a call that needs an admin principal.
fn admin_only(rpc: &str) -> Result<(), Status> {
    principal::require_admin(rpc).map_err(|d| d.to_status())
}

/// Deadline of a forwarded AddWorkspace (a clone runs up to 600 s on rag-search).
const ADD_WORKSPACE_TIMEOUT: Duration = Duration::from_secs(630);

const SESSIONS: &str = "llm-session";
const TOOLS: &str = "tool-executor";
const RAG: &str = "rag-search";

/// The tonic service of the gateway.
#[derive(Debug, Clone)]
pub(crate) struct GatewayGrpc {
    pub(crate) upstreams: Upstreams,
    timeout: Duration,
    subscriber_buffer: usize,
    subscriber_grace: Duration,
    /// Whether calls are written to the audit trail (not for `ploke up`'s one local user).
    audit: bool,
}

impl GatewayGrpc {
    pub(crate) fn new(
        upstreams: Upstreams,
        timeout: Duration,
        subscriber_buffer: usize,
        subscriber_grace: Duration,
        audit: bool,
    ) -> Self {
        Self {
            upstreams,
            timeout,
            subscriber_buffer,
            subscriber_grace,
            audit,
        }
    }
}

type Boxed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

macro_rules! unary {
    ($self:ident, $message:expr, $client:ident, $method:ident, $name:expr) => {{
        let mut client = $self.upstreams.$client.clone();
        client
            .$method(with_deadline($message, $self.timeout))
            .await
            .map(|r| Response::new(r.into_inner()))
            .map_err(|s| upstream_status($name, s))
    }};
}

impl GatewayGrpc {
    /// The caller's session (llm-session answers NOT_FOUND for another principal's): the
    /// check before the developer's files go to rag-search. Only the session's owner sends
    /// them (an admin may read the session, never fill it with their own tree).
    async fn own_session(&self, session_id: &str) -> Result<session::Session, Status> {
        let request = session::GetSessionRequest {
            session_id: session_id.to_owned(),
        };
        let found: Result<Response<session::Session>, Status> =
            unary!(self, request, sessions, get_session, SESSIONS);
        let session = found?.into_inner();
        if let Some(p) = principal::current()
            && !p.is(&session.owner)
        {
            return Err(Status::permission_denied(format!(
                "only the owner of session {} sends its files",
                shown(session_id)
            )));
        }
        Ok(session)
    }
}

#[tonic::async_trait]
impl Gateway for GatewayGrpc {
    async fn create_session(
        &self,
        request: Request<session::CreateSessionRequest>,
    ) -> Result<Response<session::Session>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "CreateSession",
            Subject::workspace(&r.workspace_root.clone()),
            async {
                check_root(&r.workspace_root)?;
                unary!(self, r, sessions, create_session, SESSIONS)
            },
        )
        .await
    }

    async fn get_session(
        &self,
        request: Request<session::GetSessionRequest>,
    ) -> Result<Response<session::Session>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "GetSession",
            Subject::session(&r.session_id.clone()),
            async { unary!(self, r, sessions, get_session, SESSIONS) },
        )
        .await
    }

    async fn list_sessions(
        &self,
        request: Request<session::ListSessionsRequest>,
    ) -> Result<Response<session::ListSessionsResponse>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "ListSessions",
            Subject::workspace(&r.workspace_root.clone()),
            async {
                check_root(&r.workspace_root)?;
                unary!(self, r, sessions, list_sessions, SESSIONS)
            },
        )
        .await
    }

    async fn list_models(
        &self,
        request: Request<session::ListModelsRequest>,
    ) -> Result<Response<session::ListModelsResponse>, Status> {
        let r = request.into_inner();
        audited(self.audit, "ListModels", Subject::default(), async {
            unary!(self, r, sessions, list_models, SESSIONS)
        })
        .await
    }

    async fn send_message(
        &self,
        request: Request<session::SendMessageRequest>,
    ) -> Result<Response<session::SendMessageResponse>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "SendMessage",
            Subject::session(&r.session_id.clone()),
            async { unary!(self, r, sessions, send_message, SESSIONS) },
        )
        .await
    }

    type StreamEventsStream = Boxed<session::SessionEvent>;

    async fn stream_events(
        &self,
        request: Request<session::StreamEventsRequest>,
    ) -> Result<Response<Self::StreamEventsStream>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "StreamEvents",
            Subject::session(&r.session_id.clone()),
            async {
                let mut client = self.upstreams.sessions.clone();
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
            },
        )
        .await
    }

    async fn cancel_turn(
        &self,
        request: Request<session::CancelTurnRequest>,
    ) -> Result<Response<session::CancelTurnResponse>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "CancelTurn",
            Subject::session(&r.session_id.clone()),
            async { unary!(self, r, sessions, cancel_turn, SESSIONS) },
        )
        .await
    }

    async fn delete_session(
        &self,
        request: Request<session::DeleteSessionRequest>,
    ) -> Result<Response<session::DeleteSessionResponse>, Status> {
        let r = request.into_inner();
        let session_id = r.session_id.clone();
        audited(
            self.audit,
            "DeleteSession",
            Subject::session(&session_id),
            async {
                let deleted: Result<Response<session::DeleteSessionResponse>, Status> =
                    unary!(self, r, sessions, delete_session, SESSIONS);
                let deleted = deleted?;
                // The developer's files go with the session (rag-search would drop them once
                // idle anyway).
                let drop = rag::DropOverlayRequest {
                    session_id: session_id.clone(),
                };
                let dropped: Result<Response<rag::DropOverlayResponse>, Status> =
                    unary!(self, drop, rag, drop_overlay, RAG);
                if let Err(e) = dropped {
                    tracing::warn!(session_id = %shown(&session_id), error = %e.message(), "deleted session's overlay not dropped");
                }
                Ok(deleted)
            },
        )
        .await
    }

    async fn list_edits(
        &self,
        request: Request<tools::ListEditsRequest>,
    ) -> Result<Response<tools::ListEditsResponse>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "ListEdits",
            Subject::session(&r.session_id.clone()),
            async { unary!(self, r, tools, list_edits, TOOLS) },
        )
        .await
    }

    async fn decide_edit(
        &self,
        request: Request<tools::DecideEditRequest>,
    ) -> Result<Response<tools::DecideEditResponse>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "DecideEdit",
            Subject::proposal(&r.proposal_id.clone()),
            async { unary!(self, r, tools, decide_edit, TOOLS) },
        )
        .await
    }

    async fn get_edit_delivery(
        &self,
        request: Request<tools::GetEditDeliveryRequest>,
    ) -> Result<Response<tools::GetEditDeliveryResponse>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "GetEditDelivery",
            Subject::proposal(&r.proposal_id.clone()),
            async { unary!(self, r, tools, get_edit_delivery, TOOLS) },
        )
        .await
    }

    async fn sync_overlay(
        &self,
        request: Request<rag::SyncOverlayRequest>,
    ) -> Result<Response<rag::SyncOverlayResponse>, Status> {
        let mut r = request.into_inner();
        audited(
            self.audit,
            "SyncOverlay",
            Subject::session(&r.session_id.clone()),
            async {
                // The overlay lies over the session's own workspace, whatever the request says.
                r.workspace_root = self.own_session(&r.session_id).await?.workspace_root;
                unary!(self, r, rag, sync_overlay, RAG)
            },
        )
        .await
    }

    async fn put_overlay_files(
        &self,
        request: Request<rag::PutOverlayFilesRequest>,
    ) -> Result<Response<rag::PutOverlayFilesResponse>, Status> {
        let mut r = request.into_inner();
        audited(
            self.audit,
            "PutOverlayFiles",
            Subject::session(&r.session_id.clone()),
            async {
                r.workspace_root = self.own_session(&r.session_id).await?.workspace_root;
                unary!(self, r, rag, put_overlay_files, RAG)
            },
        )
        .await
    }

    async fn search(
        &self,
        request: Request<rag::SearchRequest>,
    ) -> Result<Response<rag::SearchResponse>, Status> {
        let r = request.into_inner();
        let subject = Subject {
            session_id: &r.session_id.clone(),
            workspace: &r.workspace_root.clone(),
            ..Subject::default()
        };
        audited(self.audit, "Search", subject, async {
            check_root(&r.workspace_root)?;
            unary!(self, r, rag, search, RAG)
        })
        .await
    }

    async fn add_workspace(
        &self,
        request: Request<rag::AddWorkspaceRequest>,
    ) -> Result<Response<rag::Workspace>, Status> {
        let r = request.into_inner();
        let named = match &r.source {
            Some(rag::add_workspace_request::Source::Path(p)) => p.clone(),
            // Never a password into the audit log (rag-search refuses such a URL anyway).
            Some(rag::add_workspace_request::Source::Git(g)) => {
                ploke_runtime::text::url_without_credentials(&g.url).into_owned()
            }
            None => String::new(),
        };
        audited(
            self.audit,
            "AddWorkspace",
            Subject::workspace(&named),
            async {
                admin_only("AddWorkspace")?;
                // A clone may take minutes: the deadline is rag-search's own git limit and a margin.
                let mut client = self.upstreams.rag.clone();
                client
                    .add_workspace(with_deadline(r, ADD_WORKSPACE_TIMEOUT))
                    .await
                    .map(|r| Response::new(r.into_inner()))
                    .map_err(|s| upstream_status(RAG, s))
            },
        )
        .await
    }

    async fn list_workspaces(
        &self,
        request: Request<rag::ListWorkspacesRequest>,
    ) -> Result<Response<rag::ListWorkspacesResponse>, Status> {
        let r = request.into_inner();
        audited(self.audit, "ListWorkspaces", Subject::default(), async {
            unary!(self, r, rag, list_workspaces, RAG)
        })
        .await
    }

    async fn remove_workspace(
        &self,
        request: Request<rag::RemoveWorkspaceRequest>,
    ) -> Result<Response<rag::RemoveWorkspaceResponse>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "RemoveWorkspace",
            Subject::workspace(&r.workspace_root.clone()),
            async {
                admin_only("RemoveWorkspace")?;
                check_root(&r.workspace_root)?;
                unary!(self, r, rag, remove_workspace, RAG)
            },
        )
        .await
    }

    async fn index_status(
        &self,
        request: Request<rag::IndexStatusRequest>,
    ) -> Result<Response<rag::IndexStatusResponse>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "IndexStatus",
            Subject::workspace(&r.workspace_root.clone()),
            async {
                check_root(&r.workspace_root)?;
                unary!(self, r, rag, index_status, RAG)
            },
        )
        .await
    }

    async fn list_tools(
        &self,
        request: Request<tools::ListToolsRequest>,
    ) -> Result<Response<tools::ListToolsResponse>, Status> {
        let r = request.into_inner();
        audited(self.audit, "ListTools", Subject::default(), async {
            let listed: Result<Response<tools::ListToolsResponse>, Status> =
                unary!(self, r, tools, list_tools, TOOLS);
            let mut listed = listed?.into_inner();
            crate::tools::visible(&mut listed.tools);
            Ok(Response::new(listed))
        })
        .await
    }

    type ExecuteToolStream = Boxed<tools::ExecuteToolEvent>;

    async fn execute_tool(
        &self,
        request: Request<tools::ExecuteToolRequest>,
    ) -> Result<Response<Self::ExecuteToolStream>, Status> {
        let mut r = request.into_inner();
        let tool = r
            .call
            .as_ref()
            .and_then(ploke_proto::registry::tool_name)
            .unwrap_or_default();
        // Admitted first, so that the audit line names the ids the call runs with: the request
        // and call ids given to it, an MCP session tagged with its principal.
        let admitted = crate::tools::admit(&mut r);
        let ids = r.correlation.clone().unwrap_or_default();
        let workspace = r.workspace_root.clone();
        let subject = Subject {
            session_id: &ids.session_id,
            workspace: &workspace,
            tool,
            call_id: &ids.call_id,
            request_id: &ids.request_id,
            ..Subject::default()
        };
        audited(self.audit, "ExecuteTool", subject, async {
            check_root(&r.workspace_root)?;
            if admitted? {
                // A session of the caller's (llm-session answers NOT_FOUND otherwise).
                let get = session::GetSessionRequest {
                    session_id: ids.session_id.clone(),
                };
                let found: Result<Response<session::Session>, Status> =
                    unary!(self, get, sessions, get_session, SESSIONS);
                found?;
            }
            let mut client = self.upstreams.tools.clone();
            let stream = client
                .execute_tool(r)
                .await
                .map_err(|s| upstream_status(TOOLS, s))?
                .into_inner();
            Ok(Response::new(Box::pin(stream) as Self::ExecuteToolStream))
        })
        .await
    }

    async fn list_files(
        &self,
        request: Request<rag::ListFilesRequest>,
    ) -> Result<Response<rag::ListFilesResponse>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "ListFiles",
            Subject::workspace(&r.workspace_root.clone()),
            async {
                check_root(&r.workspace_root)?;
                unary!(self, r, rag, list_files, RAG)
            },
        )
        .await
    }

    type IndexWorkspaceStream = Boxed<rag::IndexProgress>;

    async fn index_workspace(
        &self,
        request: Request<rag::IndexWorkspaceRequest>,
    ) -> Result<Response<Self::IndexWorkspaceStream>, Status> {
        let r = request.into_inner();
        audited(
            self.audit,
            "IndexWorkspace",
            Subject::workspace(&r.workspace_root.clone()),
            async {
                admin_only("IndexWorkspace")?;
                check_root(&r.workspace_root)?;
                let mut client = self.upstreams.rag.clone();
                let stream = client
                    .index_workspace(r)
                    .await
                    .map_err(|s| upstream_status(RAG, s))?
                    .into_inner();
                Ok(Response::new(Box::pin(stream) as Self::IndexWorkspaceStream))
            },
        )
        .await
    }

    async fn get_system_status(
        &self,
        _request: Request<GetSystemStatusRequest>,
    ) -> Result<Response<SystemStatus>, Status> {
        audited(self.audit, "GetSystemStatus", Subject::default(), async {
            Ok(Response::new(self.system_status().await))
        })
        .await
    }
}
