//! The lifecycle of edit proposals: staged from a tool call, persisted, decided (whole or per
//! edit) or expired, applied all-or-nothing under per-file locks, then re-indexed. A proposal's
//! id derives from (request_id, call_id), so a retried call finds its proposal again and
//! parallel calls of one request never collide.

mod apply;
mod applying;
mod decide;
mod locks;
mod outcome;
pub mod plan;
mod propose;
mod store;
mod store_pg;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ploke_proto::common::v1::Correlation;
use ploke_proto::tools::v1::{EditOutcome, EditProposal, ProposalState, ToolErrorCode, tool_call};
use ploke_runtime::principal;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use apply::{ApplyError, WholeFile, recover as recover_write, write_whole};
pub use store::StoreError;

use crate::error::ExecutorError;
use crate::failure::ToolFailure;
use crate::rag::Rag;
use crate::tools::{Limits, Progress};
use locks::FileLocks;
use outcome::outcome;
use propose::Planned;
use store::Store;

/// Runs before the rename of the n-th file while applying; tests make it fail to prove that a
/// failure midway restores every file. Production has none.
#[derive(Clone)]
pub struct FaultHook(pub Arc<dyn Fn(usize) -> std::io::Result<()> + Send + Sync>);

impl std::fmt::Debug for FaultHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FaultHook")
    }
}

/// How proposals are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Apply at once without waiting for a decision.
    pub auto_approve: bool,
    /// How long a proposal waits for a decision.
    pub approval_timeout: Duration,
    /// Where approved edits land.
    pub apply_to: ApplyTo,
}

/// Where approved edits land.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApplyTo {
    /// In the workspace's files (the developer's own tree: `ploke up`).
    #[default]
    Workspace,
    /// In the session's overlay, delivered to the developer's client; the served tree is never
    /// written (a shared deployment).
    Overlay,
}

/// A decision on a proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Approve (true) or deny.
    pub approve: bool,
    /// Edits the decision covers; empty = all.
    pub edit_indices: Vec<u32>,
    /// Words for the model.
    pub reason: String,
    /// Made by the auto-approve policy, not a person.
    pub by_policy: bool,
}

/// Staged edits and their decisions.
#[derive(Clone)]
pub struct Edits {
    store: Store,
    rag: Rag,
    limits: Limits,
    policy: Policy,
    undo_dir: PathBuf,
    locks: FileLocks,
    waiters: Arc<Mutex<HashMap<String, watch::Sender<Option<EditProposal>>>>>,
    fault: FaultHook,
    shutdown: CancellationToken,
    overlays: crate::overlay::Overlays,
}

impl std::fmt::Debug for Edits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edits")
            .field("policy", &self.policy)
            .field("undo_dir", &self.undo_dir)
            .finish_non_exhaustive()
    }
}

fn now() -> prost_types::Timestamp {
    prost_types::Timestamp::from(SystemTime::now())
}

fn to_system(t: &prost_types::Timestamp) -> SystemTime {
    SystemTime::try_from(*t).unwrap_or(SystemTime::UNIX_EPOCH)
}

fn is_final(state: ProposalState) -> bool {
    matches!(
        state,
        ProposalState::Applied
            | ProposalState::Denied
            | ProposalState::Stale
            | ProposalState::Expired
            | ProposalState::Failed
    )
}

/// The id of the proposal of call `call_id` in request `request_id` made for `owner`: a retried
/// call finds its proposal again; the same ids sent by another principal name another proposal.
pub fn proposal_id(owner: &str, request_id: &str, call_id: &str) -> String {
    let mut h = blake3::Hasher::new();
    if !owner.is_empty() {
        h.update(owner.as_bytes());
        h.update(&[0]);
    }
    h.update(request_id.as_bytes());
    h.update(&[0]);
    h.update(call_id.as_bytes());
    format!("edit-{}", &h.finalize().to_hex()[..20])
}

/// What a staging tool call brings.
#[derive(Debug, Clone)]
pub struct EditCall {
    /// Canonical workspace root.
    pub root: PathBuf,
    /// The turn and call.
    pub correlation: Correlation,
    /// `apply_code_edit` or `create_file` arguments.
    pub args: tool_call::Args,
    /// Longest wait for a decision the caller allows (its timeout).
    pub wait: Option<Duration>,
    /// Where `edit_proposed` goes.
    pub progress: Progress,
    /// The session's overlay, when it has one: files are read through it.
    pub view: Option<crate::overlay::View>,
}

impl Edits {
    /// Opens the proposal store under `data_dir` and rolls back any apply a crash interrupted.
    pub async fn open(
        data_dir: &Path,
        storage_url: Option<&str>,
        rag: Rag,
        limits: Limits,
        policy: Policy,
        fault: Option<FaultHook>,
        shutdown: CancellationToken,
    ) -> Result<Self, StoreError> {
        let store = Store::open(&data_dir.join("proposals.sqlite"), storage_url).await?;
        let edits = Self {
            store,
            overlays: crate::overlay::Overlays::new(rag.clone()),
            rag,
            limits,
            policy,
            undo_dir: data_dir.join("undo"),
            locks: FileLocks::default(),
            waiters: Arc::default(),
            fault: fault.unwrap_or_else(|| FaultHook(Arc::new(|_| Ok(())))),
            shutdown,
        };
        edits.recover().await?;
        Ok(edits)
    }

    /// Finishes what a crash interrupted: an apply with an undo record is rolled back; one
    /// without never wrote anything. With a database shared by replicas, only applies this
    /// replica's undo dir has a record of: the others may be running on another replica.
    async fn recover(&self) -> Result<(), StoreError> {
        for mut p in self
            .store
            .list("", None, &[ProposalState::Approved], 1000)
            .await?
        {
            let record = self.record_path(&p.proposal_id);
            if self.store.database().shared() && !record.exists() {
                continue;
            }
            let restored = apply::recover(&record);
            p.state = ProposalState::Failed as i32;
            p.state_reason = match restored {
                Ok(true) => "interrupted while applying; every file was restored".to_owned(),
                Ok(false) => "interrupted before anything was written".to_owned(),
                Err(e) => format!("interrupted while applying; restoring failed: {e}"),
            };
            tracing::warn!(proposal_id = %p.proposal_id, reason = %p.state_reason, "recovered an interrupted apply");
            self.store.transition(&p, ProposalState::Approved).await?;
        }
        let swept = apply::sweep_temp_files(&self.undo_dir);
        if swept > 0 {
            tracing::warn!(
                files = swept,
                "removed undo records a killed process left half-written"
            );
        }
        // Records of proposals that were marked applied before the record was removed. A
        // failed proposal's record is kept: its restore failed, and the record holds the
        // files as they were before (the failure's message names it).
        if let Ok(dir) = std::fs::read_dir(&self.undo_dir) {
            for entry in dir.flatten() {
                let id = entry
                    .path()
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned());
                let Some(id) = id else { continue };
                let Some((p, _)) = self.store.get(&id).await? else {
                    continue;
                };
                match p.state() {
                    ProposalState::Approved => {}
                    ProposalState::Failed => tracing::warn!(
                        proposal_id = %id,
                        record = %entry.path().display(),
                        "kept the undo record of an apply whose restore failed"
                    ),
                    _ => apply::discard(&entry.path()),
                }
            }
        }
        Ok(())
    }

    /// The proposal database (its health, its monitor, closing it).
    pub fn database(&self) -> &store::Database {
        self.store.database()
    }

    fn record_path(&self, id: &str) -> PathBuf {
        self.undo_dir.join(format!("{id}.json"))
    }

    /// Stages the call's edits, reports them, waits for the decision (or applies at once under
    /// auto-approve) and returns the outcome. Anything short of written files is a failure the
    /// model can read (denied, stale, expired).
    pub async fn stage_and_wait(&self, call: EditCall) -> Result<EditOutcome, ToolFailure> {
        let id = proposal_id(
            &principal::owner_name(),
            &call.correlation.request_id,
            &call.correlation.call_id,
        );
        let existing = self.store.get(&id).await.map_err(store_failure)?;
        // The id covers the owner; this only guards an ownerless caller naming an owner's ids.
        let existing = existing.filter(|(p, _)| principal::may_act_on(&p.owner));
        let proposal = match existing {
            Some((p, _)) if is_final(p.state()) => return outcome(&p),
            Some((p, _)) => p,
            None => self.stage(&id, &call).await?,
        };
        let rx = self.waiter(&id);
        if !call.progress.proposed(proposal.clone()).await {
            self.expire(&id, "the tool call ended before a decision")
                .await;
            return Err(ToolFailure::new(
                ToolErrorCode::Cancelled,
                "",
                "the call was cancelled",
            ));
        }
        let mut guard = PendingGuard {
            edits: Some(self.clone()),
            id: id.clone(),
        };
        let final_state = if self.policy.auto_approve {
            let decision = Decision {
                approve: true,
                edit_indices: Vec::new(),
                reason: "applied by the auto_approve policy".to_owned(),
                by_policy: true,
            };
            match self.decide(&id, decision).await {
                Ok(p) => p,
                Err(e) => {
                    guard.edits = None;
                    return Err(match e {
                        ExecutorError::Store(e) => store_failure(e),
                        e @ ExecutorError::Denied(_) => {
                            ToolFailure::new(ToolErrorCode::PermissionDenied, "", e.to_string())
                        }
                        // The proposal was made a moment ago by this call: nothing the model
                        // can mend by changing its arguments (a decision by a user in between
                        // reads as `NotPending`'s message).
                        e @ (ExecutorError::Workspace(_)
                        | ExecutorError::NoSuchProposal(_)
                        | ExecutorError::NotPending { .. }
                        | ExecutorError::BadEditIndex { .. }
                        | ExecutorError::Internal(_)) => ToolFailure::internal(e.to_string()),
                    });
                }
            }
        } else {
            let waited = tokio::select! {
                p = self.wait(&proposal, rx, call.wait) => Some(p),
                () = self.shutdown.cancelled() => None,
            };
            match waited {
                Some(p) => p,
                None => {
                    // Shutting down: the proposal stays pending for whoever calls again.
                    guard.edits = None;
                    return Err(ToolFailure::new(
                        ToolErrorCode::Unavailable,
                        "",
                        format!("tool-executor is shutting down; proposal {id} stays pending"),
                    )
                    .hint("call again with the same request_id and call_id to resume waiting for the decision"));
                }
            }
        };
        guard.edits = None;
        self.waiters.lock().map(|mut w| w.remove(&id)).ok();
        outcome(&final_state)
    }

    async fn stage(&self, id: &str, call: &EditCall) -> Result<EditProposal, ToolFailure> {
        let in_overlay = self.policy.apply_to == ApplyTo::Overlay;
        if in_overlay && call.correlation.session_id.is_empty() {
            return Err(ToolFailure::invalid(
                "",
                "edits in this deployment land in a session's overlay, and this call names no session",
            )
            .hint("call the tool within a session (correlation.session_id)"));
        }
        let view = call.view.as_ref();
        let (tool, planned) = match &call.args {
            tool_call::Args::ApplyCodeEdit(a) => (
                "apply_code_edit",
                propose::plan_code_edit(&call.root, &self.limits, &self.rag, a, view).await?,
            ),
            tool_call::Args::CreateFile(a) => {
                if let Some(v) = view {
                    let path = crate::paths::resolve(&call.root, "file_path", &a.file_path)?;
                    v.fetch(vec![path.rel]).await?;
                }
                let (root, limits, a) = (call.root.clone(), self.limits, a.clone());
                let view = call.view.clone();
                let planned = tokio::task::spawn_blocking(move || {
                    propose::plan_create_file(&root, &limits, &a, view.as_ref())
                })
                .await
                .map_err(|e| ToolFailure::internal(format!("planning task failed: {e}")))??;
                ("create_file", planned)
            }
            _ => return Err(ToolFailure::internal("not an edit tool")),
        };
        let Planned { plan, edits, files } = planned;
        let created = now();
        let expires = SystemTime::now() + self.policy.approval_timeout;
        let proposal = EditProposal {
            proposal_id: id.to_owned(),
            correlation: Some(call.correlation.clone()),
            workspace_root: call.root.display().to_string(),
            tool_name: tool.to_owned(),
            edits,
            files,
            state: ProposalState::Pending as i32,
            state_reason: String::new(),
            applied_edits: Vec::new(),
            created_at: Some(created),
            decided_at: None,
            expires_at: Some(prost_types::Timestamp::from(expires)),
            owner: principal::owner_name(),
            decided_by: String::new(),
            in_overlay,
            by_policy: self.policy.auto_approve,
        };
        if !self
            .store
            .insert(&proposal, &plan)
            .await
            .map_err(store_failure)?
        {
            // A concurrent retry of the same call staged it first.
            if let Some((p, _)) = self.store.get(id).await.map_err(store_failure)? {
                return Ok(p);
            }
        }
        tracing::info!(
            proposal_id = id,
            tool,
            edits = proposal.edits.len(),
            "edit proposed"
        );
        Ok(proposal)
    }

    fn waiter(&self, id: &str) -> watch::Receiver<Option<EditProposal>> {
        match self.waiters.lock() {
            Ok(mut w) => w
                .entry(id.to_owned())
                .or_insert_with(|| watch::channel(None).0)
                .subscribe(),
            Err(_) => watch::channel(None).1,
        }
    }

    fn notify(&self, p: &EditProposal) {
        if let Ok(w) = self.waiters.lock()
            && let Some(tx) = w.get(&p.proposal_id)
        {
            tx.send_replace(Some(p.clone()));
        }
    }

    async fn wait(
        &self,
        proposal: &EditProposal,
        mut rx: watch::Receiver<Option<EditProposal>>,
        limit: Option<Duration>,
    ) -> EditProposal {
        let expires = proposal
            .expires_at
            .as_ref()
            .map(to_system)
            .unwrap_or(SystemTime::now());
        let mut left = expires
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        if let Some(limit) = limit {
            left = left.min(limit);
        }
        // With replicas, a decision may be made through another one: the store tells.
        let shared = self.store.database().shared();
        let id = &proposal.proposal_id;
        let decided = tokio::time::timeout(left, async {
            tokio::select! {
                p = wait_final(&mut rx) => p,
                p = self.store.until_final(id, store::SHARED_POLL), if shared => Some(p),
            }
        })
        .await;
        if let Ok(Some(p)) = decided {
            return p;
        }
        let secs = left.as_secs();
        self.expire(
            &proposal.proposal_id,
            &format!("no decision arrived within {secs} s"),
        )
        .await;
        // Either expired now, or a decision won the race and is being applied.
        if let Some(p) = self.current(&proposal.proposal_id).await
            && is_final(p.state())
        {
            return p;
        }
        wait_final(&mut rx)
            .await
            .unwrap_or_else(|| proposal.clone())
    }

    async fn current(&self, id: &str) -> Option<EditProposal> {
        self.store.get(id).await.ok().flatten().map(|(p, _)| p)
    }

    /// Marks a pending proposal expired (no-op when it is no longer pending).
    async fn expire(&self, id: &str, reason: &str) {
        let Some(mut p) = self.current(id).await else {
            return;
        };
        if p.state() != ProposalState::Pending {
            return;
        }
        p.state = ProposalState::Expired as i32;
        p.state_reason = reason.to_owned();
        p.decided_at = Some(now());
        match self.store.transition(&p, ProposalState::Pending).await {
            Ok(true) => {
                tracing::info!(proposal_id = id, reason, "edit expired");
                self.notify(&p);
            }
            Ok(false) => {}
            Err(e) => tracing::error!(proposal_id = id, error = %e, "expiring a proposal failed"),
        }
    }

    /// Lazily expires `p` when its time is up; returns it as it now stands.
    async fn expire_if_due(&self, p: EditProposal) -> EditProposal {
        let due = p.state() == ProposalState::Pending
            && p.expires_at
                .as_ref()
                .is_some_and(|t| to_system(t) <= SystemTime::now());
        if !due {
            return p;
        }
        self.expire(&p.proposal_id, "no decision arrived before it expired")
            .await;
        self.current(&p.proposal_id).await.unwrap_or(p)
    }
}

/// The next final state published on `rx`; `None` if the sender is gone.
async fn wait_final(rx: &mut watch::Receiver<Option<EditProposal>>) -> Option<EditProposal> {
    loop {
        if let Some(p) = rx.borrow_and_update().clone()
            && is_final(p.state())
        {
            return Some(p);
        }
        if rx.changed().await.is_err() {
            return None;
        }
    }
}

fn store_failure(e: StoreError) -> ToolFailure {
    match e {
        e @ StoreError::Unavailable(_) => ToolFailure::unavailable(e.shown()),
        e => ToolFailure::internal(e.to_string()),
    }
}

/// Expires the proposal if the tool call is dropped (client gone, deadline) while it waits.
struct PendingGuard {
    edits: Option<Edits>,
    id: String,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        let Some(edits) = self.edits.take() else {
            return;
        };
        let id = std::mem::take(&mut self.id);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                edits
                    .expire(&id, "the tool call was cancelled before a decision")
                    .await;
                edits.waiters.lock().map(|mut w| w.remove(&id)).ok();
            });
        }
    }
}
