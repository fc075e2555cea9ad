//! Opening the embedded default's SQLite databases one way: the file (and its directory)
//! created when missing, WAL journal, a small pool, the schema applied idempotently.

use std::path::Path;
use std::str::FromStr;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

/// Opens (creating) the database at `path` and runs `schema` (`CREATE … IF NOT EXISTS`).
pub async fn open(path: &Path, schema: &'static str) -> Result<SqlitePool, sqlx::Error> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(sqlx::Error::Io)?;
    }
    let options = SqliteConnectOptions::from_str("sqlite://")?
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal);
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await?;
    sqlx::raw_sql(schema).execute(&pool).await?;
    Ok(pool)
}
