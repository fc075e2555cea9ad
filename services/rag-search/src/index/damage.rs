//! An index whose own files are damaged (a truncated metadata file or segment, a vector file
//! cut short: a crash, a full disk, a bad block) is derived data: rather than refusing every
//! start (a crash loop under an orchestrator) it is moved aside, kept once for a look, and
//! built again from the workspace. Faults of the machine rather than of the files (a full
//! disk, no permission, another process's lock) are not damage: they stay errors.

use std::path::{Path, PathBuf};

use super::IndexError;
use crate::bm25::Bm25Error;
use crate::vectors::VectorError;

/// Whether opening failed because the index's files are damaged.
pub(super) fn damaged(e: &IndexError) -> bool {
    let machine = |text: &str| {
        [
            "No space left",
            "StorageFull",
            "Permission denied",
            "Read-only file system",
            "quota",
        ]
        .iter()
        .any(|m| text.contains(m))
    };
    let bad_data = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
        )
    };
    match e {
        IndexError::Corrupt { .. } => true,
        IndexError::Io { source, .. } => bad_data(source),
        IndexError::Bm25(Bm25Error::Tantivy(t)) => !machine(&t.to_string()),
        IndexError::Vectors(VectorError::Usearch(text)) => !machine(text),
        IndexError::Vectors(VectorError::Io { source, .. }) => bad_data(source),
        IndexError::Bm25(
            Bm25Error::Directory(_) | Bm25Error::Io(_) | Bm25Error::Closed | Bm25Error::Locked(_),
        )
        | IndexError::Embed(_)
        | IndexError::Closed
        | IndexError::Poisoned => false,
    }
}

/// Moves `dir` to `DIR.damaged` beside it (replacing an older damaged copy); where it went.
pub(super) fn move_aside(dir: &Path) -> std::io::Result<PathBuf> {
    let mut name = dir.file_name().unwrap_or_default().to_owned();
    name.push(".damaged");
    let aside = dir.with_file_name(name);
    match std::fs::remove_dir_all(&aside) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::rename(dir, &aside)?;
    Ok(aside)
}
