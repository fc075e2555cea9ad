//! The error enum of tool-executor's RPC-level operations (tool calls themselves end in a
//! [`crate::failure::ToolFailure`], not here).

use ploke_proto::tools::v1::ProposalState;
use ploke_runtime::workspaces::WorkspaceError;

use crate::edits::StoreError;

/// Why a tool-executor operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    /// The request's workspace could not be resolved.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// No proposal has this id.
    #[error("proposal {0}")]
    NoSuchProposal(String),
    /// The proposal was decided already (or expired).
    #[error("proposal {id} is {} ({reason}); only a pending proposal can be decided", state.as_str_name())]
    NotPending {
        /// Proposal id.
        id: String,
        /// Its state.
        state: ProposalState,
        /// Why it is in that state.
        reason: String,
    },
    /// An edit index past the proposal's edits.
    #[error("edit index {index} is out of range; the proposal has {count} edit(s)")]
    BadEditIndex {
        /// The index.
        index: u32,
        /// Edits in the proposal.
        count: u32,
    },
    /// The calling principal may not do this (list others' proposals, use the workspace).
    #[error(transparent)]
    Denied(#[from] ploke_runtime::principal::Denied),
    /// The proposal store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An unexpected failure.
    #[error("{0}")]
    Internal(String),
}
