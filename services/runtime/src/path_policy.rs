//! The one path policy of every service that touches a workspace: rag-search (scan, watcher,
//! RefreshFiles, GetSnippets, context assembly) and tool-executor (every tool) resolve paths
//! and open files only through this module.
//!
//! - A path is taken relative to the workspace root (or absolute inside it), at most
//!   [`MAX_PATH_BYTES`] long, without NUL bytes; `..` that climbs out is refused.
//! - Symlinks are followed only inside the root: a path whose resolution leaves the root, a
//!   dangling symlink and a symlink loop are refused.
//! - `.git` and `.ploke` (git's and ploke's own state) are neither read nor written, compared
//!   without regard to case on any path component (`.GIT/config` is `.git/config` on macOS and
//!   Windows): git's config may hold a credential (a token in a remote's URL, a CI checkout's
//!   `http.extraheader`), and `.ploke` may hold every developer's sessions, the audit log and
//!   the clones of other workspaces.
//! - Files are opened as regular files only: the open neither blocks on a FIFO nor follows a
//!   final symlink swapped in after resolution, devices, sockets and directories are refused by
//!   `fstat` on the open handle, and reads are capped.
//! - What a workspace's ignore files leave out is read one way for walks and single paths
//!   ([`ignores`]).

use std::fs::File;
use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

/// Longest path accepted, in bytes (Linux's PATH_MAX).
pub const MAX_PATH_BYTES: usize = 4096;

/// Directory names never read or written, on any component, in any case.
pub const PROTECTED_DIRS: [&str; 2] = [".git", ".ploke"];

/// A path inside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute path with every existing symlink resolved.
    pub abs: PathBuf,
    /// `/`-separated path relative to the root; empty for the root itself.
    pub rel: String,
}

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path holds a NUL byte.
    #[error("contains a NUL byte")]
    Nul,
    /// The path holds another control character (a newline, an escape): such a name would
    /// forge lines of a diff a person reviews, or drive their terminal.
    #[error(
        "contains the control character U+{0:04X}; names with control characters are not supported"
    )]
    Control(u32),
    /// A directory on the way may not be entered (its permissions).
    #[error("cannot be resolved: a directory on the way may not be entered (permission denied)")]
    Denied,
    /// The path is longer than [`MAX_PATH_BYTES`].
    #[error("is {0} bytes long; the limit is {MAX_PATH_BYTES}")]
    TooLong(usize),
    /// An absolute path that is not under the root.
    #[error("is an absolute path outside the workspace root")]
    AbsoluteOutside,
    /// `..` climbs above the root.
    #[error("climbs out of the workspace root")]
    Climbs,
    /// A symlink on the way leads outside the root.
    #[error("leads outside the workspace root through a symlink")]
    SymlinkEscape,
    /// A symlink on the way points nowhere.
    #[error("is a dangling symlink")]
    Dangling,
    /// A component is longer than the file system allows.
    #[error("has a component longer than the file system allows")]
    NameTooLong,
    /// Resolving the path runs in circles.
    #[error("runs into a symlink loop")]
    Loop,
    /// A component before the last is a file, not a directory (`src/lib.rs/x`).
    #[error("goes through a file as if it were a directory")]
    ThroughFile,
    /// Under a protected directory.
    #[error("is under {0}/, which is never read or written (git's and ploke's own state)")]
    Protected(&'static str),
    /// Resolving failed for another reason.
    #[error("cannot be resolved: {0}")]
    Io(String),
}

impl PathError {
    /// Whether the path was refused for leaving the workspace (as opposed to being malformed,
    /// protected or unreadable).
    pub fn is_outside(&self) -> bool {
        matches!(
            self,
            PathError::AbsoluteOutside
                | PathError::Climbs
                | PathError::SymlinkEscape
                | PathError::Dangling
        )
    }
}

/// The protected directory `name` is, ignoring case, if any.
pub fn protected(name: &std::ffi::OsStr) -> Option<&'static str> {
    let name = name.to_str()?;
    PROTECTED_DIRS
        .into_iter()
        .find(|p| p.eq_ignore_ascii_case(name))
}

/// Resolves `input` (relative to `root`, or absolute inside it), to read or to write. `root`
/// is canonical, or canonical up to its first component that is a symbolic link
/// ([`crate::workspaces::root_path`]): its links are followed as they point now, and what they
/// point at is the tree nothing may leave. An empty input means the root.
pub fn resolve(root: &Path, input: &str) -> Result<Resolved, PathError> {
    if input.contains('\0') {
        return Err(PathError::Nul);
    }
    if let Some(c) = input.chars().find(|c| c.is_control()) {
        return Err(PathError::Control(u32::from(c)));
    }
    if input.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong(input.len()));
    }
    let path = Path::new(input);
    // Where the root's links point now, looked up only when it is needed: a root without
    // links is canonical already, and a path found under it as written is inside.
    let mut real_root: Option<PathBuf> = None;
    let relative: &Path = if path.is_absolute() {
        match path.strip_prefix(root) {
            Ok(relative) => relative,
            Err(_) => {
                let now = real_root.insert(root_now(root)?);
                path.strip_prefix(now)
                    .map_err(|_| PathError::AbsoluteOutside)?
            }
        }
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
                    return Err(PathError::Climbs);
                }
            }
            Component::RootDir | Component::Prefix(_) => return Err(PathError::AbsoluteOutside),
        }
    }
    let lexical: PathBuf = parts.iter().fold(root.to_path_buf(), |p, c| p.join(c));
    let abs = resolve_symlinks(&lexical)?;
    let inside = match abs.strip_prefix(root) {
        Ok(inside) => inside.to_path_buf(),
        Err(_) => {
            // A root through links: judged by where they point now (looked up again if they
            // were pointed elsewhere since the absolute input was read against them).
            let real_root = match real_root {
                Some(before) if abs.starts_with(&before) || before == root => before,
                _ => root_now(root)?,
            };
            abs.strip_prefix(&real_root)
                .map_err(|_| PathError::SymlinkEscape)?
                .to_path_buf()
        }
    };
    if let Some(dir) = inside
        .components()
        .map(|c| c.as_os_str())
        .chain(parts.iter().copied())
        .find_map(protected)
    {
        return Err(PathError::Protected(dir));
    }
    let rel = inside
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/");
    Ok(Resolved { abs, rel })
}

/// Resolves a path that names something to read inside the root, as an index stores it
/// (`/`-separated, relative): `Ok(Some(abs))` when it is inside and names itself — no symlink
/// on the way, so the stored path is the file's own — `Ok(None)` when it resolves elsewhere
/// inside the root (an index never stores a file under a symlink's name), an error when it is
/// refused. A missing path resolves to where it would be.
pub fn resolve_own(root: &Path, rel: &str) -> Result<Option<PathBuf>, PathError> {
    let resolved = resolve(root, rel)?;
    let asked: Vec<&str> = rel
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    Ok((resolved.rel == asked.join("/")).then_some(resolved.abs))
}

/// The directory `root` is now (through its link, if it is one); a root that is gone stands for
/// itself, so that what is under it resolves to where it would be.
fn root_now(root: &Path) -> Result<PathBuf, PathError> {
    match std::fs::canonicalize(root) {
        Ok(real) => Ok(real),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(root.to_owned()),
        Err(e) => Err(classify(&e)),
    }
}

/// `path` with its longest existing prefix canonicalised (symlinks followed) and the missing
/// rest appended as is.
fn resolve_symlinks(path: &Path) -> Result<PathBuf, PathError> {
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
                    return Err(PathError::Dangling);
                }
                let Some(name) = existing.file_name().map(|n| n.to_os_string()) else {
                    return Err(PathError::Io(e.to_string()));
                };
                rest.push(name);
                if !existing.pop() {
                    return Err(PathError::Io(e.to_string()));
                }
            }
            Err(e) => return Err(classify(&e)),
        }
    }
}

fn classify(e: &std::io::Error) -> PathError {
    if is_loop(e) {
        PathError::Loop
    } else if e.kind() == std::io::ErrorKind::InvalidFilename {
        PathError::NameTooLong
    } else if e.kind() == std::io::ErrorKind::NotADirectory {
        PathError::ThroughFile
    } else if e.kind() == std::io::ErrorKind::PermissionDenied {
        PathError::Denied
    } else {
        PathError::Io(e.kind().to_string())
    }
}

#[cfg(unix)]
fn is_loop(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

#[cfg(not(unix))]
fn is_loop(_: &std::io::Error) -> bool {
    false
}

/// Why a file could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Nothing is there.
    #[error("does not exist")]
    NotFound,
    /// Something other than a regular file is there.
    #[error("is {0}, not a regular file")]
    NotRegular(&'static str),
    /// The file is larger than the caller reads.
    #[error("is {size} bytes; the limit is {limit}")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// The read was abandoned by its caller.
    #[error("was abandoned")]
    Cancelled,
    /// Another I/O failure.
    #[error("{0}")]
    Io(std::io::Error),
}

impl FileError {
    fn from_io(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::NotFound => FileError::NotFound,
            _ if is_loop(&e) => FileError::NotRegular("a symlink"),
            _ => FileError::Io(e),
        }
    }
}

fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    if t.is_symlink() {
        return "a symlink";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
    }
    "a special file"
}

/// Opens `abs` (already resolved) for reading as a regular file: never blocks on a FIFO
/// (`O_NONBLOCK`, harmless on regular files), never follows a final symlink (`O_NOFOLLOW`),
/// and checks the open handle itself (`fstat`), so a file swapped after resolution is judged
/// as what was opened.
pub fn open_regular(abs: &Path) -> Result<(File, std::fs::Metadata), FileError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    }
    let file = match options.open(abs) {
        Ok(file) => file,
        // A socket cannot be opened at all (ENXIO): say what is there, as for a FIFO.
        Err(e) => {
            return Err(match std::fs::symlink_metadata(abs) {
                Ok(meta) if !meta.is_file() => FileError::NotRegular(kind_of(&meta)),
                _ => FileError::from_io(e),
            });
        }
    };
    let meta = file.metadata().map_err(FileError::Io)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(kind_of(&meta)));
    }
    Ok((file, meta))
}

/// The whole content of the regular file `abs`, refused over `max_bytes` (checked before
/// reading, and the read itself stops past the cap should the file grow meanwhile).
pub fn read_regular(abs: &Path, max_bytes: u64) -> Result<Vec<u8>, FileError> {
    let (file, meta) = open_regular(abs)?;
    if meta.len() > max_bytes {
        return Err(FileError::TooLarge {
            size: meta.len(),
            limit: max_bytes,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(FileError::Io)?;
    if bytes.len() as u64 > max_bytes {
        return Err(FileError::TooLarge {
            size: bytes.len() as u64,
            limit: max_bytes,
        });
    }
    Ok(bytes)
}

/// Streams the regular file `abs` through `each` in 64 KiB chunks, checking `cancelled`
/// before every chunk, so a long read ends soon after its caller gave up.
pub fn stream_regular(
    abs: &Path,
    cancelled: &dyn Fn() -> bool,
    each: &mut dyn FnMut(&[u8]),
) -> Result<std::fs::Metadata, FileError> {
    let (mut file, meta) = open_regular(abs)?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if cancelled() {
            return Err(FileError::Cancelled);
        }
        let n = match file.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FileError::Io(e)),
        };
        if n == 0 {
            return Ok(meta);
        }
        each(&buf[..n]);
    }
}

pub mod ignores;

#[cfg(test)]
mod tests;
