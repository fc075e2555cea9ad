//! The PostgreSQL store's write transactions: an event, its seq check, its turn-lease check and
//! its effects commit together, with the `NOTIFY` announcing it (delivered at commit); and a
//! session's deletion, announced the same way. Appending an event already stored (the same
//! bytes at its seq: a try whose commit landed but whose answer was lost) changes nothing and
//! succeeds, so a caller may try again after a lost connection.
//!
//! The session row is locked (`FOR UPDATE`) first, so appends to one session from several
//! replicas are serialised. Lease rules:
//! - an event that starts a turn (`running: Some(Some(_))`) is refused with
//!   [`StoreError::Busy`] while any turn is marked running (a live one, or an expired one not
//!   yet ended by recovery); it takes the lease for this replica;
//! - every other event must belong to the running turn (its parent id) and this replica must
//!   own the lease — except ending a turn whose lease expired (recovery by any replica);
//!   otherwise [`StoreError::Superseded`];
//! - ending a turn (`running: Some(None)`) clears the lease.

use std::time::Duration;

use ploke_proto::session::v1::SessionEvent;
use prost::Message;
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{Connection, Row};

use super::postgres::{DELETED_CHANNEL, EVENTS_CHANNEL, SELECT_SESSION, corrupt, decode_session};
use super::{Effects, StoreError, StoredMessage};

/// History messages after the session's last, in `conn`'s transaction.
pub(super) async fn insert_messages(
    conn: &mut PgConnection,
    session_id: &str,
    messages: &[StoredMessage],
) -> Result<Result<(), StoreError>, sqlx::Error> {
    let next: i64 = sqlx::query(
        "SELECT COALESCE(MAX(idx), 0)::BIGINT AS n FROM messages WHERE session_id = $1",
    )
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
            "INSERT INTO messages (session_id, idx, seq, parent_id, message)
             VALUES ($1, $2, $3, $4, $5)",
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

/// The lease state of a locked session row.
struct Held {
    last_seq: i64,
    parent: Option<String>,
    owner: Option<String>,
    live: bool,
}

/// Whether `replica` may append `event` with `effects` to a session in state `held`.
fn check_lease(
    held: &Held,
    replica: &str,
    event: &SessionEvent,
    effects: &Effects,
) -> Result<(), StoreError> {
    let session_id = event.session_id.clone();
    let parent_id = event
        .correlation
        .as_ref()
        .map(|c| c.parent_id.clone())
        .unwrap_or_default();
    match &effects.running {
        Some(Some(_)) => match &held.parent {
            Some(running) => Err(StoreError::Busy {
                session_id,
                parent_id: running.clone(),
            }),
            None => Ok(()),
        },
        ending => {
            let ours = held.owner.as_deref() == Some(replica);
            let recovery = ending.is_some() && !held.live;
            if held.parent.as_deref() == Some(parent_id.as_str()) && (ours || recovery) {
                Ok(())
            } else {
                Err(StoreError::Superseded {
                    session_id,
                    parent_id,
                })
            }
        }
    }
}

/// The event, its checks, its effects and its notification in one transaction on a pooled
/// connection. The outer error is the database's; the inner one a refusal (not the next seq,
/// a lease held elsewhere, a corrupt record) after which nothing was committed.
pub(super) async fn append(
    pool: &PgPool,
    replica: &str,
    ttl: Duration,
    event: &SessionEvent,
    effects: &Effects,
) -> Result<Result<(), StoreError>, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    let mut tx = conn.begin().await?;
    let Some(row) = sqlx::query(
        "SELECT last_seq, running_parent, running_owner,
                COALESCE(lease_until > now(), FALSE) AS live
         FROM sessions WHERE id = $1 FOR UPDATE",
    )
    .bind(&event.session_id)
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(Err(not_next(event)));
    };
    let held = Held {
        last_seq: row.try_get("last_seq")?,
        parent: row.try_get("running_parent")?,
        owner: row.try_get("running_owner")?,
        live: row.try_get("live")?,
    };
    // The same event already there: an earlier try committed and its answer was lost (the
    // connection dropped at the commit). The event carries its time and ids, so no other
    // writer's is equal to it.
    if held.last_seq == event.seq as i64 {
        let stored: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT event FROM events WHERE session_id = $1 AND seq = $2")
                .bind(&event.session_id)
                .bind(event.seq as i64)
                .fetch_optional(&mut *tx)
                .await?;
        if stored.is_some_and(|bytes| bytes == event.encode_to_vec()) {
            return Ok(Ok(()));
        }
    }
    if let Err(e) = check_lease(&held, replica, event, effects) {
        return Ok(Err(e));
    }
    if held.last_seq != event.seq as i64 - 1 {
        return Ok(Err(not_next(event)));
    }
    sqlx::query("UPDATE sessions SET last_seq = $1 WHERE id = $2")
        .bind(event.seq as i64)
        .bind(&event.session_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("INSERT INTO events (session_id, seq, event) VALUES ($1, $2, $3)")
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
        sqlx::query(
            "INSERT INTO requests (session_id, client_request_id, response) VALUES ($1, $2, $3)
             ON CONFLICT DO NOTHING",
        )
        .bind(&event.session_id)
        .bind(id)
        .bind(response.encode_to_vec())
        .execute(&mut *tx)
        .await?;
    }
    // A turn starting or ending (interrupted ones too) is activity, for retention.
    let at = super::postgres::ms(event.at.as_ref());
    match &effects.running {
        Some(Some(parent)) => {
            sqlx::query(
                "UPDATE sessions SET running_parent = $1, running_owner = $2,
                     lease_until = now() + $3 * interval '1 millisecond', updated_ms = $4
                 WHERE id = $5",
            )
            .bind(parent)
            .bind(replica)
            .bind(ttl.as_millis() as f64)
            .bind(at)
            .bind(&event.session_id)
            .execute(&mut *tx)
            .await?;
        }
        Some(None) => {
            sqlx::query(
                "UPDATE sessions SET running_parent = NULL, running_owner = NULL,
                     lease_until = NULL, updated_ms = $1
                 WHERE id = $2",
            )
            .bind(at)
            .bind(&event.session_id)
            .execute(&mut *tx)
            .await?;
        }
        None => {}
    }
    if effects.change_session() {
        let row = sqlx::query(SELECT_SESSION)
            .bind(&event.session_id)
            .fetch_one(&mut *tx)
            .await?;
        let mut session = match decode_session(&row) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        // The state is derived from the lease when read, never stored.
        session.state = ploke_proto::session::v1::SessionState::Idle as i32;
        effects.apply_to(&mut session, event.at);
        sqlx::query("UPDATE sessions SET session = $1, updated_ms = $2 WHERE id = $3")
            .bind(session.encode_to_vec())
            .bind(super::postgres::ms(session.updated_at.as_ref()))
            .bind(&event.session_id)
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(EVENTS_CHANNEL)
        .bind(format!("{replica} {} {}", event.session_id, event.seq))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Ok(()))
}

fn not_next(event: &SessionEvent) -> StoreError {
    StoreError::NotNext {
        session_id: event.session_id.clone(),
        seq: event.seq,
    }
}

/// Deletes the session's rows (see [`super::SessionStore::delete_session`]) and announces it
/// to the other replicas with the commit.
pub(super) async fn delete(
    pool: &PgPool,
    replica: &str,
    id: &str,
    idle_before_ms: Option<i64>,
) -> Result<Result<Option<u64>, StoreError>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    // The row lock a turn's start takes too: a turn starts before or not at all.
    let deleted: Option<i64> = sqlx::query_scalar(
        "DELETE FROM sessions WHERE id = $1 AND running_parent IS NULL
         AND ($2::bigint IS NULL OR updated_ms < $2) RETURNING last_seq",
    )
    .bind(id)
    .bind(idle_before_ms)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(last_seq) = deleted else {
        let running: Option<Option<String>> =
            sqlx::query_scalar("SELECT running_parent FROM sessions WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        return Ok(super::not_deleted(id, running));
    };
    for sql in [
        "DELETE FROM events WHERE session_id = $1",
        "DELETE FROM messages WHERE session_id = $1",
        "DELETE FROM requests WHERE session_id = $1",
    ] {
        sqlx::query(sql).bind(id).execute(&mut *tx).await?;
    }
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(DELETED_CHANNEL)
        .bind(format!("{replica} {id}"))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Ok(Some(last_seq as u64)))
}
