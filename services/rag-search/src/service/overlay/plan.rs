//! The pure half of SyncOverlay and PutOverlayFiles: checking a request field by field, and
//! deciding each path's entry against the base ([`plan_sync`], [`plan_put`]) and the bounds
//! ([`check_limits`]). No lock, no disk: [`super::sync`] runs these under the overlay's writer
//! lock.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{Entry, OverlayLimits};
use crate::error::RagError;
use crate::scan;
use crate::service::check_relative;

/// One file of a developer's checkout, as its manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestFile {
    /// Path relative to the workspace root.
    pub path: String,
    /// blake3 (hex) of its content.
    pub hash: String,
}

/// One file's content for an overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayPut {
    /// Path relative to the workspace root.
    pub path: String,
    /// The whole content.
    pub content: Vec<u8>,
    /// Compare-and-set: the hash the overlay (or, when it does not hold the path, the base)
    /// must have for the path; empty = no check.
    pub expected_hash: String,
}

/// A put's file, checked, with its real hash.
#[derive(Debug, Clone)]
pub(super) struct Checked {
    pub(super) path: String,
    pub(super) content: Vec<u8>,
    pub(super) hash: String,
    pub(super) expected: Option<String>,
}

/// The entries a sync leads to, and what it counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Planned {
    pub(super) next: BTreeMap<String, Entry>,
    pub(super) need: Vec<String>,
    pub(super) changed: u64,
    /// Of `changed`, the paths the base lacks.
    pub(super) added: u64,
    pub(super) deleted: u64,
    pub(super) unchanged: u64,
}

fn invalid(field: String, reason: impl Into<String>) -> RagError {
    RagError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// A blake3 hex digest (64 hex digits), lowercased.
fn check_hash(field: String, hash: &str) -> Result<String, RagError> {
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid(
            field,
            format!(
                "must be a blake3 hash (64 hex digits), got `{}`",
                ploke_runtime::text::shown(hash)
            ),
        ));
    }
    Ok(hash.to_ascii_lowercase())
}

/// Each path checked and normalised; a path listed twice names both places.
pub(super) fn check_paths<'a>(
    paths: impl Iterator<Item = &'a str>,
    field: impl Fn(usize) -> String,
) -> Result<Vec<String>, RagError> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, p) in paths.enumerate() {
        let path = check_relative(&field(i), p)?;
        if let Some(first) = seen.insert(path.clone(), i) {
            return Err(invalid(
                field(i),
                format!(
                    "`{}` is listed twice (also {})",
                    ploke_runtime::text::shown(&path),
                    field(first)
                ),
            ));
        }
        out.push(path);
    }
    Ok(out)
}

/// The `.git` or `.ploke` directory a relative path is under, if any (never read or written,
/// so never asked of a client).
fn protected_dir(path: &str) -> Option<&'static str> {
    path.split('/')
        .find_map(|part| ploke_runtime::path_policy::protected(std::ffi::OsStr::new(part)))
}

/// The manifest checked: paths relative and unique, hashes well formed. Files under `.git` or
/// `.ploke` are left out: a client that lists them is never asked for their contents (git's
/// config may hold a developer's credentials).
pub(super) fn check_manifest(files: Vec<ManifestFile>) -> Result<Vec<(String, String)>, RagError> {
    let paths = check_paths(files.iter().map(|f| f.path.as_str()), |i| {
        format!("files[{i}].path")
    })?;
    let mut out = Vec::with_capacity(files.len());
    for (i, (path, f)) in paths.into_iter().zip(files).enumerate() {
        let hash = check_hash(format!("files[{i}].hash"), &f.hash)?;
        if protected_dir(&path).is_none() {
            out.push((path, hash));
        }
    }
    Ok(out)
}

/// A put's files checked: at least one, paths relative and unique, content text the index
/// would take (as a walk takes it: at most [`scan::MAX_FILE_BYTES`], UTF-8, not binary).
pub(super) fn check_puts(files: Vec<OverlayPut>) -> Result<Vec<Checked>, RagError> {
    if files.is_empty() {
        return Err(invalid("files".into(), "must not be empty"));
    }
    let paths = check_paths(files.iter().map(|f| f.path.as_str()), |i| {
        format!("files[{i}].path")
    })?;
    let mut out = Vec::with_capacity(files.len());
    for (i, (path, f)) in paths.into_iter().zip(files).enumerate() {
        if let Some(dir) = protected_dir(&path) {
            return Err(invalid(
                format!("files[{i}].path"),
                format!(
                    "`{}` is under {dir}/, which is never read or written",
                    ploke_runtime::text::shown(&path)
                ),
            ));
        }
        if f.content.len() as u64 > scan::MAX_FILE_BYTES {
            return Err(invalid(
                format!("files[{i}].content"),
                format!(
                    "is {} bytes; files over {} bytes are not indexed",
                    f.content.len(),
                    scan::MAX_FILE_BYTES
                ),
            ));
        }
        if !scan::is_text(&f.content) {
            return Err(invalid(
                format!("files[{i}].content"),
                "is not UTF-8 text (binary files are not indexed)",
            ));
        }
        let expected = if f.expected_hash.is_empty() {
            None
        } else {
            Some(check_hash(
                format!("files[{i}].expected_hash"),
                &f.expected_hash,
            )?)
        };
        out.push(Checked {
            hash: blake3::hash(&f.content).to_hex().to_string(),
            path,
            content: f.content,
            expected,
        });
    }
    Ok(out)
}

/// The entries a manifest leads to. A path with the base's hash is unchanged (and leaves the
/// overlay: a reverted file); another hash, or a path the base lacks, is CHANGED when the
/// overlay holds that content already (under any path: renames and copies cost nothing),
/// PENDING (needed) otherwise; a base file the manifest lacks is DELETED.
pub(super) fn plan_sync(
    current: &BTreeMap<String, Entry>,
    base: &BTreeMap<String, String>,
    manifest: &[(String, String)],
) -> Planned {
    let held: HashMap<&str, u64> = current
        .values()
        .filter_map(|e| match e {
            Entry::Changed { hash, size } => Some((hash.as_str(), *size)),
            Entry::Deleted | Entry::Pending { .. } => None,
        })
        .collect();
    let mut planned = Planned {
        next: BTreeMap::new(),
        need: Vec::new(),
        changed: 0,
        added: 0,
        deleted: 0,
        unchanged: 0,
    };
    for (path, hash) in manifest {
        match base.get(path) {
            Some(h) if h == hash => {
                planned.unchanged += 1;
                continue;
            }
            Some(_) => {}
            None => planned.added += 1,
        }
        planned.changed += 1;
        let entry = match held.get(hash.as_str()) {
            Some(size) => Entry::Changed {
                hash: hash.clone(),
                size: *size,
            },
            None => {
                planned.need.push(path.clone());
                Entry::Pending { hash: hash.clone() }
            }
        };
        planned.next.insert(path.clone(), entry);
    }
    let listed: HashSet<&str> = manifest.iter().map(|(p, _)| p.as_str()).collect();
    for path in base.keys().filter(|p| !listed.contains(p.as_str())) {
        planned.deleted += 1;
        planned.next.insert(path.clone(), Entry::Deleted);
    }
    planned.need.sort();
    planned
}

/// The entries a put leads to: each file CHANGED with its real hash (or out of the overlay
/// when it is the base's content again), after every compare-and-set held. `base` has the
/// base's hash of each path put (None: the base lacks it).
pub(super) fn plan_put(
    session: &str,
    current: &BTreeMap<String, Entry>,
    base: &HashMap<String, Option<String>>,
    files: &[Checked],
) -> Result<BTreeMap<String, Entry>, RagError> {
    let mut next = current.clone();
    for (i, f) in files.iter().enumerate() {
        let base_hash = base.get(&f.path).and_then(Option::as_deref);
        if let Some(expected) = &f.expected {
            let now = match current.get(&f.path) {
                Some(Entry::Changed { hash, .. } | Entry::Pending { hash }) => Some(hash.as_str()),
                Some(Entry::Deleted) => None,
                None => base_hash,
            };
            if now != Some(expected.as_str()) {
                return Err(RagError::OverlayConflict {
                    field: format!("files[{i}].expected_hash"),
                    path: f.path.clone(),
                    session: session.to_owned(),
                    expected: expected.clone(),
                    current: now.unwrap_or("no file").to_owned(),
                });
            }
        }
        if base_hash == Some(f.hash.as_str()) {
            next.remove(&f.path);
        } else {
            next.insert(
                f.path.clone(),
                Entry::Changed {
                    hash: f.hash.clone(),
                    size: f.content.len() as u64,
                },
            );
        }
    }
    Ok(next)
}

/// Bytes of content the entries hold.
pub(super) fn bytes_of(entries: &BTreeMap<String, Entry>) -> u64 {
    entries
        .values()
        .map(|e| match e {
            Entry::Changed { size, .. } => *size,
            Entry::Deleted | Entry::Pending { .. } => 0,
        })
        .sum()
}

/// Refuses entries over the limits.
pub(super) fn check_limits(
    session: &str,
    next: &BTreeMap<String, Entry>,
    limits: OverlayLimits,
) -> Result<(), RagError> {
    let full = |would, limit, unit, key| RagError::OverlayFull {
        session: session.to_owned(),
        would,
        limit,
        unit,
        key,
    };
    let files = next.len() as u64;
    if files > limits.max_files {
        return Err(full(files, limits.max_files, "files", "overlay_max_files"));
    }
    let bytes = bytes_of(next);
    if bytes > limits.max_bytes {
        return Err(full(bytes, limits.max_bytes, "bytes", "overlay_max_bytes"));
    }
    Ok(())
}

pub(super) fn pending_of(entries: &BTreeMap<String, Entry>) -> u64 {
    entries
        .values()
        .filter(|e| matches!(e, Entry::Pending { .. }))
        .count() as u64
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
