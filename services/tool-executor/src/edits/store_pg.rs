//! The proposal table in the shared PostgreSQL database: the SQLite table's columns and
//! statements in PostgreSQL's dialect, and its migrations (run at start, see
//! `ploke_runtime::postgres`). A decision is one conditional `UPDATE … WHERE state = from`,
//! so two replicas deciding one proposal at once cannot both win.

use ploke_proto::tools::v1::{EditProposal, ProposalState};
use ploke_runtime::postgres::{Migration, PgDatabase};
use prost::Message;
use sqlx::{QueryBuilder, Row};

use super::store::{StoreError, created_ms, filter};

/// The migrations of tool-executor's tables, in order.
pub(super) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "proposals",
        sql: "
CREATE TABLE proposals (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    state INTEGER NOT NULL,
    created_ms BIGINT NOT NULL,
    proposal BYTEA NOT NULL,
    plan TEXT NOT NULL
);
CREATE INDEX proposals_session ON proposals (session_id, created_ms);
CREATE INDEX proposals_state ON proposals (state);
",
    },
    Migration {
        version: 2,
        name: "proposal owners and overlay deliveries",
        sql: "
ALTER TABLE proposals ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE proposals ADD COLUMN deliveries BYTEA;
CREATE INDEX proposals_owner ON proposals (owner, created_ms);
",
    },
];

/// Stores a new proposal; false (and nothing changed) when its id exists already.
pub(super) async fn insert(
    db: &PgDatabase,
    proposal: &EditProposal,
    session: &str,
    plan_json: String,
) -> Result<bool, StoreError> {
    db.writable()?;
    let done = sqlx::query(
        "INSERT INTO proposals (id, session_id, state, created_ms, proposal, plan, owner)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
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

/// The encoded proposal and its plan's JSON.
pub(super) async fn get(
    db: &PgDatabase,
    id: &str,
) -> Result<Option<(Vec<u8>, String)>, StoreError> {
    let row = sqlx::query("SELECT proposal, plan FROM proposals WHERE id = $1")
        .bind(id)
        .fetch_optional(db.pool())
        .await;
    match db.read(row)? {
        None => Ok(None),
        Some(r) => Ok(Some((r.try_get("proposal")?, r.try_get("plan")?))),
    }
}

/// Writes `proposal` (and the encoded deliveries, if any) if the stored one is still in state
/// `from`.
pub(super) async fn transition(
    db: &PgDatabase,
    proposal: &EditProposal,
    from: ProposalState,
    deliveries: Option<Vec<u8>>,
) -> Result<bool, StoreError> {
    db.writable()?;
    let done = sqlx::query(
        "UPDATE proposals SET state = $1, proposal = $2, deliveries = COALESCE($3, deliveries)
         WHERE id = $4 AND state = $5",
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

/// The encoded deliveries of a proposal, if it has any.
pub(super) async fn deliveries(db: &PgDatabase, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
    let row = sqlx::query_scalar("SELECT deliveries FROM proposals WHERE id = $1")
        .bind(id)
        .fetch_optional(db.pool())
        .await;
    Ok(db.read(row)?.flatten())
}

/// (id, encoded proposal) newest first, of `session` (empty = all) in `states` (empty = all).
pub(super) async fn list(
    db: &PgDatabase,
    session: &str,
    owner: Option<&[String]>,
    states: &[ProposalState],
    limit: u32,
) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
    let mut q = QueryBuilder::new("SELECT id, proposal FROM proposals WHERE 1 = 1");
    filter(&mut q, session, owner, states, limit);
    let rows = q.build().fetch_all(db.pool()).await;
    db.read(rows)?
        .iter()
        .map(|r| Ok((r.try_get("id")?, r.try_get("proposal")?)))
        .collect()
}
