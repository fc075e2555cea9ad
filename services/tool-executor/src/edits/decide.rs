//! Deciding proposals: listing them (the caller's own, admins everyone's), a decision (deny,
//! or approve the chosen edits and apply them), the delivery of an apply to an overlay, and the
//! ownership check every one of these makes first.

use std::path::Path;

use ploke_proto::tools::v1::{EditProposal, ProposalState};
use ploke_runtime::principal;

use super::plan::Plan;
use super::{Decision, Edits, now};
use crate::error::ExecutorError;

impl Edits {
    /// Proposals newest first: the caller's own, or every principal's when an admin asks for
    /// `all_principals`.
    pub async fn list(
        &self,
        session_id: &str,
        all_principals: bool,
        states: &[ProposalState],
        limit: u32,
    ) -> Result<Vec<EditProposal>, ExecutorError> {
        let owner = match (principal::current(), all_principals) {
            (None, _) => None,
            (Some(_), true) => {
                principal::require_admin("ListEdits with all_principals")?;
                None
            }
            (Some(p), false) => Some(p.listed_owners()),
        };
        let mut out = Vec::new();
        for p in self
            .store
            .list(session_id, owner.as_deref(), states, limit)
            .await?
        {
            let p = self.expire_if_due(p).await;
            if states.is_empty() || states.contains(&p.state()) {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// Decides a pending proposal: deny, or apply the chosen edits (every file or none).
    pub async fn decide(
        &self,
        id: &str,
        decision: Decision,
    ) -> Result<EditProposal, ExecutorError> {
        let (p, plan) = self.own_proposal(id).await?;
        let mut p = self.expire_if_due(p).await;
        if p.state() != ProposalState::Pending {
            return Err(ExecutorError::NotPending {
                id: id.to_owned(),
                state: p.state(),
                reason: p.state_reason.clone(),
            });
        }
        let count = p.edits.len() as u32;
        if let Some(bad) = decision.edit_indices.iter().find(|i| **i >= count) {
            return Err(ExecutorError::BadEditIndex { index: *bad, count });
        }
        let named: Vec<u32> = {
            let mut v = decision.edit_indices.clone();
            v.sort_unstable();
            v.dedup();
            v
        };
        // Approve: the named edits (all when none named). Deny: all, or the named ones while
        // the others are applied.
        let chosen: Vec<u32> = match (decision.approve, named.is_empty()) {
            (true, true) => plan.all_indices(),
            (true, false) => named,
            (false, true) => Vec::new(),
            (false, false) => plan
                .all_indices()
                .into_iter()
                .filter(|i| !named.contains(i))
                .collect(),
        };
        p.decided_at = Some(now());
        p.decided_by = if decision.by_policy {
            "auto_approve".to_owned()
        } else {
            principal::owner_name()
        };
        if chosen.is_empty() {
            p.state = ProposalState::Denied as i32;
            p.state_reason = if decision.reason.is_empty() {
                "denied by the user".to_owned()
            } else {
                decision.reason.clone()
            };
            if !self.store.transition(&p, ProposalState::Pending).await? {
                return Err(self.lost_race(id).await);
            }
            tracing::info!(proposal_id = id, "edit denied");
            self.notify(&p);
            return Ok(p);
        }
        p.state = ProposalState::Approved as i32;
        if !self.store.transition(&p, ProposalState::Pending).await? {
            return Err(self.lost_race(id).await);
        }
        let p = self.apply(p, &plan, &chosen, &decision.reason).await?;
        // The waiting tool call learns the outcome first; the index follows the files after.
        self.notify(&p);
        self.refresh_applied(&p, &plan, &chosen).await;
        Ok(p)
    }

    /// The proposal and its plan, if the current principal may act on it: another principal's
    /// proposal is answered exactly like one that does not exist.
    async fn own_proposal(&self, id: &str) -> Result<(EditProposal, Plan), ExecutorError> {
        match self.store.get(id).await? {
            Some((p, plan)) if principal::may_act_on(&p.owner) => {
                // Its owner still needs the workspace (a principal taken off it may not
                // approve what was staged there before).
                principal::check_workspace(Path::new(&p.workspace_root))?;
                Ok((p, plan))
            }
            Some(_) | None => Err(ExecutorError::NoSuchProposal(id.to_owned())),
        }
    }

    /// An applied proposal's deliveries (the files its apply to an overlay wrote, for the
    /// developer's client), with the proposal.
    pub async fn delivery(
        &self,
        id: &str,
    ) -> Result<(EditProposal, Vec<ploke_proto::tools::v1::FileDelivery>), ExecutorError> {
        let (p, _) = self.own_proposal(id).await?;
        let p = self.expire_if_due(p).await;
        let files = if p.in_overlay && p.state() == ProposalState::Applied {
            self.store.deliveries(id).await?
        } else {
            Vec::new()
        };
        Ok((p, files))
    }

    async fn lost_race(&self, id: &str) -> ExecutorError {
        let p = self.current(id).await.unwrap_or_default();
        ExecutorError::NotPending {
            id: id.to_owned(),
            state: p.state(),
            reason: p.state_reason,
        }
    }
}
