//! Keeps indexes fresh without being asked: a debounced file watcher (notify) on every served
//! workspace. Changed paths (edits, creations, deletions, renames, whole directories) are
//! refreshed incrementally once the workspace has been indexed; ignored files stay ignored.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher as _};

use crate::scan;
use crate::service::RagService;

/// Quiet time before a burst of changes is refreshed.
pub const DEBOUNCE: Duration = Duration::from_millis(300);

/// The running watcher; dropping it stops watching.
pub struct Watcher {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watcher")
    }
}

/// Starts watching `roots` (and the workspaces `service` adds later; not those it removes) and
/// refreshing `service` on changes. Reads are not changes (the
/// refresh itself reads files), so access events are dropped; a burst of changes is collected
/// until `debounce` passes quietly, then refreshed at once.
pub fn spawn(
    service: RagService,
    roots: Vec<PathBuf>,
    debounce: Duration,
) -> Result<Watcher, notify::Error> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<PathBuf>>();
    let mut watcher =
        notify::recommended_watcher(move |result: notify::Result<notify::Event>| match result {
            Ok(event) => {
                if !matches!(event.kind, EventKind::Access(_)) {
                    let _ = tx.send(event.paths);
                }
            }
            Err(e) => tracing::warn!(error = %e, "file watcher error"),
        })?;
    for root in &roots {
        watcher.watch(root, RecursiveMode::Recursive)?;
    }
    let mut changes = service.workspace_changes();
    let task = tokio::spawn(async move {
        loop {
            let first = tokio::select! {
                first = rx.recv() => match first {
                    Some(first) => first,
                    None => return,
                },
                change = changes.recv() => {
                    if let Ok((root, added)) = change {
                        let outcome = if added {
                            watcher.watch(&root, RecursiveMode::Recursive)
                        } else {
                            watcher.unwatch(&root)
                        };
                        if let Err(e) = outcome {
                            tracing::warn!(root = %root.display(), added, error = %e, "file watcher not updated");
                        }
                    }
                    continue;
                }
            };
            let mut paths: BTreeSet<PathBuf> = first.into_iter().collect();
            while let Ok(Some(more)) = tokio::time::timeout(debounce, rx.recv()).await {
                paths.extend(more);
            }
            for root in &service.roots() {
                let rels: BTreeSet<String> = paths
                    .iter()
                    .filter_map(|p| scan::relative(root, p))
                    .filter(|rel| !scan::excluded(rel))
                    .collect();
                if rels.is_empty() || !service.is_indexed(root) {
                    continue;
                }
                let root_text = root.display().to_string();
                match service
                    .refresh(&root_text, rels.into_iter().collect())
                    .await
                {
                    Ok(s) => tracing::debug!(
                        root = %root_text,
                        updated = s.files_indexed,
                        removed = s.files_removed,
                        "watcher refreshed files"
                    ),
                    Err(e) => {
                        tracing::warn!(root = %root_text, error = %e, "watcher refresh failed")
                    }
                }
            }
        }
    });
    Ok(Watcher { task })
}
