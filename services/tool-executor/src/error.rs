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
    #[error(
        "proposal {id} is {}{}; only a pending proposal can be decided",
        state.as_str_name().trim_start_matches("PROPOSAL_STATE_").to_lowercase(),
        if reason.is_empty() { String::new() } else { format!(" ({reason})") }
    )]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decided_proposal_names_its_state_and_a_reason_only_when_there_is_one() {
        let raced = ExecutorError::NotPending {
            id: "edit-1".into(),
            state: ProposalState::Approved,
            reason: String::new(),
        };
        assert_eq!(
            raced.to_string(),
            "proposal edit-1 is approved; only a pending proposal can be decided"
        );
        let stale = ExecutorError::NotPending {
            id: "edit-2".into(),
            state: ProposalState::Stale,
            reason: "src/lib.rs changed".into(),
        };
        assert_eq!(
            stale.to_string(),
            "proposal edit-2 is stale (src/lib.rs changed); only a pending proposal can be decided"
        );
    }
}
