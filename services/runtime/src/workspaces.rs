//! The workspaces a service may touch, and resolving a request's `workspace_root` against them
//! (empty = the first configured one; anything else must be a configured root). Errors repeat
//! at most a short prefix of the requested root.

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::text::shown;

/// Longest `workspace_root` a request may carry, in bytes (the longest path Linux accepts).
pub const MAX_ROOT_BYTES: usize = 4096;

/// A request named a workspace the service does not serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceError {
    /// No workspace is configured and the request named none.
    #[error("no workspace is configured; pass --workspace DIR or set workspace_root")]
    NoneConfigured,
    /// The request named a root that is not configured.
    #[error("workspace {0} is not served here")]
    Unknown(String),
    /// The request's root is not absolute.
    #[error("workspace_root must be an absolute path, got `{0}`")]
    NotAbsolute(String),
    /// The request's root is longer than [`MAX_ROOT_BYTES`].
    #[error("workspace_root must be at most {MAX_ROOT_BYTES} bytes, got {0}")]
    TooLong(usize),
    /// The calling principal may not use the workspace.
    #[error(transparent)]
    Denied(#[from] crate::principal::Denied),
}

impl WorkspaceError {
    /// The gRPC status every adapter answers with: no workspace configured →
    /// `FAILED_PRECONDITION`, an unserved root → `NOT_FOUND`, a relative root →
    /// `INVALID_ARGUMENT` on `workspace_root`, a workspace the principal may not use →
    /// `PERMISSION_DENIED`.
    pub fn to_status(&self) -> tonic::Status {
        match self {
            WorkspaceError::NoneConfigured => tonic::Status::failed_precondition(self.to_string()),
            WorkspaceError::Unknown(root) => {
                ploke_proto::status::not_found(format!("workspace {root}"))
            }
            WorkspaceError::NotAbsolute(_) | WorkspaceError::TooLong(_) => {
                ploke_proto::status::invalid_argument("workspace_root", self)
            }
            WorkspaceError::Denied(d) => d.to_status(),
        }
    }
}

/// Where the workspaces added at run time are listed (rag-search, which owns them): other
/// services ask it rather than keep their own list.
pub trait WorkspaceSource: Send + Sync {
    /// Every root rag-search serves now.
    fn list(&self) -> BoxFuture<'_, Result<Vec<PathBuf>, String>>;
}

/// A boxed future of a [`WorkspaceSource`].
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// rag-search's ListWorkspaces as a [`WorkspaceSource`] (over the internal channel).
#[derive(Debug, Clone)]
pub struct RagSearchSource {
    client: ploke_proto::rag::v1::rag_search_client::RagSearchClient<crate::client::TracedChannel>,
}

impl RagSearchSource {
    /// Asks rag-search over `channel`.
    pub fn new(channel: crate::client::TracedChannel) -> Self {
        Self {
            client: ploke_proto::rag::v1::rag_search_client::RagSearchClient::new(channel),
        }
    }
}

impl WorkspaceSource for RagSearchSource {
    fn list(&self) -> BoxFuture<'_, Result<Vec<PathBuf>, String>> {
        let mut client = self.client.clone();
        // The service's own view of every served root, whoever's request made it ask:
        // rag-search lists only a principal's workspaces to that principal.
        Box::pin(crate::principal::scope(None, async move {
            let listed = client
                .list_workspaces(ploke_proto::rag::v1::ListWorkspacesRequest {})
                .await
                .map_err(|s| format!("rag-search ListWorkspaces: {}", s.message()))?;
            Ok(listed
                .into_inner()
                .workspaces
                .into_iter()
                .map(|w| PathBuf::from(w.workspace_root))
                .collect())
        }))
    }
}

/// How often services that follow rag-search's workspaces ask again (an unknown root is
/// asked about at once).
pub const FOLLOW_PERIOD: std::time::Duration = std::time::Duration::from_secs(10);

/// The workspaces a service serves: those configured (`--workspace`, first = default) and
/// those added at run time. Clones share the run-time set, so an add or remove is seen by
/// every holder at once; a service that does not own the set follows a [`WorkspaceSource`].
#[derive(Clone, Default)]
pub struct Workspaces {
    configured: Vec<PathBuf>,
    added: Arc<RwLock<Vec<PathBuf>>>,
    source: Option<Arc<dyn WorkspaceSource>>,
    /// Serialises syncs, so that a burst of unknown roots asks the source once.
    syncing: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Workspaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspaces")
            .field("roots", &self.roots())
            .field("follows_source", &self.source.is_some())
            .finish()
    }
}

/// The path a workspace root is known by: canonical up to its first component that is a
/// symbolic link, and as written from there on, so that the root follows its links when they
/// are pointed at other trees (git-sync points its link at each new worktree and deletes the
/// old one; a deploy's `current` link moves to the next release, and a monorepo's service is
/// served as `/srv/current/services/api`). Every file under it is resolved through the links as
/// they point at that moment ([`crate::path_policy::resolve`]). A path with `..` after a link
/// (which would climb out of wherever the link points) and one that cannot be resolved are
/// canonical, and as given, respectively.
pub fn root_path(path: &Path) -> PathBuf {
    // Without `.` and a trailing `/` (which would make `lstat` follow a last link).
    let path: PathBuf = path.components().collect();
    let mut upto = PathBuf::new();
    let mut rest = path.components();
    while let Some(component) = rest.next() {
        upto.push(component);
        let is_link = matches!(component, Component::Normal(_))
            && upto
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            continue;
        }
        let after = rest.as_path();
        if after.components().any(|c| c == Component::ParentDir) {
            break;
        }
        if let (Some(parent), Some(name)) = (upto.parent(), upto.file_name())
            && let Ok(parent) = std::fs::canonicalize(parent)
        {
            let at = parent.join(name);
            // (`join("")` would end the path with a `/`.)
            return if after.as_os_str().is_empty() {
                at
            } else {
                at.join(after)
            };
        }
        break;
    }
    std::fs::canonicalize(&path).unwrap_or(path)
}

/// Why the configured roots cannot be served, if they cannot: one that is not a directory, a
/// git directory (a `.git`, a bare repository or anything inside one: serving it would hand
/// its config, credentials in remote URLs included, and its hooks to every tool), or one given
/// twice (by another spelling or a link). Relative roots are taken from the current directory.
pub fn check_roots(roots: &[PathBuf]) -> Result<(), (PathBuf, String)> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut seen: Vec<(PathBuf, &PathBuf)> = Vec::new();
    for root in roots {
        let refuse = |reason: String| Err((root.clone(), reason));
        let canon = match std::fs::canonicalize(cwd.join(root)) {
            Ok(c) => c,
            Err(e) => return refuse(e.to_string()),
        };
        if !canon.is_dir() {
            return refuse("is not a directory".into());
        }
        if let Some(reason) = git_internals(&canon) {
            return refuse(reason);
        }
        if let Some((_, first)) = seen.iter().find(|(c, _)| *c == canon) {
            return refuse(format!(
                "is {} again (given twice, as {} resolves to)",
                first.display(),
                canon.display()
            ));
        }
        seen.push((canon, root));
    }
    Ok(())
}

/// Why the directory `dir` (canonical) is git's own state rather than a working tree, if it is.
pub fn git_internals(dir: &Path) -> Option<String> {
    if dir.components().any(|c| c.as_os_str() == ".git") {
        return Some("is inside a .git directory; serve the working tree that holds it".into());
    }
    let bare =
        dir.join("HEAD").is_file() && dir.join("objects").is_dir() && dir.join("refs").is_dir();
    bare.then(|| "is a bare git repository (no working tree); serve a checkout of it".into())
}

impl Workspaces {
    /// The given roots; relative ones are taken from the current directory.
    pub fn new(roots: &[PathBuf]) -> Self {
        let cwd = std::env::current_dir().unwrap_or_default();
        Self {
            configured: roots.iter().map(|r| root_path(&cwd.join(r))).collect(),
            ..Self::default()
        }
    }

    /// Follows `source` for the roots added at run time: an unknown root is looked up there
    /// before it is refused ([`Self::resolve_current`]), and [`Self::follow`] keeps the set
    /// fresh so that a removed root stops being served.
    pub fn with_source(mut self, source: Arc<dyn WorkspaceSource>) -> Self {
        self.source = Some(source);
        self
    }

    /// Refuses a `workspace_root` over [`MAX_ROOT_BYTES`], as [`Workspaces::resolve`] does
    /// first: for a caller that forwards the request (the gateway).
    pub fn check_length(requested: &str) -> Result<(), WorkspaceError> {
        if requested.len() > MAX_ROOT_BYTES {
            return Err(WorkspaceError::TooLong(requested.len()));
        }
        Ok(())
    }

    /// Every root, the default first: the configured ones, then those added at run time.
    pub fn roots(&self) -> Vec<PathBuf> {
        let mut roots = self.configured.clone();
        if let Ok(added) = self.added.read() {
            roots.extend(
                added
                    .iter()
                    .filter(|r| !self.configured.contains(r))
                    .cloned(),
            );
        }
        roots
    }

    /// Whether `root` was configured (and so cannot be removed at run time).
    pub fn is_configured(&self, root: &Path) -> bool {
        self.configured.iter().any(|r| r == root)
    }

    /// Adds a root at run time (as [`root_path`] gives it); false when it was already served.
    pub fn add(&self, root: &Path) -> bool {
        let root = root_path(root);
        if self.is_configured(&root) {
            return false;
        }
        match self.added.write() {
            Ok(mut added) if !added.contains(&root) => {
                added.push(root);
                true
            }
            _ => false,
        }
    }

    /// Stops serving a root added at run time; false when it was not one.
    pub fn remove(&self, root: &Path) -> bool {
        match self.added.write() {
            Ok(mut added) => {
                let before = added.len();
                added.retain(|r| r != root);
                added.len() != before
            }
            Err(_) => false,
        }
    }

    /// Replaces the run-time set with what the source lists.
    fn replace_added(&self, roots: Vec<PathBuf>) {
        if let Ok(mut added) = self.added.write() {
            *added = roots
                .into_iter()
                .filter(|r| !self.configured.contains(r))
                .collect();
        }
    }

    /// Asks the source for the current set (no-op without one).
    pub async fn sync(&self) -> Result<(), String> {
        let Some(source) = &self.source else {
            return Ok(());
        };
        let _one = self.syncing.lock().await;
        let roots = source.list().await?;
        self.replace_added(roots);
        Ok(())
    }

    /// Keeps the run-time set in step with the source every `period` (nothing without one);
    /// the caller aborts the task when it stops.
    pub fn follow(&self, period: std::time::Duration) -> Option<tokio::task::JoinHandle<()>> {
        self.source.as_ref()?;
        let this = self.clone();
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = this.sync().await {
                    tracing::debug!(error = %e, "workspace list not refreshed");
                }
            }
        }))
    }

    /// [`Self::resolve`], after asking the source when the root is not known here yet (it may
    /// have been added on rag-search a moment ago).
    pub async fn resolve_current(&self, requested: &str) -> Result<PathBuf, WorkspaceError> {
        match self.resolve(requested) {
            Err(WorkspaceError::Unknown(_) | WorkspaceError::NoneConfigured)
                if self.source.is_some() =>
            {
                if let Err(e) = self.sync().await {
                    tracing::warn!(error = %e, "could not ask rag-search for its workspaces");
                }
                self.resolve(requested)
            }
            other => other,
        }
    }

    /// The root a request means: the default for an empty string, else the served root it
    /// names (compared as [`root_path`] gives both), if the current principal may use it
    /// ([`crate::principal::check_workspace`]). Errors hold at most a short prefix of it.
    pub fn resolve(&self, requested: &str) -> Result<PathBuf, WorkspaceError> {
        let root = self.find(requested)?;
        crate::principal::check_workspace(&root)?;
        Ok(root)
    }

    fn find(&self, requested: &str) -> Result<PathBuf, WorkspaceError> {
        Self::check_length(requested)?;
        let roots = self.roots();
        if requested.is_empty() {
            return roots.first().cloned().ok_or(WorkspaceError::NoneConfigured);
        }
        let path = Path::new(requested);
        if !path.is_absolute() {
            return Err(WorkspaceError::NotAbsolute(shown(requested).into_owned()));
        }
        let wanted = root_path(path);
        if let Some(root) = roots.iter().find(|r| **r == wanted) {
            return Ok(root.clone());
        }
        // Another name of a served tree: where a served link points now, or a link to it.
        Self::same_tree_among(&roots, path)
            .ok_or_else(|| WorkspaceError::Unknown(shown(requested).into_owned()))
    }

    /// The served root whose directory `dir` is now, by whatever name (a link to it, the tree
    /// a served link points at), if one is.
    pub fn same_tree(&self, dir: &Path) -> Option<PathBuf> {
        Self::same_tree_among(&self.roots(), dir)
    }

    fn same_tree_among(roots: &[PathBuf], dir: &Path) -> Option<PathBuf> {
        let real = std::fs::canonicalize(dir).ok()?;
        roots
            .iter()
            .find(|r| std::fs::canonicalize(r).is_ok_and(|c| c == real))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_directories_and_roots_given_twice_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".git/objects")).unwrap();
        std::fs::create_dir_all(ws.join(".git/refs")).unwrap();
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let bare = dir.path().join("bare.git");
        std::fs::create_dir_all(bare.join("objects")).unwrap();
        std::fs::create_dir_all(bare.join("refs")).unwrap();
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::os::unix::fs::symlink(&ws, dir.path().join("link")).unwrap();
        assert_eq!(check_roots(std::slice::from_ref(&ws)), Ok(()));
        let refused = |roots: &[PathBuf]| check_roots(roots).unwrap_err().1;
        assert_eq!(
            refused(&[ws.join(".git")]),
            "is inside a .git directory; serve the working tree that holds it"
        );
        assert_eq!(
            refused(&[ws.join(".git/refs")]),
            "is inside a .git directory; serve the working tree that holds it"
        );
        assert_eq!(
            refused(std::slice::from_ref(&bare)),
            "is a bare git repository (no working tree); serve a checkout of it"
        );
        let canon = ws.canonicalize().unwrap();
        assert_eq!(
            refused(&[ws.clone(), dir.path().join("link")]),
            format!(
                "is {} again (given twice, as {} resolves to)",
                ws.display(),
                canon.display()
            )
        );
        assert_eq!(
            refused(&[dir.path().join("missing")]),
            "No such file or directory (os error 2)"
        );
    }

    #[test]
    fn resolves_default_configured_and_refuses_others() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let ws = Workspaces::new(&[a.path().to_owned(), b.path().to_owned()]);
        let a_canon = std::fs::canonicalize(a.path()).unwrap();
        let b_canon = std::fs::canonicalize(b.path()).unwrap();
        assert_eq!(ws.resolve(""), Ok(a_canon));
        assert_eq!(ws.resolve(&b.path().to_string_lossy()), Ok(b_canon.clone()));
        let with_dot = format!("{}/.", b.path().display());
        assert_eq!(ws.resolve(&with_dot), Ok(b_canon));
        assert_eq!(
            ws.resolve("/etc"),
            Err(WorkspaceError::Unknown("/etc".into()))
        );
        assert_eq!(
            ws.resolve("rel/dir"),
            Err(WorkspaceError::NotAbsolute("rel/dir".into()))
        );
        assert_eq!(
            Workspaces::new(&[]).resolve(""),
            Err(WorkspaceError::NoneConfigured)
        );
    }

    /// A served link is found by its own name and by the tree it points at now (what a
    /// client in that directory sends), and that tree is the link's, not another workspace.
    #[test]
    fn a_served_link_is_found_by_where_it_points_now() {
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap();
        let (one, two, other) = (top.join("wt-1"), top.join("wt-2"), top.join("other"));
        for d in [&one, &two, &other] {
            std::fs::create_dir(d).unwrap();
        }
        let link = top.join("repo");
        std::os::unix::fs::symlink(&one, &link).unwrap();
        let ws = Workspaces::new(&[link.clone(), other.clone()]);
        assert_eq!(ws.roots(), vec![link.clone(), other.clone()]);
        let text = |p: &Path| p.to_string_lossy().into_owned();
        assert_eq!(ws.resolve(&text(&link)), Ok(link.clone()));
        assert_eq!(ws.resolve(&text(&one)), Ok(link.clone()));
        assert_eq!(ws.same_tree(&one), Some(link.clone()));
        assert_eq!(ws.same_tree(&other), Some(other.clone()));
        assert_eq!(ws.same_tree(&two), None);
        // Pointed elsewhere: the old tree is nobody's, the new one is the link's.
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&two, &link).unwrap();
        assert_eq!(
            ws.resolve(&text(&one)),
            Err(WorkspaceError::Unknown(text(&one)))
        );
        assert_eq!(ws.resolve(&text(&two)), Ok(link.clone()));
        assert_eq!(ws.same_tree(&one), None);
    }

    #[test]
    fn long_roots_are_refused_and_never_echoed_whole() {
        let ws = Workspaces::new(&[]);
        let huge = format!("/{}", "a".repeat(1 << 20));
        let status = ws.resolve(&huge).unwrap_err().to_status();
        assert_eq!(
            (status.code(), status.message()),
            (
                tonic::Code::InvalidArgument,
                "workspace_root: workspace_root must be at most 4096 bytes, got 1048577"
            )
        );
        let long = format!("/{}", "b".repeat(4000));
        let status = ws.resolve(&long).unwrap_err().to_status();
        assert_eq!(
            (status.code(), status.message().to_owned()),
            (
                tonic::Code::NotFound,
                format!("workspace /{}…(4001 bytes) not found", "b".repeat(199))
            )
        );
        let relative = "r".repeat(300);
        assert_eq!(
            ws.resolve(&relative),
            Err(WorkspaceError::NotAbsolute(format!(
                "{}…(300 bytes)",
                "r".repeat(200)
            )))
        );
    }
}
