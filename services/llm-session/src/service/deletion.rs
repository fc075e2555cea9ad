//! Deleting a session: its owner's (or an admin's) whole session — events, history, request
//! ids — in one store transaction, never while a turn runs; its subscribers' streams end.

use super::SessionService;
use crate::error::SessionError;

impl SessionService {
    /// Deletes the session: the number of events it held. A session another principal owns
    /// is answered as one that does not exist; one running a turn (here, on another replica,
    /// or whose end storage has not recorded yet) is refused with [`SessionError::Busy`].
    pub async fn delete(&self, session_id: &str) -> Result<u64, SessionError> {
        self.own_session(session_id).await?;
        // No turn of this replica starts or ends meanwhile.
        let _turns = self.turns.lock().await;
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
        let events = self
            .store
            .delete_session(session_id)
            .await?
            .ok_or_else(|| SessionError::NoSuchSession(session_id.to_owned()))?;
        self.deps.log.close(session_id);
        tracing::info!(session_id, events, "session deleted");
        Ok(events)
    }
}
