//! The shared deployment's database: connecting to PostgreSQL (`[storage] url`), running a
//! component's versioned migrations at start, and telling storage faults (the server gone,
//! out of disk, shutting down) apart from other database errors.
//!
//! **Migrations.** Each component (`llm-session`, `tool-executor`) has an ordered list of
//! [`Migration`]s. At start, under a PostgreSQL advisory lock (so replicas starting at once
//! take turns), every migration whose version is not yet in `ploke_migrations` runs in a
//! transaction together with the row recording it. A second start runs nothing.
//!
//! **Health.** A statement that fails because the server is unreachable or cannot take writes
//! marks storage broken (health fault `storage`, NOT_SERVING, answers UNAVAILABLE); the
//! monitor probes with a small write until one works again.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection, Row};

use crate::server::Readiness;
use crate::sqlite::DbError;
use crate::storage_health::{StorageFault, StorageHealth, StorageMonitor};

/// How long a statement waits for a pooled connection before storage counts as unavailable.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections per service replica.
const MAX_CONNECTIONS: u32 = 16;
/// The advisory lock key migrations run under (any fixed number; "ploke" in ASCII).
const MIGRATION_LOCK: i64 = 0x0070_6c6f_6b65;

const BOOKKEEPING: &str = "
CREATE TABLE IF NOT EXISTS ploke_migrations (
    component TEXT NOT NULL,
    version BIGINT NOT NULL,
    name TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
);
CREATE TABLE IF NOT EXISTS ploke_storage_probe (
    id TEXT PRIMARY KEY,
    at TIMESTAMPTZ NOT NULL
);
";

/// One schema change of a component.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Version, increasing from 1; never reused.
    pub version: i64,
    /// What it does, for the log and the bookkeeping row.
    pub name: &'static str,
    /// The statements.
    pub sql: &'static str,
}

/// The database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum PgOpenError {
    /// The URL does not parse.
    #[error("storage: [storage] url is not a PostgreSQL URL: {0}")]
    Url(sqlx::Error),
    /// The server could not be reached or refused the connection.
    #[error("storage: connecting to PostgreSQL at {target}: {source}")]
    Connect {
        /// Host, port and database (no password).
        target: String,
        /// Why.
        source: sqlx::Error,
    },
    /// A migration failed.
    #[error("storage: migrating {component} to version {version} ({name}): {source}")]
    Migrate {
        /// The component.
        component: String,
        /// The migration's version.
        version: i64,
        /// Its name.
        name: &'static str,
        /// Why.
        source: sqlx::Error,
    },
}

/// A pool on the shared database with the health of the connection to it.
#[derive(Debug, Clone)]
pub struct PgDatabase {
    pool: PgPool,
    health: StorageHealth,
    component: String,
}

/// Whether `e` means the server is unreachable or cannot take writes, rather than the
/// statement being wrong.
pub fn is_storage_error(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|c| is_storage_code(&c)),
        _ => false,
    }
}

/// Whether a SQLSTATE says the database cannot be used now, whatever the statement: 08
/// connection, 28 invalid authorization (a password rotated, a role dropped while running), 53
/// insufficient resources (disk full), 57 operator intervention (shutdown), 58 system error;
/// 25006 read-only transaction (a standby), 3D000 no such database (dropped), 42501 no
/// privilege (a grant revoked).
fn is_storage_code(code: &str) -> bool {
    ["08", "28", "53", "57", "58"]
        .iter()
        .any(|class| code.starts_with(class))
        || ["25006", "3D000", "42501"].contains(&code)
}

/// Connects to `url` and brings `component`'s tables up to date with `migrations`.
pub async fn connect(
    url: &str,
    component: &str,
    migrations: &[Migration],
) -> Result<PgDatabase, PgOpenError> {
    // The server's NOTICEs ("relation … already exists, skipping" at every start's
    // migrations) are not worth a log line each.
    let options = PgConnectOptions::from_str(url)
        .map_err(PgOpenError::Url)?
        .options([("client_min_messages", "warning")]);
    let target = format!(
        "{}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or("")
    );
    let pool = PgPoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options)
        .await
        .map_err(|source| PgOpenError::Connect {
            target: target.clone(),
            source,
        })?;
    migrate(&pool, component, migrations).await?;
    Ok(PgDatabase {
        pool,
        health: StorageHealth::remote(&format!("postgres {target}")),
        component: component.to_owned(),
    })
}

/// Runs the migrations `component` has not run yet, under the advisory lock.
async fn migrate(
    pool: &PgPool,
    component: &str,
    migrations: &[Migration],
) -> Result<(), PgOpenError> {
    let failed = |version: i64, name: &'static str| {
        move |source| PgOpenError::Migrate {
            component: component.to_owned(),
            version,
            name,
            source,
        }
    };
    let mut conn = pool.acquire().await.map_err(failed(0, "connect"))?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *conn)
        .await
        .map_err(failed(0, "lock"))?;
    let result = async {
        sqlx::raw_sql(BOOKKEEPING)
            .execute(&mut *conn)
            .await
            .map_err(failed(0, "bookkeeping"))?;
        for m in migrations {
            let mut tx = conn.begin().await.map_err(failed(m.version, m.name))?;
            let done = sqlx::query(
                "SELECT 1 AS done FROM ploke_migrations WHERE component = $1 AND version = $2",
            )
            .bind(component)
            .bind(m.version)
            .fetch_optional(&mut *tx)
            .await
            .map_err(failed(m.version, m.name))?;
            if done.is_some() {
                continue;
            }
            sqlx::raw_sql(m.sql)
                .execute(&mut *tx)
                .await
                .map_err(failed(m.version, m.name))?;
            sqlx::query(
                "INSERT INTO ploke_migrations (component, version, name) VALUES ($1, $2, $3)",
            )
            .bind(component)
            .bind(m.version)
            .bind(m.name)
            .execute(&mut *tx)
            .await
            .map_err(failed(m.version, m.name))?;
            tx.commit().await.map_err(failed(m.version, m.name))?;
            tracing::info!(
                component,
                version = m.version,
                name = m.name,
                "migration applied"
            );
        }
        Ok(())
    }
    .await;
    // Unlocking fails only with the connection, which releases the lock anyway.
    let _ = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *conn)
        .await;
    result
}

/// The versions of `component`'s migrations that have run, in order.
pub async fn applied(pool: &PgPool, component: &str) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query("SELECT version FROM ploke_migrations WHERE component = $1 ORDER BY version")
        .bind(component)
        .fetch_all(pool)
        .await?
        .iter()
        .map(|r| r.try_get("version"))
        .collect()
}

impl PgDatabase {
    /// The pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The health of the connection to the server.
    pub fn health(&self) -> &StorageHealth {
        &self.health
    }

    /// Before a write: refused while storage is broken.
    pub fn writable(&self) -> Result<(), StorageFault> {
        self.health.writable()
    }

    /// A write's result: a storage failure marks storage broken.
    pub fn written<T>(&self, result: Result<T, sqlx::Error>) -> Result<T, DbError> {
        self.read(result)
    }

    /// A read's result: a storage failure marks storage broken.
    pub fn read<T>(&self, result: Result<T, sqlx::Error>) -> Result<T, DbError> {
        result.map_err(|e| {
            if matches!(e, sqlx::Error::PoolClosed) {
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

    /// Starts the storage monitor: while broken, a probe write every `period` decides when
    /// storage works again.
    pub fn monitor(&self, readiness: Readiness, period: Duration) -> StorageMonitor {
        let pool = self.pool.clone();
        let id = self.component.clone();
        self.health.monitor(readiness, period, move || {
            let pool = pool.clone();
            let id = id.clone();
            async move {
                let written = sqlx::query(
                    "INSERT INTO ploke_storage_probe (id, at) VALUES ($1, now())
                     ON CONFLICT (id) DO UPDATE SET at = excluded.at",
                )
                .bind(id)
                .execute(&pool)
                .await;
                match written {
                    Ok(_) => Ok(()),
                    Err(e @ sqlx::Error::PoolTimedOut) => {
                        Err(format!("{e}; {}", connect_once(&pool).await))
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
        })
    }

    /// Closes the pool once in-flight queries finish.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Why a pool that timed out gets no connection: one connection made outside the pool, whose
/// error names the cause the pool's retries hide (connection refused, a password refused, no
/// such host).
async fn connect_once(pool: &PgPool) -> String {
    let options = pool.connect_options();
    match tokio::time::timeout(ACQUIRE_TIMEOUT, sqlx::PgConnection::connect_with(&options)).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            "a connection outside the pool succeeds now (the server came back while the pool \
             waited, or every pooled connection is busy)"
                .to_owned()
        }
        Ok(Err(e)) => format!("connecting: {e}"),
        Err(_) => format!(
            "connecting: no answer within {} s",
            ACQUIRE_TIMEOUT.as_secs()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pool_that_times_out_is_told_why_by_one_connection_of_its_own() {
        // A port nothing listens on: connections are refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pool = PgPoolOptions::new()
            .acquire_timeout(Duration::from_millis(200))
            .connect_lazy(&format!("postgres://ploke@127.0.0.1:{port}/ploke"))
            .unwrap();
        let e = pool.acquire().await.unwrap_err();
        assert!(matches!(e, sqlx::Error::PoolTimedOut), "{e}");
        let why = connect_once(&pool).await;
        assert!(
            why.starts_with("connecting: ") && why.contains("refused"),
            "{why}"
        );
    }

    #[test]
    fn database_states_that_stop_every_statement_are_storage_faults() {
        for code in [
            "08006", "28P01", "28000", "53100", "57P01", "58030", "25006", "3D000", "42501",
        ] {
            assert!(is_storage_code(code), "{code}");
        }
        // A statement's own fault (a constraint, a syntax error, a lost race) is not.
        for code in ["23505", "42601", "40001", "22021"] {
            assert!(!is_storage_code(code), "{code}");
        }
    }
}
