//! The values rag-search's domain takes and returns (validated requests, results, states).

use std::path::PathBuf;
use std::time::SystemTime;

use crate::bm25::Filters;
use crate::index::{ItemRecord, Phase, Progress, Summary};

/// Retrieval method, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Hybrid when dense vectors exist, BM25 otherwise.
    Default,
    /// BM25 only.
    Bm25,
    /// Dense only.
    Dense,
    /// RRF of BM25 and dense.
    Hybrid,
}

/// A validated search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    /// Requested workspace root (empty = default).
    pub workspace_root: String,
    /// Query text, non-empty.
    pub query: String,
    /// Method.
    pub strategy: Strategy,
    /// Hits wanted, 1..=1000.
    pub top_k: usize,
    /// Restrictions.
    pub filters: Filters,
    /// Answer as this session sees the workspace (its overlay over the base); empty = the
    /// base alone.
    pub session_id: String,
}

/// Where an index run stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexState {
    /// Never indexed.
    NotIndexed,
    /// Running.
    Indexing(Progress),
    /// Queryable.
    Ready,
    /// The last run failed.
    Failed(String),
}

impl IndexState {
    /// The state results are told with. A run that is embedding or committing has every file in
    /// its keyword index (the parse's last commit comes first), so it answers for the whole tree:
    /// `Ready`. Only a run still walking or parsing answers from part of the files: `Indexing`.
    /// Whether the dense side had vectors is the strategy's own reason (`dense_unavailable_reason`).
    pub fn of_results(&self) -> IndexState {
        match self {
            IndexState::Indexing(p)
                if matches!(p.phase, Phase::Embedding | Phase::Committing | Phase::Done) =>
            {
                IndexState::Ready
            }
            other => other.clone(),
        }
    }

    /// The name clients see in context stats.
    pub fn name(&self) -> &'static str {
        match self {
            IndexState::NotIndexed => "not_indexed",
            IndexState::Indexing(_) => "indexing",
            IndexState::Ready => "ready",
            IndexState::Failed(_) => "failed",
        }
    }
}

/// What IndexStatus reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Resolved root.
    pub root: PathBuf,
    /// State.
    pub state: IndexState,
    /// Files indexed.
    pub files: u64,
    /// Items indexed.
    pub items: u64,
    /// When the last full run finished.
    pub last_indexed_at: Option<SystemTime>,
    /// Bytes on disk.
    pub index_bytes: u64,
    /// Items with a vector.
    pub embedded_items: u64,
    /// Embedding model name, if any.
    pub embed_model: String,
    /// Why dense retrieval is unavailable (empty when it is available).
    pub dense_unavailable_reason: String,
}

/// One ranked hit with everything a response needs.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The item.
    pub record: ItemRecord,
    /// Source text as indexed.
    pub text: String,
    /// Fused (or BM25) score.
    pub score: f32,
    /// 1-based BM25 rank (0 = not found by BM25).
    pub bm25_rank: u32,
    /// 1-based dense rank (0 = not found by dense).
    pub dense_rank: u32,
}

/// Search results.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    /// Hits, best first.
    pub hits: Vec<SearchHit>,
    /// Method used after defaults and fallbacks.
    pub strategy: Strategy,
    /// Whether dense retrieval contributed.
    pub dense_used: bool,
    /// Why it did not.
    pub dense_unavailable_reason: String,
    /// The state of the index that answered.
    pub index_state: IndexState,
}

/// Outcome of reading one span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnippetStatus {
    /// Read; hash as expected.
    Ok,
    /// The file's hash differs from the expected one.
    Stale,
    /// No such file.
    Missing,
    /// Outside the file, or not on UTF-8 boundaries.
    OutOfRange,
}

/// One span to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanRequest {
    /// Path relative to the root.
    pub path: String,
    /// First byte.
    pub byte_start: u64,
    /// End byte.
    pub byte_end: u64,
    /// Expected file hash (empty = any).
    pub expected_hash: String,
}

/// One span read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    /// Path relative to the root.
    pub path: String,
    /// First byte.
    pub byte_start: u64,
    /// End byte.
    pub byte_end: u64,
    /// First line (1-based).
    pub line_start: u32,
    /// Last line (1-based).
    pub line_end: u32,
    /// Text.
    pub text: String,
    /// Current file hash.
    pub file_hash: String,
    /// Outcome.
    pub status: SnippetStatus,
}

/// What a lookup asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupTarget {
    /// Exact canonical path (or a Rust crate's public path, [`crate::index::WorkspaceIndex::lookup_canon`]).
    CanonPath(String),
    /// Bare or qualified name.
    Name(String),
    /// Every item of a file (relative path).
    File(String),
}

/// A finished refresh (from RefreshFiles or the watcher).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refreshed {
    /// Workspace root.
    pub root: PathBuf,
    /// The paths asked for.
    pub paths: Vec<String>,
    /// What changed.
    pub summary: Summary,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_ready_once_every_file_is_parsed() {
        let at = |phase| {
            IndexState::Indexing(Progress {
                phase,
                ..Progress::default()
            })
        };
        let told: Vec<&str> = [
            Phase::Scanning,
            Phase::Parsing,
            Phase::Embedding,
            Phase::Committing,
            Phase::Done,
        ]
        .into_iter()
        .map(|p| at(p).of_results().name())
        .collect();
        assert_eq!(told, ["indexing", "indexing", "ready", "ready", "ready"]);
        let failed = IndexState::Failed("disk full".into());
        assert_eq!(failed.of_results(), failed);
    }
}
