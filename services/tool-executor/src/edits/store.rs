//! Durable proposals: one table holding each proposal as its protobuf encoding beside the
//! columns it is filtered by, and its plan — in SQLite under the data dir (the embedded
//! default) or in the shared PostgreSQL database (`[storage] url`, see `store_pg`), where
//! every tool-executor replica sees the same proposals. Every write is refused while storage
//! is broken and (SQLite) counts only if the file is still the one opened (see
//! `ploke_runtime::sqlite`).

use std::path::Path;

use ploke_proto::tools::v1::{EditProposal, FileDelivery, GetEditDeliveryResponse, ProposalState};
use ploke_runtime::postgres::{PgDatabase, PgOpenError};
use ploke_runtime::sqlite::{DbError, OpenError};
use ploke_runtime::storage_health::StorageFault;
use prost::Message;
use sqlx::{QueryBuilder, Row};

use super::plan::Plan;

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened.
    #[error("proposal store: {0}")]
    Open(#[from] OpenError),
    /// The shared database could not be opened.
    #[error("proposal store: {0}")]
    OpenShared(#[from] PgOpenError),
    /// Storage cannot take writes (disk full, read-only, data dir removed): UNAVAILABLE.
    #[error("proposal store: {0}")]
    Unavailable(#[from] StorageFault),
    /// The database failed.
    #[error("proposal store: {0}")]
    Db(#[from] sqlx::Error),
    /// A stored row could not be decoded.
    #[error("proposal store: corrupt row {id}: {reason}")]
    Corrupt {
        /// Proposal id.
        id: String,
        /// What was wrong.
        reason: String,
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
            Self::Unavailable(f) => format!("proposal store: {}", f.shown_to(internals)),
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

/// How often a call waiting for a decision reads the shared database.
pub(super) const SHARED_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// The proposal table.
#[derive(Debug, Clone)]
pub(super) struct Store {
    db: Database,
}

/// Where the proposal table lives: its health, its monitor, closing it.
#[derive(Debug, Clone)]
pub enum Database {
    /// SQLite under the data dir.
    Sqlite(ploke_runtime::sqlite::Database),
    /// The shared PostgreSQL database.
    Postgres(PgDatabase),
}

impl Database {
    /// Whether other replicas share it.
    pub fn shared(&self) -> bool {
        match self {
            Database::Sqlite(_) => false,
            Database::Postgres(_) => true,
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

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS proposals (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    state INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    proposal BLOB NOT NULL,
    plan TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS proposals_session ON proposals (session_id, created_ms);
CREATE INDEX IF NOT EXISTS proposals_state ON proposals (state);
";

/// Schema changes after [`SCHEMA`], in order (see `ploke_runtime::sqlite::open`); the same
/// steps as the PostgreSQL migrations after version 1.
const UPGRADES: &[&str] = &[
    // 1: proposals belong to the principal whose session staged them; the files an apply to a
    // session's overlay delivers to the developer's client.
    "ALTER TABLE proposals ADD COLUMN owner TEXT NOT NULL DEFAULT '';
     ALTER TABLE proposals ADD COLUMN deliveries BLOB;
     CREATE INDEX IF NOT EXISTS proposals_owner ON proposals (owner, created_ms);",
];

/// The files an apply to an overlay delivered, as stored (protobuf).
pub(super) fn encode_deliveries(files: &[FileDelivery]) -> Vec<u8> {
    GetEditDeliveryResponse {
        proposal: None,
        deliveries: files.to_vec(),
    }
    .encode_to_vec()
}

pub(super) fn created_ms(p: &EditProposal) -> i64 {
    p.created_at
        .as_ref()
        .map(|t| t.seconds * 1000 + i64::from(t.nanos / 1_000_000))
        .unwrap_or(0)
}

impl Store {
    /// Opens the shared database at `url` (migrating it) when given, else (creating) the
    /// database file at `path`.
    pub(super) async fn open(path: &Path, url: Option<&str>) -> Result<Self, StoreError> {
        let db = match url {
            Some(url) => Database::Postgres(
                ploke_runtime::postgres::connect(url, "tool-executor", super::store_pg::MIGRATIONS)
                    .await?,
            ),
            None => Database::Sqlite(ploke_runtime::sqlite::open(path, SCHEMA, UPGRADES).await?),
        };
        Ok(Self { db })
    }

    /// The database (its health, its monitor, closing it).
    pub(super) fn database(&self) -> &Database {
        &self.db
    }

    /// Stores a new proposal; false (and nothing changed) when its id exists already.
    pub(super) async fn insert(
        &self,
        proposal: &EditProposal,
        plan: &Plan,
    ) -> Result<bool, StoreError> {
        let plan_json = serde_json::to_string(plan).map_err(|e| StoreError::Corrupt {
            id: proposal.proposal_id.clone(),
            reason: e.to_string(),
        })?;
        let session = proposal
            .correlation
            .as_ref()
            .map(|c| c.session_id.clone())
            .unwrap_or_default();
        let db = match &self.db {
            Database::Sqlite(db) => db,
            Database::Postgres(pg) => {
                return super::store_pg::insert(pg, proposal, &session, plan_json).await;
            }
        };
        db.writable()?;
        let done = sqlx::query(
            "INSERT OR IGNORE INTO proposals (id, session_id, state, created_ms, proposal, plan, owner)
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&proposal.proposal_id)
        .bind(session)
        .bind(proposal.state)
        .bind(created_ms(proposal))
        .bind(proposal.encode_to_vec())
        .bind(plan_json)
        .bind(&proposal.owner)
        .execute(db.pool())
        .await;
        Ok(db.written(done)?.rows_affected() == 1)
    }

    /// The proposal and its plan.
    pub(super) async fn get(&self, id: &str) -> Result<Option<(EditProposal, Plan)>, StoreError> {
        let row = match &self.db {
            Database::Sqlite(db) => {
                let row = sqlx::query("SELECT proposal, plan FROM proposals WHERE id = ?")
                    .bind(id)
                    .fetch_optional(db.pool())
                    .await;
                db.read(row)?
                    .map(|r| Ok::<_, sqlx::Error>((r.try_get("proposal")?, r.try_get("plan")?)))
            }
            Database::Postgres(pg) => super::store_pg::get(pg, id).await?.map(Ok),
        };
        let Some(row) = row else {
            return Ok(None);
        };
        let (bytes, plan): (Vec<u8>, String) = row?;
        let corrupt = |reason: String| StoreError::Corrupt {
            id: id.to_owned(),
            reason,
        };
        let proposal =
            EditProposal::decode(bytes.as_slice()).map_err(|e| corrupt(e.to_string()))?;
        let plan = serde_json::from_str(&plan).map_err(|e| corrupt(e.to_string()))?;
        Ok(Some((proposal, plan)))
    }

    /// Writes `proposal` if the stored one is still in state `from`; false when it is not
    /// (another decision got there first).
    pub(super) async fn transition(
        &self,
        proposal: &EditProposal,
        from: ProposalState,
    ) -> Result<bool, StoreError> {
        self.transition_delivering(proposal, from, None).await
    }

    /// [`Store::transition`], recording with it the files an apply to an overlay delivers.
    pub(super) async fn transition_delivering(
        &self,
        proposal: &EditProposal,
        from: ProposalState,
        deliveries: Option<&[FileDelivery]>,
    ) -> Result<bool, StoreError> {
        let deliveries = deliveries.map(encode_deliveries);
        let db = match &self.db {
            Database::Sqlite(db) => db,
            Database::Postgres(pg) => {
                return super::store_pg::transition(pg, proposal, from, deliveries).await;
            }
        };
        db.writable()?;
        let done = sqlx::query(
            "UPDATE proposals SET state = ?, proposal = ?, deliveries = COALESCE(?, deliveries)
             WHERE id = ? AND state = ?",
        )
        .bind(proposal.state)
        .bind(proposal.encode_to_vec())
        .bind(deliveries)
        .bind(&proposal.proposal_id)
        .bind(from as i32)
        .execute(db.pool())
        .await;
        Ok(db.written(done)?.rows_affected() == 1)
    }

    /// The files an apply to an overlay delivered (empty for any other proposal).
    pub(super) async fn deliveries(&self, id: &str) -> Result<Vec<FileDelivery>, StoreError> {
        let bytes: Option<Vec<u8>> = match &self.db {
            Database::Sqlite(db) => {
                let row = sqlx::query_scalar("SELECT deliveries FROM proposals WHERE id = ?")
                    .bind(id)
                    .fetch_optional(db.pool())
                    .await;
                db.read(row)?.flatten()
            }
            Database::Postgres(pg) => super::store_pg::deliveries(pg, id).await?,
        };
        let Some(bytes) = bytes else {
            return Ok(Vec::new());
        };
        GetEditDeliveryResponse::decode(bytes.as_slice())
            .map(|r| r.deliveries)
            .map_err(|e| StoreError::Corrupt {
                id: id.to_owned(),
                reason: e.to_string(),
            })
    }

    /// The proposal once it is in a final state, read every `period` (a decision made through
    /// another replica sharing the database). Read errors are retried.
    pub(super) async fn until_final(&self, id: &str, period: std::time::Duration) -> EditProposal {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if let Ok(Some((p, _))) = self.get(id).await
                && super::is_final(p.state())
            {
                return p;
            }
        }
    }

    /// Proposals newest first, of `session` (empty = all), of one of `owners` (`None` = every
    /// owner's) in `states` (empty = all).
    pub(super) async fn list(
        &self,
        session: &str,
        owner: Option<&[String]>,
        states: &[ProposalState],
        limit: u32,
    ) -> Result<Vec<EditProposal>, StoreError> {
        let rows: Vec<(String, Vec<u8>)> = match &self.db {
            Database::Sqlite(db) => {
                let mut q = QueryBuilder::new("SELECT id, proposal FROM proposals WHERE 1 = 1");
                filter(&mut q, session, owner, states, limit);
                let rows = q.build().fetch_all(db.pool()).await;
                db.read(rows)?
                    .iter()
                    .map(|r| Ok::<_, sqlx::Error>((r.try_get("id")?, r.try_get("proposal")?)))
                    .collect::<Result<_, _>>()?
            }
            Database::Postgres(pg) => {
                super::store_pg::list(pg, session, owner, states, limit).await?
            }
        };
        rows.into_iter()
            .map(|(id, bytes)| {
                EditProposal::decode(bytes.as_slice()).map_err(|e| StoreError::Corrupt {
                    id,
                    reason: e.to_string(),
                })
            })
            .collect()
    }
}

/// The `WHERE` and `ORDER BY` of a listing, for either database.
pub(super) fn filter<DB: sqlx::Database>(
    q: &mut QueryBuilder<DB>,
    session: &str,
    owner: Option<&[String]>,
    states: &[ProposalState],
    limit: u32,
) where
    for<'a> String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> i32: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    {
        if !session.is_empty() {
            q.push(" AND session_id = ").push_bind(session.to_owned());
        }
        if let Some(owners) = owner {
            q.push(" AND owner IN (");
            let mut each = q.separated(", ");
            for o in owners {
                each.push_bind(o.clone());
            }
            q.push(")");
        }
        if !states.is_empty() {
            q.push(" AND state IN (");
            let mut sep = q.separated(", ");
            for s in states {
                sep.push_bind(*s as i32);
            }
            q.push(")");
        }
        q.push(" ORDER BY created_ms DESC, id DESC LIMIT ")
            .push_bind(i64::from(limit));
    }
}
