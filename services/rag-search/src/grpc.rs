//! The gRPC adapter of rag-search: converts and validates requests (`TryFrom`), calls the
//! domain and maps [`RagError`] to `tonic::Status` exhaustively.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::time::SystemTime;

use ploke_proto::common::v1 as common;
use ploke_proto::rag::v1::rag_search_server::RagSearch;
use ploke_proto::rag::v1::{self as pb};
use ploke_proto::status::{invalid_argument, not_found};
use ploke_runtime::workspaces::WorkspaceError;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};

use crate::bm25::{Filters, normalize_prefix};
use crate::context::{Assembled, Budget, Cut};
use crate::error::RagError;
use crate::index::{ItemRecord, Phase, Progress, Summary};
use crate::parse::Kind;
use crate::service::{
    IndexState, LookupTarget, RagService, SearchHit, SearchQuery, SnippetStatus, SpanRequest,
    Strategy,
};

/// Largest `top_k` a request may ask for.
pub const MAX_TOP_K: u32 = 1000;
/// `top_k` when a request gives 0.
pub const DEFAULT_TOP_K: u32 = 10;
/// Candidates GetContext retrieves when `top_k` is 0.
pub const DEFAULT_CONTEXT_TOP_K: u32 = 30;
/// Longest query accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 4096;
/// Most spans one GetSnippets may ask for.
pub const MAX_SNIPPETS: usize = 256;
/// Most paths one RefreshFiles may name.
pub const MAX_REFRESH_PATHS: usize = 10_000;

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

fn to_status(e: RagError) -> Status {
    match e {
        RagError::Workspace(w) => match w {
            WorkspaceError::NoneConfigured => Status::failed_precondition(w.to_string()),
            WorkspaceError::Unknown(root) => not_found(format!("workspace {root}")),
            WorkspaceError::NotAbsolute(_) => invalid_argument("workspace_root", w),
        },
        e @ RagError::NotIndexed(_) => Status::failed_precondition(e.to_string()),
        e @ RagError::IndexingInProgress(_) => Status::failed_precondition(e.to_string()),
        e @ RagError::DenseUnavailable(_) => Status::failed_precondition(e.to_string()),
        RagError::BadPath {
            ref field,
            ref path,
            reason,
        } => invalid_argument(field, format!("`{path}` {reason}")),
        e @ RagError::Index(_) => Status::internal(e.to_string()),
        e @ RagError::Internal(_) => Status::internal(e.to_string()),
    }
}

// ------------------------------------------------------------------ conversions

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

fn strategy_to_pb(s: Strategy) -> pb::Strategy {
    match s {
        Strategy::Default => pb::Strategy::Unspecified,
        Strategy::Bm25 => pb::Strategy::Bm25,
        Strategy::Dense => pb::Strategy::Dense,
        Strategy::Hybrid => pb::Strategy::Hybrid,
    }
}

/// `ItemKind` → domain kind; `None` for UNSPECIFIED.
pub fn kind_from_pb(field: &str, value: i32) -> Result<Option<Kind>, Status> {
    use common::ItemKind as K;
    let kind = match K::try_from(value) {
        Ok(K::Unspecified) => return Ok(None),
        Ok(K::Function) => Kind::Function,
        Ok(K::Method) => Kind::Method,
        Ok(K::Struct) => Kind::Struct,
        Ok(K::Enum) => Kind::Enum,
        Ok(K::Union) => Kind::Union,
        Ok(K::Trait) => Kind::Trait,
        Ok(K::Impl) => Kind::Impl,
        Ok(K::Module) => Kind::Module,
        Ok(K::Const) => Kind::Const,
        Ok(K::Static) => Kind::Static,
        Ok(K::TypeAlias) => Kind::TypeAlias,
        Ok(K::Macro) => Kind::Macro,
        Ok(K::TextWindow) => Kind::TextWindow,
        Err(_) => {
            return Err(invalid_argument(
                field,
                format!("unknown item kind {value}"),
            ));
        }
    };
    Ok(Some(kind))
}

/// Domain kind → `ItemKind`.
pub fn kind_to_pb(kind: Kind) -> common::ItemKind {
    use common::ItemKind as K;
    match kind {
        Kind::Function => K::Function,
        Kind::Method => K::Method,
        Kind::Struct => K::Struct,
        Kind::Enum => K::Enum,
        Kind::Union => K::Union,
        Kind::Trait => K::Trait,
        Kind::Impl => K::Impl,
        Kind::Module => K::Module,
        Kind::Const => K::Const,
        Kind::Static => K::Static,
        Kind::TypeAlias => K::TypeAlias,
        Kind::Macro => K::Macro,
        Kind::TextWindow => K::TextWindow,
    }
}

fn filters(f: Option<pb::SearchFilters>) -> Result<Filters, Status> {
    let Some(f) = f else {
        return Ok(Filters::default());
    };
    let mut kinds = Vec::new();
    for (i, k) in f.kinds.iter().enumerate() {
        if let Some(kind) = kind_from_pb(&format!("filters.kinds[{i}]"), *k)? {
            kinds.push(kind);
        }
    }
    let mut path_prefixes = Vec::new();
    for (i, p) in f.path_prefixes.iter().enumerate() {
        let norm = normalize_prefix(p);
        if norm.split('/').any(|c| c == "..") || p.starts_with('/') {
            return Err(invalid_argument(
                &format!("filters.path_prefixes[{i}]"),
                format!("`{p}` must be relative to the workspace root, without `..`"),
            ));
        }
        if !norm.is_empty() {
            path_prefixes.push(norm);
        }
    }
    Ok(Filters {
        path_prefixes,
        kinds,
        languages: f
            .languages
            .iter()
            .map(|l| l.trim().to_ascii_lowercase())
            .collect(),
    })
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

fn top_k(value: u32, default: u32) -> Result<usize, Status> {
    match value {
        0 => Ok(default as usize),
        1..=MAX_TOP_K => Ok(value as usize),
        _ => Err(invalid_argument(
            "top_k",
            format!("must be between 1 and {MAX_TOP_K} (0 = {default}), got {value}"),
        )),
    }
}

impl TryFrom<pb::SearchRequest> for SearchQuery {
    type Error = Status;

    fn try_from(r: pb::SearchRequest) -> Result<Self, Status> {
        Ok(SearchQuery {
            query: query_text(&r.query)?,
            strategy: strategy(r.strategy)?,
            top_k: top_k(r.top_k, DEFAULT_TOP_K)?,
            filters: filters(r.filters)?,
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
            top_k: top_k(r.top_k, DEFAULT_CONTEXT_TOP_K)?,
            filters: filters(r.filters)?,
            workspace_root: r.workspace_root,
        })
    }
}

fn span(
    r: &ItemRecord,
    start: usize,
    end: usize,
    line_start: u32,
    line_end: u32,
) -> common::CodeSpan {
    common::CodeSpan {
        path: r.file.clone(),
        byte_start: start as u64,
        byte_end: end as u64,
        line_start,
        line_end,
    }
}

fn hit_to_pb(h: SearchHit) -> pb::SearchHit {
    let i = &h.record.item;
    pb::SearchHit {
        part: Some(common::ContextPart {
            file_path: h.record.file.clone(),
            canon_path: i.canon_path.clone(),
            kind: kind_to_pb(i.kind) as i32,
            language: h.record.language.clone(),
            span: Some(span(
                &h.record,
                i.byte_start,
                i.byte_end,
                i.line_start,
                i.line_end,
            )),
            snippet: h.text,
            score: h.score,
            file_hash: h.record.file_hash.clone(),
            tokens: 0,
        }),
        score: h.score,
        bm25_rank: h.bm25_rank,
        dense_rank: h.dense_rank,
    }
}

fn item_to_pb(r: ItemRecord) -> pb::CodeItem {
    let i = &r.item;
    pb::CodeItem {
        canon_path: i.canon_path.clone(),
        name: i.name.clone(),
        kind: kind_to_pb(i.kind) as i32,
        language: r.language.clone(),
        span: Some(span(&r, i.byte_start, i.byte_end, i.line_start, i.line_end)),
        signature: i.signature.clone(),
        doc: i.doc.clone(),
        file_hash: r.file_hash.clone(),
    }
}

fn cut_to_pb(c: Cut) -> common::CutReason {
    match c {
        Cut::Duplicate => common::CutReason::Duplicate,
        Cut::Stitched => common::CutReason::Stitched,
        Cut::PerPart => common::CutReason::PerPart,
        Cut::PerFile => common::CutReason::PerFile,
        Cut::Total => common::CutReason::Total,
    }
}

fn assembled_to_pb(a: Assembled, dense_used: bool) -> common::AssembledContext {
    let files: BTreeSet<&str> = a.parts.iter().map(|p| p.candidate.file.as_str()).collect();
    let stats = common::ContextStats {
        total_tokens: a.total_tokens,
        budget: Some(common::TokenBudget {
            max_total: a.budget.max_total,
            per_file_max: a.budget.per_file_max,
            per_part_max: a.budget.per_part_max,
        }),
        candidates: a.candidates,
        parts_included: u32::try_from(a.parts.len()).unwrap_or(u32::MAX),
        files: u32::try_from(files.len()).unwrap_or(u32::MAX),
        cut: a
            .cuts
            .iter()
            .map(|c| common::CutPart {
                file_path: c.file.clone(),
                canon_path: c.canon_path.clone(),
                reason: cut_to_pb(c.reason) as i32,
                tokens_before: c.tokens_before,
                tokens_after: c.tokens_after,
            })
            .collect(),
        tokenizer: crate::tokens::TOKENIZER_NAME.to_owned(),
        dense_used,
    };
    let rendered = a
        .parts
        .iter()
        .map(|p| p.rendered.as_str())
        .collect::<String>();
    let parts = a
        .parts
        .into_iter()
        .map(|p| {
            let c = p.candidate;
            common::ContextPart {
                span: Some(common::CodeSpan {
                    path: c.file.clone(),
                    byte_start: c.byte_start as u64,
                    byte_end: c.byte_end as u64,
                    line_start: c.line_start,
                    line_end: c.line_end,
                }),
                file_path: c.file,
                canon_path: c.canon_path,
                kind: kind_to_pb(c.kind) as i32,
                language: c.language,
                snippet: c.text,
                score: c.score,
                file_hash: c.file_hash,
                tokens: p.tokens,
            }
        })
        .collect();
    common::AssembledContext {
        parts,
        stats: Some(stats),
        rendered,
    }
}

fn phase_to_pb(p: Phase) -> pb::IndexPhase {
    match p {
        Phase::Scanning => pb::IndexPhase::Scanning,
        Phase::Parsing => pb::IndexPhase::Parsing,
        Phase::Committing => pb::IndexPhase::Committing,
        Phase::Done => pb::IndexPhase::Done,
    }
}

fn progress_to_pb(p: &Progress) -> pb::IndexProgress {
    pb::IndexProgress {
        phase: phase_to_pb(p.phase) as i32,
        files_done: p.files_done,
        files_total: p.files_total,
        items_done: p.items_done,
        items_total: 0,
        embedded_done: 0,
        message: p.message.clone(),
        summary: None,
    }
}

fn summary_to_pb(s: &Summary) -> pb::IndexSummary {
    pb::IndexSummary {
        files_indexed: s.files_indexed,
        files_unchanged: s.files_unchanged,
        files_skipped: s.files_skipped,
        files_removed: s.files_removed,
        items_total: s.items_total,
        items_embedded: 0,
        embeddings_reused: 0,
        duration_ms: u64::try_from(s.duration.as_millis()).unwrap_or(u64::MAX),
        dense_available: false,
    }
}

fn timestamp(t: SystemTime) -> prost_types::Timestamp {
    prost_types::Timestamp::from(t)
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
        // Resolve first so that a bad workspace fails the call, not the stream.
        let status = self.service.status(&r.workspace_root).map_err(to_status)?;
        if let IndexState::Indexing(_) = status.state {
            return Err(to_status(RagError::IndexingInProgress(
                status.root.display().to_string(),
            )));
        }
        let (tx, rx) = mpsc::channel::<Result<pb::IndexProgress, Status>>(64);
        let (ptx, mut prx) = mpsc::channel::<Progress>(64);
        let service = self.service.clone();
        tokio::spawn(async move {
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
                    embedded_done: 0,
                    message: format!(
                        "indexed {} files ({} unchanged), {} items in {} ms",
                        summary.files_indexed,
                        summary.files_unchanged,
                        summary.items_total,
                        summary.duration.as_millis()
                    ),
                    summary: Some(summary_to_pb(&summary)),
                }),
                Err(e) => Err(to_status(e)),
            };
            let _ = tx.send(last).await;
        });
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
            embedded_items: 0,
            dense_available: false,
            embed_model: String::new(),
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
            .snippets(&r.workspace_root, spans)
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
            None => return Err(invalid_argument("target", "set canon_path or name")),
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
        let items = self
            .service
            .lookup(&r.workspace_root, &target, kind, limit)
            .map_err(to_status)?;
        Ok(Response::new(pb::LookupItemResponse {
            items: items.into_iter().map(item_to_pb).collect(),
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
            items_embedded: 0,
        }))
    }
}
