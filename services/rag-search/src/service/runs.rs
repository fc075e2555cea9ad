//! Index runs of the service: one at a time per workspace, started with the service for every
//! configured workspace or by IndexWorkspace; a caller who finds a run going follows it (its
//! progress streams to them) and then runs its own, so its answer covers its own changes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::{IndexState, RagService, Slot, lock_poisoned};
use crate::error::RagError;
use crate::index::{self, Phase, Progress, Summary};

/// What a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Work {
    /// Index every changed file (every file with `force`), then embed.
    Index {
        /// Parse unchanged files too.
        force: bool,
    },
    /// Only embed the items without a vector (what a refresh left to the background).
    Embed,
}

/// What the latest index run of a workspace reported last.
#[derive(Debug, Clone)]
pub(super) enum RunEvent {
    /// It is going.
    Progress(Progress),
    /// It ended (the error as text: callers who joined it get it as [`RagError::RunFailed`]).
    Finished(Result<Summary, String>),
}

impl RagService {
    /// Indexes a workspace, sending progress to `progress` (dropped when the receiver lags).
    /// Needs an admin principal (or a trusted caller) that may use the workspace.
    pub async fn index(
        &self,
        workspace_root: &str,
        force: bool,
        progress: mpsc::Sender<Progress>,
    ) -> Result<Summary, RagError> {
        ploke_runtime::principal::require_admin("IndexWorkspace")?;
        self.index_now(workspace_root, force, progress).await
    }

    /// IndexWorkspace's checks, in the request's task before its stream starts: an admin
    /// principal (or a trusted caller) that may use the workspace; the workspace's status.
    pub fn may_index(&self, workspace_root: &str) -> Result<super::Status, RagError> {
        ploke_runtime::principal::require_admin("IndexWorkspace")?;
        self.status(workspace_root)
    }

    async fn index_now(
        &self,
        workspace_root: &str,
        force: bool,
        progress: mpsc::Sender<Progress>,
    ) -> Result<Summary, RagError> {
        let (root, slot) = self.slot(workspace_root)?;
        // A run already going (the one started with the service, or another caller's) may
        // have scanned before this call's changes: it is followed to its end (its progress
        // streams to the caller), then this call's own run starts, which costs a hash per
        // unchanged file. A run another caller started meanwhile is as fresh: it is joined.
        // The summary is of everything done between the call and its answer.
        let mut earlier: Option<Summary> = None;
        loop {
            let own = match begin(&root, &slot)? {
                None => {
                    self.run(root, slot, Work::Index { force }, progress)
                        .await?
                }
                Some(mut runs) if earlier.is_some() => follow(&mut runs, &progress).await?,
                Some(mut runs) => {
                    // Its failure is its callers' business; this call runs its own.
                    earlier = Some(follow(&mut runs, &progress).await.unwrap_or_default());
                    continue;
                }
            };
            return Ok(match earlier {
                // A forced run parsed every file again: its own figures are the whole answer
                // (added up, every file would count twice and every vector once more reused).
                Some(_) if force => own,
                Some(e) => e.then(own),
                None => own,
            });
        }
    }

    /// Runs an index run [`begin`] started.
    async fn run(
        &self,
        root: PathBuf,
        slot: Arc<Slot>,
        work: Work,
        progress: mpsc::Sender<Progress>,
    ) -> Result<Summary, RagError> {
        let task_slot = slot.clone();
        let embedder = self.embedder.clone();
        let started = std::time::Instant::now();
        // An index run embeds after committing what it parsed: the index can be written again
        // (a full disk freed), so a storage fault is cleared then, not once every item has its
        // vector (minutes on a large workspace, with searches answering all along).
        let written = matches!(work, Work::Index { .. })
            .then(|| self.readiness.clone())
            .flatten()
            .map(|readiness| (readiness, tokio::runtime::Handle::current()));
        let outcome = tokio::task::spawn_blocking(move || {
            let mut written = written;
            let mut report = |mut p: Progress| {
                p.elapsed = started.elapsed();
                if let Ok(mut s) = task_slot.state.lock() {
                    *s = IndexState::Indexing(p.clone());
                    task_slot.runs.send_replace(RunEvent::Progress(p.clone()));
                }
                if p.phase == Phase::Embedding
                    && let Some((readiness, runtime)) = written.take()
                {
                    runtime.block_on(readiness.set_degraded(super::INDEX_STORAGE_FAULT, None));
                }
                let _ = progress.try_send(p);
            };
            let result = match work {
                Work::Index { force } => {
                    index::build(&*task_slot, force, embedder.as_deref(), &mut report)
                }
                Work::Embed => index::embed_pending(&*task_slot, embedder.as_deref(), &mut report),
            };
            Ok::<_, RagError>(result?)
        })
        .await
        .map_err(|e| RagError::Internal(format!("indexing task: {e}")))
        .and_then(|r| r);
        let outcome = self.storage_outcome(outcome).await;
        if let Err(RagError::IndexStorage { .. }) = &outcome {
            self.storage_failed(&root);
        }
        let mut state = slot.state.lock().map_err(|_| lock_poisoned())?;
        *state = match &outcome {
            Ok(_) => IndexState::Ready,
            Err(e) => IndexState::Failed(e.to_string()),
        };
        slot.runs.send_replace(RunEvent::Finished(match &outcome {
            Ok(s) => Ok(s.clone()),
            Err(e) => Err(e.to_string()),
        }));
        drop(state);
        if let Ok(summary) = &outcome {
            ploke_runtime::metrics::record::index_items(&root, summary.items_total);
            ploke_runtime::metrics::record::index_run("full", summary.duration);
            tracing::info!(
                root = %root.display(),
                files_indexed = summary.files_indexed,
                files_unchanged = summary.files_unchanged,
                items = summary.items_total,
                embedded = summary.items_embedded,
                reused = summary.embeddings_reused,
                ms = summary.duration.as_millis() as u64,
                "workspace indexed"
            );
        }
        outcome
    }

    /// Brings every configured workspace's index up to date in the background (index from
    /// nothing, or refresh by hash); searches answer from the last commit meanwhile. Each run
    /// has begun when this returns, so no caller sees "not indexed" for a workspace about to
    /// be indexed, and an IndexWorkspace call joins it.
    pub fn index_in_background(&self) -> Vec<tokio::task::JoinHandle<()>> {
        let mut started = Vec::new();
        let slots: Vec<(PathBuf, Arc<Slot>)> = self
            .slots
            .read()
            .map(|s| s.iter().map(|(r, s)| (r.clone(), s.clone())).collect())
            .unwrap_or_default();
        for (root, slot) in slots {
            started.extend(self.index_slot_in_background(root, slot));
        }
        started
    }

    /// Starts a background run on one workspace unless one is going already.
    pub(super) fn index_slot_in_background(
        &self,
        root: PathBuf,
        slot: Arc<Slot>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        match begin(&root, &slot) {
            Ok(None) => {}
            Ok(Some(_)) => return None,
            Err(e) => {
                tracing::warn!(root = %root.display(), error = %e, "background indexing could not start");
                return None;
            }
        }
        let service = self.clone();
        Some(tokio::spawn(async move {
            let (tx, _) = mpsc::channel(1);
            tracing::info!(root = %root.display(), "background indexing started");
            if let Err(e) = service
                .run(root.clone(), slot, Work::Index { force: false }, tx)
                .await
            {
                tracing::warn!(root = %root.display(), error = %e, "background indexing failed; searches answer from the last committed index");
            }
        }))
    }
}

impl RagService {
    /// Embeds, in the background, the items a refresh left without a vector; after the run
    /// going, if one is (it may have passed its own embedding already).
    pub(super) fn embed_in_background(&self, root: PathBuf, slot: Arc<Slot>) {
        let service = self.clone();
        tokio::spawn(async move {
            let (tx, _) = mpsc::channel(1);
            // A few runs at most: each one followed ends before the next look.
            for _ in 0..3 {
                match begin(&root, &slot) {
                    Ok(None) => {
                        match service.run(root.clone(), slot, Work::Embed, tx).await {
                            Ok(s) => {
                                tracing::info!(root = %root.display(), embedded = s.items_embedded, "items a refresh left were embedded")
                            }
                            Err(e) => {
                                tracing::warn!(root = %root.display(), error = %e, "embedding what a refresh left failed; the next run embeds it")
                            }
                        }
                        return;
                    }
                    Ok(Some(mut going)) => {
                        let _ = follow(&mut going, &tx).await;
                    }
                    Err(e) => {
                        tracing::warn!(root = %root.display(), error = %e, "embedding what a refresh left could not start");
                        return;
                    }
                }
            }
        });
    }
}

/// Starts a run on `slot` (None: the caller runs it) or, when one is going, subscribes to it.
pub(super) fn begin(
    root: &Path,
    slot: &Slot,
) -> Result<Option<tokio::sync::watch::Receiver<RunEvent>>, RagError> {
    let mut state = slot.state.lock().map_err(|_| lock_poisoned())?;
    if matches!(*state, IndexState::Indexing(_)) {
        return Ok(Some(slot.runs.subscribe()));
    }
    let first = Progress {
        message: format!("starting {}", root.display()),
        ..Progress::default()
    };
    *state = IndexState::Indexing(first.clone());
    slot.runs.send_replace(RunEvent::Progress(first));
    Ok(None)
}

/// Follows a run someone else started: its progress to `progress`, then its outcome.
pub(super) async fn follow(
    runs: &mut tokio::sync::watch::Receiver<RunEvent>,
    progress: &mpsc::Sender<Progress>,
) -> Result<Summary, RagError> {
    loop {
        let event = runs.borrow_and_update().clone();
        match event {
            RunEvent::Progress(p) => {
                let _ = progress.try_send(p);
            }
            RunEvent::Finished(outcome) => return outcome.map_err(RagError::RunFailed),
        }
        if runs.changed().await.is_err() {
            return Err(RagError::Internal("the index run went away".into()));
        }
    }
}
