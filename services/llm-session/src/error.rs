//! The error enum of llm-session's domain.

use ploke_runtime::workspaces::WorkspaceError;

use crate::store::StoreError;

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
    /// No provider was named and none is configured as the default.
    #[error(
        "no provider: configure [providers.NAME] in ploke.toml (and [session] default_provider), or name one in the request"
    )]
    NoProvider,
    /// The provider cannot be used as configured (e.g. its key is missing).
    #[error("provider `{name}`: {reason}")]
    ProviderUnusable {
        /// Provider name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The provider names no model and the request gave none.
    #[error("provider `{0}` has no default_model; pass a model")]
    NoModel(String),
    /// No session has this id.
    #[error("session {0}")]
    NoSuchSession(String),
    /// The calling principal may not do this (list others' sessions, use this workspace).
    #[error(transparent)]
    Denied(#[from] ploke_runtime::principal::Denied),
    /// A turn is running in the session.
    #[error(
        "session {session_id} is running a turn (parent {parent_id}); wait for it to end or cancel it (`ploke sessions cancel {session_id}`)"
    )]
    Busy {
        /// Session id.
        session_id: String,
        /// The running turn.
        parent_id: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A task of the service failed (panicked, or the runtime is shutting down).
    #[error("session task failed: {0}")]
    Task(String),
}
