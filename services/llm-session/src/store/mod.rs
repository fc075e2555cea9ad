//! Durable sessions, events and history behind [`SessionStore`]: SQLite is the embedded
//! default ([`sqlite::SqliteStore`]); a shared deployment implements the same trait over
//! PostgreSQL with the same tables ([`postgres::PgStore`]), where several replicas share the
//! sessions and learn of each other's events and cancels through [`Remote`] notifications.

pub mod postgres;
mod postgres_tx;
pub mod sqlite;

use ploke_proto::common::v1::TokenUsage;
use ploke_proto::session::v1::{SendMessageResponse, Session, SessionEvent, TurnFailed};
use ploke_runtime::sqlite::DbError;
use ploke_runtime::storage_health::StorageFault;
use prost_types::Timestamp;

use crate::provider::wire::ChatMessage;

/// The opened database behind the store: its health, its monitor, closing it.
#[derive(Debug, Clone)]
pub enum Database {
    /// SQLite under the data dir.
    Sqlite(ploke_runtime::sqlite::Database),
    /// The shared PostgreSQL database.
    Postgres(ploke_runtime::postgres::PgDatabase),
}

impl Database {
    /// Whether other replicas share it.
    pub fn shared(&self) -> bool {
        match self {
            Database::Sqlite(_) => false,
            Database::Postgres(_) => true,
        }
    }

    /// Its health.
    pub fn health(&self) -> &ploke_runtime::storage_health::StorageHealth {
        match self {
            Database::Sqlite(d) => d.health(),
            Database::Postgres(d) => d.health(),
        }
    }

    /// Starts its storage monitor.
    pub fn monitor(
        &self,
        readiness: ploke_runtime::server::Readiness,
        period: std::time::Duration,
    ) -> ploke_runtime::storage_health::StorageMonitor {
        match self {
            Database::Sqlite(d) => d.monitor(readiness, period),
            Database::Postgres(d) => d.monitor(readiness, period),
        }
    }

    /// Closes it once in-flight queries finish.
    pub async fn close(&self) {
        match self {
            Database::Sqlite(d) => d.close().await,
            Database::Postgres(d) => d.close().await,
        }
    }
}

/// Opens the configured store: PostgreSQL when `[storage] url` is set (migrated at start),
/// else SQLite under the data dir.
pub async fn open(
    config: &crate::Config,
) -> Result<(std::sync::Arc<dyn SessionStore>, Database), crate::StartError> {
    Ok(match &config.storage_url {
        Some(url) => {
            let store = postgres::PgStore::connect(url, config.lease).await?;
            let db = Database::Postgres(store.database().clone());
            (std::sync::Arc::new(store), db)
        }
        None => {
            let store = sqlite::SqliteStore::open(&config.data_dir.join("sessions.sqlite")).await?;
            let db = Database::Sqlite(store.database().clone());
            (std::sync::Arc::new(store), db)
        }
    })
}

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Storage cannot take writes (disk full, read-only, data dir removed): UNAVAILABLE.
    #[error("session store: {0}")]
    Unavailable(#[from] StorageFault),
    /// The database failed.
    #[error("session store: {0}")]
    Db(#[from] sqlx::Error),
    /// A stored row could not be decoded.
    #[error("session store: corrupt row: {0}")]
    Corrupt(String),
    /// The event is not the session's next (another writer appended first). Nothing was
    /// written.
    #[error("session store: event {seq} of session {session_id} is not the next seq")]
    NotNext {
        /// Session id.
        session_id: String,
        /// The refused seq.
        seq: u64,
    },
    /// Another turn holds the session (on this replica or another): it must end first.
    #[error("session {session_id} is running a turn (parent {parent_id})")]
    Busy {
        /// Session id.
        session_id: String,
        /// The running turn.
        parent_id: String,
    },
    /// The session was deleted (while a subscriber followed it).
    #[error("session {0} was deleted")]
    Deleted(String),
    /// The turn this event belongs to is no longer this replica's: its lease expired and
    /// another replica ended it. Nothing was written.
    #[error(
        "turn {parent_id} of session {session_id} was ended by another replica (its lease expired)"
    )]
    Superseded {
        /// Session id.
        session_id: String,
        /// The turn.
        parent_id: String,
    },
}

impl StoreError {
    /// The message for the current caller: a storage fault's cause (files, the database's
    /// address) only to those who may see the deployment's internals
    /// ([`StorageFault::shown`]).
    pub fn shown(&self) -> String {
        self.shown_to(ploke_runtime::principal::sees_internals())
    }

    /// [`Self::shown`] for a caller decided before ([`StorageFault::shown_to`]).
    pub fn shown_to(&self, internals: bool) -> String {
        match self {
            Self::Unavailable(f) => format!("session store: {}", f.shown_to(internals)),
            e => e.to_string(),
        }
    }
}

impl From<DbError> for StoreError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Storage(f) => StoreError::Unavailable(f),
            DbError::Db(e) => StoreError::Db(e),
        }
    }
}

/// What a `delete_session` that deleted no row answers, from the session's running mark read
/// in the same transaction: [`StoreError::Busy`] while a turn runs, `None` when the session is
/// gone (or, for retention, was active since).
fn not_deleted(
    session_id: &str,
    running: Option<Option<String>>,
) -> Result<Option<u64>, StoreError> {
    match running.flatten() {
        Some(parent_id) => Err(StoreError::Busy {
            session_id: session_id.to_owned(),
            parent_id,
        }),
        None => Ok(None),
    }
}

/// What else the transaction that appends an event records. Everything in it commits with the
/// event or not at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Effects {
    /// History messages to append; their seq is the event's, their turn the event's
    /// `correlation.parent_id`.
    pub messages: Vec<ChatMessage>,
    /// A `client_request_id` and the answer it got.
    pub request: Option<(String, SendMessageResponse)>,
    /// A title for a session that has none.
    pub title: Option<String>,
    /// Marks a turn running (`Some(Some(parent_id))`) or finished (`Some(None)`).
    pub running: Option<Option<String>>,
    /// Tokens to add to the session's total (and `updated_at` set to the event's time).
    pub usage: Option<TokenUsage>,
    /// The session's newest turn ended: completed (`Some(None)`) or not (`Some(Some(why))`),
    /// kept as the session's `last_failure`.
    pub ended: Option<Option<TurnFailed>>,
}

impl Effects {
    /// Whether the session's own record changes (its title, usage or last failure).
    pub(crate) fn change_session(&self) -> bool {
        self.title.is_some() || self.usage.is_some() || self.ended.is_some()
    }

    /// Applies to `session` what changes its own record, for an event at `at`, which becomes
    /// its `updated_at` (the record is written with it, and the activity retention reads must
    /// not move back to an older time).
    pub(crate) fn apply_to(&self, session: &mut Session, at: Option<Timestamp>) {
        if let Some(title) = &self.title {
            session.title.clone_from(title);
        }
        if let Some(u) = &self.usage {
            let total = session.usage.get_or_insert_with(TokenUsage::default);
            total.input_tokens += u.input_tokens;
            total.output_tokens += u.output_tokens;
            total.total_tokens += u.total_tokens;
        }
        if let Some(ended) = &self.ended {
            session.last_failure.clone_from(ended);
        }
        if at.is_some() {
            session.updated_at = at;
        }
    }
}

/// One message of a session's history, as the provider will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Seq of the event it came from.
    pub seq: u64,
    /// The turn (user message id) it belongs to.
    pub parent_id: String,
    /// The message.
    pub message: ChatMessage,
}

/// Where sessions live. Every method is one atomic step.
#[async_trait::async_trait]
pub trait SessionStore: Send + Sync + std::fmt::Debug {
    /// Stores a new session.
    async fn create_session(&self, session: &Session) -> Result<(), StoreError>;
    /// One session.
    async fn get_session(&self, id: &str) -> Result<Option<Session>, StoreError>;
    /// Sessions newest first, of `workspace_root` (empty = all) and of one of `owners` (`None`
    /// = every owner's), after the page cursor.
    async fn list_sessions(
        &self,
        workspace_root: &str,
        owners: Option<&[String]>,
        limit: u32,
        after: Option<&PageCursor>,
    ) -> Result<Vec<Session>, StoreError>;
    /// Appends an event whose seq is the session's last seq + 1 (checked), records the new
    /// last seq and applies `effects`, in one transaction.
    async fn append_event(&self, event: &SessionEvent, effects: &Effects)
    -> Result<(), StoreError>;
    /// Events with seq > `after_seq`, in order, at most `limit`.
    async fn events_after(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<SessionEvent>, StoreError>;
    /// Appends messages to the history.
    async fn append_messages(
        &self,
        session_id: &str,
        messages: &[StoredMessage],
    ) -> Result<(), StoreError>;
    /// The whole history, oldest first.
    async fn messages(&self, session_id: &str) -> Result<Vec<StoredMessage>, StoreError>;
    /// The answer a `client_request_id` got, if any.
    async fn find_request(
        &self,
        session_id: &str,
        client_request_id: &str,
    ) -> Result<Option<SendMessageResponse>, StoreError>;
    /// Ids of sessions last active (created, a turn started or ended) before `updated_before_ms` and
    /// running no turn, least recently active first, at most `limit`.
    async fn idle_sessions(
        &self,
        updated_before_ms: i64,
        limit: u32,
    ) -> Result<Vec<String>, StoreError>;
    /// Deletes a session with its events, history and request ids in one transaction: the
    /// number of events it held, `None` when no session has this id (or, with
    /// `idle_before_ms`, when it was active since). Refused with [`StoreError::Busy`] (nothing
    /// deleted) while a turn is marked running.
    async fn delete_session(
        &self,
        id: &str,
        idle_before_ms: Option<i64>,
    ) -> Result<Option<u64>, StoreError>;
    /// Sessions whose turn was running when the service stopped: (session id, parent id).
    /// With replicas, only turns whose owner's lease expired (the owner is gone).
    async fn running(&self) -> Result<Vec<(String, String)>, StoreError>;
    /// Notifications from other replicas sharing the store; `None` when no other process
    /// writes to it (SQLite).
    fn remote(&self) -> Option<tokio::sync::broadcast::Receiver<Remote>> {
        None
    }
    /// Asks the replica running `session_id`'s turn to cancel it: the turn's parent id, or
    /// `None` when no turn runs there. Only stores shared by replicas have other replicas.
    async fn cancel_remote(
        &self,
        _session_id: &str,
        _reason: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(None)
    }
}

/// What another replica did that this one must react to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remote {
    /// An event was appended (subscribers read it from the store).
    Appended {
        /// Session id.
        session_id: String,
        /// Its seq.
        seq: u64,
    },
    /// Cancel this replica's turn.
    Cancel {
        /// Session id.
        session_id: String,
        /// The turn.
        parent_id: String,
        /// Why.
        reason: String,
    },
    /// A session was deleted: its subscribers' streams end.
    Deleted {
        /// Session id.
        session_id: String,
    },
    /// Notifications may have been lost (the listener reconnected): every subscriber reads
    /// the store again.
    Resync,
}

/// Position in the session listing: (created ms, session id) of the last session returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageCursor {
    /// Creation time of the last session of the previous page, in ms.
    pub created_ms: i64,
    /// Its id.
    pub session_id: String,
}

impl PageCursor {
    /// The opaque page token.
    pub fn token(&self) -> String {
        format!("{}.{}", self.created_ms, self.session_id)
    }

    /// Parses a page token.
    pub fn parse(token: &str) -> Option<Self> {
        let (ms, id) = token.split_once('.')?;
        Some(Self {
            created_ms: ms.parse().ok()?,
            session_id: id.to_owned(),
        })
    }
}
