//! Resolving a tool's path argument inside its workspace root: lexical `..` that climbs out,
//! absolute paths elsewhere and symlinks that lead out are refused, and nothing under `.git/`
//! may be written.

use std::path::{Component, Path, PathBuf};

use ploke_proto::tools::v1::ToolErrorCode;

use crate::failure::ToolFailure;

/// What the caller will do with the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read or list.
    Read,
    /// Create or change.
    Write,
}

/// A path inside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute path with every existing symlink resolved.
    pub abs: PathBuf,
    /// `/`-separated path relative to the root; empty for the root itself.
    pub rel: String,
}

fn outside(field: &str, input: &str, why: &str) -> ToolFailure {
    ToolFailure::new(
        ToolErrorCode::OutsideWorkspace,
        field,
        format!("`{input}` {why}"),
    )
    .hint("use a path relative to the workspace root, without `..` that leaves it")
}

/// Resolves `input` (relative to `root`, or absolute inside it) for `access`. `root` must be
/// canonical. An empty input means the root.
pub fn resolve(
    root: &Path,
    field: &str,
    input: &str,
    access: Access,
) -> Result<Resolved, ToolFailure> {
    if input.contains('\0') {
        return Err(ToolFailure::invalid(field, "the path contains a NUL byte"));
    }
    let path = Path::new(input);
    let relative: &Path = if path.is_absolute() {
        path.strip_prefix(root).map_err(|_| {
            outside(
                field,
                input,
                "is an absolute path outside the workspace root",
            )
        })?
    } else {
        path
    };
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in relative.components() {
        match c {
            Component::Normal(p) => parts.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(outside(field, input, "climbs out of the workspace root"));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(outside(field, input, "is not inside the workspace root"));
            }
        }
    }
    let lexical: PathBuf = parts.iter().fold(root.to_path_buf(), |p, c| p.join(c));
    let abs = resolve_symlinks(&lexical).map_err(|e| ToolFailure::io(field, input, &e))?;
    let Ok(inside) = abs.strip_prefix(root) else {
        return Err(outside(
            field,
            input,
            "leads outside the workspace root through a symlink",
        ));
    };
    let rel = inside
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/");
    if access == Access::Write
        && (inside.components().any(|c| c.as_os_str() == ".git")
            || parts.iter().any(|c| *c == ".git"))
    {
        return Err(ToolFailure::new(
            ToolErrorCode::PermissionDenied,
            field,
            format!("`{input}` is under .git/, which tools may read but never write"),
        ));
    }
    Ok(Resolved { abs, rel })
}

/// `path` with its longest existing prefix canonicalised (symlinks followed) and the missing
/// rest appended as is.
fn resolve_symlinks(path: &Path) -> std::io::Result<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        match std::fs::canonicalize(&existing) {
            Ok(canon) => {
                return Ok(rest.iter().rev().fold(canon, |p: PathBuf, c| p.join(c)));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A dangling symlink is refused: where it points is not ours to create.
                if existing.symlink_metadata().is_ok() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "dangling symlink",
                    ));
                }
                let Some(name) = existing.file_name().map(|n| n.to_os_string()) else {
                    return Err(e);
                };
                rest.push(name);
                if !existing.pop() {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "fn a() {}\n").unwrap();
        (dir, root)
    }

    #[test]
    fn relative_and_absolute_paths_inside_resolve() {
        let (_d, root) = root();
        let want = Resolved {
            abs: root.join("src/lib.rs"),
            rel: "src/lib.rs".into(),
        };
        assert_eq!(
            resolve(&root, "f", "src/lib.rs", Access::Read).unwrap(),
            want
        );
        assert_eq!(
            resolve(&root, "f", "./src/../src/lib.rs", Access::Read).unwrap(),
            want
        );
        let abs = root.join("src/lib.rs");
        assert_eq!(
            resolve(&root, "f", abs.to_str().unwrap(), Access::Write).unwrap(),
            want
        );
        assert_eq!(
            resolve(&root, "f", "new/dir/file.rs", Access::Write).unwrap(),
            Resolved {
                abs: root.join("new/dir/file.rs"),
                rel: "new/dir/file.rs".into()
            }
        );
        assert_eq!(resolve(&root, "f", "", Access::Read).unwrap().rel, "");
    }

    #[test]
    fn traversal_and_absolute_paths_elsewhere_are_refused() {
        let (_d, root) = root();
        for bad in ["../x", "src/../../x", "/etc/passwd"] {
            let e = resolve(&root, "file", bad, Access::Read).unwrap_err();
            assert_eq!(
                (e.code, e.field.as_str()),
                (ToolErrorCode::OutsideWorkspace, "file"),
                "{bad}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_that_leave_the_root_are_refused() {
        let (_d, root) = root();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.join("link")).unwrap();
        std::os::unix::fs::symlink(root.join("src"), root.join("inner")).unwrap();
        let e = resolve(&root, "file", "link/secret", Access::Read).unwrap_err();
        assert_eq!(e.code, ToolErrorCode::OutsideWorkspace);
        let e = resolve(&root, "file", "link/new.rs", Access::Write).unwrap_err();
        assert_eq!(e.code, ToolErrorCode::OutsideWorkspace);
        assert_eq!(
            resolve(&root, "file", "inner/lib.rs", Access::Read)
                .unwrap()
                .rel,
            "src/lib.rs"
        );
    }

    #[test]
    fn git_is_readable_but_never_writable() {
        let (_d, root) = root();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        assert!(resolve(&root, "f", ".git/config", Access::Read).is_ok());
        for bad in [".git/config", ".git/hooks/pre-commit", "sub/.git/x"] {
            let e = resolve(&root, "f", bad, Access::Write).unwrap_err();
            assert_eq!(e.code, ToolErrorCode::PermissionDenied, "{bad}");
        }
    }
}
