//! Conversions between rag-search's domain types and `ploke.rag.v1` / `ploke.common.v1`, with
//! field-level validation of requests.

use std::collections::BTreeSet;
use std::time::SystemTime;

use ploke_proto::common::v1 as common;
use ploke_proto::rag::v1::{self as pb};
use ploke_proto::status::invalid_argument;
use ploke_runtime::language::{self, LANGUAGES};
use tonic::Status;

use super::{DEFAULT_CONTEXT_TOP_K, DEFAULT_TOP_K, MAX_QUERY_CHARS, MAX_TOP_K};
use crate::bm25::{Filters, normalize_prefix};
use crate::context::{Assembled, Cut};
use crate::index::{ItemRecord, Phase, Progress, Summary};
use crate::parse::Kind;
use crate::service::{IndexState, SearchHit, SearchQuery, Strategy};

pub(super) fn strategy(value: i32) -> Result<Strategy, Status> {
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

pub(super) fn strategy_to_pb(s: Strategy) -> pb::Strategy {
    match s {
        Strategy::Default => pb::Strategy::Unspecified,
        Strategy::Bm25 => pb::Strategy::Bm25,
        Strategy::Dense => pb::Strategy::Dense,
        Strategy::Hybrid => pb::Strategy::Hybrid,
    }
}

/// `ItemKind` → domain kind; `None` for UNSPECIFIED.
pub(super) fn kind_from_pb(field: &str, value: i32) -> Result<Option<Kind>, Status> {
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
        Ok(K::Class) => Kind::Class,
        Ok(K::Interface) => Kind::Interface,
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
pub(super) fn kind_to_pb(kind: Kind) -> common::ItemKind {
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
        Kind::Class => K::Class,
        Kind::Interface => K::Interface,
    }
}

pub(super) fn filters(f: Option<pb::SearchFilters>) -> Result<Filters, Status> {
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
                format!(
                    "`{}` must be relative to the workspace root, without `..`",
                    ploke_runtime::text::shown(p)
                ),
            ));
        }
        if !norm.is_empty() {
            path_prefixes.push(norm);
        }
    }
    let mut languages = Vec::new();
    for (i, l) in f.languages.iter().enumerate() {
        let Some(language) = language::named(l) else {
            return Err(invalid_argument(
                &format!("filters.languages[{i}]"),
                format!(
                    "unknown language `{}`; known: {}",
                    ploke_runtime::text::shown(l),
                    LANGUAGES.join(", ")
                ),
            ));
        };
        languages.push(language.to_owned());
    }
    Ok(Filters {
        path_prefixes,
        kinds,
        languages,
    })
}

pub(super) fn query_text(query: &str) -> Result<String, Status> {
    if query.trim().is_empty() {
        return Err(invalid_argument("query", "must not be empty"));
    }
    if !ploke_runtime::text::has_word(query) {
        return Err(invalid_argument("query", ploke_runtime::text::NO_WORD));
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

pub(super) fn top_k(value: u32, default: u32) -> Result<usize, Status> {
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
            session_id: r.session_id,
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
            session_id: r.session_id,
        })
    }
}

pub(super) fn span(
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

pub(super) fn hit_to_pb(h: SearchHit) -> pb::SearchHit {
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
            crate_name: i.crate_name.clone(),
            rendered: String::new(),
            name: i.answered_name().to_owned(),
        }),
        score: h.score,
        bm25_rank: h.bm25_rank,
        dense_rank: h.dense_rank,
    }
}

pub(super) fn item_to_pb(r: ItemRecord) -> pb::CodeItem {
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

pub(super) fn cut_to_pb(c: Cut) -> common::CutReason {
    match c {
        Cut::Duplicate => common::CutReason::Duplicate,
        Cut::Stitched => common::CutReason::Stitched,
        Cut::PerPart => common::CutReason::PerPart,
        Cut::PerFile => common::CutReason::PerFile,
        Cut::Total => common::CutReason::Total,
    }
}

pub(super) fn assembled_to_pb(
    a: Assembled,
    dense_used: bool,
    index_state: &IndexState,
) -> common::AssembledContext {
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
        index_state: index_state.of_results().name().to_owned(),
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
            let rendered = p.rendered;
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
                crate_name: c.crate_name,
                rendered,
                name: c.name,
            }
        })
        .collect();
    common::AssembledContext {
        parts,
        stats: Some(stats),
        rendered,
    }
}

pub(super) fn state_to_pb(s: &IndexState) -> pb::IndexState {
    match s {
        IndexState::NotIndexed => pb::IndexState::NotIndexed,
        IndexState::Indexing(_) => pb::IndexState::Indexing,
        IndexState::Ready => pb::IndexState::Ready,
        IndexState::Failed(_) => pb::IndexState::Failed,
    }
}

pub(super) fn phase_to_pb(p: Phase) -> pb::IndexPhase {
    match p {
        Phase::Scanning => pb::IndexPhase::Scanning,
        Phase::Parsing => pb::IndexPhase::Parsing,
        Phase::Embedding => pb::IndexPhase::Embedding,
        Phase::Committing => pb::IndexPhase::Committing,
        Phase::Done => pb::IndexPhase::Done,
    }
}

pub(super) fn progress_to_pb(p: &Progress) -> pb::IndexProgress {
    pb::IndexProgress {
        phase: phase_to_pb(p.phase) as i32,
        files_done: p.files_done,
        files_total: p.files_total,
        items_done: p.items_done,
        // Known once parsing is over: every item is written by then.
        items_total: match p.phase {
            Phase::Scanning | Phase::Parsing => 0,
            Phase::Embedding | Phase::Committing | Phase::Done => p.items_done,
        },
        embedded_done: p.embedded_done,
        message: p.message.clone(),
        summary: None,
        embed_total: p.embed_total,
        embed_done: p.embed_done,
        eta: p.eta.and_then(|d| prost_types::Duration::try_from(d).ok()),
        elapsed: prost_types::Duration::try_from(p.elapsed).ok(),
    }
}

pub(super) fn summary_to_pb(s: &Summary, dense_available: bool) -> pb::IndexSummary {
    pb::IndexSummary {
        files_indexed: s.files_indexed,
        files_unchanged: s.files_unchanged,
        files_skipped: s.files_skipped,
        files_removed: s.files_removed,
        items_total: s.items_total,
        items_embedded: s.items_embedded,
        embeddings_reused: s.embeddings_reused,
        duration_ms: u64::try_from(s.duration.as_millis()).unwrap_or(u64::MAX),
        dense_available,
    }
}

/// The last line of an index run: what it did, naming files left out and removed only when
/// there were any (a developer otherwise cannot tell a skipped file from one with no items).
pub(super) fn done_message(s: &Summary) -> String {
    let mut files = format!("{} unchanged", s.files_unchanged);
    if s.files_skipped > 0 {
        files.push_str(&format!(
            ", {} skipped as too large, binary or unreadable",
            s.files_skipped
        ));
    }
    if s.files_removed > 0 {
        files.push_str(&format!(", {} removed", s.files_removed));
    }
    format!(
        "indexed {} files ({files}), {} items, {} embedded ({} reused) in {} ms",
        s.files_indexed,
        s.items_total,
        s.items_embedded,
        s.embeddings_reused,
        s.duration.as_millis()
    )
}

pub(super) fn timestamp(t: SystemTime) -> prost_types::Timestamp {
    prost_types::Timestamp::from(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_of_a_run_names_skipped_and_removed_files_when_there_are_any() {
        let mut s = Summary {
            files_indexed: 12,
            files_unchanged: 3,
            items_total: 40,
            items_embedded: 30,
            embeddings_reused: 10,
            duration: std::time::Duration::from_millis(250),
            ..Summary::default()
        };
        assert_eq!(
            done_message(&s),
            "indexed 12 files (3 unchanged), 40 items, 30 embedded (10 reused) in 250 ms"
        );
        s.files_skipped = 2;
        s.files_removed = 1;
        assert_eq!(
            done_message(&s),
            "indexed 12 files (3 unchanged, 2 skipped as too large, binary or unreadable, \
             1 removed), 40 items, 30 embedded (10 reused) in 250 ms"
        );
    }
}
