//! The error enum of llm-session's domain.

use ploke_runtime::workspaces::WorkspaceError;

/// Why an llm-session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The request's workspace could not be resolved.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// The request named a provider that is not configured.
    #[error("provider `{name}` is not configured; configured: {configured}")]
    UnknownProvider {
        /// The name asked for.
        name: String,
        /// The configured names, comma-separated.
        configured: String,
    },
    /// No session has this id.
    #[error("session {0}")]
    NoSuchSession(String),
    /// The capability has not been built yet.
    #[error("{0} is not implemented yet")]
    NotYet(&'static str),
}
