//! SyncOverlay, PutOverlayFiles, GetOverlay and DropOverlay: the request is checked and each
//! path's entry decided by [`super::plan`]; here the overlay is found or made, the caller's
//! rights decided in the request's task (the principal is a task-local: the session's owner,
//! and the workspace through its resolution), and the change committed under the overlay's
//! writer lock.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ploke_runtime::principal::{self, Principal};

use super::plan::{
    ManifestFile, OverlayPut, bytes_of, check_limits, check_manifest, check_paths, check_puts,
    pending_of, plan_put, plan_sync,
};
use super::{
    Entry, Overlay, OverlayEntry, OverlayInfo, check_session_id, lost_contents_pending, may_act,
};
use crate::error::RagError;
use crate::index::Phase;
use crate::service::{IndexState, RagService, Slot, lock_poisoned};

/// Where a workspace's first index run stands, for a sync refused until every file is parsed.
fn base_state(state: &IndexState) -> String {
    match state {
        IndexState::Indexing(p) if p.phase == Phase::Parsing => {
            format!("parsing, {} of {} files", p.files_done, p.files_total)
        }
        IndexState::Indexing(_) => "reading the tree".to_owned(),
        IndexState::NotIndexed | IndexState::Ready => "not started".to_owned(),
        IndexState::Failed(why) => format!("failed: {why}"),
    }
}

/// What a sync found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    /// Paths whose content the server lacks, in path order.
    pub need: Vec<String>,
    /// Manifest files that differ from the base (changed or new).
    pub changed: u64,
    /// Of `changed`, the paths the base lacks.
    pub added: u64,
    /// Base files the manifest lacks.
    pub deleted: u64,
    /// Manifest files identical to the base.
    pub unchanged: u64,
    /// The overlay's version after the sync.
    pub version: u64,
    /// Bytes of content the overlay holds.
    pub bytes: u64,
    /// Its limit.
    pub max_bytes: u64,
}

/// The overlay after a put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Put {
    /// Its version.
    pub version: u64,
    /// Paths whose content is still awaited.
    pub pending: u64,
    /// Items its index holds.
    pub items: u64,
}

/// What a write needs from the request's task.
struct Writing {
    session: String,
    root: PathBuf,
    slot: Arc<Slot>,
    caller: Option<Principal>,
    owner: String,
}

impl RagService {
    /// The session's overlay and its base, for a write: NOT_FOUND when the overlay belongs to
    /// a principal the caller may not act for; the overlay's workspace (or, for a new one,
    /// `workspace_root`) resolved with the caller's permissions. A sync naming another
    /// workspace than its overlay's is refused.
    fn writing(
        &self,
        session: &str,
        workspace_root: &str,
        sync: bool,
    ) -> Result<Writing, RagError> {
        let caller = principal::current();
        let requested = match self.overlays.get(session) {
            Some(o) if !may_act(caller.as_ref(), &o.owner) => {
                return Err(RagError::NoOverlay(session.to_owned()));
            }
            Some(o) => {
                if sync && !workspace_root.is_empty() {
                    let asked = self.workspaces.resolve(workspace_root)?;
                    if asked != o.root {
                        return Err(RagError::OverlayWorkspace {
                            session: session.to_owned(),
                            root: o.root.display().to_string(),
                        });
                    }
                }
                o.root.to_string_lossy().into_owned()
            }
            None => workspace_root.to_owned(),
        };
        let (root, slot) = self.slot(&requested)?;
        Ok(Writing {
            session: session.to_owned(),
            root,
            slot,
            owner: principal::owner_name(),
            caller,
        })
    }

    /// Runs `write` on the session's overlay (made now when it has none) under its writer
    /// lock, on the blocking pool; an overlay made for a write that failed is forgotten.
    async fn write_overlay<T: Send + 'static>(
        &self,
        w: Writing,
        write: impl FnOnce(&Overlay, bool, &Slot) -> Result<T, RagError> + Send + 'static,
    ) -> Result<T, RagError> {
        let overlays = self.overlays.clone();
        let opening = self.opening.clone();
        let embedder = self.embedder.clone();
        let per_principal = self.overlay_limits.max_per_principal;
        self.blocking(move || {
            let (overlay, created) = overlays.get_or_create(
                &w.session,
                &w.root,
                (&w.owner, per_principal),
                &opening,
                embedder.as_deref(),
            )?;
            if !may_act(w.caller.as_ref(), &overlay.owner) || overlay.root != w.root {
                return Err(RagError::NoOverlay(w.session));
            }
            let outcome = {
                let _writing = overlay.writer.lock().map_err(|_| lock_poisoned())?;
                if overlay.gone.load(Ordering::SeqCst) {
                    return Err(RagError::NoOverlay(w.session));
                }
                write(&overlay, created, &w.slot)
            };
            match &outcome {
                Err(_) if created => {
                    overlays.remove(&overlay);
                }
                Ok(_) | Err(_) => overlay.touch(),
            }
            outcome
        })
        .await?
    }

    /// SyncOverlay: the developer's manifest against the base (see [`plan_sync`]); answers
    /// which contents the server lacks. The base must have finished an index run.
    pub async fn sync_overlay(
        &self,
        session_id: &str,
        workspace_root: &str,
        files: Vec<ManifestFile>,
    ) -> Result<Synced, RagError> {
        check_session_id("session_id", session_id, false)?;
        let manifest = check_manifest(files)?;
        let w = self.writing(session_id, workspace_root, true)?;
        let limits = self.overlay_limits;
        let embedder = self.embedder.clone();
        self.write_overlay(w, move |overlay, created, slot| {
            // A first run that has parsed every file (it embeds now) holds the whole tree:
            // the overlay is a difference from it as from a finished index.
            let state = slot.state.lock().map_err(|_| lock_poisoned())?.clone();
            let base: BTreeMap<String, String> = {
                let index = slot.index.read().map_err(|_| lock_poisoned())?;
                if index.last_indexed_at().is_none() && state.of_results() != IndexState::Ready {
                    return Err(RagError::BaseIncomplete {
                        root: overlay.root.display().to_string(),
                        state: base_state(&state),
                    });
                }
                index
                    .files()
                    .map(|(p, h)| (p.to_owned(), h.to_owned()))
                    .collect()
            };
            let (current, version) = {
                let inner = overlay.inner.read().map_err(|_| lock_poisoned())?;
                (inner.entries.clone(), inner.version)
            };
            // Content lost from disk is needed again rather than reused.
            let mut held = current.clone();
            lost_contents_pending(&overlay.store, &mut held);
            let planned = plan_sync(&held, &base, &manifest);
            // Not one path of the workspace's (or none at all), and all of its files missing: as
            // the overlay this manifest would delete the whole workspace.
            if ploke_proto::status::checkout_misaligned(
                planned.unchanged,
                planned.changed,
                planned.added,
                planned.deleted,
            ) {
                return Err(RagError::CheckoutMisaligned {
                    root: overlay.root.display().to_string(),
                    sent: planned.changed,
                    missing: planned.deleted,
                });
            }
            check_limits(&overlay.session, &planned.next, limits)?;
            let version = if created || planned.next != current {
                version + 1
            } else {
                version
            };
            let bytes = bytes_of(&planned.next);
            super::index::commit(
                overlay,
                planned.next,
                version,
                Some(slot),
                embedder.as_deref(),
            )?;
            Ok(Synced {
                need: planned.need,
                changed: planned.changed,
                added: planned.added,
                deleted: planned.deleted,
                unchanged: planned.unchanged,
                version,
                bytes,
                max_bytes: limits.max_bytes,
            })
        })
        .await
    }

    /// PutOverlayFiles: stores contents (CHANGED with the hash they really have), after every
    /// compare-and-set held, and indexes the files that changed. A session without an overlay
    /// gets one over `workspace_root` (ignored for an existing overlay).
    pub async fn put_overlay_files(
        &self,
        session_id: &str,
        workspace_root: &str,
        files: Vec<OverlayPut>,
    ) -> Result<Put, RagError> {
        check_session_id("session_id", session_id, false)?;
        let files = check_puts(files)?;
        let w = self.writing(session_id, workspace_root, false)?;
        let limits = self.overlay_limits;
        let embedder = self.embedder.clone();
        self.write_overlay(w, move |overlay, created, slot| {
            let base: HashMap<String, Option<String>> = {
                let index = slot.index.read().map_err(|_| lock_poisoned())?;
                files
                    .iter()
                    .map(|f| (f.path.clone(), index.file_hash(&f.path).map(str::to_owned)))
                    .collect()
            };
            let (current, version) = {
                let inner = overlay.inner.read().map_err(|_| lock_poisoned())?;
                (inner.entries.clone(), inner.version)
            };
            let next = plan_put(&overlay.session, &current, &base, &files)?;
            check_limits(&overlay.session, &next, limits)?;
            for f in &files {
                if matches!(next.get(&f.path), Some(Entry::Changed { hash, .. }) if *hash == f.hash)
                {
                    overlay.store.put_blob(&f.hash, &f.content)?;
                }
            }
            let version = if created || next != current {
                version + 1
            } else {
                version
            };
            let pending = pending_of(&next);
            super::index::commit(overlay, next, version, Some(slot), embedder.as_deref())?;
            let items = overlay
                .inner
                .read()
                .map_err(|_| lock_poisoned())?
                .index
                .item_count();
            Ok(Put {
                version,
                pending,
                items,
            })
        })
        .await
    }

    /// GetOverlay: every entry, with the contents of `paths` (or of every changed file). A
    /// session without an overlay, or whose overlay the caller may not act on, has version 0
    /// and no entries.
    pub async fn get_overlay(
        &self,
        session_id: &str,
        paths: Vec<String>,
        all_contents: bool,
    ) -> Result<OverlayInfo, RagError> {
        check_session_id("session_id", session_id, false)?;
        let wanted: HashSet<String> =
            check_paths(paths.iter().map(String::as_str), |i| format!("paths[{i}]"))?
                .into_iter()
                .collect();
        let none = OverlayInfo {
            session_id: session_id.to_owned(),
            ..OverlayInfo::default()
        };
        let Some(overlay) = self
            .overlays
            .get(session_id)
            .filter(|o| principal::may_act_on(&o.owner))
        else {
            return Ok(none);
        };
        overlay.touch();
        self.blocking(move || {
            let inner = overlay.inner.read().map_err(|_| lock_poisoned())?;
            let entries = inner
                .entries
                .iter()
                .map(|(path, entry)| OverlayEntry {
                    content: match entry {
                        Entry::Changed { hash, .. } if all_contents || wanted.contains(path) => {
                            overlay.store.blob_content(hash)
                        }
                        Entry::Changed { .. } | Entry::Deleted | Entry::Pending { .. } => None,
                    },
                    path: path.clone(),
                    entry: entry.clone(),
                })
                .collect();
            Ok(OverlayInfo {
                session_id: overlay.session.clone(),
                root: Some(overlay.root.clone()),
                version: inner.version,
                entries,
                owner: overlay.owner.clone(),
            })
        })
        .await?
    }

    /// DropOverlay: forgets the session's overlay; false when it had none (or one the caller
    /// may not act on).
    pub async fn drop_overlay(&self, session_id: &str) -> Result<bool, RagError> {
        check_session_id("session_id", session_id, false)?;
        let Some(overlay) = self
            .overlays
            .get(session_id)
            .filter(|o| principal::may_act_on(&o.owner))
        else {
            return Ok(false);
        };
        let overlays = self.overlays.clone();
        let dropped = self.blocking(move || overlays.remove(&overlay)).await?;
        if dropped {
            tracing::info!(session = session_id, "overlay dropped");
        }
        Ok(dropped)
    }
}
