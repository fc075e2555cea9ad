//! An overlay on disk, under `<data_dir>/overlays/<session key>/`:
//!
//! - `overlay.json`: the manifest — session, workspace root, owner, version and every entry
//!   (path, state, hash, size) — written to a temp file, synced and renamed, so a crash leaves
//!   the old manifest or the new one;
//! - `blobs/<blake3 hex>`: the contents of the changed files, one file per distinct content
//!   (written the same way; a blob is never changed, only removed once no entry names it);
//! - `touched`: when the overlay was last used (ms since the epoch), for expiry across restarts;
//! - `index/`: the overlay's own index ([`crate::index::WorkspaceIndex`]).

use std::collections::{BTreeMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::Entry;
use crate::error::RagError;

const MANIFEST: &str = "overlay.json";
const TOUCHED: &str = "touched";
/// Bumped when the manifest's meaning changes; an overlay of another format is dropped.
const FORMAT: u32 = 1;

/// The manifest as stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Manifest {
    pub(super) format: u32,
    pub(super) session: String,
    pub(super) root: PathBuf,
    pub(super) owner: String,
    pub(super) version: u64,
    pub(super) entries: BTreeMap<String, Entry>,
}

impl Manifest {
    pub(super) fn new(
        session: &str,
        root: &Path,
        owner: &str,
        version: u64,
        entries: BTreeMap<String, Entry>,
    ) -> Self {
        Self {
            format: FORMAT,
            session: session.to_owned(),
            root: root.to_owned(),
            owner: owner.to_owned(),
            version,
            entries,
        }
    }
}

/// The directory name of a session's overlay: readable and unique (the session id may hold
/// any printable character; the name keeps the safe ones and a hash of the whole).
pub(super) fn session_key(session: &str) -> String {
    let hash = blake3::hash(session.as_bytes()).to_hex();
    let name: String = session
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(40)
        .collect();
    format!("{name}-{}", &hash[..16])
}

/// Where one overlay's files live.
#[derive(Debug, Clone)]
pub(super) struct Store {
    dir: PathBuf,
}

fn storage(path: &Path) -> impl FnOnce(std::io::Error) -> RagError + '_ {
    move |e| RagError::OverlayStorage(format!("{}: {e}", path.display()))
}

/// Writes `bytes` to `path` through a synced temp file and a rename.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), RagError> {
    let tmp = path.with_extension("tmp");
    let mut out = std::fs::File::create(&tmp).map_err(storage(&tmp))?;
    out.write_all(bytes).map_err(storage(&tmp))?;
    out.sync_all().map_err(storage(&tmp))?;
    drop(out);
    std::fs::rename(&tmp, path).map_err(storage(path))
}

impl Store {
    pub(super) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the overlay's index lives.
    pub(super) fn index_dir(&self) -> PathBuf {
        self.dir.join("index")
    }

    fn blobs(&self) -> PathBuf {
        self.dir.join("blobs")
    }

    fn blob(&self, hash: &str) -> PathBuf {
        self.blobs().join(hash)
    }

    /// Reads the manifest; an error says why it cannot be used.
    pub(super) fn read_manifest(&self) -> Result<Manifest, String> {
        let path = self.dir.join(MANIFEST);
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let m: Manifest =
            serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        if m.format != FORMAT {
            return Err(format!(
                "{}: format {} is not {FORMAT}",
                path.display(),
                m.format
            ));
        }
        Ok(m)
    }

    /// Writes the manifest durably.
    pub(super) fn write_manifest(&self, m: &Manifest) -> Result<(), RagError> {
        std::fs::create_dir_all(&self.dir).map_err(storage(&self.dir))?;
        let bytes = serde_json::to_vec(m)
            .map_err(|e| RagError::Internal(format!("serialising an overlay manifest: {e}")))?;
        write_atomically(&self.dir.join(MANIFEST), &bytes)
    }

    /// Stores `content` under its hash (nothing when that content is stored already, intact).
    pub(super) fn put_blob(&self, hash: &str, content: &[u8]) -> Result<(), RagError> {
        let path = self.blob(hash);
        if self.blob_content(hash).is_some() {
            return Ok(());
        }
        let dir = self.blobs();
        std::fs::create_dir_all(&dir).map_err(storage(&dir))?;
        write_atomically(&path, content)
    }

    /// The content stored under `hash`, if it is (and still has that hash: a damaged blob is
    /// missing, never served).
    pub(super) fn blob_content(&self, hash: &str) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.blob(hash)).ok()?;
        (blake3::hash(&bytes).to_hex().as_str() == hash).then_some(bytes)
    }

    /// Whether content of `hash` is stored (its size not checked: a damaged blob is found
    /// when read, [`Self::blob_content`]).
    pub(super) fn has_blob(&self, hash: &str) -> bool {
        self.blob(hash).is_file()
    }

    /// Removes every stored content (and temp file) that `live` does not name.
    pub(super) fn collect_garbage(&self, live: &HashSet<&str>) {
        let Ok(dir) = std::fs::read_dir(self.blobs()) else {
            return;
        };
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !live.contains(name.as_str())
                && let Err(e) = std::fs::remove_file(entry.path())
            {
                tracing::warn!(blob = %entry.path().display(), error = %e, "an overlay blob could not be removed");
            }
        }
    }

    /// When the overlay was last used, as last saved (ms since the epoch; 0 if never).
    pub(super) fn read_touched(&self) -> u64 {
        std::fs::read_to_string(self.dir.join(TOUCHED))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Saves when the overlay was last used (a lost write costs at most an earlier expiry).
    pub(super) fn write_touched(&self, ms: u64) {
        if let Err(e) = write_atomically(&self.dir.join(TOUCHED), ms.to_string().as_bytes()) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "overlay use time not saved");
        }
    }

    /// Removes the overlay from disk.
    pub(super) fn remove(&self) {
        match std::fs::remove_dir_all(&self.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "an overlay directory could not be removed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_and_blobs_round_trip_and_garbage_goes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join(session_key("s/1 ü")));
        assert!(store.dir().ends_with(format!(
            "s1-{}",
            &blake3::hash("s/1 ü".as_bytes()).to_hex()[..16]
        )));
        let a = blake3::hash(b"fn a() {}").to_hex().to_string();
        let b = blake3::hash(b"fn b() {}").to_hex().to_string();
        store.put_blob(&a, b"fn a() {}").unwrap();
        store.put_blob(&b, b"fn b() {}").unwrap();
        let entries = BTreeMap::from([
            (
                "src/a.rs".to_owned(),
                Entry::Changed {
                    hash: a.clone(),
                    size: 9,
                },
            ),
            ("src/gone.rs".to_owned(), Entry::Deleted),
            ("src/p.rs".to_owned(), Entry::Pending { hash: b.clone() }),
        ]);
        let m = Manifest::new("s/1 ü", Path::new("/ws"), "alice", 3, entries);
        store.write_manifest(&m).unwrap();
        assert_eq!(store.read_manifest().unwrap(), m);
        assert_eq!(store.blob_content(&a).unwrap(), b"fn a() {}");
        store.collect_garbage(&HashSet::from([a.as_str()]));
        assert!(store.has_blob(&a) && !store.has_blob(&b));
        // A damaged blob is never served.
        std::fs::write(store.blob(&a), b"fn x() {}").unwrap();
        assert_eq!(store.blob_content(&a), None);
        store.write_touched(42);
        assert_eq!(store.read_touched(), 42);
        std::fs::write(store.dir().join(MANIFEST), b"{not json").unwrap();
        assert!(store.read_manifest().is_err());
        store.remove();
        assert!(!store.dir().exists());
    }
}
