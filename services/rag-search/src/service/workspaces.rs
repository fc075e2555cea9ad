//! Workspaces at run time: adding a directory or a git repository (cloned under
//! `[rag_search] repos_dir`, default `<data_dir>/repos/`), listing what is served, removing what was added, and keeping git
//! clones at their branch's tip. Every change is persisted before it is answered and told to
//! the watcher; the new workspace is indexed in the background.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ploke_runtime::principal;

use super::registry::{Entry, GitOrigin, epoch_ms};
use super::{IndexState, RagService, lock_poisoned};
use crate::error::RagError;
use crate::git;
use crate::index::workspace_key;

/// Where a workspace to add comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewWorkspace {
    /// An absolute directory on this host.
    Path(String),
    /// A git repository and branch (empty = the remote's default).
    Git {
        /// Clone URL.
        url: String,
        /// Branch.
        branch: String,
    },
}

/// A served workspace, as ListWorkspaces reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceInfo {
    /// Its root.
    pub root: PathBuf,
    /// Its name (the root's last component), as principals' workspace lists may use it.
    pub name: String,
    /// Configured (true) or added at run time.
    pub configured: bool,
    /// Its git origin, for a clone.
    pub git: Option<GitOrigin>,
    /// The commit checked out (clones).
    pub head: String,
    /// Its index.
    pub state: IndexState,
    /// Items indexed.
    pub items: u64,
    /// When it was added.
    pub added_at: Option<SystemTime>,
    /// When the clone was last fetched.
    pub updated_at: Option<SystemTime>,
}

/// How long one git clone or fetch may take.
pub(super) const GIT_TIMEOUT: Duration = Duration::from_secs(600);

fn bad(field: &'static str, reason: impl Into<String>) -> RagError {
    RagError::BadWorkspace {
        field,
        reason: reason.into(),
    }
}

impl RagService {
    /// Serves one more workspace (see [`NewWorkspace`]); adding a git repository that is
    /// served already fetches it now.
    pub async fn add_workspace(&self, new: NewWorkspace) -> Result<WorkspaceInfo, RagError> {
        principal::require_admin("AddWorkspace")?;
        let mut registry = self.registry.lock().await;
        let (root, git) = match new {
            NewWorkspace::Path(path) => (self.checked_dir(&path)?, None),
            NewWorkspace::Git { url, branch } => {
                git::check_url(&url).map_err(RagError::Git)?;
                if !branch.is_empty() {
                    git::check_branch(&branch).await.map_err(RagError::Git)?;
                }
                let dir = self.opening.repos_dir.join(repo_key(&url, &branch));
                if let Some(entry) = registry.get(&canonical(&dir)).cloned() {
                    drop(registry);
                    self.update_clone(&entry).await?;
                    return self.info(&entry.root).await;
                }
                let branch = if dir.exists() {
                    // A clone left by an add that failed half-way: start again.
                    remove_tree(&dir)?;
                    git::clone(&url, &branch, &dir, GIT_TIMEOUT).await
                } else {
                    if let Some(parent) = dir.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| {
                            RagError::Internal(format!("{}: {e}", parent.display()))
                        })?;
                    }
                    git::clone(&url, &branch, &dir, GIT_TIMEOUT).await
                };
                let branch = match branch {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = remove_tree(&dir);
                        return Err(RagError::Git(e));
                    }
                };
                (canonical(&dir), Some(GitOrigin { url, branch }))
            }
        };
        // By this name, or another of its directory (a link to it, where a served link
        // points): two indexes of one tree would answer for it apart.
        let served = self.workspaces.roots().into_iter().find(|r| *r == root);
        if let Some(served) = served.or_else(|| self.workspaces.same_tree(&root)) {
            return Err(RagError::WorkspaceExists {
                asked: root.display().to_string(),
                served: served.display().to_string(),
            });
        }
        let now = epoch_ms(SystemTime::now());
        let entry = Entry {
            root: root.clone(),
            updated_at_ms: git.as_ref().map(|_| now),
            git,
            added_at_ms: now,
        };
        let fresh_clone = entry.git.is_some();
        let opened = async {
            let opening = self.opening.clone();
            let embedder = self.embedder.clone();
            let at = root.clone();
            let slot = tokio::task::spawn_blocking(move || opening.open(&at, embedder.as_deref()))
                .await
                .map_err(|e| RagError::Internal(format!("opening the index: {e}")))??;
            registry
                .put(entry)
                .map_err(|e| RagError::Registry(e.to_string()))?;
            Ok::<_, RagError>(slot)
        }
        .await;
        // A new index that cannot be written (a full disk) is UNAVAILABLE and the storage
        // fault, as for any other index write.
        let slot = match self.storage_outcome(opened).await {
            Ok(slot) => slot,
            Err(e) => {
                tracing::warn!(root = %root.display(), error = %e, "workspace not added");
                // Nothing lists a clone whose workspace was not added: it goes.
                if fresh_clone {
                    let _ = remove_tree(&root);
                }
                return Err(e);
            }
        };
        let slot = Arc::new(slot);
        self.slots
            .write()
            .map_err(|_| lock_poisoned())?
            .insert(root.clone(), slot.clone());
        self.workspaces.add(&root);
        drop(registry);
        let _ = self.changes.send((root.clone(), true));
        tracing::info!(root = %root.display(), "workspace added");
        let _run = self.index_slot_in_background(root.clone(), slot);
        self.info(&root).await
    }

    /// Every served workspace the calling principal may use, configured ones first.
    pub async fn list_workspaces(&self) -> Result<Vec<WorkspaceInfo>, RagError> {
        let caller = principal::current();
        let mut out = Vec::new();
        for root in self.workspaces.roots() {
            if caller.as_ref().is_none_or(|p| p.may_use(&root)) {
                out.push(self.info(&root).await?);
            }
        }
        Ok(out)
    }

    /// Stops serving a workspace added at run time; with `delete_data` its index (and clone)
    /// go too.
    pub async fn remove_workspace(
        &self,
        requested: &str,
        delete_data: bool,
    ) -> Result<WorkspaceInfo, RagError> {
        principal::require_admin("RemoveWorkspace")?;
        let root = self.workspaces.resolve(requested)?;
        if self.workspaces.is_configured(&root) {
            return Err(RagError::ConfiguredWorkspace(root.display().to_string()));
        }
        let info = self.info(&root).await?;
        let mut registry = self.registry.lock().await;
        let entry = registry
            .remove(&root)
            .map_err(|e| RagError::Registry(e.to_string()))?;
        self.workspaces.remove(&root);
        let slot = self
            .slots
            .write()
            .map_err(|_| lock_poisoned())?
            .remove(&root);
        let _ = self.changes.send((root.clone(), false));
        {
            let service = self.clone();
            let root = root.clone();
            self.blocking(move || service.drop_overlays_of(&root))
                .await?;
        }
        if let Some(slot) = slot {
            // A run going stops at its next step; searches already holding the slot finish.
            match slot.index.write() {
                Ok(mut index) => index.close(),
                Err(poisoned) => poisoned.into_inner().close(),
            }
        }
        if delete_data {
            remove_tree(&self.opening.index_dir(&root))?;
            if entry.is_some_and(|e| e.git.is_some()) {
                remove_tree(&root)?;
            }
        }
        tracing::info!(root = %root.display(), delete_data, "workspace removed");
        Ok(info)
    }

    /// Fetches every git workspace and re-indexes those whose tip moved.
    pub async fn update_clones(&self) {
        let entries: Vec<Entry> = self.registry.lock().await.entries().to_vec();
        for entry in entries.iter().filter(|e| e.git.is_some()) {
            if let Err(e) = self.update_clone(entry).await {
                tracing::warn!(root = %entry.root.display(), error = %e, "git workspace not updated");
            }
        }
    }

    /// Fetches one clone, moves it to its branch's tip and re-indexes it when the tip moved.
    async fn update_clone(&self, entry: &Entry) -> Result<(), RagError> {
        let Some(origin) = &entry.git else {
            return Ok(());
        };
        let before = git::head(&entry.root).await.unwrap_or_default();
        git::update(&entry.root, &origin.branch, GIT_TIMEOUT)
            .await
            .map_err(RagError::Git)?;
        let after = git::head(&entry.root).await.map_err(RagError::Git)?;
        {
            let mut registry = self.registry.lock().await;
            if let Some(current) = registry.get(&entry.root).cloned() {
                let updated = Entry {
                    updated_at_ms: Some(epoch_ms(SystemTime::now())),
                    ..current
                };
                registry
                    .put(updated)
                    .map_err(|e| RagError::Registry(e.to_string()))?;
            }
        }
        if before != after {
            tracing::info!(root = %entry.root.display(), %before, %after, "git workspace moved; re-indexing");
            if let Some(slot) = self.slot_of(&entry.root) {
                let _run = self.index_slot_in_background(entry.root.clone(), slot);
            }
        }
        Ok(())
    }

    /// Keeps git workspaces at their branch's tip, fetching every `period`.
    pub fn follow_clones(&self, period: Duration) -> tokio::task::JoinHandle<()> {
        let service = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                service.update_clones().await;
            }
        })
    }

    async fn info(&self, root: &Path) -> Result<WorkspaceInfo, RagError> {
        let entry = self.registry.lock().await.get(root).cloned();
        let head = match entry.as_ref().and_then(|e| e.git.as_ref()) {
            Some(_) => git::head(root).await.unwrap_or_default(),
            None => String::new(),
        };
        let (state, items) = match self.slot_of(root) {
            Some(slot) => {
                let state = slot.state.lock().map_err(|_| lock_poisoned())?.clone();
                let items = slot.counts()?.items;
                (state, items)
            }
            None => (IndexState::NotIndexed, 0),
        };
        Ok(WorkspaceInfo {
            root: root.to_owned(),
            name: principal::workspace_name(root),
            configured: self.workspaces.is_configured(root),
            git: entry.as_ref().and_then(|e| e.git.clone()),
            head,
            state,
            items,
            added_at: entry
                .as_ref()
                .map(|e| super::registry::from_epoch_ms(e.added_at_ms)),
            updated_at: entry
                .and_then(|e| e.updated_at_ms)
                .map(super::registry::from_epoch_ms),
        })
    }

    /// An absolute, existing directory that is not the whole file system and not inside
    /// rag-search's own data, as it is served ([`ploke_runtime::workspaces::root_path`]: a
    /// link stays a link, followed when it is pointed elsewhere).
    fn checked_dir(&self, path: &str) -> Result<PathBuf, RagError> {
        if path.is_empty() {
            return Err(bad("path", "must not be empty"));
        }
        if path.len() > ploke_runtime::workspaces::MAX_ROOT_BYTES {
            return Err(bad("path", "must be at most 4096 bytes"));
        }
        if !Path::new(path).is_absolute() {
            return Err(bad(
                "path",
                "must be an absolute path on the rag-search host",
            ));
        }
        let dir = std::fs::canonicalize(path)
            .map_err(|e| bad("path", format!("cannot be opened: {e}")))?;
        // Served through its link, if it is one (followed when pointed elsewhere), and
        // checked where it points now.
        let root = ploke_runtime::workspaces::root_path(Path::new(path));
        if !dir.is_dir() {
            return Err(bad("path", "is not a directory"));
        }
        if dir.parent().is_none() {
            return Err(bad("path", "must not be the root of the file system"));
        }
        if let Some(reason) = ploke_runtime::workspaces::git_internals(&dir) {
            return Err(bad("path", reason));
        }
        let data = canonical(&self.opening.data_dir);
        if dir.starts_with(&data) {
            return Err(bad(
                "path",
                "must not be inside rag-search's data directory",
            ));
        }
        Ok(root)
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// A directory name for a clone of `url` at `branch`.
fn repo_key(url: &str, branch: &str) -> String {
    let name = url
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or("repo")
        .trim_end_matches(".git");
    let base = if branch.is_empty() {
        PathBuf::from(name)
    } else {
        PathBuf::from(format!("{name}-{branch}"))
    };
    workspace_key(&PathBuf::from(url).join(base))
}

fn remove_tree(dir: &Path) -> Result<(), RagError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(RagError::Internal(format!("{}: {e}", dir.display()))),
    }
}
