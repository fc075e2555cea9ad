//! The error enum of tool-executor's domain.

use ploke_runtime::workspaces::WorkspaceError;

/// Why a tool-executor operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The request's workspace could not be resolved.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// No proposal has this id.
    #[error("proposal {0}")]
    NoSuchProposal(String),
    /// The capability has not been built yet.
    #[error("{0} is not implemented yet")]
    NotYet(&'static str),
}
