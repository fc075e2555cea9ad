//! Keeps indexes fresh without being asked: a debounced file watcher (notify) on every served
//! workspace. Changed paths (edits, creations, deletions, renames, whole directories) are
//! refreshed incrementally once the workspace has been indexed; ignored files stay ignored.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::event::ModifyKind;
use notify::{EventKind, RecursiveMode, Watcher as _};

use crate::scan;
use crate::service::RagService;

/// Quiet time before a burst of changes is refreshed.
pub const DEBOUNCE: Duration = Duration::from_millis(300);

/// How often each workspace root is looked at to see whether its directory was replaced (the
/// repository deleted and cloned again: the watches on the old directory saw only its removal).
const ROOT_CHECK: Duration = Duration::from_secs(5);

/// The watcher's events, as the task reads them.
struct Batch {
    /// Created or renamed: a directory among them gets watches of its own.
    arrived: bool,
    /// Removed or renamed: a root among them has gone away.
    left: bool,
    paths: Vec<PathBuf>,
}

/// The roots of `lost` that are directories again, taken out of it.
fn found_again(lost: &mut BTreeSet<PathBuf>) -> Vec<PathBuf> {
    let back: Vec<PathBuf> = lost.iter().filter(|r| r.is_dir()).cloned().collect();
    for root in &back {
        lost.remove(root);
    }
    back
}

/// The directory a root names now: device and inode (none while it is missing). An inode
/// number can be given again at once to a directory made in place of a removed one, so the
/// watcher's removal event is the other way a replacement is seen.
fn identity(root: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(root).ok().map(|m| (m.dev(), m.ino()))
}

/// The roots whose directory is another than the one last seen, each seen now recorded (a
/// root missing keeps the directory it had: it is replaced once another appears).
fn replaced(seen: &mut HashMap<PathBuf, (u64, u64)>, roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in roots {
        let Some(now) = identity(root) else { continue };
        if seen
            .insert(root.clone(), now)
            .is_some_and(|before| before != now)
        {
            out.push(root.clone());
        }
    }
    out
}

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
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Batch>();
    let mut watcher =
        notify::recommended_watcher(move |result: notify::Result<notify::Event>| match result {
            Ok(event) => {
                if !matches!(event.kind, EventKind::Access(_)) {
                    // A directory made or moved in gets watches of its own.
                    let renamed = matches!(event.kind, EventKind::Modify(ModifyKind::Name(_)));
                    let _ = tx.send(Batch {
                        arrived: event.kind.is_create() || renamed,
                        left: event.kind.is_remove() || renamed,
                        paths: event.paths,
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "file watcher error"),
        })?;
    // Watching when this returns, as a recursive watch did; later walks (a workspace added, a
    // directory made, ignore rules changed) read the disk on a blocking thread.
    for root in &roots {
        watch_tree(&mut watcher, root, root);
    }
    let watcher = std::sync::Arc::new(std::sync::Mutex::new(watcher));
    let mut changes = service.workspace_changes();
    let mut seen = HashMap::new();
    replaced(&mut seen, &roots);
    let mut lost: BTreeSet<PathBuf> = BTreeSet::new();
    let mut check = tokio::time::interval(ROOT_CHECK);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let task = tokio::spawn(async move {
        loop {
            let first: Batch = tokio::select! {
                first = rx.recv() => match first {
                    Some(first) => first,
                    None => return,
                },
                _ = check.tick() => {
                    let mut roots = replaced(&mut seen, &service.roots());
                    for root in found_again(&mut lost) {
                        if !roots.contains(&root) {
                            roots.push(root);
                        }
                    }
                    for root in roots {
                        again(&service, &watcher, root).await;
                    }
                    continue;
                }
                change = changes.recv() => {
                    if let Ok((root, added)) = change {
                        if added {
                            replaced(&mut seen, std::slice::from_ref(&root));
                            watch_blocking(&watcher, root.clone(), root).await;
                        } else if let Ok(mut w) = watcher.lock()
                            && let Err(e) = w.unwatch(&root)
                        {
                            tracing::warn!(root = %root.display(), error = %e, "file watcher not updated");
                        }
                    }
                    continue;
                }
            };
            let mut created = Vec::new();
            let mut left = Vec::new();
            let mut paths: BTreeSet<PathBuf> = BTreeSet::new();
            let mut take = |batch: Batch| {
                if batch.arrived {
                    created.extend(batch.paths.iter().cloned());
                }
                if batch.left {
                    left.extend(batch.paths.iter().cloned());
                }
                paths.extend(batch.paths);
            };
            take(first);
            while let Ok(Some(more)) = tokio::time::timeout(debounce, rx.recv()).await {
                take(more);
            }
            // A root directory removed or moved away: watched and walked again once a
            // directory is there again (now, or when the next check finds one).
            for root in service.roots() {
                if left.contains(&root) {
                    lost.insert(root);
                }
            }
            for root in found_again(&mut lost) {
                replaced(&mut seen, std::slice::from_ref(&root));
                again(&service, &watcher, root).await;
            }
            // A directory made since is watched too (with what it already holds).
            for dir in created.into_iter().filter(|p| p.is_dir()) {
                if let Some(root) = service.roots().into_iter().find(|r| dir.starts_with(r)) {
                    watch_blocking(&watcher, root, dir).await;
                }
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
                // Ignore rules changed: what is indexed (and watched) may change anywhere, so
                // the whole workspace is walked again (only changed files are parsed); the
                // changed rules were only applied by a full `ploke index` before.
                if rels.iter().any(|rel| is_ignore_file(rel)) {
                    watch_blocking(&watcher, root.clone(), root.clone()).await;
                    let changed: Vec<String> =
                        rels.into_iter().filter(|rel| is_ignore_file(rel)).collect();
                    let (service, root) = (service.clone(), root.clone());
                    tokio::spawn(async move {
                        let root_text = root.display().to_string();
                        match service.rewalk(root, changed).await {
                            Ok(s) => tracing::info!(
                                root = %root_text,
                                added = s.files_indexed,
                                removed = s.files_removed,
                                "ignore rules changed; workspace walked again"
                            ),
                            Err(e) => {
                                tracing::warn!(root = %root_text, error = %e, "walking the workspace again after its ignore rules changed failed")
                            }
                        }
                    });
                    continue;
                }
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

/// A workspace whose directory was replaced: its new tree watched and walked again (a
/// repository cloned again in its place would otherwise be served as it was, unwatched).
async fn again(
    service: &RagService,
    watcher: &std::sync::Arc<std::sync::Mutex<notify::RecommendedWatcher>>,
    root: PathBuf,
) {
    let root_text = root.display().to_string();
    tracing::warn!(root = %root_text, "workspace directory replaced; watching and indexing it again");
    watch_blocking(watcher, root.clone(), root.clone()).await;
    if !service.is_indexed(&root) {
        return;
    }
    let service = service.clone();
    tokio::spawn(async move {
        match service.rewalk(root, Vec::new()).await {
            Ok(s) => tracing::info!(
                root = %root_text,
                indexed = s.files_indexed,
                removed = s.files_removed,
                "replaced workspace directory indexed again"
            ),
            Err(e) => {
                tracing::warn!(root = %root_text, error = %e, "indexing a replaced workspace directory failed")
            }
        }
    });
}

/// [`watch_tree`] on a blocking thread.
async fn watch_blocking(
    watcher: &std::sync::Arc<std::sync::Mutex<notify::RecommendedWatcher>>,
    root: PathBuf,
    start: PathBuf,
) {
    let watcher = std::sync::Arc::clone(watcher);
    let walked = tokio::task::spawn_blocking(move || {
        if let Ok(mut w) = watcher.lock() {
            watch_tree(&mut *w, &root, &start);
        }
    })
    .await;
    if let Err(e) = walked {
        tracing::warn!(error = %e, "watching a directory tree failed");
    }
}

/// Whether `rel` is a file of ignore rules the index follows.
fn is_ignore_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name == ".gitignore" || name == ".ignore"
}

/// Watches every directory under `start` (in the workspace `root`) that the index walks: not
/// hidden, not ignored. One watch per directory, each on its own: a directory that may not be
/// read (a database volume in the repository) or the kernel's limit on watches leaves that
/// directory unwatched, not the whole workspace (a recursive watch failed as a whole, and so
/// did the watcher of every workspace), and ignored trees (`target/`, `node_modules/`) take
/// no watches at all.
fn watch_tree(watcher: &mut impl notify::Watcher, root: &Path, start: &Path) {
    let rules = std::sync::Arc::new(ploke_runtime::path_policy::ignores::IgnoreRules::new(root));
    let (mut watched, mut failed) = (0u64, Vec::new());
    for entry in rules.walker(start).build().flatten() {
        // The start itself may be a link to a directory (a root that is git-sync's link): the
        // walk goes through it, and so does its watch (inotify follows it to the directory).
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir())
            || (entry.depth() == 0 && entry.path().is_dir());
        if !is_dir {
            continue;
        }
        match watcher.watch(entry.path(), RecursiveMode::NonRecursive) {
            Ok(()) => watched += 1,
            Err(e) => failed.push((entry.path().to_owned(), e)),
        }
    }
    if let Some((first, e)) = failed.first() {
        tracing::warn!(
            root = %root.display(),
            watched,
            unwatched = failed.len(),
            first = %first.display(),
            error = %e,
            "some directories are not watched; changes in them need RefreshFiles"
        );
    } else {
        tracing::debug!(root = %root.display(), start = %start.display(), watched, "watching");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_replaced_by_another_directory_is_seen_and_one_missing_waits_for_its_return() {
        let base = tempfile::tempdir().unwrap();
        let (root, gone) = (base.path().join("repo"), base.path().join("gone"));
        std::fs::create_dir(&root).unwrap();
        let mut seen = HashMap::new();
        let roots = vec![root.clone(), gone.clone()];
        assert!(replaced(&mut seen, &roots).is_empty());
        assert!(replaced(&mut seen, &roots).is_empty());
        // Moved away (its inode lives on) and made again: another directory.
        std::fs::rename(&root, base.path().join("repo.old")).unwrap();
        assert!(
            replaced(&mut seen, &roots).is_empty(),
            "missing is not replaced"
        );
        std::fs::create_dir(&root).unwrap();
        assert_eq!(replaced(&mut seen, &roots), vec![root.clone()]);
        assert!(replaced(&mut seen, &roots).is_empty(), "reported once");
        // Roots seen leaving come back once they are directories again.
        let mut lost: BTreeSet<PathBuf> = [root.clone(), gone.clone()].into();
        assert_eq!(found_again(&mut lost), vec![root]);
        assert_eq!(lost, [gone.clone()].into());
        std::fs::create_dir(&gone).unwrap();
        assert_eq!(found_again(&mut lost), vec![gone]);
        assert!(lost.is_empty());
    }

    /// Records the directories watched; refuses those named `locked`.
    struct Recording(Vec<PathBuf>);

    impl notify::Watcher for Recording {
        fn new<F: notify::EventHandler>(_: F, _: notify::Config) -> notify::Result<Self> {
            Ok(Self(Vec::new()))
        }

        fn watch(&mut self, path: &Path, mode: RecursiveMode) -> notify::Result<()> {
            assert_eq!(mode, RecursiveMode::NonRecursive);
            if path.ends_with("locked") {
                return Err(notify::Error::io(std::io::Error::from(
                    std::io::ErrorKind::PermissionDenied,
                )));
            }
            self.0.push(path.to_owned());
            Ok(())
        }

        fn unwatch(&mut self, _: &Path) -> notify::Result<()> {
            Ok(())
        }

        fn kind() -> notify::WatcherKind {
            notify::WatcherKind::NullWatcher
        }
    }

    #[test]
    fn each_walked_directory_is_watched_on_its_own_and_one_refused_leaves_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in ["src/net", "locked/inner", "target/debug", ".github", "docs"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        let mut w = Recording(Vec::new());
        watch_tree(&mut w, root, root);
        let mut watched: Vec<String> =
            w.0.iter()
                .map(|p| crate::scan::relative(root, p).unwrap_or_default())
                .collect();
        watched.sort();
        // The refused directory is left out, and so are what the index never reads (ignored,
        // hidden); everything else is watched. (Its subdirectory, walked, is watched too.)
        assert_eq!(watched, ["", "docs", "locked/inner", "src", "src/net"]);
    }
}
