//! The gRPC adapter of rag-search: converts and validates requests (`TryFrom`), calls the
//! domain and maps [`RagError`] to `tonic::Status` exhaustively.

mod convert;
mod overlay;
mod workspaces;

use workspaces::workspace_to_pb;

use std::pin::Pin;

use ploke_proto::common::v1 as common;
use ploke_proto::rag::v1::rag_search_server::RagSearch;
use ploke_proto::rag::v1::{self as pb};
use ploke_proto::status::{
    BASE_INCOMPLETE, CHECKOUT_MISALIGNED, failed_precondition, invalid_argument,
};
use ploke_runtime::blocking::BlockingError;
use ploke_runtime::text::shown;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};

use convert::{
    assembled_to_pb, done_message, hit_to_pb, item_to_pb, kind_from_pb, progress_to_pb,
    state_to_pb, strategy_to_pb, summary_to_pb, timestamp,
};

use crate::context::Budget;
use crate::embed::EmbedError;
use crate::error::RagError;
use crate::git::GitError;
use crate::index::{IndexError, Phase, Progress};
use crate::service::{
    IndexState, LookupTarget, NewWorkspace, RagService, SearchQuery, SnippetStatus, SpanRequest,
    check_relative,
};

/// Largest `top_k` a request may ask for.
pub(crate) const MAX_TOP_K: u32 = 1000;
/// `top_k` when a request gives 0.
pub(crate) const DEFAULT_TOP_K: u32 = 10;
/// Candidates GetContext retrieves when `top_k` is 0.
pub(crate) const DEFAULT_CONTEXT_TOP_K: u32 = 30;
/// Longest query accepted, in characters.
pub(crate) const MAX_QUERY_CHARS: usize = 4096;
/// Most spans one GetSnippets may ask for.
pub(crate) const MAX_SNIPPETS: usize = 256;
/// Most files one ListFiles answers, and how many when it names no limit.
pub(crate) const MAX_FILES: u32 = 5000;
const DEFAULT_FILES: u32 = 1000;
/// Most paths one RefreshFiles may name.
pub(crate) const MAX_REFRESH_PATHS: usize = 10_000;

/// The tonic service of rag-search.
#[derive(Debug, Clone)]
pub(crate) struct RagSearchGrpc {
    service: RagService,
    /// Largest message it sends (an overlay's contents must fit).
    max_message_bytes: usize,
}

impl RagSearchGrpc {
    pub(crate) fn new(service: RagService, max_message_bytes: usize) -> Self {
        Self {
            service,
            max_message_bytes,
        }
    }
}

fn to_status(e: RagError) -> Status {
    match e {
        RagError::Workspace(w) => w.to_status(),
        e @ RagError::NotIndexed(_) => Status::failed_precondition(e.to_string()),
        e @ RagError::RunFailed(_) => Status::unavailable(e.to_string()),
        e @ RagError::DenseUnavailable(_) => Status::failed_precondition(e.to_string()),
        RagError::BadPath {
            ref field,
            ref path,
            reason,
        } => invalid_argument(field, format!("`{}` {reason}", shown(path))),
        RagError::Index(IndexError::Embed(e)) | RagError::Embedding(e) => embed_status(&e),
        e @ RagError::IndexStorage { .. } => Status::unavailable(e.to_string()),
        e @ RagError::Index(
            IndexError::Bm25(_)
            | IndexError::Io { .. }
            | IndexError::Vectors(_)
            | IndexError::Corrupt { .. }
            | IndexError::Poisoned,
        ) => Status::internal(e.to_string()),
        e @ RagError::Index(IndexError::Closed) => Status::unavailable(e.to_string()),
        RagError::Blocking(e @ BlockingError::Saturated { .. }) => {
            Status::resource_exhausted(e.to_string())
        }
        RagError::Git(e) => git_status(&e),
        RagError::BadWorkspace { field, ref reason } => invalid_argument(field, reason),
        e @ RagError::WorkspaceExists { .. } => Status::already_exists(e.to_string()),
        e @ RagError::ConfiguredWorkspace(_) => Status::failed_precondition(e.to_string()),
        e @ RagError::Registry(_) => Status::unavailable(e.to_string()),
        e @ (RagError::Internal(_) | RagError::Blocking(BlockingError::Panicked(_))) => {
            Status::internal(e.to_string())
        }
        RagError::Denied(d) => d.to_status(),
        RagError::Invalid { ref field, reason } => invalid_argument(field, reason),
        e @ RagError::NoOverlay(_) => Status::not_found(e.to_string()),
        e @ RagError::OverlayFull { .. } => Status::resource_exhausted(e.to_string()),
        e @ RagError::TooManyOverlays { .. } => Status::resource_exhausted(e.to_string()),
        e @ (RagError::OverlayConflict { .. } | RagError::OverlayWorkspace { .. }) => {
            Status::failed_precondition(e.to_string())
        }
        ref e @ RagError::BaseIncomplete {
            ref root,
            ref state,
        } => failed_precondition(
            BASE_INCOMPLETE,
            e,
            [("root", root.clone()), ("state", state.clone())],
        ),
        e @ RagError::CheckoutMisaligned { sent, missing, .. } => failed_precondition(
            CHECKOUT_MISALIGNED,
            &e,
            [("sent", sent.to_string()), ("missing", missing.to_string())],
        ),
        e @ RagError::OverlayStorage(_) => Status::unavailable(e.to_string()),
    }
}

/// A bad URL or branch names its field; git refusing (no such repository or branch, no access,
/// git missing) is a precondition; running out of time is DEADLINE_EXCEEDED.
fn git_status(e: &GitError) -> Status {
    match e {
        GitError::Invalid { field, reason } => invalid_argument(field, reason),
        GitError::Failed { .. } | GitError::Unavailable(_) => {
            Status::failed_precondition(e.to_string())
        }
        GitError::TimedOut { .. } => Status::deadline_exceeded(e.to_string()),
    }
}

/// An unreachable or busy endpoint is UNAVAILABLE (try again later), a refusal is a
/// precondition for the operator to fix, a broken model or answer is INTERNAL.
fn embed_status(e: &EmbedError) -> Status {
    match e {
        EmbedError::Unavailable(_) => Status::unavailable(e.to_string()),
        EmbedError::Refused(_) | EmbedError::Config(_) => {
            Status::failed_precondition(e.to_string())
        }
        EmbedError::Model(_) => Status::internal(e.to_string()),
    }
}

type ProgressStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::IndexProgress, Status>> + Send>>;

#[tonic::async_trait]
impl RagSearch for RagSearchGrpc {
    async fn add_workspace(
        &self,
        request: Request<pb::AddWorkspaceRequest>,
    ) -> Result<Response<pb::Workspace>, Status> {
        let new = NewWorkspace::try_from(request.into_inner())?;
        let added = self.service.add_workspace(new).await.map_err(to_status)?;
        Ok(Response::new(workspace_to_pb(added)))
    }

    async fn list_workspaces(
        &self,
        _request: Request<pb::ListWorkspacesRequest>,
    ) -> Result<Response<pb::ListWorkspacesResponse>, Status> {
        let all = self.service.list_workspaces().await.map_err(to_status)?;
        Ok(Response::new(pb::ListWorkspacesResponse {
            workspaces: all.into_iter().map(workspace_to_pb).collect(),
        }))
    }

    async fn remove_workspace(
        &self,
        request: Request<pb::RemoveWorkspaceRequest>,
    ) -> Result<Response<pb::RemoveWorkspaceResponse>, Status> {
        let r = request.into_inner();
        if r.workspace_root.is_empty() {
            return Err(invalid_argument(
                "workspace_root",
                "must name the workspace to remove",
            ));
        }
        let removed = self
            .service
            .remove_workspace(&r.workspace_root, r.delete_data)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::RemoveWorkspaceResponse {
            removed: Some(workspace_to_pb(removed)),
        }))
    }

    type IndexWorkspaceStream = ProgressStream;

    async fn index_workspace(
        &self,
        request: Request<pb::IndexWorkspaceRequest>,
    ) -> Result<Response<Self::IndexWorkspaceStream>, Status> {
        let r = request.into_inner();
        // Check and resolve first so that a refusal or a bad workspace fails the call, not the
        // stream. A run already going is joined: its progress and outcome come back on this
        // stream.
        let status = self
            .service
            .may_index(&r.workspace_root)
            .map_err(to_status)?;
        let (tx, rx) = mpsc::channel::<Result<pb::IndexProgress, Status>>(64);
        let (ptx, mut prx) = mpsc::channel::<Progress>(64);
        let service = self.service.clone();
        let dense_available = status.dense_unavailable_reason.is_empty();
        // The run's task keeps the caller's principal, so the domain's checks see it.
        let principal = ploke_runtime::principal::current();
        tokio::spawn(ploke_runtime::principal::scope(principal, async move {
            let run = service.index(&r.workspace_root, r.force, ptx);
            tokio::pin!(run);
            let outcome = loop {
                tokio::select! {
                    Some(p) = prx.recv() => {
                        if p.phase != Phase::Done {
                            let _ = tx.send(Ok(progress_to_pb(&p))).await;
                        }
                    }
                    outcome = &mut run => break outcome,
                }
            };
            let last = match outcome {
                Ok(summary) => Ok(pb::IndexProgress {
                    phase: pb::IndexPhase::Done as i32,
                    files_done: summary.files_indexed + summary.files_unchanged,
                    files_total: summary.files_indexed + summary.files_unchanged,
                    items_done: summary.items_total,
                    items_total: summary.items_total,
                    embedded_done: summary.items_embedded + summary.embeddings_reused,
                    embed_total: summary.items_embedded,
                    embed_done: summary.items_embedded,
                    eta: Some(prost_types::Duration::default()),
                    elapsed: prost_types::Duration::try_from(summary.duration).ok(),
                    message: done_message(&summary),
                    summary: Some(summary_to_pb(&summary, dense_available)),
                }),
                Err(e) => Err(to_status(e)),
            };
            let _ = tx.send(last).await;
        }));
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn index_status(
        &self,
        request: Request<pb::IndexStatusRequest>,
    ) -> Result<Response<pb::IndexStatusResponse>, Status> {
        let r = request.into_inner();
        let s = self.service.status(&r.workspace_root).map_err(to_status)?;
        let (state, progress, message) = match s.state {
            IndexState::NotIndexed => (pb::IndexState::NotIndexed, None, String::new()),
            IndexState::Indexing(p) => (
                pb::IndexState::Indexing,
                Some(progress_to_pb(&p)),
                String::new(),
            ),
            IndexState::Ready => (pb::IndexState::Ready, None, String::new()),
            IndexState::Failed(m) => (pb::IndexState::Failed, None, m),
        };
        Ok(Response::new(pb::IndexStatusResponse {
            workspace_root: s.root.display().to_string(),
            state: state as i32,
            files: s.files,
            items: s.items,
            embedded_items: s.embedded_items,
            dense_available: s.dense_unavailable_reason.is_empty(),
            embed_model: s.embed_model,
            dense_unavailable_reason: s.dense_unavailable_reason,
            last_indexed_at: s.last_indexed_at.map(timestamp),
            index_bytes: s.index_bytes,
            progress,
            message,
        }))
    }

    async fn search(
        &self,
        request: Request<pb::SearchRequest>,
    ) -> Result<Response<pb::SearchResponse>, Status> {
        let query = SearchQuery::try_from(request.into_inner())?;
        let outcome = self.service.search(query).await.map_err(to_status)?;
        Ok(Response::new(pb::SearchResponse {
            strategy: strategy_to_pb(outcome.strategy) as i32,
            dense_used: outcome.dense_used,
            dense_unavailable_reason: outcome.dense_unavailable_reason,
            index_state: state_to_pb(&outcome.index_state.of_results()) as i32,
            hits: outcome.hits.into_iter().map(hit_to_pb).collect(),
        }))
    }

    async fn get_context(
        &self,
        request: Request<pb::GetContextRequest>,
    ) -> Result<Response<common::AssembledContext>, Status> {
        let r = request.into_inner();
        let b = r.budget.unwrap_or_default();
        let budget = Budget::with_defaults(b.max_total, b.per_file_max, b.per_part_max);
        let query = SearchQuery::try_from(r)?;
        let (assembled, outcome) = self
            .service
            .context(query, budget)
            .await
            .map_err(to_status)?;
        Ok(Response::new(assembled_to_pb(
            assembled,
            outcome.dense_used,
            &outcome.index_state,
        )))
    }

    async fn get_snippets(
        &self,
        request: Request<pb::GetSnippetsRequest>,
    ) -> Result<Response<pb::GetSnippetsResponse>, Status> {
        let r = request.into_inner();
        if r.spans.is_empty() {
            return Err(invalid_argument("spans", "must not be empty"));
        }
        if r.spans.len() > MAX_SNIPPETS {
            return Err(invalid_argument(
                "spans",
                format!(
                    "at most {MAX_SNIPPETS} spans per call, got {}",
                    r.spans.len()
                ),
            ));
        }
        let mut spans = Vec::with_capacity(r.spans.len());
        for (i, s) in r.spans.into_iter().enumerate() {
            let Some(span) = s.span else {
                return Err(invalid_argument(&format!("spans[{i}].span"), "must be set"));
            };
            if span.byte_end < span.byte_start {
                return Err(invalid_argument(
                    &format!("spans[{i}].span.byte_end"),
                    format!("{} is before byte_start {}", span.byte_end, span.byte_start),
                ));
            }
            spans.push(SpanRequest {
                path: span.path,
                byte_start: span.byte_start,
                byte_end: span.byte_end,
                expected_hash: s.expected_file_hash,
            });
        }
        let snippets = self
            .service
            .snippets(&r.workspace_root, &r.session_id, spans)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::GetSnippetsResponse {
            snippets: snippets
                .into_iter()
                .map(|s| pb::Snippet {
                    span: Some(common::CodeSpan {
                        path: s.path,
                        byte_start: s.byte_start,
                        byte_end: s.byte_end,
                        line_start: s.line_start,
                        line_end: s.line_end,
                    }),
                    text: s.text,
                    file_hash: s.file_hash,
                    status: match s.status {
                        SnippetStatus::Ok => pb::SnippetStatus::Ok,
                        SnippetStatus::Stale => pb::SnippetStatus::Stale,
                        SnippetStatus::Missing => pb::SnippetStatus::Missing,
                        SnippetStatus::OutOfRange => pb::SnippetStatus::OutOfRange,
                    } as i32,
                })
                .collect(),
        }))
    }

    async fn lookup_item(
        &self,
        request: Request<pb::LookupItemRequest>,
    ) -> Result<Response<pb::LookupItemResponse>, Status> {
        let r = request.into_inner();
        let target = match r.target {
            None => {
                return Err(invalid_argument(
                    "target",
                    "set canon_path, name or file_path",
                ));
            }
            Some(pb::lookup_item_request::Target::CanonPath(p)) => {
                if p.trim().is_empty() {
                    return Err(invalid_argument("canon_path", "must not be empty"));
                }
                LookupTarget::CanonPath(p.trim().to_owned())
            }
            Some(pb::lookup_item_request::Target::Name(n)) => {
                if n.trim().is_empty() {
                    return Err(invalid_argument("name", "must not be empty"));
                }
                LookupTarget::Name(n.trim().to_owned())
            }
            Some(pb::lookup_item_request::Target::FilePath(f)) => {
                LookupTarget::File(check_relative("file_path", &f).map_err(to_status)?)
            }
        };
        let limit = match r.limit {
            0 => 20,
            1..=100 => r.limit as usize,
            n => {
                return Err(invalid_argument(
                    "limit",
                    format!("must be between 1 and 100 (0 = 20), got {n}"),
                ));
            }
        };
        let kind = kind_from_pb("kind", r.kind)?;
        let (items, total) = self
            .service
            .lookup(&r.workspace_root, &r.session_id, &target, kind, limit)
            .map_err(to_status)?;
        Ok(Response::new(pb::LookupItemResponse {
            items: items.into_iter().map(item_to_pb).collect(),
            total: u32::try_from(total).unwrap_or(u32::MAX),
        }))
    }

    async fn refresh_files(
        &self,
        request: Request<pb::RefreshFilesRequest>,
    ) -> Result<Response<pb::RefreshFilesResponse>, Status> {
        let r = request.into_inner();
        if r.paths.is_empty() {
            return Err(invalid_argument("paths", "must not be empty"));
        }
        if r.paths.len() > MAX_REFRESH_PATHS {
            return Err(invalid_argument(
                "paths",
                format!(
                    "at most {MAX_REFRESH_PATHS} paths per call, got {}",
                    r.paths.len()
                ),
            ));
        }
        let s = self
            .service
            .refresh(&r.workspace_root, r.paths)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::RefreshFilesResponse {
            files_updated: s.files_indexed,
            files_removed: s.files_removed,
            files_unchanged: s.files_unchanged,
            items_added: s.items_added,
            items_removed: s.items_removed,
            items_embedded: s.items_embedded,
        }))
    }

    async fn sync_overlay(
        &self,
        request: Request<pb::SyncOverlayRequest>,
    ) -> Result<Response<pb::SyncOverlayResponse>, Status> {
        let r = request.into_inner();
        let synced = self
            .service
            .sync_overlay(&r.session_id, &r.workspace_root, overlay::manifest(r.files))
            .await
            .map_err(to_status)?;
        Ok(Response::new(overlay::synced_to_pb(synced)))
    }

    async fn put_overlay_files(
        &self,
        request: Request<pb::PutOverlayFilesRequest>,
    ) -> Result<Response<pb::PutOverlayFilesResponse>, Status> {
        let r = request.into_inner();
        let put = self
            .service
            .put_overlay_files(&r.session_id, &r.workspace_root, overlay::puts(r.files))
            .await
            .map_err(to_status)?;
        Ok(Response::new(overlay::put_to_pb(put)))
    }

    async fn get_overlay(
        &self,
        request: Request<pb::GetOverlayRequest>,
    ) -> Result<Response<pb::Overlay>, Status> {
        let r = request.into_inner();
        let info = self
            .service
            .get_overlay(&r.session_id, r.paths, r.all_contents)
            .await
            .map_err(to_status)?;
        Ok(Response::new(overlay::overlay_to_pb(
            info,
            self.max_message_bytes,
        )?))
    }

    async fn drop_overlay(
        &self,
        request: Request<pb::DropOverlayRequest>,
    ) -> Result<Response<pb::DropOverlayResponse>, Status> {
        let r = request.into_inner();
        let dropped = self
            .service
            .drop_overlay(&r.session_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::DropOverlayResponse { dropped }))
    }

    async fn list_files(
        &self,
        request: Request<pb::ListFilesRequest>,
    ) -> Result<Response<pb::ListFilesResponse>, Status> {
        let r = request.into_inner();
        let limit = match r.limit {
            0 => DEFAULT_FILES,
            1..=MAX_FILES => r.limit,
            n => {
                return Err(invalid_argument(
                    "limit",
                    format!("must be between 1 and {MAX_FILES} (0 = {DEFAULT_FILES}), got {n}"),
                ));
            }
        };
        if r.page_token.len() > ploke_runtime::path_policy::MAX_PATH_BYTES {
            return Err(invalid_argument(
                "page_token",
                "is not a token this service issued",
            ));
        }
        let page = self
            .service
            .list_files(&r.workspace_root, &r.page_token, limit as usize)
            .map_err(to_status)?;
        Ok(Response::new(pb::ListFilesResponse {
            files: page
                .files
                .into_iter()
                .map(|(path, language, file_hash, items)| pb::IndexedFile {
                    path,
                    language,
                    file_hash,
                    items,
                })
                .collect(),
            next_page_token: page.next.unwrap_or_default(),
            total: page.total,
        }))
    }
}
