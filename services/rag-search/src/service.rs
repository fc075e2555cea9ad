//! rag-search's domain: resolves workspaces and runs index and retrieval operations. Indexing
//! and retrieval are the capability of the rag-search issue; until it lands every operation
//! resolves its workspace and reports `NotYet`.

use std::path::PathBuf;

use ploke_runtime::workspaces::Workspaces;

use crate::error::RagError;

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
}

/// The rag-search domain service.
#[derive(Debug, Clone)]
pub struct RagService {
    workspaces: Workspaces,
}

impl RagService {
    /// A service over `workspaces`.
    pub fn new(workspaces: Workspaces) -> Self {
        Self { workspaces }
    }

    /// The workspace a request means.
    pub fn workspace(&self, requested: &str) -> Result<PathBuf, RagError> {
        Ok(self.workspaces.resolve(requested)?)
    }

    /// Index a workspace.
    pub fn index(&self, workspace_root: &str) -> Result<(), RagError> {
        self.workspace(workspace_root)?;
        Err(RagError::NotYet("workspace indexing"))
    }

    /// Status of a workspace index.
    pub fn status(&self, workspace_root: &str) -> Result<(), RagError> {
        self.workspace(workspace_root)?;
        Err(RagError::NotYet("index status"))
    }

    /// Ranked search.
    pub fn search(&self, query: &SearchQuery) -> Result<(), RagError> {
        self.workspace(&query.workspace_root)?;
        Err(RagError::NotYet("hybrid search"))
    }

    /// Context assembly.
    pub fn context(&self, query: &SearchQuery) -> Result<(), RagError> {
        self.workspace(&query.workspace_root)?;
        Err(RagError::NotYet("context assembly"))
    }

    /// Exact snippets.
    pub fn snippets(&self, workspace_root: &str) -> Result<(), RagError> {
        self.workspace(workspace_root)?;
        Err(RagError::NotYet("snippet reading"))
    }

    /// Item lookup.
    pub fn lookup(&self, workspace_root: &str) -> Result<(), RagError> {
        self.workspace(workspace_root)?;
        Err(RagError::NotYet("item lookup"))
    }

    /// Incremental refresh.
    pub fn refresh(&self, workspace_root: &str) -> Result<(), RagError> {
        self.workspace(workspace_root)?;
        Err(RagError::NotYet("incremental refresh"))
    }
}
