//! Per-file locks: edits to one file are applied one at a time; locks of several files are
//! taken in path order so that two proposals never deadlock.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// The lock table.
#[derive(Debug, Clone, Default)]
pub(super) struct FileLocks {
    table: Arc<Mutex<HashMap<PathBuf, Arc<AsyncMutex<()>>>>>,
}

impl FileLocks {
    /// Locks every path (sorted, deduplicated); the guards release them.
    pub(super) async fn lock_all(&self, mut paths: Vec<PathBuf>) -> Vec<OwnedMutexGuard<()>> {
        paths.sort();
        paths.dedup();
        let locks: Vec<Arc<AsyncMutex<()>>> = {
            let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
            table.retain(|_, l| Arc::strong_count(l) > 1);
            paths
                .into_iter()
                .map(|p| table.entry(p).or_default().clone())
                .collect()
        };
        let mut guards = Vec::with_capacity(locks.len());
        for l in locks {
            guards.push(l.lock_owned().await);
        }
        guards
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_file_is_locked_by_one_holder_at_a_time() {
        let locks = FileLocks::default();
        let held = locks.lock_all(vec!["/a".into(), "/b".into()]).await;
        let mut waiting = Box::pin(locks.lock_all(vec!["/b".into()]));
        assert!(futures::poll!(&mut waiting).is_pending());
        drop(held);
        assert_eq!(waiting.await.len(), 1);
        assert_eq!(locks.lock_all(vec!["/c".into()]).await.len(), 1);
    }
}
