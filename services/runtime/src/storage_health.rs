//! Whether a service's database can still keep what the service acknowledges.
//!
//! A store asks [`StorageHealth::writable`] before each write and reports every storage-class
//! failure to [`StorageHealth::broken`]. A [`StorageMonitor`] checks every `period` that the
//! database file is still the file that was opened — same device and inode, so a data dir that
//! was removed, or a database replaced under the service, is noticed even when nothing writes —
//! and, while storage is broken, whether a probe write succeeds again. It raises the health
//! fault `storage` (NOT_SERVING) while storage is broken and clears it when storage recovers.
//!
//! A file that is no longer at its path cannot be trusted with new writes: they would land in
//! a deleted inode and be gone at the next start. Such writes are refused (the caller answers
//! UNAVAILABLE) until the same file is back at its path (a data dir moved away and back), or
//! the service restarts.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::server::Readiness;

/// The name of the health fault raised while storage is broken.
pub const HEALTH_FAULT: &str = "storage";

/// Storage cannot take writes now; the message names storage and says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("storage unavailable: {reason}")]
pub struct StorageFault {
    /// Why.
    pub reason: String,
}

impl StorageFault {
    /// What the current caller is told: the cause for those who may see a deployment's
    /// internals ([`crate::principal::sees_internals`]); a plain principal of a shared
    /// deployment only that storage is unavailable, since the cause names the server's files or
    /// database address. The cause is in the log and the health check either way.
    pub fn shown(&self) -> String {
        self.shown_to(crate::principal::sees_internals())
    }

    /// [`Self::shown`] for a caller decided before (a stream answered after its call returned,
    /// outside the call's principal).
    pub fn shown_to(&self, internals: bool) -> String {
        if internals {
            self.to_string()
        } else {
            "storage unavailable: the service cannot use its database now; the operators see \
             why in its health check and log"
                .to_owned()
        }
    }
}

/// The storage state a service reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageState {
    /// Writes are accepted.
    Healthy,
    /// Writes are refused, for this reason.
    Broken(String),
}

/// The identity of a file: its device and inode (on other systems, only that it exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

fn file_id(path: &Path) -> std::io::Result<FileId> {
    let meta = std::fs::metadata(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Ok(FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        Ok(FileId { dev: 0, ino: 0 })
    }
}

struct Inner {
    path: PathBuf,
    /// The file's identity; `None` for a database that is not a local file (PostgreSQL).
    identity: Option<FileId>,
    state: watch::Sender<StorageState>,
}

/// The health of one database file, shared by its store and its monitor.
#[derive(Clone)]
pub struct StorageHealth {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for StorageHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageHealth")
            .field("path", &self.inner.path)
            .field("state", &*self.inner.state.borrow())
            .finish()
    }
}

impl StorageHealth {
    /// Watches `path`, which must exist: the file found there now is the one writes may go to.
    pub fn new(path: &Path) -> std::io::Result<Self> {
        let identity = file_id(path)?;
        Ok(Self {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                identity: Some(identity),
                state: watch::channel(StorageState::Healthy).0,
            }),
        })
    }

    /// The health of a database that is not a local file (a PostgreSQL server), named
    /// `label` in messages: only failed statements and probes decide it.
    pub fn remote(label: &str) -> Self {
        Self {
            inner: Arc::new(Inner {
                path: PathBuf::from(label),
                identity: None,
                state: watch::channel(StorageState::Healthy).0,
            }),
        }
    }

    /// The watched file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The current state.
    pub fn state(&self) -> StorageState {
        self.inner.state.borrow().clone()
    }

    /// Follows the state (a new value on every change).
    pub fn subscribe(&self) -> watch::Receiver<StorageState> {
        self.inner.state.subscribe()
    }

    /// Whether the file at the path is still the one that was opened.
    pub fn check_file(&self) -> Result<(), String> {
        let path = self.inner.path.display();
        let Some(identity) = self.inner.identity else {
            return Ok(());
        };
        match file_id(&self.inner.path) {
            Ok(id) if id == identity => Ok(()),
            Ok(_) => Err(format!(
                "{path} was replaced by another file while the service ran"
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
                "{path} was removed while the service ran (is the data dir still there?)"
            )),
            Err(e) => Err(format!("{path} cannot be checked: {e}")),
        }
    }

    /// Before a write: refused while storage is broken or the file is not the one opened.
    pub fn writable(&self) -> Result<(), StorageFault> {
        if let StorageState::Broken(reason) = self.state() {
            return Err(StorageFault { reason });
        }
        self.check_file().map_err(|reason| self.broken(reason))
    }

    /// Records that storage failed (the first failure is logged; health follows through the
    /// monitor) and returns the fault to answer with.
    pub fn broken(&self, reason: String) -> StorageFault {
        let changed = self.inner.state.send_if_modified(|s| match s {
            StorageState::Healthy => {
                *s = StorageState::Broken(reason.clone());
                true
            }
            StorageState::Broken(_) => false,
        });
        if changed {
            tracing::error!(path = %self.inner.path.display(), reason = %reason, "storage broken, refusing writes");
        }
        StorageFault { reason }
    }

    /// Records that storage works again.
    pub fn recovered(&self) {
        let changed = self.inner.state.send_if_modified(|s| match s {
            StorageState::Broken(_) => {
                *s = StorageState::Healthy;
                true
            }
            StorageState::Healthy => false,
        });
        if changed {
            tracing::info!(path = %self.inner.path.display(), "storage recovered, accepting writes");
        }
    }

    /// One probe: the file must be the one opened; while broken, `probe` (a small write) must
    /// succeed too before storage counts as recovered. A remote database is probed while
    /// healthy too, and a failed probe breaks it: nothing else notices a server that went away
    /// while no call wrote (tool-executor stayed SERVING with PostgreSQL stopped until a call
    /// failed).
    pub async fn probe<F>(&self, probe: impl FnOnce() -> F)
    where
        F: Future<Output = Result<(), String>>,
    {
        if let Err(reason) = self.check_file() {
            self.broken(reason);
            return;
        }
        let remote = self.inner.identity.is_none();
        match self.state() {
            StorageState::Broken(_) => match probe().await {
                Ok(()) => self.recovered(),
                Err(e) => {
                    tracing::debug!(path = %self.inner.path.display(), error = %e, "storage probe write failed");
                    // The latest cause is the one to act on (a statement that first saw "pool
                    // timed out" is followed by a probe that names the refused connection).
                    let reason = format!("{}: {e}", self.inner.path.display());
                    self.inner.state.send_if_modified(|s| match s {
                        StorageState::Broken(old) if *old != reason => {
                            *old = reason;
                            true
                        }
                        StorageState::Broken(_) | StorageState::Healthy => false,
                    });
                }
            },
            StorageState::Healthy if remote => {
                if let Err(e) = probe().await {
                    self.broken(format!("{}: {e}", self.inner.path.display()));
                }
            }
            StorageState::Healthy => {}
        }
    }

    /// Probes every `period` and on every failure a store reports, and keeps `readiness` in
    /// step: the fault `storage` is raised (NOT_SERVING) while broken and cleared when healthy
    /// (SERVING, unless another fault is raised or the server drains).
    pub fn monitor<P, F>(&self, readiness: Readiness, period: Duration, probe: P) -> StorageMonitor
    where
        P: Fn() -> F + Send + Sync + 'static,
        F: Future<Output = Result<(), String>> + Send,
    {
        let health = self.clone();
        let mut changes = self.subscribe();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut reported = StorageState::Healthy;
            loop {
                tokio::select! {
                    _ = ticks.tick() => health.probe(&probe).await,
                    changed = changes.changed() => if changed.is_err() { return },
                }
                let now = health.state();
                if now != reported {
                    let fault = match &now {
                        StorageState::Healthy => None,
                        StorageState::Broken(reason) => Some(reason.clone()),
                    };
                    readiness.set_fault(HEALTH_FAULT, fault).await;
                    reported = now;
                }
            }
        });
        StorageMonitor { task }
    }
}

/// A running storage monitor; dropping it stops it.
#[derive(Debug)]
pub struct StorageMonitor {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StorageMonitor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_or_replaced_file_refuses_writes_until_it_is_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        std::fs::write(&path, "x").unwrap();
        let health = StorageHealth::new(&path).unwrap();
        assert_eq!(health.writable(), Ok(()));

        // Moved away: refused, and broken from now on.
        let away = dir.path().join("away");
        std::fs::rename(&path, &away).unwrap();
        let fault = health.writable().unwrap_err();
        assert!(fault.to_string().starts_with("storage unavailable: "));
        assert!(fault.reason.contains("was removed"), "{fault}");
        assert!(matches!(health.state(), StorageState::Broken(_)));

        // Another file at the path is not the database that was opened.
        std::fs::write(&path, "y").unwrap();
        assert!(health.check_file().unwrap_err().contains("replaced"));

        // The same file back: the probe write decides.
        std::fs::remove_file(&path).unwrap();
        std::fs::rename(&away, &path).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(health.probe(|| async { Err("disk full".to_owned()) }));
        assert!(matches!(health.state(), StorageState::Broken(_)));
        rt.block_on(health.probe(|| async { Ok(()) }));
        assert_eq!(health.state(), StorageState::Healthy);
        assert_eq!(health.writable(), Ok(()));
    }

    #[test]
    fn a_remote_database_is_probed_while_healthy_and_a_failed_probe_breaks_it() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let remote = StorageHealth::remote("postgres 127.0.0.1:5432/ploke");
        rt.block_on(remote.probe(|| async { Ok(()) }));
        assert_eq!(remote.state(), StorageState::Healthy);
        rt.block_on(remote.probe(|| async { Err("pool timed out".to_owned()) }));
        assert_eq!(
            remote.state(),
            StorageState::Broken("postgres 127.0.0.1:5432/ploke: pool timed out".into())
        );
        // While broken, the latest probe's cause replaces the first one.
        rt.block_on(
            remote.probe(|| async {
                Err("pool timed out; connecting: connection refused".to_owned())
            }),
        );
        assert_eq!(
            remote.state(),
            StorageState::Broken(
                "postgres 127.0.0.1:5432/ploke: pool timed out; connecting: connection refused"
                    .into()
            )
        );
        rt.block_on(remote.probe(|| async { Ok(()) }));
        assert_eq!(remote.state(), StorageState::Healthy);
        // A local file is not written to while healthy: its identity is checked instead.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        std::fs::write(&path, "x").unwrap();
        let local = StorageHealth::new(&path).unwrap();
        rt.block_on(local.probe(|| async { Err("not asked".to_owned()) }));
        assert_eq!(local.state(), StorageState::Healthy);
    }

    #[test]
    fn only_callers_who_see_internals_are_told_why_storage_failed() {
        use crate::principal::{DEFAULT_PRINCIPAL, Principal, Role, scope};
        let fault = StorageFault {
            reason: "postgres db.internal:5432/ploke: pool timed out".into(),
        };
        let full = "storage unavailable: postgres db.internal:5432/ploke: pool timed out";
        let told = |who: Option<Principal>| {
            let fault = fault.clone();
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(scope(who, async move { fault.shown() }))
        };
        assert_eq!(told(None), full);
        assert_eq!(told(Some(Principal::everywhere("root", Role::Admin))), full);
        assert_eq!(
            told(Some(Principal::everywhere(DEFAULT_PRINCIPAL, Role::User))),
            full
        );
        assert_eq!(
            told(Some(Principal::everywhere("alice", Role::User))),
            "storage unavailable: the service cannot use its database now; the operators see \
             why in its health check and log"
        );
    }
}
