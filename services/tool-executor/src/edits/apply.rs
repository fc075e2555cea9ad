//! Writing a proposal's files all-or-nothing: every file's hash is re-checked first (a change
//! makes the proposal stale and nothing is written); then an undo record is made durable, each
//! file is written to a temporary sibling, fsynced and renamed over the original; a failure
//! midway puts every already-written file back. An undo record left by a crash is replayed at
//! start-up.

use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use ploke_runtime::path_policy::{FileError, read_regular};
use serde::{Deserialize, Serialize};

use super::plan::Plan;
use crate::paths::resolve;

/// One file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileWrite {
    /// Absolute path.
    pub abs: PathBuf,
    /// Path relative to the workspace root, for messages.
    pub rel: String,
    /// Hash the file must still have; `None` = it must not exist yet.
    pub base_hash: Option<String>,
    /// New content.
    pub content: String,
}

/// Why nothing (lasting) was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// A file is no longer what the proposal was made against; nothing was written.
    #[error("{file} {why} since the proposal was made; nothing was written")]
    Stale {
        /// The file.
        file: String,
        /// What happened to it.
        why: &'static str,
    },
    /// A file is read-only (no write permission for anyone): someone made it so on purpose
    /// (generated, vendored, locked), and replacing it would not ask. Nothing was written.
    #[error(
        "{file} is read-only (mode {mode:o}); nothing was written: make it writable (chmod u+w) to edit it"
    )]
    ReadOnly {
        /// The file.
        file: String,
        /// Its permission bits.
        mode: u32,
    },
    /// The undo record could not be written (the data dir is full or read-only): nothing was
    /// written, and the same decision may be made again once it can be.
    #[error("the undo record {record} could not be written ({reason}); nothing was written")]
    Unrecorded {
        /// Where the record goes.
        record: String,
        /// Why.
        reason: String,
    },
    /// Writing failed; every file that had been written was restored.
    #[error("writing {file} failed ({reason}); every file was restored")]
    Failed {
        /// The file.
        file: String,
        /// The I/O error.
        reason: String,
    },
    /// Writing failed and restoring did too: the undo record is kept for the next start.
    #[error(
        "writing {file} failed ({reason}) and restoring failed ({restore}); the undo record is kept in {record}"
    )]
    RestoreFailed {
        /// The file.
        file: String,
        /// The write error.
        reason: String,
        /// The restore error.
        restore: String,
        /// Where the undo record is.
        record: String,
    },
}

impl ApplyError {
    /// The state a proposal ends in when its apply failed so.
    pub fn state(&self) -> ploke_proto::tools::v1::ProposalState {
        use ploke_proto::tools::v1::ProposalState;
        match self {
            ApplyError::Stale { .. } => ProposalState::Stale,
            ApplyError::ReadOnly { .. }
            | ApplyError::Unrecorded { .. }
            | ApplyError::Failed { .. }
            | ApplyError::RestoreFailed { .. } => ProposalState::Failed,
        }
    }
}

/// The undo record: every file's content before the write (`None` = it did not exist).
#[derive(Debug, Serialize, Deserialize)]
struct UndoRecord {
    files: Vec<(PathBuf, Option<String>)>,
}

/// Largest file re-read for the hash check; a file that grew past it has changed.
const CHECK_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// Checks the files' current state against the plan; the originals, in order. Files are read
/// by the path policy: one that became a FIFO, a device or a symlink since is stale, never
/// waited on.
pub(super) fn check(writes: &[FileWrite]) -> Result<Vec<Option<String>>, ApplyError> {
    let mut originals = Vec::with_capacity(writes.len());
    for w in writes {
        let stale = |why| ApplyError::Stale {
            file: w.rel.clone(),
            why,
        };
        match (&w.base_hash, read_regular(&w.abs, CHECK_MAX_BYTES)) {
            (None, Err(FileError::NotFound)) => originals.push(None),
            (None, _) => return Err(stale("was created")),
            (Some(_), Err(_)) => return Err(stale("was deleted or became unreadable")),
            (Some(hash), Ok(bytes)) => {
                if blake3::hash(&bytes).to_hex().as_str() != hash {
                    return Err(stale("changed"));
                }
                if let Some(mode) = read_only(&w.abs) {
                    return Err(ApplyError::ReadOnly {
                        file: w.rel.clone(),
                        mode,
                    });
                }
                originals.push(Some(
                    String::from_utf8(bytes).map_err(|_| stale("changed"))?,
                ));
            }
        }
    }
    Ok(originals)
}

/// The permission bits of the file at `abs` when nobody may write it (a file replaced by
/// rename would otherwise lose that without anyone being asked); `None` when it is writable or
/// cannot be looked at (the write then says why).
pub(super) fn read_only(abs: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = fs::symlink_metadata(abs).ok()?.permissions().mode() & 0o7777;
    (mode & 0o222 == 0).then_some(mode)
}

/// Writes `writes` whose current contents are `originals` (from [`check`]). `fault` runs before
/// each rename (tests inject failures there; production passes a no-op). On success the undo
/// record stays until the caller has recorded the outcome and calls [`discard`].
pub(super) fn write_all(
    writes: &[FileWrite],
    originals: Vec<Option<String>>,
    record_path: &Path,
    fault: &dyn Fn(usize) -> std::io::Result<()>,
) -> Result<(), ApplyError> {
    let record = UndoRecord {
        files: writes
            .iter()
            .map(|w| w.abs.clone())
            .zip(originals)
            .collect(),
    };
    let failed = |file: &str, e: &dyn std::fmt::Display| ApplyError::Failed {
        file: file.to_owned(),
        reason: e.to_string(),
    };
    write_record(record_path, &record).map_err(|e| ApplyError::Unrecorded {
        record: record_path.display().to_string(),
        reason: e.to_string(),
    })?;
    for (i, w) in writes.iter().enumerate() {
        let (e, replaced) = match write_one(w, || fault(i)) {
            Ok(()) => continue,
            Err(WriteError::Io(e, replaced)) => (e, replaced),
            // Saved by someone between the check and the write: left as they saved it, and
            // the files written before it put back.
            Err(WriteError::Changed) => {
                return Err(match restore(&record, i) {
                    Ok(()) => {
                        let _ = fs::remove_file(record_path);
                        ApplyError::Stale {
                            file: w.rel.clone(),
                            why: if w.base_hash.is_some() {
                                "changed"
                            } else {
                                "was created"
                            },
                        }
                    }
                    Err(r) => ApplyError::RestoreFailed {
                        file: w.rel.clone(),
                        reason: "it changed while the edit was written".to_owned(),
                        restore: r.to_string(),
                        record: record_path.display().to_string(),
                    },
                });
            }
        };
        // The files before this one were replaced, and this one too if it failed after its
        // rename; a file never replaced is not written again (on a full disk that write would
        // fail too, and report a restore that was never needed as failed).
        return Err(match restore(&record, i + usize::from(replaced)) {
            Ok(()) => {
                let _ = fs::remove_file(record_path);
                failed(&w.rel, &e)
            }
            Err(r) => ApplyError::RestoreFailed {
                file: w.rel.clone(),
                reason: e.to_string(),
                restore: r.to_string(),
                record: record_path.display().to_string(),
            },
        });
    }
    Ok(())
}

/// Removes the undo record of a finished apply.
pub(super) fn discard(record_path: &Path) {
    let _ = fs::remove_file(record_path);
}

/// Replays an undo record left by an interrupted apply; true when one was found.
pub fn recover(record_path: &Path) -> std::io::Result<bool> {
    let bytes = match fs::read(record_path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let record: UndoRecord = serde_json::from_slice(&bytes).map_err(std::io::Error::other)?;
    restore(&record, record.files.len())?;
    for (abs, _) in &record.files {
        remove_temp_siblings(abs);
    }
    fs::remove_file(record_path)?;
    Ok(true)
}

/// Removes the temporary files a killed process left in `dir` (an undo-record directory):
/// records being written when the process died, which nothing would ever read.
pub(super) fn sweep_temp_files(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| is_temp_name(&e.file_name().to_string_lossy(), None))
        .filter(|e| fs::remove_file(e.path()).is_ok())
        .count()
}

/// Removes the temporary siblings an interrupted write left next to `path`
/// (`.NAME.ploke-PID.tmp`, whatever the pid).
fn remove_temp_siblings(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let name = name.to_string_lossy();
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if is_temp_name(&e.file_name().to_string_lossy(), Some(&name)) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Whether `file_name` is a temporary file of [`temp_path`] (for the file `of`, if given).
fn is_temp_name(file_name: &str, of: Option<&str>) -> bool {
    let Some(rest) = file_name
        .strip_prefix('.')
        .and_then(|r| r.strip_suffix(".tmp"))
    else {
        return false;
    };
    let Some((name, pid)) = rest.rsplit_once(".ploke-") else {
        return false;
    };
    !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && of.is_none_or(|o| o == name)
}

fn write_record(path: &Path, record: &UndoRecord) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let json = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    atomic_write(path, json.as_slice(), None)
}

/// Restores the first `upto + 1` files of `record` (those that may have been written).
/// Puts back the first `count` files of `record`.
fn restore(record: &UndoRecord, count: usize) -> std::io::Result<()> {
    for (abs, original) in record.files.iter().take(count) {
        match original {
            Some(text) => atomic_write(abs, text.as_bytes(), None)?,
            None => match fs::remove_file(abs) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            },
        }
    }
    Ok(())
}

/// Why one file was not written.
enum WriteError {
    /// Writing failed; whether the file had been replaced (it holds the new content).
    Io(std::io::Error, bool),
    /// The file changed (or was created) after the check: it was left as it is now.
    Changed,
}

/// Writes one file through a temporary sibling put in its place: swapped with it
/// (`RENAME_EXCHANGE`), so that what it held can be checked against the hash the edit was made
/// over and swapped back when someone saved it meanwhile; a new file only where none exists
/// (`RENAME_NOREPLACE`). A plain rename after a last check where the file system has neither.
fn write_one(
    w: &FileWrite,
    before_rename: impl FnOnce() -> std::io::Result<()>,
) -> Result<(), WriteError> {
    if let Some(dir) = w.abs.parent() {
        fs::create_dir_all(dir).map_err(|e| WriteError::Io(e, false))?;
    }
    let was = fs::metadata(&w.abs).ok();
    let tmp = temp_path(&w.abs);
    let written = write_synced(&tmp, w.content.as_bytes(), Like::of(was.as_ref(), None))
        .and_then(|()| before_rename());
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(WriteError::Io(e, false));
    }
    put_in_place(&tmp, w)?;
    sync_dir(&w.abs).map_err(|e| WriteError::Io(e, true))
}

/// Puts the written `tmp` at `w.abs` if the file there is still what the edit was made over,
/// and removes `tmp` (the new content not used, or what was replaced) — unless a save swapped
/// out could not be swapped back: it is then left at `tmp` and the error says where.
fn put_in_place(tmp: &Path, w: &FileWrite) -> Result<(), WriteError> {
    let placed = place(tmp, w);
    if !matches!(placed, Err(WriteError::Io(_, true))) {
        let _ = fs::remove_file(tmp);
    }
    placed
}

fn place(tmp: &Path, w: &FileWrite) -> Result<(), WriteError> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    let unsupported = |e: rustix::io::Errno| {
        [
            rustix::io::Errno::INVAL,
            rustix::io::Errno::NOSYS,
            rustix::io::Errno::NOTSUP,
        ]
        .contains(&e)
    };
    let io = |e: rustix::io::Errno| WriteError::Io(e.into(), false);
    let Some(base) = &w.base_hash else {
        return match renameat_with(CWD, tmp, CWD, &w.abs, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::EXIST) => Err(WriteError::Changed),
            Err(e) if unsupported(e) => match fs::symlink_metadata(&w.abs) {
                Ok(_) => Err(WriteError::Changed),
                Err(_) => fs::rename(tmp, &w.abs).map_err(|e| WriteError::Io(e, false)),
            },
            Err(e) => Err(io(e)),
        };
    };
    let holds_base = |path: &Path| {
        read_regular(path, CHECK_MAX_BYTES)
            .is_ok_and(|bytes| blake3::hash(&bytes).to_hex().as_str() == base)
    };
    match renameat_with(CWD, tmp, CWD, &w.abs, RenameFlags::EXCHANGE) {
        Ok(()) if holds_base(tmp) => Ok(()),
        Ok(()) => {
            // Swapped out a save made since the check: swap it back.
            renameat_with(CWD, tmp, CWD, &w.abs, RenameFlags::EXCHANGE).map_err(|e| {
                let kept = std::io::Error::other(format!(
                    "{} changed while the edit was written and could not be put back ({e}); \
                     the changed file is at {}",
                    w.rel,
                    tmp.display()
                ));
                WriteError::Io(kept, true)
            })?;
            Err(WriteError::Changed)
        }
        Err(e) if unsupported(e) => {
            if !holds_base(&w.abs) {
                return Err(WriteError::Changed);
            }
            fs::rename(tmp, &w.abs).map_err(|e| WriteError::Io(e, false))
        }
        Err(e) => Err(io(e)),
    }
}

fn atomic_write(path: &Path, bytes: &[u8], mode: Option<fs::Permissions>) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let was = fs::metadata(path).ok();
    let tmp = temp_path(path);
    let result = write_synced(&tmp, bytes, Like::of(was.as_ref(), mode))
        .and_then(|()| fs::rename(&tmp, path))
        .and_then(|()| sync_dir(path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// What a file written in place of another keeps of it: its mode and its owner.
struct Like {
    mode: Option<fs::Permissions>,
    owner: Option<(u32, u32)>,
}

impl Like {
    /// Of the file `was` (if it exists), with `mode` given instead of its own.
    fn of(was: Option<&fs::Metadata>, mode: Option<fs::Permissions>) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self {
            mode: mode.or_else(|| was.map(fs::Metadata::permissions)),
            owner: was.map(|m| (m.uid(), m.gid())),
        }
    }
}

/// Writes `tmp` with the mode (set before the content: a 0600 file's new content is never
/// readable at the umask's mode) and the owner of the file it replaces. An owner this process
/// may not give (it runs as another user) stays its own.
fn write_synced(tmp: &Path, bytes: &[u8], like: Like) -> std::io::Result<()> {
    let mut f = File::create(tmp)?;
    if let Some(mode) = like.mode {
        f.set_permissions(mode)?;
    }
    if let Some((uid, gid)) = like.owner
        && let Err(e) = std::os::unix::fs::fchown(&f, Some(uid), Some(gid))
        && e.kind() != std::io::ErrorKind::PermissionDenied
    {
        return Err(e);
    }
    f.write_all(bytes)?;
    f.sync_all()
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.ploke-{}.tmp", std::process::id()))
}

fn sync_dir(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) => File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

/// One whole file to write with [`write_whole`]: its path relative to the root, the hash its
/// current content must have (`None`: it must not exist) and the new content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WholeFile {
    /// Path relative to the root.
    pub rel: String,
    /// The hash it must have now; `None` = it must not exist.
    pub base_hash: Option<String>,
    /// The new content.
    pub content: String,
}

/// Writes whole files into `root` with the guarantees of an apply: every path through the
/// path policy, every file's current hash checked first (stale: nothing written), an undo
/// record at `record`, temp + fsync + rename, every file restored if one fails; the record is
/// removed once all are written (blocking). The `ploke` client writes an overlay's delivery
/// into the developer's checkout with it.
pub fn write_whole(root: &Path, files: &[WholeFile], record: &Path) -> Result<(), ApplyError> {
    let mut writes = Vec::with_capacity(files.len());
    for f in files {
        // A path the policy refuses is not a stale file: it fails, and no caller may take it
        // for a place to save the content.
        let resolved = resolve(root, "file_path", &f.rel).map_err(|e| ApplyError::Failed {
            file: ploke_runtime::text::shown(&f.rel).into_owned(),
            reason: format!("the path {e}"),
        })?;
        writes.push(FileWrite {
            abs: resolved.abs,
            rel: f.rel.clone(),
            base_hash: f.base_hash.clone(),
            content: f.content.clone(),
        });
    }
    let originals = check(&writes)?;
    write_all(&writes, originals, record, &|_| Ok(()))?;
    discard(record);
    Ok(())
}

/// Re-resolves, re-checks and writes the chosen edits' files (blocking).
pub(super) fn write_chosen(
    root: &Path,
    plan: &Plan,
    chosen: &[u32],
    files: &[String],
    record: &Path,
    fault: &(dyn Fn(usize) -> std::io::Result<()> + Send + Sync),
) -> Result<(), ApplyError> {
    let mut writes = Vec::with_capacity(files.len());
    for f in files {
        let stale = |why| ApplyError::Stale {
            file: f.clone(),
            why,
        };
        let resolved = resolve(root, "file_path", f)
            .map_err(|_| stale("no longer resolves inside the workspace"))?;
        let base_hash = plan.file(f).and_then(|p| p.base_hash.clone());
        writes.push(FileWrite {
            abs: resolved.abs,
            rel: f.clone(),
            base_hash,
            content: String::new(),
        });
    }
    let originals = check(&writes)?;
    for (w, original) in writes.iter_mut().zip(&originals) {
        let original = original.as_deref().unwrap_or("");
        w.content = plan
            .content_with(&w.rel, original, chosen)
            .map_err(|reason| ApplyError::Failed {
                file: w.rel.clone(),
                reason,
            })?
            .unwrap_or_else(|| original.to_owned());
    }
    write_all(&writes, originals, record, fault)
}

#[cfg(test)]
mod tests;
