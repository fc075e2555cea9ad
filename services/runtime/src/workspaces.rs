//! The workspaces a service may touch, and resolving a request's `workspace_root` against them
//! (empty = the first configured one; anything else must be a configured root). Errors repeat
//! at most a short prefix of the requested root.

use std::path::{Path, PathBuf};

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
}

impl WorkspaceError {
    /// The gRPC status every adapter answers with: no workspace configured →
    /// `FAILED_PRECONDITION`, an unserved root → `NOT_FOUND`, a relative root →
    /// `INVALID_ARGUMENT` on `workspace_root`.
    pub fn to_status(&self) -> tonic::Status {
        match self {
            WorkspaceError::NoneConfigured => tonic::Status::failed_precondition(self.to_string()),
            WorkspaceError::Unknown(root) => {
                ploke_proto::status::not_found(format!("workspace {root}"))
            }
            WorkspaceError::NotAbsolute(_) | WorkspaceError::TooLong(_) => {
                ploke_proto::status::invalid_argument("workspace_root", self)
            }
        }
    }
}

/// Configured workspace roots, canonicalised where they exist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workspaces {
    roots: Vec<PathBuf>,
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

impl Workspaces {
    /// The given roots; relative ones are taken from the current directory.
    pub fn new(roots: &[PathBuf]) -> Self {
        let cwd = std::env::current_dir().unwrap_or_default();
        Self {
            roots: roots.iter().map(|r| canonical(&cwd.join(r))).collect(),
        }
    }

    /// Refuses a `workspace_root` over [`MAX_ROOT_BYTES`], as [`Workspaces::resolve`] does
    /// first: for a caller that forwards the request (the gateway).
    pub fn check_length(requested: &str) -> Result<(), WorkspaceError> {
        if requested.len() > MAX_ROOT_BYTES {
            return Err(WorkspaceError::TooLong(requested.len()));
        }
        Ok(())
    }

    /// Every root, the default first.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The root a request means: the default for an empty string, else the configured root
    /// it names (compared after canonicalisation). Errors hold at most a short prefix of it.
    pub fn resolve(&self, requested: &str) -> Result<PathBuf, WorkspaceError> {
        Self::check_length(requested)?;
        if requested.is_empty() {
            return self
                .roots
                .first()
                .cloned()
                .ok_or(WorkspaceError::NoneConfigured);
        }
        let path = Path::new(requested);
        if !path.is_absolute() {
            return Err(WorkspaceError::NotAbsolute(shown(requested).into_owned()));
        }
        let wanted = canonical(path);
        self.roots
            .iter()
            .find(|r| **r == wanted)
            .cloned()
            .ok_or_else(|| WorkspaceError::Unknown(shown(requested).into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
