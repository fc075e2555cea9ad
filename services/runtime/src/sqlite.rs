//! Opening the embedded default's SQLite databases one way, and telling storage faults apart
//! from other database errors.
//!
//! **Why these settings.** With SQLite's default WAL setup every connection maps the WAL
//! index, `DB-shm`, into memory (`mmap(MAP_SHARED)`). A page of that map the kernel cannot
//! back — the file truncated or replaced under the process, the filesystem refusing to give
//! the page (a full tmpfs or quota, a read-only or vanished volume) — is delivered as SIGBUS,
//! and the process dies on the spot: no log line, no error, no `turn_failed`. That is how a
//! data dir made unwritable killed llm-session. So:
//!
//! - `locking_mode = EXCLUSIVE` before `journal_mode = WAL`: SQLite then keeps the WAL index
//!   in heap memory and never creates or maps `-shm` (<https://sqlite.org/wal.html#noshm>).
//!   Every storage fault surfaces as an error code from `read`/`write`/`fsync`, which the
//!   stores turn into UNAVAILABLE and the service survives.
//! - `mmap_size = 0`: the database file itself is never memory-mapped either (SQLite's
//!   default, set explicitly so a build default cannot change it).
//! - One connection, opened at start and kept for the life of the pool: EXCLUSIVE holds the
//!   file lock for the connection's lifetime, so a second connection (or a reconnect after an
//!   idle timeout, which could also meet an unwritable directory) must never happen. SQLite
//!   serialises writers anyway; the stores' reads are short.
//! - The lock is what a second process meets: opening a database another process holds gives
//!   [`OpenError::Locked`] after `busy_timeout` (which also covers a restart in the same
//!   process racing the previous pool's close), never two writers on one file.
//! - `synchronous = FULL` (WAL's default, set explicitly): a commit has reached the disk when
//!   the write returns, so a store acknowledges only what is durable.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqliteLockingMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};

use crate::server::Readiness;
use crate::storage_health::{StorageFault, StorageHealth, StorageMonitor};

/// How long a connection waits for a lock another process holds.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// The table the storage probe writes to while storage is broken.
const PROBE_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS ploke_storage_probe (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL
);";

/// A database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Its directory could not be created.
    #[error("storage: creating {dir}: {source}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another process holds the database.
    #[error(
        "storage: {path} is locked by another process; each service needs a data dir of its own"
    )]
    Locked {
        /// The database file.
        path: PathBuf,
    },
    /// SQLite failed.
    #[error("storage: opening {path}: {source}")]
    Db {
        /// The database file.
        path: PathBuf,
        /// Why.
        source: sqlx::Error,
    },
}

/// A write or read failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// Storage failed (disk full, read-only, removed or replaced file, I/O error).
    #[error(transparent)]
    Storage(#[from] StorageFault),
    /// Any other database error (a constraint, a decode error).
    #[error(transparent)]
    Db(sqlx::Error),
}

/// One opened database with the health of its file.
#[derive(Debug, Clone)]
pub struct Database {
    pool: SqlitePool,
    health: StorageHealth,
}

/// Whether `e` means storage itself failed rather than the statement.
pub fn is_storage_error(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            let primary = db
                .code()
                .and_then(|c| c.parse::<i32>().ok())
                .map(|c| c & 0xff);
            // PERM, BUSY, LOCKED, READONLY, IOERR, CORRUPT, FULL, CANTOPEN, PROTOCOL, NOTADB.
            matches!(primary, Some(3 | 5 | 6 | 8 | 10 | 11 | 13 | 14 | 15 | 26))
        }
        _ => false,
    }
}

/// Opens (creating) the database at `path` as the module comment says, runs `schema`
/// (`CREATE … IF NOT EXISTS`: the first shape of the tables), then each of `upgrades` that the
/// file has not had yet (counted in `PRAGMA user_version`), each in a transaction with the
/// version it reaches. A shipped upgrade never changes; a new one is appended.
pub async fn open(
    path: &Path,
    schema: &'static str,
    upgrades: &[&'static str],
) -> Result<Database, OpenError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| OpenError::Dir {
            dir: dir.to_owned(),
            source,
        })?;
    }
    let failed = |source: sqlx::Error| {
        if let sqlx::Error::Database(db) = &source
            && matches!(
                db.code()
                    .and_then(|c| c.parse::<i32>().ok())
                    .map(|c| c & 0xff),
                Some(5 | 6)
            )
        {
            return OpenError::Locked {
                path: path.to_owned(),
            };
        }
        OpenError::Db {
            path: path.to_owned(),
            source,
        }
    };
    let options = SqliteConnectOptions::from_str("sqlite://")
        .map_err(failed)?
        .filename(path)
        .create_if_missing(true)
        .locking_mode(SqliteLockingMode::Exclusive)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(BUSY_TIMEOUT)
        .pragma("mmap_size", "0");
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_with(options)
        .await
        .map_err(failed)?;
    // The first write takes the exclusive lock, which the connection keeps from here on.
    for sql in [PROBE_SCHEMA, schema] {
        sqlx::raw_sql(sql).execute(&pool).await.map_err(failed)?;
    }
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&pool)
        .await
        .map_err(failed)?;
    for (i, sql) in upgrades.iter().enumerate() {
        let reaches = i64::try_from(i + 1).unwrap_or(i64::MAX);
        if reaches <= version {
            continue;
        }
        let mut tx = pool.begin().await.map_err(failed)?;
        sqlx::raw_sql(*sql)
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
        // PRAGMA takes no bind parameters; the number is ours.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "PRAGMA user_version = {reaches}"
        )))
        .execute(&mut *tx)
        .await
        .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        tracing::info!(path = %path.display(), version = reaches, "database upgraded");
    }
    let health = StorageHealth::new(path).map_err(|e| failed(sqlx::Error::Io(e)))?;
    Ok(Database { pool, health })
}

impl Database {
    /// The pool (one connection).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The health of the file.
    pub fn health(&self) -> &StorageHealth {
        &self.health
    }

    /// Before a write: refused while storage is broken or the file was removed or replaced.
    pub fn writable(&self) -> Result<(), StorageFault> {
        self.health.writable()
    }

    /// A write's result: a storage failure marks storage broken; a success counts only if
    /// the file is still the one opened (a write into a removed file is not durable).
    pub fn written<T>(&self, result: Result<T, sqlx::Error>) -> Result<T, DbError> {
        let value = self.read(result)?;
        self.health
            .check_file()
            .map_err(|reason| DbError::Storage(self.health.broken(reason)))?;
        Ok(value)
    }

    /// A read's result: a storage failure marks storage broken.
    pub fn read<T>(&self, result: Result<T, sqlx::Error>) -> Result<T, DbError> {
        result.map_err(|e| {
            if matches!(e, sqlx::Error::PoolClosed) {
                // Shutting down: unavailable, but nothing is wrong with storage.
                DbError::Storage(StorageFault {
                    reason: format!("{} is closed", self.health.path().display()),
                })
            } else if is_storage_error(&e) {
                let reason = format!("{}: {e}", self.health.path().display());
                DbError::Storage(self.health.broken(reason))
            } else {
                DbError::Db(e)
            }
        })
    }

    /// Starts the storage monitor: every `period` (and at once on a failure), the file is
    /// checked and, while broken, a probe write tried; health follows.
    pub fn monitor(&self, readiness: Readiness, period: Duration) -> StorageMonitor {
        let pool = self.pool.clone();
        self.health.monitor(readiness, period, move || {
            let pool = pool.clone();
            async move {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0);
                sqlx::query(
                    "INSERT INTO ploke_storage_probe (id, at_ms) VALUES (1, ?)
                     ON CONFLICT(id) DO UPDATE SET at_ms = excluded.at_ms",
                )
                .bind(now)
                .execute(&pool)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
            }
        })
    }

    /// Closes the connection (and releases the file lock) once in-flight queries finish.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn no_shared_memory_file_is_mapped_and_a_second_opener_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sqlite");
        let db = open(&path, "CREATE TABLE IF NOT EXISTS t (v BLOB);", &[])
            .await
            .unwrap();
        for _ in 0..50 {
            db.writable().unwrap();
            let r = sqlx::query("INSERT INTO t (v) VALUES (?)")
                .bind(vec![7u8; 4000])
                .execute(db.pool())
                .await;
            db.written(r).unwrap();
        }
        // The WAL index lives on the heap: no -shm file, and nothing of the database mapped.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.ends_with("-shm")), "{names:?}");
        #[cfg(target_os = "linux")]
        {
            let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
            assert!(
                !maps.contains(&path.display().to_string()),
                "the database is memory-mapped"
            );
        }
        // A second opener (another process would meet the same lock) gets a clear error.
        match open(&path, "", &[]).await {
            Err(e @ OpenError::Locked { .. }) => {
                assert!(e.to_string().contains("locked by another process"), "{e}")
            }
            other => panic!("expected Locked, got {other:?}"),
        }
        db.close().await;
        // Once closed, the file opens again with everything in it.
        let again = open(&path, "", &[]).await.unwrap();
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t")
            .fetch_one(again.pool())
            .await
            .unwrap();
        assert_eq!(n, 50);
    }

    #[tokio::test]
    async fn a_write_after_the_file_was_removed_is_a_storage_fault() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let db = open(
            &data.join("x.sqlite"),
            "CREATE TABLE IF NOT EXISTS t (v INTEGER);",
            &[],
        )
        .await
        .unwrap();
        std::fs::remove_dir_all(&data).unwrap();
        // The write itself succeeds into the deleted inode; it must not count.
        let r = sqlx::query("INSERT INTO t (v) VALUES (1)")
            .execute(db.pool())
            .await;
        match db.written(r) {
            Err(DbError::Storage(f)) => assert!(f.reason.contains("was removed"), "{f}"),
            other => panic!("expected a storage fault, got {other:?}"),
        }
        assert!(db.writable().is_err());
    }
}
