//! What a decided proposal means to the model: written files are a result, anything else a
//! typed failure that says nothing was written and what to do next.

use ploke_proto::tools::v1::{EditOutcome, EditProposal, ProposalState, ToolErrorCode};

use crate::failure::ToolFailure;

/// The state reason of an applied proposal.
pub(super) fn applied_reason(chosen: &[u32], denied: &[u32], reason: &str) -> String {
    let mut s = if denied.is_empty() {
        format!("applied {} edit(s)", chosen.len())
    } else {
        format!("applied edits {chosen:?}; edits {denied:?} were denied")
    };
    if !reason.is_empty() {
        s.push_str(": ");
        s.push_str(reason);
    }
    s
}

/// The tool outcome of a final proposal: written files are a result, everything else an error.
pub(super) fn outcome(p: &EditProposal) -> Result<EditOutcome, ToolFailure> {
    let id = &p.proposal_id;
    let fail =
        |code, message: String, hint: &str| Err(ToolFailure::new(code, "", message).hint(hint));
    match p.state() {
        ProposalState::Applied => {
            let files_changed = p
                .files
                .iter()
                .filter(|f| {
                    p.edits
                        .iter()
                        .any(|e| e.file_path == f.file_path && p.applied_edits.contains(&e.index))
                })
                .map(|f| f.file_path.clone())
                .collect();
            Ok(EditOutcome {
                proposal_id: id.clone(),
                state: p.state,
                applied_edits: p.applied_edits.clone(),
                files_changed,
                message: p.state_reason.clone(),
                in_overlay: p.in_overlay,
            })
        }
        ProposalState::Denied => fail(
            ToolErrorCode::Denied,
            format!(
                "the user denied proposal {id}; nothing was written: {}",
                p.state_reason
            ),
            "do not repeat the same edit; ask the user or propose something different",
        ),
        ProposalState::Stale => fail(
            ToolErrorCode::Stale,
            format!("proposal {id}: {}", p.state_reason),
            "read the file again and propose the edit against its current content",
        ),
        ProposalState::Expired => fail(
            ToolErrorCode::Expired,
            format!(
                "proposal {id} expired; nothing was written: {}",
                p.state_reason
            ),
            "",
        ),
        ProposalState::Failed => fail(
            ToolErrorCode::Internal,
            format!("proposal {id} failed: {}", p.state_reason),
            "",
        ),
        ProposalState::Unspecified | ProposalState::Pending | ProposalState::Approved => fail(
            ToolErrorCode::Internal,
            format!("proposal {id} ended in state {}", p.state().as_str_name()),
            "",
        ),
    }
}
