//! Session overlays: a developer's own changes (their branch, their uncommitted edits) over
//! the indexed base of a shared workspace, seen by every read that names the session.
//!
//! Design:
//! - **Entries.** An overlay maps paths to what the developer has instead of the base: CHANGED
//!   (content held, hash and size), DELETED, or PENDING (changed, content not received yet).
//!   Every entry shadows the base's file of that path: reads never answer it from the base
//!   ([`crate::index::Layer::hidden`]), so a file the developer changed or deleted never comes
//!   back in its base version, not even while its upload is pending.
//! - **Contents** are stored once per distinct blake3 hash (`blobs/<hash>`, see [`store`]), not
//!   as a materialised tree: a rename or a copy costs nothing (a sync finds the content by
//!   hash), the hash of a blob is its name, and no developer-chosen path is ever created on the
//!   server's disk (nothing for a path policy to get wrong).
//! - **Index.** Each overlay has its own small [`WorkspaceIndex`] (BM25 and vectors) of its
//!   changed files, fed the blobs as contents ([`crate::index::Contents`]): a sync or put
//!   parses and embeds only the files it changed, vectors are taken from the overlay's and the
//!   base's content-hash caches first (an edited file re-embeds only the items whose text
//!   changed), and it is applied in one short write section. Searches rank base and overlay
//!   with one set of corpus statistics and merge them ([`crate::index::layers`]).
//! - **Writes** (sync, put) of one overlay are serialised by its writer lock and prepared with
//!   no read lock held; the manifest is written (temp + fsync + rename) before the new entries
//!   are visible, and a restart brings the index back in line with the manifest.
//! - **Owner and expiry.** The principal that created an overlay owns it; others are told it
//!   does not exist. Overlays unused for `[rag_search] overlay_idle_secs` are dropped by a
//!   sweep, and with their workspace.

mod index;
mod plan;
mod read;
mod store;
mod sync;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use ploke_runtime::principal::Principal;

use super::registry::epoch_ms;
use super::{Opening, RagService, lock_poisoned};
use crate::embed::Embedder;
use crate::error::RagError;
use crate::index::WorkspaceIndex;

pub use plan::{ManifestFile, OverlayPut};
pub(super) use read::{FileView, items_of_file, lookup, search};
pub use sync::{Put, Synced};

use store::Store;

/// Bounds on every overlay (`[rag_search] overlay_max_bytes`, `overlay_max_files`,
/// `overlay_idle_secs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverlayLimits {
    /// Most bytes of content one overlay holds.
    pub max_bytes: u64,
    /// Most entries (changed, deleted, pending) one overlay holds.
    pub max_files: u64,
    /// Dropped after this long unused; `None` = never.
    pub idle: Option<Duration>,
    /// Most overlays one principal holds at once (each up to `max_bytes`).
    pub max_per_principal: u64,
}

impl Default for OverlayLimits {
    fn default() -> Self {
        Self {
            max_bytes: 64 * 1024 * 1024,
            max_files: 20_000,
            idle: Some(Duration::from_secs(86_400)),
            max_per_principal: 16,
        }
    }
}

/// Longest session id, in bytes.
pub(super) const MAX_SESSION_ID_BYTES: usize = 128;

/// What an overlay holds for one path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Entry {
    /// The developer's content: its blake3 (hex) and size.
    Changed {
        /// blake3 (hex).
        hash: String,
        /// Bytes.
        size: u64,
    },
    /// The developer does not have the file.
    Deleted,
    /// Changed, content not received yet.
    Pending {
        /// The hash the manifest announced.
        hash: String,
    },
}

/// One path of an overlay, as GetOverlay reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayEntry {
    /// Path relative to the workspace root.
    pub path: String,
    /// What the overlay holds.
    pub entry: Entry,
    /// The content, when asked for (CHANGED only).
    pub content: Option<Vec<u8>>,
}

/// A session's overlay as GetOverlay reports it; version 0 and no entries when there is none.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OverlayInfo {
    /// The session.
    pub session_id: String,
    /// The workspace it lies over (None when there is no overlay).
    pub root: Option<PathBuf>,
    /// Increases with every change.
    pub version: u64,
    /// Every entry, in path order.
    pub entries: Vec<OverlayEntry>,
    /// The principal that owns it (empty: made by a trusted caller).
    pub owner: String,
}

/// An overlay's entries and index, changed together.
pub(super) struct Inner {
    pub(super) version: u64,
    pub(super) entries: BTreeMap<String, Entry>,
    pub(super) index: WorkspaceIndex,
}

impl Inner {
    /// Paths the overlay shadows (every entry).
    pub(super) fn hidden(&self) -> HashSet<&str> {
        self.entries.keys().map(String::as_str).collect()
    }
}

/// One session's overlay.
pub(super) struct Overlay {
    pub(super) session: String,
    pub(super) root: PathBuf,
    pub(super) owner: String,
    store: Store,
    pub(super) inner: RwLock<Inner>,
    /// Serialises syncs, puts and the drop.
    writer: Mutex<()>,
    touched_ms: AtomicU64,
    saved_touch_ms: AtomicU64,
    /// Set once dropped: a write that waited for the writer lock stops.
    gone: AtomicBool,
}

/// How often the use time is saved, at most.
const TOUCH_SAVE_MS: u64 = 60_000;

impl Overlay {
    /// Records a use now (saved at most every minute).
    pub(super) fn touch(&self) {
        let now = epoch_ms(SystemTime::now());
        self.touched_ms.fetch_max(now, Ordering::SeqCst);
        let saved = self.saved_touch_ms.load(Ordering::SeqCst);
        if now.saturating_sub(saved) >= TOUCH_SAVE_MS
            && self
                .saved_touch_ms
                .compare_exchange(saved, now, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.store.write_touched(now);
        }
    }

    fn last_used(&self) -> SystemTime {
        super::registry::from_epoch_ms(self.touched_ms.load(Ordering::SeqCst))
    }

    /// Forgets the overlay: waits for a write going, then closes its index and removes it
    /// from disk.
    fn remove(&self) {
        self.gone.store(true, Ordering::SeqCst);
        let _writing = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match self.inner.write() {
            Ok(mut inner) => inner.index.close(),
            Err(poisoned) => poisoned.into_inner().index.close(),
        }
        self.store.remove();
    }
}

/// Turns CHANGED entries whose content is not stored into PENDING: asked for again by the
/// next sync, never answered from the base.
fn lost_contents_pending(store: &Store, entries: &mut BTreeMap<String, Entry>) {
    for (path, e) in entries.iter_mut() {
        if let Entry::Changed { hash, .. } = e
            && !store.has_blob(hash)
        {
            tracing::warn!(dir = %store.dir().display(), path, "an overlay's content is missing; it is awaited again");
            *e = Entry::Pending { hash: hash.clone() };
        }
    }
}

/// Whether `caller` (the request's principal, taken in its task) may act on what `owner` owns.
pub(super) fn may_act(caller: Option<&Principal>, owner: &str) -> bool {
    caller.is_none_or(|p| p.owns(owner))
}

/// Every overlay, by session id.
pub(super) struct Overlays {
    dir: PathBuf,
    map: Mutex<HashMap<String, Arc<Overlay>>>,
}

impl Overlays {
    /// The overlays persisted under `data_dir/overlays` over the served `roots`: each one's
    /// index is brought in line with its manifest; a damaged one, or one whose workspace is no
    /// longer served, is dropped with a warning.
    pub(super) fn load(
        data_dir: &Path,
        roots: &[PathBuf],
        opening: &Opening,
        embedder: Option<&Embedder>,
    ) -> Self {
        let dir = data_dir.join("overlays");
        let mut map = HashMap::new();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let store = Store::new(entry.path());
            match Self::load_one(&store, roots, opening, embedder) {
                Ok(overlay) => {
                    tracing::info!(session = %overlay.session, root = %overlay.root.display(), "overlay loaded");
                    map.insert(overlay.session.clone(), Arc::new(overlay));
                }
                Err(why) => {
                    tracing::warn!(dir = %store.dir().display(), reason = %why, "overlay dropped");
                    store.remove();
                }
            }
        }
        Self {
            dir,
            map: Mutex::new(map),
        }
    }

    fn load_one(
        store: &Store,
        roots: &[PathBuf],
        opening: &Opening,
        embedder: Option<&Embedder>,
    ) -> Result<Overlay, String> {
        let m = store.read_manifest()?;
        if !roots.contains(&m.root) {
            return Err(format!("workspace {} is not served", m.root.display()));
        }
        let index = opening
            .open_overlay(&m.root, &store.index_dir(), embedder)
            .map_err(|e| e.to_string())?;
        let mut entries = m.entries.clone();
        lost_contents_pending(store, &mut entries);
        // Never saved (a crash before the first save): in use from now.
        let touched = match store.read_touched() {
            0 => epoch_ms(SystemTime::now()),
            t => t,
        };
        let overlay = Overlay {
            session: m.session.clone(),
            root: m.root.clone(),
            owner: m.owner.clone(),
            store: store.clone(),
            inner: RwLock::new(Inner {
                version: m.version,
                entries: m.entries.clone(),
                index,
            }),
            writer: Mutex::new(()),
            touched_ms: AtomicU64::new(touched),
            saved_touch_ms: AtomicU64::new(touched),
            gone: AtomicBool::new(false),
        };
        let version = if entries == m.entries {
            m.version
        } else {
            m.version + 1
        };
        index::commit(&overlay, entries, version, None, embedder).map_err(|e| e.to_string())?;
        Ok(overlay)
    }

    pub(super) fn get(&self, session: &str) -> Option<Arc<Overlay>> {
        self.map.lock().ok()?.get(session).cloned()
    }

    /// The session's overlay, made (empty, version 0, owned by `owner`) when it has none,
    /// unless `owner` already holds `max_per_principal` overlays. The bool says whether it
    /// was made now.
    pub(super) fn get_or_create(
        &self,
        session: &str,
        root: &Path,
        (owner, max_per_principal): (&str, u64),
        opening: &Opening,
        embedder: Option<&Embedder>,
    ) -> Result<(Arc<Overlay>, bool), RagError> {
        let mut map = self.map.lock().map_err(|_| lock_poisoned())?;
        if let Some(o) = map.get(session) {
            return Ok((o.clone(), false));
        }
        let held = map.values().filter(|o| o.owner == owner).count() as u64;
        if !owner.is_empty() && held >= max_per_principal {
            return Err(RagError::TooManyOverlays {
                owner: owner.to_owned(),
                limit: max_per_principal,
            });
        }
        let store = Store::new(self.dir.join(store::session_key(session)));
        // Whatever a dropped overlay of the same key left behind goes first.
        store.remove();
        let index = opening.open_overlay(root, &store.index_dir(), embedder)?;
        let now = epoch_ms(SystemTime::now());
        let overlay = Arc::new(Overlay {
            session: session.to_owned(),
            root: root.to_owned(),
            owner: owner.to_owned(),
            store,
            inner: RwLock::new(Inner {
                version: 0,
                entries: BTreeMap::new(),
                index,
            }),
            writer: Mutex::new(()),
            touched_ms: AtomicU64::new(now),
            saved_touch_ms: AtomicU64::new(0),
            gone: AtomicBool::new(false),
        });
        map.insert(session.to_owned(), overlay.clone());
        Ok((overlay, true))
    }

    /// Forgets the session's overlay if it is `which` (not one made since).
    pub(super) fn remove(&self, which: &Arc<Overlay>) -> bool {
        let removed = match self.map.lock() {
            Ok(mut map) => match map.get(&which.session) {
                Some(o) if Arc::ptr_eq(o, which) => map.remove(&which.session),
                _ => None,
            },
            Err(_) => None,
        };
        match removed {
            Some(o) => {
                o.remove();
                true
            }
            None => false,
        }
    }

    /// Closes every overlay's index (the service is stopping); later writes fail.
    pub(super) fn close(&self) {
        for o in self.matching(|_| true) {
            match o.inner.write() {
                Ok(mut inner) => inner.index.close(),
                Err(poisoned) => poisoned.into_inner().index.close(),
            }
        }
    }

    /// Overlays matching `pred`.
    fn matching(&self, pred: impl Fn(&Overlay) -> bool) -> Vec<Arc<Overlay>> {
        self.map
            .lock()
            .map(|m| m.values().filter(|o| pred(o)).cloned().collect())
            .unwrap_or_default()
    }
}

impl Opening {
    /// Opens (or creates) an overlay's index in `dir`, for contents of the workspace `root`.
    fn open_overlay(
        &self,
        root: &Path,
        dir: &Path,
        embedder: Option<&Embedder>,
    ) -> Result<WorkspaceIndex, crate::index::IndexError> {
        let dense = embedder.map(|e| crate::index::DenseSpec {
            model: e.name(),
            dims: e.dims(),
        });
        let r = &self.retrieval;
        let mut index = WorkspaceIndex::open(root, dir, (r.boosts, r.prior), dense)?;
        index.release_writer();
        Ok(index)
    }
}

/// A session id a request may carry: at most [`MAX_SESSION_ID_BYTES`] of printable ASCII
/// without spaces; empty only where `empty_ok` (reads: the base alone).
pub fn check_session_id(field: &str, id: &str, empty_ok: bool) -> Result<(), RagError> {
    let bad = |reason: String| RagError::Invalid {
        field: field.to_owned(),
        reason,
    };
    if id.is_empty() {
        return if empty_ok {
            Ok(())
        } else {
            Err(bad("must name the session".into()))
        };
    }
    if id.len() > MAX_SESSION_ID_BYTES {
        return Err(bad(format!(
            "must be at most {MAX_SESSION_ID_BYTES} bytes, got {}",
            id.len()
        )));
    }
    if !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad(
            "must be printable ASCII without spaces or control characters".into(),
        ));
    }
    Ok(())
}

impl RagService {
    /// Drops every overlay unused since `now - [rag_search] overlay_idle_secs`; the sessions
    /// dropped. Nothing expires without an idle limit.
    pub async fn expire_overlays(&self, now: SystemTime) -> Result<Vec<String>, RagError> {
        let Some(idle) = self.overlay_limits.idle else {
            return Ok(Vec::new());
        };
        let Some(cutoff) = now.checked_sub(idle) else {
            return Ok(Vec::new());
        };
        let stale = self.overlays.matching(|o| o.last_used() < cutoff);
        let overlays = self.overlays.clone();
        self.blocking(move || {
            let mut dropped = Vec::new();
            for o in stale {
                if overlays.remove(&o) {
                    tracing::info!(session = %o.session, root = %o.root.display(), "idle overlay dropped");
                    dropped.push(o.session.clone());
                }
            }
            dropped
        })
        .await
    }

    /// Runs [`Self::expire_overlays`] every `period` until the task is aborted.
    pub fn expire_overlays_every(&self, period: Duration) -> tokio::task::JoinHandle<()> {
        let service = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                if let Err(e) = service.expire_overlays(SystemTime::now()).await {
                    tracing::warn!(error = %e, "overlay expiry sweep failed");
                }
            }
        })
    }

    /// Drops the overlays over `root` (its workspace is no longer served).
    pub(super) fn drop_overlays_of(&self, root: &Path) {
        for o in self.overlays.matching(|o| o.root == root) {
            if self.overlays.remove(&o) {
                tracing::info!(session = %o.session, root = %root.display(), "overlay dropped with its workspace");
            }
        }
    }
}
