//! The client side of rag-search as the tools use it: context, lookups and refreshes, with
//! rag-search's statuses turned into tool failures the model can read.

use std::path::Path;

use ploke_proto::common::v1::{AssembledContext, ItemKind, TokenBudget};
use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::rag::v1::{
    GetContextRequest, GetOverlayRequest, LookupItemRequest, LookupItemResponse, Overlay,
    OverlayFile, PutOverlayFilesRequest, PutOverlayFilesResponse, RefreshFilesRequest,
    RefreshFilesResponse, SearchFilters, Strategy, lookup_item_request,
};
use ploke_proto::tools::v1::ToolErrorCode;
use ploke_runtime::client::TracedChannel;
use tonic::{Code, Status};

use crate::failure::ToolFailure;

/// What a lookup asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Exact canonical path.
    CanonPath(String),
    /// Bare or qualified name.
    Name(String),
    /// Every item of a file (relative path).
    File(String),
}

/// rag-search as the tools see it.
#[derive(Debug, Clone)]
pub struct Rag {
    client: RagSearchClient<TracedChannel>,
}

impl Rag {
    /// A client over `channel`, taking replies up to `max_message_bytes`.
    pub fn new(channel: TracedChannel, max_message_bytes: usize) -> Self {
        Self {
            client: RagSearchClient::new(channel).max_decoding_message_size(max_message_bytes),
        }
    }

    /// Context for `query` within `max_total` tokens, as session `session` sees the workspace
    /// (its overlay over the base; empty = the base).
    pub async fn context(
        &self,
        root: &Path,
        session: &str,
        query: &str,
        (max_total, languages): (u32, &[String]),
    ) -> Result<AssembledContext, ToolFailure> {
        let request = GetContextRequest {
            workspace_root: root.display().to_string(),
            query: query.to_owned(),
            budget: Some(TokenBudget {
                max_total,
                per_file_max: 0,
                per_part_max: 0,
            }),
            strategy: Strategy::Unspecified as i32,
            top_k: 0,
            filters: (!languages.is_empty()).then(|| SearchFilters {
                languages: languages.to_vec(),
                ..SearchFilters::default()
            }),
            session_id: session.to_owned(),
        };
        let response = self.client.clone().get_context(request).await;
        Ok(response
            .map_err(|s| failure("search_term", s))?
            .into_inner())
    }

    /// Items matching `target`, as session `session` sees the workspace.
    pub async fn lookup(
        &self,
        root: &Path,
        session: &str,
        target: Lookup,
        kind: ItemKind,
        limit: u32,
    ) -> Result<LookupItemResponse, ToolFailure> {
        use lookup_item_request::Target;
        let target = match target {
            Lookup::CanonPath(p) => Target::CanonPath(p),
            Lookup::Name(n) => Target::Name(n),
            Lookup::File(f) => Target::FilePath(f),
        };
        let request = LookupItemRequest {
            workspace_root: root.display().to_string(),
            target: Some(target),
            kind: kind as i32,
            limit,
            session_id: session.to_owned(),
        };
        let response = self.client.clone().lookup_item(request).await;
        Ok(response.map_err(|s| failure("", s))?.into_inner())
    }

    /// Asks rag-search to re-read `paths` (relative).
    pub async fn refresh(
        &self,
        root: &Path,
        paths: Vec<String>,
    ) -> Result<RefreshFilesResponse, ToolFailure> {
        let request = RefreshFilesRequest {
            workspace_root: root.display().to_string(),
            paths,
        };
        let response = self.client.clone().refresh_files(request).await;
        Ok(response.map_err(|s| failure("", s))?.into_inner())
    }
}

impl Rag {
    /// The overlay of `session` (version 0 and no entries without one), with the contents of
    /// `paths`.
    pub async fn overlay(&self, session: &str, paths: Vec<String>) -> Result<Overlay, ToolFailure> {
        let request = GetOverlayRequest {
            session_id: session.to_owned(),
            paths,
            all_contents: false,
        };
        let response = self.client.clone().get_overlay(request).await;
        Ok(response.map_err(|s| failure("", s))?.into_inner())
    }

    /// Writes `files` into the overlay of `session` over `root` (created if it has none), each
    /// only over the content its `expected_hash` names.
    pub async fn put_overlay(
        &self,
        root: &Path,
        session: &str,
        files: Vec<OverlayFile>,
    ) -> Result<PutOverlayFilesResponse, Status> {
        let request = PutOverlayFilesRequest {
            session_id: session.to_owned(),
            files,
            workspace_root: root.display().to_string(),
        };
        Ok(self
            .client
            .clone()
            .put_overlay_files(request)
            .await?
            .into_inner())
    }
}

/// rag-search's answer as a tool failure. `field` names the argument an INVALID_ARGUMENT is
/// about when rag-search's own field name means nothing to the model.
fn failure(field: &str, status: Status) -> ToolFailure {
    let message = format!("code index: {}", status.message());
    match status.code() {
        Code::InvalidArgument => ToolFailure::invalid(field, message),
        Code::FailedPrecondition => ToolFailure::unavailable(message)
            .hint("the workspace is not indexed yet; use search_code or read_file meanwhile"),
        Code::NotFound => ToolFailure::new(ToolErrorCode::NotFound, "", message),
        Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted | Code::Aborted => {
            ToolFailure::unavailable(message)
        }
        Code::Cancelled => ToolFailure::new(ToolErrorCode::Cancelled, "", message),
        Code::Ok
        | Code::Unknown
        | Code::AlreadyExists
        | Code::PermissionDenied
        | Code::OutOfRange
        | Code::Unimplemented
        | Code::Internal
        | Code::DataLoss
        | Code::Unauthenticated => ToolFailure::internal(message),
    }
}
