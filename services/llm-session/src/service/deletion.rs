//! Deleting sessions: a caller's own (or an admin's anyone's) whole session — events, history,
//! request ids — in one store transaction, never while a turn runs, its subscribers' streams
//! ended; and, with `[session] retention_days`, the sessions idle longer than that.

use std::time::{Duration, SystemTime};

use super::SessionService;
use crate::error::SessionError;
use crate::store::StoreError;

/// Idle sessions read and deleted per round of [`SessionService::expire`].
const EXPIRE_BATCH: u32 = 200;

impl SessionService {
    /// Deletes the session: the number of events it held. A session another principal owns
    /// is answered as one that does not exist; one running a turn (here, on another replica,
    /// or whose end storage has not recorded yet) is refused with [`SessionError::Busy`].
    pub async fn delete(&self, session_id: &str) -> Result<u64, SessionError> {
        self.own_session(session_id).await?;
        // Its own task: a caller that goes away mid-way never leaves the rows deleted and the
        // session's followers untold.
        let this = self.clone();
        let id = session_id.to_owned();
        tokio::spawn(async move { this.remove(&id, None, "request").await })
            .await
            .map_err(|e| SessionError::Task(e.to_string()))??
            .ok_or_else(|| SessionError::NoSuchSession(session_id.to_owned()))
    }

    /// Deletes the sessions idle for longer than `[session] retention_days` at `now` (none
    /// when it is 0): how many. One running a turn, or active since it was found idle, stays;
    /// one another replica deleted first counts there.
    pub async fn expire(&self, now: SystemTime) -> Result<usize, SessionError> {
        let days = self.settings.retention_days;
        if days == 0 {
            return Ok(0);
        }
        let Some(cutoff) = now.checked_sub(Duration::from_secs(u64::from(days) * 86_400)) else {
            return Ok(0);
        };
        let cutoff_ms = cutoff
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut deleted = 0;
        loop {
            let idle = self.store.idle_sessions(cutoff_ms, EXPIRE_BATCH).await?;
            let mut progressed = false;
            for session_id in &idle {
                match self.remove(session_id, Some(cutoff_ms), "retention").await {
                    Ok(Some(_)) => {
                        deleted += 1;
                        progressed = true;
                    }
                    Ok(None) => progressed = true,
                    // A turn runs in it now: the session is active again.
                    Err(
                        SessionError::Busy { .. } | SessionError::Store(StoreError::Busy { .. }),
                    ) => {}
                    Err(e) => return Err(e),
                }
            }
            if idle.len() < EXPIRE_BATCH as usize || !progressed {
                break;
            }
        }
        if deleted > 0 {
            tracing::info!(deleted, retention_days = days, "idle sessions deleted");
        }
        Ok(deleted)
    }

    /// Deletes the session unless a turn runs in it (or, with `idle_before_ms`, it was active
    /// since): the number of events it held, `None` when it does not exist (or stays).
    /// `reason` labels the deletion in the metrics (`request`, `retention`).
    async fn remove(
        &self,
        session_id: &str,
        idle_before_ms: Option<i64>,
        reason: &'static str,
    ) -> Result<Option<u64>, SessionError> {
        // No turn of this replica starts or ends meanwhile.
        let _turns = self.turns.of(session_id).lock().await;
        let busy = |parent_id: String| SessionError::Busy {
            session_id: session_id.to_owned(),
            parent_id,
        };
        let running = self
            .running
            .lock()
            .ok()
            .and_then(|r| r.get(session_id).map(|t| t.parent_id.clone()));
        if let Some(parent_id) = running {
            return Err(busy(parent_id));
        }
        let pending = self.pending.lock().ok().and_then(|p| {
            p.get(session_id)
                .map(|end| end.correlation.parent_id.clone())
        });
        if let Some(parent_id) = pending {
            return Err(busy(parent_id));
        }
        let Some(events) = self
            .store
            .delete_session(session_id, idle_before_ms)
            .await?
        else {
            return Ok(None);
        };
        self.deps.log.close(session_id);
        ploke_runtime::metrics::record::session_deleted(reason);
        tracing::info!(session_id, events, reason, "session deleted");
        Ok(Some(events))
    }
}
