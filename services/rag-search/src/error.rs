//! The error enum of rag-search's domain.

use ploke_runtime::workspaces::WorkspaceError;

/// Why a rag-search operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RagError {
    /// The request's workspace could not be resolved.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// The capability has not been built yet.
    #[error("{0} is not implemented yet")]
    NotYet(&'static str),
}
