//! The workspaces added at run time, persisted in `<data_dir>/workspaces.json` (written to a
//! temp file, synced and renamed, so a crash leaves the old list or the new one), so that a
//! restarted rag-search serves them again without anyone adding them twice.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A git repository a workspace is cloned from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GitOrigin {
    /// Where it is fetched from.
    pub url: String,
    /// The branch followed.
    pub branch: String,
}

/// One workspace added at run time.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Entry {
    /// Its root (for git: the clone).
    pub root: PathBuf,
    /// Set when it is a clone rag-search keeps up to date.
    #[serde(default)]
    pub git: Option<GitOrigin>,
    /// When it was added, ms since the epoch.
    pub added_at_ms: u64,
    /// When the clone was last fetched, ms since the epoch.
    #[serde(default)]
    pub updated_at_ms: Option<u64>,
}

/// Milliseconds since the epoch of `t`.
pub(super) fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The time `ms` stands for.
pub(super) fn from_epoch_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct File {
    version: u32,
    workspaces: Vec<Entry>,
}

const VERSION: u32 = 1;

/// The persisted list.
#[derive(Debug)]
pub(super) struct Registry {
    path: PathBuf,
    entries: Vec<Entry>,
}

impl Registry {
    /// Where the list of `data_dir` lives.
    pub(super) fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("workspaces.json")
    }

    /// Reads the list (empty when there is none); a list that cannot be read is an error, not
    /// an empty list: starting without the team's workspaces would look like data loss.
    pub(super) fn load(data_dir: &Path) -> Result<Self, String> {
        let path = Self::path(data_dir);
        let entries = match std::fs::read(&path) {
            Ok(bytes) => {
                let file: File = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
                if file.version != VERSION {
                    return Err(format!(
                        "version {} is not {VERSION}; this rag-search is older than the list",
                        file.version
                    ));
                }
                file.workspaces
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.to_string()),
        };
        Ok(Self { path, entries })
    }

    /// Every entry, in the order added.
    pub(super) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entry of `root`.
    pub(super) fn get(&self, root: &Path) -> Option<&Entry> {
        self.entries.iter().find(|e| e.root == root)
    }

    /// Adds or replaces the entry of its root and writes the list.
    pub(super) fn put(&mut self, entry: Entry) -> std::io::Result<()> {
        let mut next = self.entries.clone();
        match next.iter_mut().find(|e| e.root == entry.root) {
            Some(e) => *e = entry,
            None => next.push(entry),
        }
        self.write(&next)?;
        self.entries = next;
        Ok(())
    }

    /// Removes the entry of `root` and writes the list; the entry, if there was one.
    pub(super) fn remove(&mut self, root: &Path) -> std::io::Result<Option<Entry>> {
        let Some(at) = self.entries.iter().position(|e| e.root == root) else {
            return Ok(None);
        };
        let mut next = self.entries.clone();
        let removed = next.remove(at);
        self.write(&next)?;
        self.entries = next;
        Ok(Some(removed))
    }

    fn write(&self, entries: &[Entry]) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = File {
            version: VERSION,
            workspaces: entries.to_vec(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        let tmp = self.path.with_extension("json.tmp");
        let mut out = std::fs::File::create(&tmp)?;
        out.write_all(&bytes)?;
        out.sync_all()?;
        drop(out);
        std::fs::rename(&tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_a_reload_and_a_damaged_list_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Registry::load(dir.path()).unwrap();
        let a = Entry {
            root: "/srv/a".into(),
            git: None,
            added_at_ms: 1,
            updated_at_ms: None,
        };
        let b = Entry {
            root: "/srv/b".into(),
            git: Some(GitOrigin {
                url: "file:///srv/repo.git".into(),
                branch: "main".into(),
            }),
            added_at_ms: 2,
            updated_at_ms: Some(3),
        };
        r.put(a.clone()).unwrap();
        r.put(b.clone()).unwrap();
        assert_eq!(r.remove(Path::new("/srv/a")).unwrap(), Some(a));
        assert_eq!(Registry::load(dir.path()).unwrap().entries(), [b]);
        std::fs::write(Registry::path(dir.path()), b"{not json").unwrap();
        assert!(Registry::load(dir.path()).is_err());
    }
}
