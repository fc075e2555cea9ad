//! One workspace's place in the service: its index behind a lock, its state, the channel its
//! runs report on, and the counts its index last showed, for whoever asks while a run writes.

use std::path::PathBuf;
use std::sync::{Mutex, RwLock};
use std::time::SystemTime;

use super::lock_poisoned;
use super::runs::RunEvent;
use super::types::IndexState;
use crate::error::RagError;
use crate::index::{Guarded, IndexError, Summary, WorkspaceIndex};

/// What an index holds, as IndexStatus and ListWorkspaces tell it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub files: u64,
    pub items: u64,
    pub embedded: u64,
    pub last_indexed_at: Option<SystemTime>,
}

impl Counts {
    fn of(index: &WorkspaceIndex) -> Self {
        Self {
            files: index.file_count(),
            items: index.item_count(),
            embedded: index.embedded_count(),
            last_indexed_at: index.last_indexed_at(),
        }
    }
}

pub(super) struct Slot {
    pub index: RwLock<WorkspaceIndex>,
    /// The state, and the channel a run reports on; changed together under this lock, so
    /// that a caller who finds a run going and subscribes sees that run's end.
    pub state: Mutex<IndexState>,
    pub runs: tokio::sync::watch::Sender<RunEvent>,
    /// The counts as of the last write through [`Guarded`] (or the last read that found the
    /// lock free): what a status reports while a writer holds the index.
    known: Mutex<Counts>,
    /// Where the index's files are.
    dir: PathBuf,
}

impl Slot {
    pub(super) fn new(index: WorkspaceIndex, state: IndexState) -> Self {
        Self {
            known: Mutex::new(Counts::of(&index)),
            dir: index.dir().to_owned(),
            index: RwLock::new(index),
            state: Mutex::new(state),
            runs: tokio::sync::watch::channel(RunEvent::Finished(Ok(Summary::default()))).0,
        }
    }

    /// The index's counts without waiting: read now when no writer holds the index, else
    /// those its last writer left.
    pub(super) fn counts(&self) -> Result<Counts, RagError> {
        let mut known = self.known.lock().map_err(|_| lock_poisoned())?;
        if let Ok(index) = self.index.try_read() {
            *known = Counts::of(&index);
        }
        Ok(*known)
    }

    /// Whether the index's files are gone from disk (its directory removed under the running
    /// service, `.ploke` deleted to start over): the index open here can no longer be written.
    pub(super) fn files_gone(&self) -> bool {
        !self.dir.join("bm25").is_dir()
    }

    /// Puts `index` (opened afresh in the same directory) in place of the one held.
    pub(super) fn replace(&self, index: WorkspaceIndex) -> Result<(), RagError> {
        let mut held = self.index.write().map_err(|_| lock_poisoned())?;
        *held = index;
        self.remember(&held);
        Ok(())
    }

    /// Bytes the index's files take on disk (read from the directory, no lock taken).
    pub(super) fn disk_bytes(&self) -> u64 {
        crate::index::dir_bytes(&self.dir)
    }

    fn remember(&self, index: &WorkspaceIndex) {
        if let Ok(mut known) = self.known.lock() {
            *known = Counts::of(index);
        }
    }
}

/// Writes through the slot leave their counts behind for [`Slot::counts`].
impl Guarded for Slot {
    fn read<R>(&self, f: impl FnOnce(&WorkspaceIndex) -> R) -> Result<R, IndexError> {
        let guard = self.index.read().map_err(|_| IndexError::Poisoned)?;
        Ok(f(&guard))
    }

    fn write<R>(&self, f: impl FnOnce(&mut WorkspaceIndex) -> R) -> Result<R, IndexError> {
        let mut guard = self.index.write().map_err(|_| IndexError::Poisoned)?;
        let r = f(&mut guard);
        self.remember(&guard);
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn while_a_writer_holds_the_index_its_counts_are_those_the_last_write_left() {
        let (ws, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::create_dir_all(ws.path().join("src")).unwrap();
        std::fs::write(
            ws.path().join("src/lib.rs"),
            "pub fn a() {}\npub fn b() {}\n",
        )
        .unwrap();
        let mut index = WorkspaceIndex::open_plain(ws.path(), data.path());
        index.index_all(false, None, &mut |_| {}).unwrap();
        let slot = Slot::new(index, IndexState::Ready);
        let first = slot.counts().unwrap();
        assert_eq!(
            (first.files, first.items, first.embedded),
            (1, 2, 0),
            "{first:?}"
        );
        assert!(first.last_indexed_at.is_some());

        std::fs::write(ws.path().join("src/more.rs"), "pub fn c() {}\n").unwrap();
        slot.write(|index| index.refresh(&["src/more.rs".to_owned()], None))
            .unwrap()
            .unwrap();
        // A run holds the lock: nothing read it since the refresh, so what is reported is what
        // the refresh left, not an empty index (it used to say 0 files, 0 items).
        let held = slot.index.write().unwrap();
        assert_eq!(
            slot.counts().unwrap(),
            Counts {
                files: 2,
                items: 3,
                ..first
            }
        );
        drop(held);
        assert_eq!(slot.counts().unwrap().items, 3);
        assert!(slot.disk_bytes() > 0);
    }
}
