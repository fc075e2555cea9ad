//! A session's overlay as the tools see it: the developer's own changes (kept by rag-search)
//! over the shared workspace. A tool call of a session that has an overlay reads every path
//! through its [`View`]: a file the developer changed is read from the overlay, a file they
//! deleted does not exist, a file whose upload is still pending is unavailable — the base's
//! version of any of them is never used. A call fetches the contents it will read before its
//! blocking work starts ([`View::fetch`]); they are kept in the view and in a small cache
//! shared by calls, addressed by content hash (a changed file is a new hash).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ploke_proto::rag::v1::{OverlayEntryState, OverlayFile};
use ploke_proto::tools::v1::ToolErrorCode;

use crate::failure::ToolFailure;
use crate::paths::Resolved;
use crate::rag::Rag;

/// Bytes of overlay contents the cache keeps across calls.
const CACHE_BYTES: usize = 128 * 1024 * 1024;
/// Bytes of contents asked for in one GetOverlay (well under the message limit).
const FETCH_BATCH_BYTES: u64 = 8 * 1024 * 1024;

/// What the overlay holds for one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Changed, deleted or pending.
    pub state: OverlayEntryState,
    /// blake3 (hex) of the developer's content (changed).
    pub hash: String,
    /// Its size in bytes.
    pub size: u64,
}

/// How a path reads through an overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shadow {
    /// Not in the overlay: the workspace's own file.
    Base,
    /// The developer's content and its hash.
    Changed(Arc<Vec<u8>>, String),
    /// The developer does not have it.
    Deleted,
    /// The developer changed it and the content has not arrived yet.
    Pending,
}

#[derive(Debug, Default)]
struct Cache {
    by_hash: HashMap<String, Arc<Vec<u8>>>,
    order: VecDeque<String>,
    bytes: usize,
}

impl Cache {
    fn get(&self, hash: &str) -> Option<Arc<Vec<u8>>> {
        self.by_hash.get(hash).cloned()
    }

    fn put(&mut self, hash: String, content: Arc<Vec<u8>>) {
        if self.by_hash.contains_key(&hash) {
            return;
        }
        self.bytes += content.len();
        self.order.push_back(hash.clone());
        self.by_hash.insert(hash, content);
        while self.bytes > CACHE_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(c) = self.by_hash.remove(&old) {
                self.bytes -= c.len();
            }
        }
    }
}

/// Reads overlays from rag-search.
#[derive(Debug, Clone)]
pub struct Overlays {
    rag: Rag,
    cache: Arc<Mutex<Cache>>,
}

/// One call's view of a session's overlay (its entries as of the call's start).
#[derive(Debug, Clone)]
pub struct View {
    session: String,
    root: PathBuf,
    version: u64,
    entries: Arc<BTreeMap<String, Entry>>,
    overlays: Overlays,
    /// Contents this call fetched or found cached, by hash.
    held: Arc<Mutex<HashMap<String, Arc<Vec<u8>>>>>,
}

/// The failure for a path whose developer's version has not arrived yet.
pub fn pending(field: &str, rel: &str) -> ToolFailure {
    ToolFailure::new(
        ToolErrorCode::Unavailable,
        field,
        format!("the developer's version of {rel} is still being uploaded"),
    )
    .hint("try again in a moment")
}

/// The failure for a path the developer deleted (as for a missing file).
pub fn deleted(field: &str, rel: &str) -> ToolFailure {
    ToolFailure::not_found(field, format!("{rel} does not exist"))
        .hint("use list_dir or search_code to find the right path")
}

impl Overlays {
    /// Overlays kept by `rag`.
    pub fn new(rag: Rag) -> Self {
        Self {
            rag,
            cache: Arc::default(),
        }
    }

    /// The view of `session`'s overlay over `root`, or `None` when it has none. rag-search
    /// not answering is a tool failure (never a silent fall back to the base).
    pub async fn view(&self, root: &Path, session: &str) -> Result<Option<View>, ToolFailure> {
        if session.is_empty() {
            return Ok(None);
        }
        let overlay = self.rag.overlay(session, Vec::new()).await?;
        if overlay.version == 0 || Path::new(&overlay.workspace_root) != root {
            return Ok(None);
        }
        let entries = overlay
            .entries
            .into_iter()
            .map(|e| {
                let state = e.state();
                (
                    e.path,
                    Entry {
                        state,
                        hash: e.hash,
                        size: e.size,
                    },
                )
            })
            .collect();
        Ok(Some(View {
            session: session.to_owned(),
            root: root.to_owned(),
            version: overlay.version,
            entries: Arc::new(entries),
            overlays: self.clone(),
            held: Arc::default(),
        }))
    }

    /// Writes `files` to `session`'s overlay over `root` (compare-and-set on each file's
    /// expected hash).
    pub async fn put(
        &self,
        root: &Path,
        session: &str,
        files: Vec<OverlayFile>,
    ) -> Result<(), tonic::Status> {
        self.rag.put_overlay(root, session, files).await.map(|_| ())
    }
}

impl View {
    /// The session.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The workspace root it lies over.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Its version when the call started.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Every path the overlay holds, in path order.
    pub fn entries(&self) -> impl Iterator<Item = (&String, &Entry)> {
        self.entries.iter()
    }

    /// Whether the base's version of `rel` must not be used.
    pub fn hides(&self, rel: &str) -> bool {
        self.entries.contains_key(rel)
    }

    /// How `rel` reads. The content of a changed file must have been fetched ([`View::fetch`]);
    /// one that was not is a retryable failure, never the base's version.
    pub fn shadow(&self, rel: &str) -> Result<Shadow, ToolFailure> {
        let Some(entry) = self.entries.get(rel) else {
            return Ok(Shadow::Base);
        };
        match entry.state {
            OverlayEntryState::Deleted => Ok(Shadow::Deleted),
            OverlayEntryState::Pending | OverlayEntryState::Unspecified => Ok(Shadow::Pending),
            OverlayEntryState::Changed => {
                let content = self
                    .held(&entry.hash)
                    .ok_or_else(|| changed_meanwhile(rel))?;
                Ok(Shadow::Changed(content, entry.hash.clone()))
            }
        }
    }

    /// The content of `hash` if this call holds it, taking it from the shared cache if there.
    fn held(&self, hash: &str) -> Option<Arc<Vec<u8>>> {
        let mut held = self.held.lock().ok()?;
        if let Some(c) = held.get(hash) {
            return Some(c.clone());
        }
        let cached = self.overlays.cache.lock().ok()?.get(hash)?;
        held.insert(hash.to_owned(), cached.clone());
        Some(cached)
    }

    /// Fetches the contents of the changed `paths` not cached yet, in batches.
    pub async fn fetch(&self, paths: Vec<String>) -> Result<(), ToolFailure> {
        let missing: Vec<(String, u64)> = paths
            .into_iter()
            .filter_map(|p| {
                let e = self.entries.get(&p)?;
                (e.state == OverlayEntryState::Changed && self.held(&e.hash).is_none())
                    .then_some((p, e.size))
            })
            .collect();
        let mut batch: Vec<String> = Vec::new();
        let mut batch_bytes = 0u64;
        for (path, size) in missing {
            if !batch.is_empty() && batch_bytes + size > FETCH_BATCH_BYTES {
                self.fetch_batch(std::mem::take(&mut batch)).await?;
                batch_bytes = 0;
            }
            batch_bytes += size;
            batch.push(path);
        }
        if !batch.is_empty() {
            self.fetch_batch(batch).await?;
        }
        Ok(())
    }

    async fn fetch_batch(&self, paths: Vec<String>) -> Result<(), ToolFailure> {
        let overlay = self.overlays.rag.overlay(&self.session, paths).await?;
        let (Ok(mut cache), Ok(mut held)) = (self.overlays.cache.lock(), self.held.lock()) else {
            return Err(ToolFailure::internal("the overlay cache lock was poisoned"));
        };
        for e in overlay.entries {
            if e.state() != OverlayEntryState::Changed || e.content.is_empty() && e.size > 0 {
                continue;
            }
            // Kept under the hash of what arrived: a file changed since the call started is
            // simply not found under the old hash.
            let hash = blake3::hash(&e.content).to_hex().to_string();
            let content = Arc::new(e.content);
            held.insert(hash.clone(), content.clone());
            cache.put(hash, content);
        }
        Ok(())
    }

    /// Fetches every changed file's content (before a search over all of them).
    pub async fn fetch_all(&self) -> Result<(), ToolFailure> {
        let paths = self
            .entries
            .iter()
            .filter(|(_, e)| e.state == OverlayEntryState::Changed)
            .map(|(p, _)| p.clone())
            .collect();
        self.fetch(paths).await
    }

    /// The entries directly under the directory `dir` (relative, empty = the root): files
    /// the developer changed or added there, and directories that only the overlay has.
    pub fn children(&self, dir: &str) -> BTreeMap<String, Option<&Entry>> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let mut out = BTreeMap::new();
        for (path, entry) in self.entries.range(prefix.clone()..) {
            let Some(rest) = path.strip_prefix(&prefix) else {
                break;
            };
            match rest.split_once('/') {
                None => {
                    out.insert(rest.to_owned(), Some(entry));
                }
                Some((sub, _)) if entry.state != OverlayEntryState::Deleted => {
                    out.entry(sub.to_owned()).or_insert(None);
                }
                Some(_) => {}
            }
        }
        out
    }
}

fn changed_meanwhile(rel: &str) -> ToolFailure {
    ToolFailure::unavailable(format!(
        "the developer's version of {rel} changed while the tool ran"
    ))
    .hint("call the tool again")
}

/// The text of a resolved file and its hash, read through `view` when there is one (blocking).
pub fn read_text(
    view: Option<&View>,
    path: &Resolved,
    field: &str,
    max_bytes: u64,
) -> Result<(String, String), ToolFailure> {
    match view.map(|v| v.shadow(&path.rel)).transpose()? {
        None | Some(Shadow::Base) => {
            crate::tools::files::read_text(&path.abs, field, &path.rel, max_bytes)
        }
        Some(Shadow::Deleted) => Err(deleted(field, &path.rel)),
        Some(Shadow::Pending) => Err(pending(field, &path.rel)),
        Some(Shadow::Changed(bytes, hash)) => {
            if bytes.len() as u64 > max_bytes {
                return Err(ToolFailure::new(
                    ToolErrorCode::TooLarge,
                    field,
                    format!(
                        "{} is {} bytes; the limit is {max_bytes}",
                        path.rel,
                        bytes.len()
                    ),
                ));
            }
            let text = String::from_utf8(bytes.as_ref().clone()).map_err(|_| {
                ToolFailure::new(
                    ToolErrorCode::NotUtf8,
                    field,
                    format!("{} is not valid UTF-8 text", path.rel),
                )
            })?;
            Ok((text, hash))
        }
    }
}

/// Whether the resolved path names an existing file or directory, through `view`.
pub fn exists(view: Option<&View>, path: &Resolved) -> Result<bool, ToolFailure> {
    match view.map(|v| v.entries.get(&path.rel)) {
        Some(Some(e)) => match e.state {
            OverlayEntryState::Changed => Ok(true),
            OverlayEntryState::Deleted => Ok(false),
            OverlayEntryState::Pending | OverlayEntryState::Unspecified => {
                Err(pending("file_path", &path.rel))
            }
        },
        Some(None) | None => Ok(path.abs.symlink_metadata().is_ok()),
    }
}
