//! Recovery from index storage faults. A workspace whose index could not be written (a full
//! disk, a removed or read-only data dir) is indexed again in the background, with growing
//! pauses, until a run succeeds: that run reads every file changed meanwhile (a refresh that
//! failed is not retried on its own, and the watcher has moved on) and clears the health fault
//! the failure set, without anyone calling an RPC or touching a file.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::slot::Slot;
use super::{IndexState, RagService};
use crate::error::RagError;

/// The first pause before a retry; it doubles up to [`LONGEST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_secs(2);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// Workspaces waiting for a successful run after a storage fault.
#[derive(Debug, Default)]
pub(super) struct Recovery {
    waiting: Mutex<HashSet<PathBuf>>,
    /// Whether the retry task is running.
    retrying: AtomicBool,
    /// Set when the service closes: the task ends.
    closed: AtomicBool,
}

impl Recovery {
    fn waiting(&self) -> Vec<PathBuf> {
        self.waiting
            .lock()
            .map(|w| w.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn recovered(&self, root: &Path) {
        if let Ok(mut w) = self.waiting.lock() {
            w.remove(root);
        }
    }

    /// Ends the retries (the service is closing).
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}

impl RagService {
    /// Notes that `root`'s index could not be written, and starts the retries unless they run.
    pub(super) fn storage_failed(&self, root: &Path) {
        let recovery = &self.recovery;
        if recovery.closed.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(mut w) = recovery.waiting.lock() {
            w.insert(root.to_owned());
        }
        if !recovery.retrying.swap(true, Ordering::AcqRel) {
            tracing::warn!(root = %root.display(), "index storage failed; indexing again in the background until it works");
            tokio::spawn(self.clone().retry());
        }
    }

    /// Opens `root`'s index again in its directory and puts it in the slot (a failure is
    /// logged; the next round tries again).
    async fn reopen(&self, root: &Path, slot: &Arc<Slot>) {
        let (service, root_owned, slot) = (self.clone(), root.to_owned(), slot.clone());
        let reopened = self
            .blocking(move || {
                let index = service
                    .opening
                    .open_index(&root_owned, service.embedder.as_deref())
                    .map_err(RagError::from)?;
                slot.replace(index)
            })
            .await;
        match reopened.and_then(|r| r) {
            Ok(()) => {
                tracing::warn!(root = %root.display(), "the index's files were removed; opened a new index, indexing the workspace again");
            }
            Err(e) => {
                tracing::warn!(root = %root.display(), error = %e, "the index's files were removed and a new index could not be opened yet");
            }
        }
    }

    async fn retry(self) {
        let mut pause = FIRST_PAUSE;
        loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_PAUSE);
            if self.recovery.closed.load(Ordering::Relaxed) {
                return;
            }
            for root in self.recovery.waiting() {
                let Some(slot) = self.slot_of(&root) else {
                    // Removed meanwhile.
                    self.recovery.recovered(&root);
                    continue;
                };
                // An index whose files were removed is opened afresh (empty, in a directory
                // made again) and built whole: the one held could never be written again.
                if slot.files_gone() {
                    self.reopen(&root, &slot).await;
                }
                // A run already going is left to end; the next round looks again.
                if let Some(run) = self.index_slot_in_background(root.clone(), slot.clone()) {
                    let _ = run.await;
                }
                let ready = slot
                    .state
                    .lock()
                    .is_ok_and(|s| matches!(*s, IndexState::Ready));
                if ready {
                    tracing::info!(root = %root.display(), "index storage works again; the workspace is indexed");
                    self.recovery.recovered(&root);
                }
            }
            if self.recovery.waiting().is_empty() {
                self.recovery.retrying.store(false, Ordering::Release);
                // A failure noted between the look and the store found the task running: it
                // is this one's to retry.
                if self.recovery.waiting().is_empty()
                    || self.recovery.retrying.swap(true, Ordering::AcqRel)
                {
                    return;
                }
            }
        }
    }
}
