//! The SQLite [`SessionStore`]: sessions, events and history messages in one file (WAL, see
//! `ploke_runtime::sqlite` for why it is opened as it is). Every write is refused while storage
//! is broken and counts only if the file is still the one opened.

use std::path::Path;

use ploke_proto::session::v1::{SendMessageResponse, Session, SessionEvent};
use ploke_runtime::sqlite::Database;
use prost::Message;
use sqlx::sqlite::SqliteConnection;
use sqlx::{Connection, Row};

use super::{Effects, PageCursor, SessionStore, StoreError, StoredMessage};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    workspace_root TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    last_seq INTEGER NOT NULL DEFAULT 0,
    running_parent TEXT,
    session BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_created ON sessions (created_ms DESC, id DESC);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event BLOB NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    parent_id TEXT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
);
CREATE TABLE IF NOT EXISTS requests (
    session_id TEXT NOT NULL,
    client_request_id TEXT NOT NULL,
    response BLOB NOT NULL,
    PRIMARY KEY (session_id, client_request_id)
);
";

/// Schema changes after [`SCHEMA`], in order (see `ploke_runtime::sqlite::open`); the same
/// steps as the PostgreSQL migrations after version 1.
const UPGRADES: &[&str] = &[
    // 1: sessions belong to the principal that created them (empty: made without one).
    "ALTER TABLE sessions ADD COLUMN owner TEXT NOT NULL DEFAULT '';
     CREATE INDEX IF NOT EXISTS sessions_owner ON sessions (owner, created_ms DESC, id DESC);",
    // 2: when a session was last active (created, or a turn ended), for retention. Sessions
    // from before count from the upgrade: none is deleted earlier than its real idle time.
    "ALTER TABLE sessions ADD COLUMN updated_ms INTEGER NOT NULL DEFAULT 0;
     UPDATE sessions SET updated_ms = CAST(strftime('%s', 'now') AS INTEGER) * 1000;
     CREATE INDEX IF NOT EXISTS sessions_updated ON sessions (updated_ms);",
];

/// Sessions in a SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    db: Database,
}

fn ms(t: Option<&prost_types::Timestamp>) -> i64 {
    t.map(|t| t.seconds * 1000 + i64::from(t.nanos / 1_000_000))
        .unwrap_or(0)
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

impl SqliteStore {
    /// Opens (creating) the database at `path`.
    pub async fn open(path: &Path) -> Result<Self, ploke_runtime::sqlite::OpenError> {
        let db = ploke_runtime::sqlite::open(path, SCHEMA, UPGRADES).await?;
        Ok(Self { db })
    }

    /// The database (its health, its monitor, closing it).
    pub fn database(&self) -> &Database {
        &self.db
    }
}

#[async_trait::async_trait]
impl SessionStore for SqliteStore {
    async fn create_session(&self, session: &Session) -> Result<(), StoreError> {
        self.db.writable()?;
        let r = sqlx::query("INSERT INTO sessions (id, workspace_root, created_ms, last_seq, session, owner, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?)")
            .bind(&session.session_id)
            .bind(&session.workspace_root)
            .bind(ms(session.created_at.as_ref()))
            .bind(session.last_seq as i64)
            .bind(session.encode_to_vec())
            .bind(&session.owner)
            .bind(ms(session.updated_at.as_ref()))
            .execute(self.db.pool())
            .await;
        self.db.written(r)?;
        Ok(())
    }

    async fn get_session(&self, id: &str) -> Result<Option<Session>, StoreError> {
        let row = sqlx::query("SELECT session, last_seq FROM sessions WHERE id = ?")
            .bind(id)
            .fetch_optional(self.db.pool())
            .await;
        self.db.read(row)?.map(|r| decode_session(&r)).transpose()
    }

    async fn list_sessions(
        &self,
        workspace_root: &str,
        owners: Option<&[String]>,
        limit: u32,
        after: Option<&PageCursor>,
    ) -> Result<Vec<Session>, StoreError> {
        let mut q = sqlx::QueryBuilder::new("SELECT session, last_seq FROM sessions WHERE 1 = 1");
        if !workspace_root.is_empty() {
            q.push(" AND workspace_root = ").push_bind(workspace_root);
        }
        if let Some(owners) = owners {
            q.push(" AND owner IN (");
            let mut each = q.separated(", ");
            for o in owners {
                each.push_bind(o.clone());
            }
            q.push(")");
        }
        if let Some(c) = after {
            q.push(" AND (created_ms < ")
                .push_bind(c.created_ms)
                .push(" OR (created_ms = ")
                .push_bind(c.created_ms)
                .push(" AND id < ")
                .push_bind(c.session_id.clone())
                .push("))");
        }
        q.push(" ORDER BY created_ms DESC, id DESC LIMIT ")
            .push_bind(i64::from(limit));
        let rows = q.build().fetch_all(self.db.pool()).await;
        self.db.read(rows)?.iter().map(decode_session).collect()
    }

    async fn append_event(
        &self,
        event: &SessionEvent,
        effects: &Effects,
    ) -> Result<(), StoreError> {
        self.db.writable()?;
        let result = async {
            let mut conn = self.db.pool().acquire().await?;
            append_tx(&mut conn, event, effects).await
        }
        .await;
        self.db.written(result)?
    }

    async fn events_after(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<SessionEvent>, StoreError> {
        let rows = sqlx::query(
            "SELECT event FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(session_id)
        .bind(after_seq as i64)
        .bind(i64::from(limit))
        .fetch_all(self.db.pool())
        .await;
        self.db
            .read(rows)?
            .iter()
            .map(|r| {
                let bytes: Vec<u8> = r.try_get("event")?;
                SessionEvent::decode(bytes.as_slice()).map_err(corrupt)
            })
            .collect()
    }

    async fn append_messages(
        &self,
        session_id: &str,
        messages: &[StoredMessage],
    ) -> Result<(), StoreError> {
        self.db.writable()?;
        let result = async {
            let mut tx = self.db.pool().begin().await?;
            let done = insert_messages(&mut tx, session_id, messages).await?;
            if done.is_ok() {
                tx.commit().await?;
            }
            Ok(done)
        }
        .await;
        self.db.written(result)?
    }

    async fn messages(&self, session_id: &str) -> Result<Vec<StoredMessage>, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, parent_id, message FROM messages WHERE session_id = ? ORDER BY idx",
        )
        .bind(session_id)
        .fetch_all(self.db.pool())
        .await;
        self.db
            .read(rows)?
            .iter()
            .map(|r| {
                let seq: i64 = r.try_get("seq")?;
                let text: String = r.try_get("message")?;
                Ok(StoredMessage {
                    seq: seq as u64,
                    parent_id: r.try_get("parent_id")?,
                    message: serde_json::from_str(&text).map_err(corrupt)?,
                })
            })
            .collect()
    }

    async fn find_request(
        &self,
        session_id: &str,
        client_request_id: &str,
    ) -> Result<Option<SendMessageResponse>, StoreError> {
        let row = sqlx::query(
            "SELECT response FROM requests WHERE session_id = ? AND client_request_id = ?",
        )
        .bind(session_id)
        .bind(client_request_id)
        .fetch_optional(self.db.pool())
        .await;
        self.db
            .read(row)?
            .map(|r| {
                let bytes: Vec<u8> = r.try_get("response")?;
                SendMessageResponse::decode(bytes.as_slice()).map_err(corrupt)
            })
            .transpose()
    }

    async fn idle_sessions(
        &self,
        updated_before_ms: i64,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query_scalar(
            "SELECT id FROM sessions WHERE updated_ms < ? AND running_parent IS NULL
             ORDER BY updated_ms, id LIMIT ?",
        )
        .bind(updated_before_ms)
        .bind(i64::from(limit))
        .fetch_all(self.db.pool())
        .await;
        Ok(self.db.read(rows)?)
    }

    async fn delete_session(
        &self,
        id: &str,
        idle_before_ms: Option<i64>,
    ) -> Result<Option<u64>, StoreError> {
        self.db.writable()?;
        let result = async {
            // The row first: the transaction writes at once, and a running turn (or, for
            // retention, activity since the session was found idle) keeps it.
            let mut tx = self.db.pool().begin().await?;
            let deleted: Option<i64> = sqlx::query_scalar(
                "DELETE FROM sessions WHERE id = ? AND running_parent IS NULL
                 AND (? IS NULL OR updated_ms < ?) RETURNING last_seq",
            )
            .bind(id)
            .bind(idle_before_ms)
            .bind(idle_before_ms)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(last_seq) = deleted else {
                let running: Option<Option<String>> =
                    sqlx::query_scalar("SELECT running_parent FROM sessions WHERE id = ?")
                        .bind(id)
                        .fetch_optional(&mut *tx)
                        .await?;
                return Ok(super::not_deleted(id, running));
            };
            for sql in [
                "DELETE FROM events WHERE session_id = ?",
                "DELETE FROM messages WHERE session_id = ?",
                "DELETE FROM requests WHERE session_id = ?",
            ] {
                sqlx::query(sql).bind(id).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(Ok(Some(last_seq as u64)))
        }
        .await;
        self.db.written(result)?
    }

    async fn running(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows =
            sqlx::query("SELECT id, running_parent FROM sessions WHERE running_parent IS NOT NULL")
                .fetch_all(self.db.pool())
                .await;
        self.db
            .read(rows)?
            .iter()
            .map(|r| Ok((r.try_get("id")?, r.try_get("running_parent")?)))
            .collect()
    }
}

fn decode_session(row: &sqlx::sqlite::SqliteRow) -> Result<Session, StoreError> {
    let bytes: Vec<u8> = row.try_get("session")?;
    let last_seq: i64 = row.try_get("last_seq")?;
    let mut s = Session::decode(bytes.as_slice()).map_err(corrupt)?;
    s.last_seq = last_seq as u64;
    Ok(s)
}

/// History messages after the session's last, in `conn`'s transaction.
async fn insert_messages(
    conn: &mut SqliteConnection,
    session_id: &str,
    messages: &[StoredMessage],
) -> Result<Result<(), StoreError>, sqlx::Error> {
    let next: i64 =
        sqlx::query("SELECT COALESCE(MAX(idx), 0) AS n FROM messages WHERE session_id = ?")
            .bind(session_id)
            .fetch_one(&mut *conn)
            .await?
            .try_get("n")?;
    for (i, m) in messages.iter().enumerate() {
        let json = match serde_json::to_string(&m.message) {
            Ok(j) => j,
            Err(e) => return Ok(Err(corrupt(e))),
        };
        sqlx::query(
            "INSERT INTO messages (session_id, idx, seq, parent_id, message) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(session_id)
        .bind(next + 1 + i as i64)
        .bind(m.seq as i64)
        .bind(&m.parent_id)
        .bind(json)
        .execute(&mut *conn)
        .await?;
    }
    Ok(Ok(()))
}

/// The event, its seq check and its effects in one transaction on `conn`. The outer error is
/// the database's; the inner one a refusal (not the next seq, a corrupt record) after which
/// nothing was committed.
async fn append_tx(
    conn: &mut SqliteConnection,
    event: &SessionEvent,
    effects: &Effects,
) -> Result<Result<(), StoreError>, sqlx::Error> {
    let mut tx = conn.begin().await?;
    let done = sqlx::query("UPDATE sessions SET last_seq = ? WHERE id = ? AND last_seq = ?")
        .bind(event.seq as i64)
        .bind(&event.session_id)
        .bind(event.seq as i64 - 1)
        .execute(&mut *tx)
        .await?;
    if done.rows_affected() != 1 {
        // The same event already there (a commit that landed though it reported a failure):
        // nothing to write, as in the PostgreSQL store.
        let stored: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT event FROM events WHERE session_id = ? AND seq = ?")
                .bind(&event.session_id)
                .bind(event.seq as i64)
                .fetch_optional(&mut *tx)
                .await?;
        let last: Option<i64> = sqlx::query_scalar("SELECT last_seq FROM sessions WHERE id = ?")
            .bind(&event.session_id)
            .fetch_optional(&mut *tx)
            .await?;
        if last == Some(event.seq as i64) && stored.is_some_and(|b| b == event.encode_to_vec()) {
            return Ok(Ok(()));
        }
        return Ok(Err(StoreError::NotNext {
            session_id: event.session_id.clone(),
            seq: event.seq,
        }));
    }
    sqlx::query("INSERT INTO events (session_id, seq, event) VALUES (?, ?, ?)")
        .bind(&event.session_id)
        .bind(event.seq as i64)
        .bind(event.encode_to_vec())
        .execute(&mut *tx)
        .await?;
    let parent_id = event
        .correlation
        .as_ref()
        .map(|c| c.parent_id.clone())
        .unwrap_or_default();
    let messages: Vec<StoredMessage> = effects
        .messages
        .iter()
        .map(|m| StoredMessage {
            seq: event.seq,
            parent_id: parent_id.clone(),
            message: m.clone(),
        })
        .collect();
    if let Err(e) = insert_messages(&mut tx, &event.session_id, &messages).await? {
        return Ok(Err(e));
    }
    if let Some((id, response)) = &effects.request {
        sqlx::query("INSERT OR IGNORE INTO requests (session_id, client_request_id, response) VALUES (?, ?, ?)")
            .bind(&event.session_id)
            .bind(id)
            .bind(response.encode_to_vec())
            .execute(&mut *tx)
            .await?;
    }
    if let Some(running) = &effects.running {
        // A turn starting or ending (interrupted ones too) is activity, for retention.
        sqlx::query("UPDATE sessions SET running_parent = ?, updated_ms = ? WHERE id = ?")
            .bind(running.as_deref())
            .bind(ms(event.at.as_ref()))
            .bind(&event.session_id)
            .execute(&mut *tx)
            .await?;
    }
    if effects.change_session() {
        let row = sqlx::query("SELECT session, last_seq FROM sessions WHERE id = ?")
            .bind(&event.session_id)
            .fetch_one(&mut *tx)
            .await?;
        let mut session = match decode_session(&row) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        effects.apply_to(&mut session, event.at);
        sqlx::query("UPDATE sessions SET session = ?, updated_ms = ? WHERE id = ?")
            .bind(session.encode_to_vec())
            .bind(ms(session.updated_at.as_ref()))
            .bind(&event.session_id)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(Ok(()))
}
