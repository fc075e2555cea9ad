//! Applying an approved proposal: every chosen edit written all-or-nothing under per-file
//! locks (temp file, fsync, rename, undo record), the outcome recorded, the index refreshed.
//! A proposal of a shared deployment lands in the session's overlay instead: the new contents
//! go to rag-search in one compare-and-set write (each file only over the content the proposal
//! was made against) and are kept as the delivery the developer's client writes locally; the
//! served tree is never touched.

use std::path::{Path, PathBuf};

use ploke_proto::rag::v1::OverlayFile;
use ploke_proto::tools::v1::{EditProposal, FileDelivery, ProposalState};
use ploke_runtime::principal;

use super::Edits;
use super::apply::{self, ApplyError};
use super::outcome::applied_reason;
use super::plan::Plan;
use super::store::StoreError;
use crate::error::ExecutorError;
use crate::paths::resolve;
use ploke_runtime::storage_health::StorageFault;

impl Edits {
    pub(super) async fn apply(
        &self,
        mut p: EditProposal,
        plan: &Plan,
        chosen: &[u32],
        reason: &str,
    ) -> Result<EditProposal, ExecutorError> {
        if p.in_overlay {
            return self.apply_to_overlay(p, plan, chosen, reason).await;
        }
        let root = PathBuf::from(&p.workspace_root);
        let files = chosen_files(plan, chosen);
        let _guards = self
            .locks
            .lock_all(files.iter().map(|f| root.join(f)).collect())
            .await;
        let record = self.record_path(&p.proposal_id);
        let (plan2, chosen2, files2, fault, root2, record2) = (
            plan.clone(),
            chosen.to_vec(),
            files.clone(),
            self.fault.clone(),
            root.clone(),
            record.clone(),
        );
        let written = tokio::task::spawn_blocking(move || {
            apply::write_chosen(
                &root2,
                &plan2,
                &chosen2,
                &files2,
                &record2,
                fault.0.as_ref(),
            )
        })
        .await
        .map_err(|e| ExecutorError::Internal(format!("apply task failed: {e}")))?;
        if let Err(e @ ApplyError::Unrecorded { .. }) = &written {
            // Nothing was written and nothing is lost: the proposal waits again, and the one
            // who decided is told storage is short (UNAVAILABLE), to decide again later.
            let fault = StorageFault {
                reason: e.to_string(),
            };
            tracing::error!(proposal_id = %p.proposal_id, reason = %fault.reason, "apply not started: no undo record");
            p.state = ProposalState::Pending as i32;
            p.decided_at = None;
            p.decided_by = String::new();
            self.store.transition(&p, ProposalState::Approved).await?;
            return Err(ExecutorError::Store(StoreError::Unavailable(fault)));
        }
        let denied: Vec<u32> = plan
            .all_indices()
            .into_iter()
            .filter(|i| !chosen.contains(i))
            .collect();
        match &written {
            Ok(()) => {
                p.state = ProposalState::Applied as i32;
                p.applied_edits = chosen.to_vec();
                p.state_reason = applied_reason(chosen, &denied, reason);
            }
            Err(e) => {
                p.state = e.state() as i32;
                p.state_reason = e.to_string();
            }
        }
        if let Err(e) = self.store.transition(&p, ProposalState::Approved).await {
            // The outcome could not be recorded, so nothing may count as applied: the files go
            // back as they were (the proposal stays approved; the next start marks it failed).
            if written.is_ok() {
                match apply::recover(&record) {
                    Ok(_) => {
                        tracing::error!(proposal_id = %p.proposal_id, error = %e, "recording an apply failed; its files were restored")
                    }
                    Err(r) => {
                        tracing::error!(proposal_id = %p.proposal_id, error = %e, restore = %r, record = %record.display(), "recording an apply failed and restoring its files failed")
                    }
                }
            }
            return Err(e.into());
        }
        if !matches!(written, Err(ApplyError::RestoreFailed { .. })) {
            apply::discard(&record);
        }
        tracing::info!(proposal_id = %p.proposal_id, decided_by = %p.decided_by, state = p.state().as_str_name(), reason = %p.state_reason, "edit decided");
        Ok(p)
    }

    /// Has the index re-read the files an applied proposal wrote into the workspace (an
    /// overlay's apply has updated its overlay already). A failure leaves the watcher to
    /// catch up.
    pub(super) async fn refresh_applied(&self, p: &EditProposal, plan: &Plan, chosen: &[u32]) {
        if p.in_overlay || p.state() != ProposalState::Applied {
            return;
        }
        let root = PathBuf::from(&p.workspace_root);
        if let Err(e) = self.rag.refresh(&root, chosen_files(plan, chosen)).await {
            tracing::warn!(proposal_id = %p.proposal_id, error = %e, "index refresh after apply failed");
        }
    }

    /// Applies the chosen edits to the session's overlay and records what is delivered.
    async fn apply_to_overlay(
        &self,
        mut p: EditProposal,
        plan: &Plan,
        chosen: &[u32],
        reason: &str,
    ) -> Result<EditProposal, ExecutorError> {
        let root = PathBuf::from(&p.workspace_root);
        let session = p
            .correlation
            .as_ref()
            .map(|c| c.session_id.clone())
            .unwrap_or_default();
        let files = chosen_files(plan, chosen);
        // The overlay is the session owner's, whoever decided (an admin, the auto-approve
        // policy): the write is made as the owner, so an overlay it creates is theirs.
        let owner = (!p.owner.is_empty()).then(|| principal::Principal {
            name: p.owner.clone(),
            role: principal::Role::User,
            workspaces: vec![p.workspace_root.clone()],
            read_only: false,
        });
        let written = principal::scope(
            owner,
            self.write_overlay(&root, &session, plan, chosen, &files),
        )
        .await;
        let denied: Vec<u32> = plan
            .all_indices()
            .into_iter()
            .filter(|i| !chosen.contains(i))
            .collect();
        let deliveries = match written {
            Ok(deliveries) => {
                p.state = ProposalState::Applied as i32;
                p.applied_edits = chosen.to_vec();
                p.state_reason = applied_reason(chosen, &denied, reason);
                Some(deliveries)
            }
            Err(e) => {
                p.state = e.state() as i32;
                p.state_reason = e.to_string();
                None
            }
        };
        self.store
            .transition_delivering(&p, ProposalState::Approved, deliveries.as_deref())
            .await?;
        tracing::info!(
            proposal_id = %p.proposal_id,
            session_id = %session,
            decided_by = %p.decided_by,
            state = p.state().as_str_name(),
            reason = %p.state_reason,
            "edit decided (the session's overlay)"
        );
        Ok(p)
    }

    /// The new content of every file, checked against the session's current version of it,
    /// written to the overlay in one compare-and-set request.
    async fn write_overlay(
        &self,
        root: &Path,
        session: &str,
        plan: &Plan,
        chosen: &[u32],
        files: &[String],
    ) -> Result<Vec<FileDelivery>, ApplyError> {
        let failed = |file: &str, reason: String| ApplyError::Failed {
            file: file.to_owned(),
            reason,
        };
        // What a failure before any one file names.
        let all = match files {
            [] => "the overlay".to_owned(),
            [one] => one.clone(),
            [first, rest @ ..] => format!("{first} and {} more", rest.len()),
        };
        let view = self
            .overlays
            .view(root, session)
            .await
            .map_err(|e| failed(&all, e.message.clone()))?;
        if let Some(v) = &view {
            v.fetch(files.to_vec())
                .await
                .map_err(|e| failed(&all, e.message.clone()))?;
        }
        let (root2, files2, max) = (root.to_owned(), files.to_vec(), self.limits.max_file_bytes);
        let view2 = view.clone();
        let currents = tokio::task::spawn_blocking(move || {
            files2
                .iter()
                .map(|f| current(&root2, f, view2.as_ref(), max))
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| failed(&all, format!("reading task failed: {e}")))?;
        let mut puts = Vec::with_capacity(files.len());
        let mut deliveries = Vec::with_capacity(files.len());
        for (f, now) in files.iter().zip(currents) {
            let now = now?;
            let base = plan.file(f).and_then(|x| x.base_hash.clone());
            let stale = |why| ApplyError::Stale {
                file: f.clone(),
                why,
            };
            match (&base, &now) {
                (None, Some(_)) => return Err(stale("was created")),
                (Some(_), None) => return Err(stale("was deleted")),
                (Some(b), Some((_, h))) if b != h => return Err(stale("changed")),
                (None, None) | (Some(_), Some(_)) => {}
            }
            let original = now.map(|(text, _)| text).unwrap_or_default();
            let content = plan
                .content_with(f, &original, chosen)
                .map_err(|reason| failed(f, reason))?
                .unwrap_or(original);
            let hash = blake3::hash(content.as_bytes()).to_hex().to_string();
            puts.push(OverlayFile {
                path: f.clone(),
                content: content.clone().into_bytes(),
                expected_hash: base.clone().unwrap_or_default(),
            });
            deliveries.push(FileDelivery {
                file_path: f.clone(),
                base_hash: base.unwrap_or_default(),
                hash,
                content: content.into_bytes(),
            });
        }
        match self.overlays.put(root, session, puts).await {
            Ok(()) => Ok(deliveries),
            // Another write reached the overlay between the check and the put.
            Err(s) if s.code() == tonic::Code::FailedPrecondition => Err(ApplyError::Stale {
                file: files.join(", "),
                why: "changed in the session's overlay",
            }),
            Err(s) => Err(failed(&all, format!("rag-search: {}", s.message()))),
        }
    }
}

/// The files that the chosen edits touch, in plan order.
fn chosen_files(plan: &Plan, chosen: &[u32]) -> Vec<String> {
    plan.files
        .iter()
        .filter(|f| {
            plan.edits
                .iter()
                .any(|e| e.file == f.file && chosen.contains(&e.index))
        })
        .map(|f| f.file.clone())
        .collect()
}

/// The session's current text and hash of `rel` (`None` when it does not exist there).
fn current(
    root: &Path,
    rel: &str,
    view: Option<&crate::overlay::View>,
    max: u64,
) -> Result<Option<(String, String)>, ApplyError> {
    let stale = |why| ApplyError::Stale {
        file: rel.to_owned(),
        why,
    };
    let path = resolve(root, "file_path", rel)
        .map_err(|_| stale("no longer resolves inside the workspace"))?;
    if !crate::overlay::exists(view, &path).map_err(|_| stale("is being uploaded again"))? {
        return Ok(None);
    }
    crate::overlay::read_text(view, &path, "file_path", max)
        .map(Some)
        .map_err(|_| stale("can no longer be read"))
}
