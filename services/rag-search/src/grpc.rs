//! The gRPC adapter of rag-search: converts and validates requests, calls the domain and maps
//! [`RagError`] to `tonic::Status` exhaustively.

use std::pin::Pin;

use ploke_proto::common::v1::AssembledContext;
use ploke_proto::rag::v1::rag_search_server::RagSearch;
use ploke_proto::rag::v1::{self as pb};
use ploke_proto::status::{invalid_argument, not_found, not_yet};
use ploke_runtime::workspaces::WorkspaceError;
use tonic::{Request, Response, Status};

use crate::error::RagError;
use crate::service::{RagService, SearchQuery, Strategy};

/// Largest `top_k` a request may ask for.
pub const MAX_TOP_K: u32 = 1000;
/// `top_k` when a request gives 0.
pub const DEFAULT_TOP_K: u32 = 10;
/// Longest query accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 4096;
/// Most spans one GetSnippets may ask for.
pub const MAX_SNIPPETS: usize = 256;

/// The tonic service of rag-search.
#[derive(Debug, Clone)]
pub struct RagSearchGrpc {
    service: RagService,
}

impl RagSearchGrpc {
    pub fn new(service: RagService) -> Self {
        Self { service }
    }
}

fn to_status(method: &str, e: RagError) -> Status {
    match e {
        RagError::Workspace(w) => match w {
            WorkspaceError::NoneConfigured => Status::failed_precondition(w.to_string()),
            WorkspaceError::Unknown(root) => not_found(format!("workspace {root}")),
            WorkspaceError::NotAbsolute(_) => invalid_argument("workspace_root", w),
        },
        RagError::NotYet(capability) => not_yet(method, capability),
    }
}

fn strategy(value: i32) -> Result<Strategy, Status> {
    match pb::Strategy::try_from(value) {
        Ok(pb::Strategy::Unspecified) => Ok(Strategy::Default),
        Ok(pb::Strategy::Bm25) => Ok(Strategy::Bm25),
        Ok(pb::Strategy::Dense) => Ok(Strategy::Dense),
        Ok(pb::Strategy::Hybrid) => Ok(Strategy::Hybrid),
        Err(_) => Err(invalid_argument(
            "strategy",
            format!("unknown value {value}; use STRATEGY_BM25, STRATEGY_DENSE or STRATEGY_HYBRID"),
        )),
    }
}

fn query_text(query: &str) -> Result<String, Status> {
    if query.trim().is_empty() {
        return Err(invalid_argument("query", "must not be empty"));
    }
    let chars = query.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(invalid_argument(
            "query",
            format!("must be at most {MAX_QUERY_CHARS} characters, got {chars}"),
        ));
    }
    Ok(query.to_owned())
}

fn top_k(value: u32) -> Result<usize, Status> {
    match value {
        0 => Ok(DEFAULT_TOP_K as usize),
        1..=MAX_TOP_K => Ok(value as usize),
        _ => Err(invalid_argument(
            "top_k",
            format!("must be between 1 and {MAX_TOP_K} (0 = {DEFAULT_TOP_K}), got {value}"),
        )),
    }
}

impl TryFrom<pb::SearchRequest> for SearchQuery {
    type Error = Status;

    fn try_from(r: pb::SearchRequest) -> Result<Self, Status> {
        Ok(SearchQuery {
            query: query_text(&r.query)?,
            strategy: strategy(r.strategy)?,
            top_k: top_k(r.top_k)?,
            workspace_root: r.workspace_root,
        })
    }
}

impl TryFrom<pb::GetContextRequest> for SearchQuery {
    type Error = Status;

    fn try_from(r: pb::GetContextRequest) -> Result<Self, Status> {
        Ok(SearchQuery {
            query: query_text(&r.query)?,
            strategy: strategy(r.strategy)?,
            top_k: top_k(r.top_k)?,
            workspace_root: r.workspace_root,
        })
    }
}

type ProgressStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::IndexProgress, Status>> + Send>>;

#[tonic::async_trait]
impl RagSearch for RagSearchGrpc {
    type IndexWorkspaceStream = ProgressStream;

    async fn index_workspace(
        &self,
        request: Request<pb::IndexWorkspaceRequest>,
    ) -> Result<Response<Self::IndexWorkspaceStream>, Status> {
        let r = request.into_inner();
        self.service
            .index(&r.workspace_root)
            .map_err(|e| to_status("IndexWorkspace", e))?;
        Err(Status::internal(
            "indexing finished without a progress stream",
        ))
    }

    async fn index_status(
        &self,
        request: Request<pb::IndexStatusRequest>,
    ) -> Result<Response<pb::IndexStatusResponse>, Status> {
        let r = request.into_inner();
        self.service
            .status(&r.workspace_root)
            .map_err(|e| to_status("IndexStatus", e))?;
        Err(Status::internal("index status produced no answer"))
    }

    async fn search(
        &self,
        request: Request<pb::SearchRequest>,
    ) -> Result<Response<pb::SearchResponse>, Status> {
        let query = SearchQuery::try_from(request.into_inner())?;
        self.service
            .search(&query)
            .map_err(|e| to_status("Search", e))?;
        Err(Status::internal("search produced no answer"))
    }

    async fn get_context(
        &self,
        request: Request<pb::GetContextRequest>,
    ) -> Result<Response<AssembledContext>, Status> {
        let query = SearchQuery::try_from(request.into_inner())?;
        self.service
            .context(&query)
            .map_err(|e| to_status("GetContext", e))?;
        Err(Status::internal("context assembly produced no answer"))
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
        for (i, s) in r.spans.iter().enumerate() {
            let Some(span) = &s.span else {
                return Err(invalid_argument(&format!("spans[{i}].span"), "must be set"));
            };
            if span.byte_end < span.byte_start {
                return Err(invalid_argument(
                    &format!("spans[{i}].span.byte_end"),
                    format!("{} is before byte_start {}", span.byte_end, span.byte_start),
                ));
            }
        }
        self.service
            .snippets(&r.workspace_root)
            .map_err(|e| to_status("GetSnippets", e))?;
        Err(Status::internal("snippets produced no answer"))
    }

    async fn lookup_item(
        &self,
        request: Request<pb::LookupItemRequest>,
    ) -> Result<Response<pb::LookupItemResponse>, Status> {
        let r = request.into_inner();
        match &r.target {
            None => return Err(invalid_argument("target", "set canon_path or name")),
            Some(pb::lookup_item_request::Target::CanonPath(p)) if p.trim().is_empty() => {
                return Err(invalid_argument("canon_path", "must not be empty"));
            }
            Some(pb::lookup_item_request::Target::Name(n)) if n.trim().is_empty() => {
                return Err(invalid_argument("name", "must not be empty"));
            }
            Some(_) => {}
        }
        if r.limit > 100 {
            return Err(invalid_argument(
                "limit",
                format!("must be between 1 and 100 (0 = 20), got {}", r.limit),
            ));
        }
        self.service
            .lookup(&r.workspace_root)
            .map_err(|e| to_status("LookupItem", e))?;
        Err(Status::internal("lookup produced no answer"))
    }

    async fn refresh_files(
        &self,
        request: Request<pb::RefreshFilesRequest>,
    ) -> Result<Response<pb::RefreshFilesResponse>, Status> {
        let r = request.into_inner();
        if r.paths.is_empty() {
            return Err(invalid_argument("paths", "must not be empty"));
        }
        self.service
            .refresh(&r.workspace_root)
            .map_err(|e| to_status("RefreshFiles", e))?;
        Err(Status::internal("refresh produced no answer"))
    }
}
