//! The PostgreSQL [`SessionStore`] of a shared deployment: the SQLite store's tables (sessions,
//! events, history messages, request ids) in one database that several llm-session replicas
//! share, with what replicas need on top:
//!
//! - **Turn leases.** A running turn's session row names its owner replica and a lease expiry
//!   the owner renews every [`Lease::renew`]; the user message that starts a turn takes the
//!   lease in its transaction (row lock), so two replicas never run turns of one session at
//!   once, and every later event of the turn is refused once the lease is another's (see
//!   `postgres_tx`). Only turns whose lease expired count as [`SessionStore::running`].
//! - **Notifications.** Each appended event is announced with `NOTIFY` in its transaction
//!   (delivered at commit); a listener turns other replicas' announcements and cancel requests
//!   into [`Remote`] messages. Ordering and completeness come from reading the events table by
//!   seq, never from the notifications.

use std::sync::Arc;
use std::time::Duration;

use ploke_proto::session::v1::{SendMessageResponse, Session, SessionEvent, SessionState};
use ploke_runtime::postgres::{Migration, PgDatabase, PgOpenError};
use prost::Message;
use sqlx::Row;
use sqlx::postgres::{PgListener, PgRow};
use tokio::sync::broadcast;

use super::{Effects, PageCursor, Remote, SessionStore, StoreError, StoredMessage};

/// The notification channel of appended events: payload `replica session_id seq`.
pub(super) const EVENTS_CHANNEL: &str = "ploke_session_events";
/// The notification channel of cancel requests: payload JSON [`CancelNote`].
const CANCEL_CHANNEL: &str = "ploke_session_cancel";
/// The notification channel of deleted sessions: payload `replica session_id`.
pub(super) const DELETED_CHANNEL: &str = "ploke_session_deleted";
/// Notifications buffered for slow readers before they resync from the store.
const REMOTE_BUFFER: usize = 4096;

/// The migrations of llm-session's tables, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "sessions, events, messages, requests, turn leases",
        sql: "
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    workspace_root TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    last_seq BIGINT NOT NULL DEFAULT 0,
    running_parent TEXT,
    running_owner TEXT,
    lease_until TIMESTAMPTZ,
    session BYTEA NOT NULL
);
CREATE INDEX sessions_created ON sessions (created_ms DESC, id DESC);
CREATE INDEX sessions_running ON sessions (running_owner) WHERE running_parent IS NOT NULL;
CREATE TABLE events (
    session_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    event BYTEA NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE messages (
    session_id TEXT NOT NULL,
    idx BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    parent_id TEXT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
);
CREATE TABLE requests (
    session_id TEXT NOT NULL,
    client_request_id TEXT NOT NULL,
    response BYTEA NOT NULL,
    PRIMARY KEY (session_id, client_request_id)
);
",
    },
    Migration {
        version: 2,
        name: "sessions belong to the principal that created them",
        sql: "
ALTER TABLE sessions ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_owner ON sessions (owner, created_ms DESC, id DESC);
",
    },
    Migration {
        version: 3,
        name: "when a session was last active, for retention",
        // The default is evaluated per row: rows already there count from the migration, and
        // so do rows that replicas of the previous version insert during a rolling upgrade.
        sql: "
ALTER TABLE sessions ADD COLUMN updated_ms BIGINT NOT NULL
    DEFAULT (extract(epoch FROM now()) * 1000)::bigint;
CREATE INDEX sessions_updated ON sessions (updated_ms);
",
    },
];

/// How long a turn's lease lasts and how often its owner renews it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// A lease not renewed for this long is expired: its turn counts as interrupted.
    pub ttl: Duration,
    /// How often the owner renews its leases (well under `ttl`).
    pub renew: Duration,
}

impl Default for Lease {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(15),
            renew: Duration::from_secs(5),
        }
    }
}

/// A cancel request for the replica running a turn.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct CancelNote {
    owner: String,
    session_id: String,
    parent_id: String,
    reason: String,
}

/// Aborts the store's background tasks when the last clone goes.
#[derive(Debug)]
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Sessions in a shared PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgStore {
    db: PgDatabase,
    replica: Arc<str>,
    lease: Lease,
    remote: broadcast::Sender<Remote>,
    _tasks: Arc<Tasks>,
}

pub(super) fn ms(t: Option<&prost_types::Timestamp>) -> i64 {
    t.map(|t| t.seconds * 1000 + i64::from(t.nanos / 1_000_000))
        .unwrap_or(0)
}

pub(super) fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

/// `SELECT` of a session row by id, with whether its turn's lease is live.
pub(super) const SELECT_SESSION: &str = "SELECT session, last_seq, \
     (running_parent IS NOT NULL AND lease_until > now()) AS live FROM sessions WHERE id = $1";
/// The same columns, for listings.
const SESSION_COLUMNS: &str =
    "session, last_seq, (running_parent IS NOT NULL AND lease_until > now()) AS live";

pub(super) fn decode_session(row: &PgRow) -> Result<Session, StoreError> {
    let bytes: Vec<u8> = row.try_get("session")?;
    let last_seq: i64 = row.try_get("last_seq")?;
    let live: Option<bool> = row.try_get("live")?;
    let mut s = Session::decode(bytes.as_slice()).map_err(corrupt)?;
    s.last_seq = last_seq as u64;
    s.state = if live == Some(true) {
        SessionState::Running
    } else {
        SessionState::Idle
    } as i32;
    Ok(s)
}

impl PgStore {
    /// Connects to `url`, runs the migrations, starts listening for other replicas and
    /// renewing this replica's leases.
    pub async fn connect(url: &str, lease: Lease) -> Result<Self, PgOpenError> {
        let db = ploke_runtime::postgres::connect(url, "llm-session", MIGRATIONS).await?;
        let replica: Arc<str> = uuid::Uuid::now_v7().to_string().into();
        let (remote, _) = broadcast::channel(REMOTE_BUFFER);
        let mut listener = PgListener::connect_with(db.pool())
            .await
            .map_err(|source| PgOpenError::Connect {
                target: db.health().path().display().to_string(),
                source,
            })?;
        listener
            .listen_all([EVENTS_CHANNEL, CANCEL_CHANNEL, DELETED_CHANNEL])
            .await
            .map_err(|source| PgOpenError::Connect {
                target: db.health().path().display().to_string(),
                source,
            })?;
        let listening = tokio::spawn(listen(listener, replica.clone(), remote.clone()));
        let renewing = tokio::spawn(renew(db.clone(), replica.clone(), lease));
        tracing::info!(replica = %replica, "session store on postgres");
        Ok(Self {
            db,
            replica,
            lease,
            remote,
            _tasks: Arc::new(Tasks(vec![listening, renewing])),
        })
    }

    /// The database (its health, its monitor, closing it).
    pub fn database(&self) -> &PgDatabase {
        &self.db
    }

    /// One try of [`SessionStore::append_event`].
    async fn try_append(&self, event: &SessionEvent, effects: &Effects) -> Result<(), StoreError> {
        self.db.writable()?;
        let result = super::postgres_tx::append(
            self.db.pool(),
            &self.replica,
            self.lease.ttl,
            event,
            effects,
        )
        .await;
        self.db.written(result)?
    }

    /// This replica's id (the owner named in its turns' leases).
    pub fn replica(&self) -> &str {
        &self.replica
    }
}

/// Turns notifications into [`Remote`] messages until the store is dropped. A lost connection
/// (notifications may have been missed) is a [`Remote::Resync`]; the listener reconnects.
async fn listen(mut listener: PgListener, replica: Arc<str>, remote: broadcast::Sender<Remote>) {
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                if let Some(r) = parse(n.channel(), n.payload(), &replica) {
                    let _ = remote.send(r);
                }
            }
            Ok(None) => {
                tracing::warn!("postgres notifications interrupted, reconnecting");
                let _ = remote.send(Remote::Resync);
            }
            Err(e) => {
                tracing::warn!(error = %e, "postgres notifications failed, retrying");
                let _ = remote.send(Remote::Resync);
                // A backoff, so a server that is down is not hammered.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// The [`Remote`] a notification means for `replica` (`None`: its own, or not for it).
fn parse(channel: &str, payload: &str, replica: &str) -> Option<Remote> {
    match channel {
        EVENTS_CHANNEL => {
            let mut parts = payload.split(' ');
            let (from, session_id, seq) = (parts.next()?, parts.next()?, parts.next()?);
            (from != replica).then(|| Remote::Appended {
                session_id: session_id.to_owned(),
                seq: seq.parse().unwrap_or(0),
            })
        }
        CANCEL_CHANNEL => {
            let note: CancelNote = serde_json::from_str(payload).ok()?;
            (note.owner == replica).then_some(Remote::Cancel {
                session_id: note.session_id,
                parent_id: note.parent_id,
                reason: note.reason,
            })
        }
        DELETED_CHANNEL => {
            let (from, session_id) = payload.split_once(' ')?;
            (from != replica).then(|| Remote::Deleted {
                session_id: session_id.to_owned(),
            })
        }
        _ => None,
    }
}

/// Renews every lease this replica holds, every `lease.renew`.
async fn renew(db: PgDatabase, replica: Arc<str>, lease: Lease) {
    let mut ticks = tokio::time::interval(lease.renew);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let done = sqlx::query(
            "UPDATE sessions SET lease_until = now() + $2 * interval '1 millisecond'
             WHERE running_owner = $1 AND running_parent IS NOT NULL",
        )
        .bind(&*replica)
        .bind(lease.ttl.as_millis() as f64)
        .execute(db.pool())
        .await;
        if let Err(e) = db.read(done) {
            tracing::warn!(replica = %replica, error = %e, "renewing turn leases failed");
        }
    }
}

#[async_trait::async_trait]
impl SessionStore for PgStore {
    async fn create_session(&self, session: &Session) -> Result<(), StoreError> {
        self.db.writable()?;
        let r = sqlx::query(
            "INSERT INTO sessions (id, workspace_root, created_ms, last_seq, session, owner, updated_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
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
        let row = sqlx::query(SELECT_SESSION)
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
        let mut q = sqlx::QueryBuilder::new(format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE 1 = 1"
        ));
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
        // A turn's later events ride out a short outage (the server restarting, a failover):
        // tried again while the turn's lease could still be this replica's. An append is
        // idempotent (`postgres_tx::append`), so one that landed before its answer was lost
        // is not written twice. The event that starts a turn answers its caller at once.
        let patient = !matches!(effects.running, Some(Some(_)));
        let mut waited: Option<(std::time::Instant, u32)> = None;
        loop {
            let result = self.try_append(event, effects).await;
            let fault = match (&result, patient) {
                (Err(StoreError::Unavailable(fault)), true) if !self.db.pool().is_closed() => fault,
                _ => {
                    if let (Some((since, _)), Ok(())) = (waited, &result) {
                        tracing::info!(
                            session_id = %event.session_id,
                            seq = event.seq,
                            waited_ms = since.elapsed().as_millis() as u64,
                            "turn event appended once the database answered again"
                        );
                    }
                    return result;
                }
            };
            let (since, tries) = waited.get_or_insert_with(|| {
                tracing::warn!(
                    session_id = %event.session_id,
                    seq = event.seq,
                    error = %fault.reason,
                    "appending a turn's event failed; trying again for up to a turn lease"
                );
                (std::time::Instant::now(), 0)
            });
            *tries += 1;
            let Some(left) = self.lease.ttl.checked_sub(since.elapsed()) else {
                return result;
            };
            let pause = ploke_runtime::retry::backoff(50, 1_000, *tries, None);
            tokio::time::sleep(pause.min(left)).await;
        }
    }

    async fn events_after(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<SessionEvent>, StoreError> {
        let rows = sqlx::query(
            "SELECT event FROM events WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
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
            let done = super::postgres_tx::insert_messages(&mut tx, session_id, messages).await?;
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
            "SELECT seq, parent_id, message FROM messages WHERE session_id = $1 ORDER BY idx",
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
            "SELECT response FROM requests WHERE session_id = $1 AND client_request_id = $2",
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

    async fn running(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, running_parent FROM sessions
             WHERE running_parent IS NOT NULL AND (lease_until IS NULL OR lease_until <= now())",
        )
        .fetch_all(self.db.pool())
        .await;
        self.db
            .read(rows)?
            .iter()
            .map(|r| Ok((r.try_get("id")?, r.try_get("running_parent")?)))
            .collect()
    }

    async fn idle_sessions(
        &self,
        updated_before_ms: i64,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query_scalar(
            "SELECT id FROM sessions WHERE updated_ms < $1 AND running_parent IS NULL
             ORDER BY updated_ms, id LIMIT $2",
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
        let result =
            super::postgres_tx::delete(self.db.pool(), &self.replica, id, idle_before_ms).await;
        self.db.written(result)?
    }

    fn remote(&self) -> Option<broadcast::Receiver<Remote>> {
        Some(self.remote.subscribe())
    }

    async fn cancel_remote(
        &self,
        session_id: &str,
        reason: &str,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT running_parent, running_owner FROM sessions
             WHERE id = $1 AND running_parent IS NOT NULL AND lease_until > now()",
        )
        .bind(session_id)
        .fetch_optional(self.db.pool())
        .await;
        let Some(row) = self.db.read(row)? else {
            return Ok(None);
        };
        let note = CancelNote {
            owner: row
                .try_get::<Option<String>, _>("running_owner")?
                .unwrap_or_default(),
            session_id: session_id.to_owned(),
            parent_id: row.try_get("running_parent")?,
            // A notification's payload is bounded (8000 bytes); the reason is only shown.
            reason: reason.chars().take(1000).collect(),
        };
        let payload = serde_json::to_string(&note).map_err(corrupt)?;
        let sent = sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CANCEL_CHANNEL)
            .bind(payload)
            .execute(self.db.pool())
            .await;
        self.db.written(sent)?;
        Ok(Some(note.parent_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_for_other_replicas_only() {
        assert_eq!(
            parse(EVENTS_CHANNEL, "b s1 7", "a"),
            Some(Remote::Appended {
                session_id: "s1".into(),
                seq: 7
            })
        );
        assert_eq!(parse(EVENTS_CHANNEL, "a s1 7", "a"), None);
        assert_eq!(parse(EVENTS_CHANNEL, "garbage", "a"), None);
        let note = r#"{"owner":"a","session_id":"s","parent_id":"p","reason":"r"}"#;
        assert_eq!(
            parse(CANCEL_CHANNEL, note, "a"),
            Some(Remote::Cancel {
                session_id: "s".into(),
                parent_id: "p".into(),
                reason: "r".into()
            })
        );
        assert_eq!(parse(CANCEL_CHANNEL, note, "b"), None);
        assert_eq!(
            parse(DELETED_CHANNEL, "b s1", "a"),
            Some(Remote::Deleted {
                session_id: "s1".into()
            })
        );
        assert_eq!(parse(DELETED_CHANNEL, "a s1", "a"), None);
    }
}
