//! Turns nobody runs any more and turns another replica asked to cancel: ending the turns a
//! previous run (or, with replicas, a replica whose lease expired) left running with
//! `turn_failed{interrupted}`, and cancelling this replica's turns on request.

use ploke_proto::common::v1::Correlation;
use ploke_proto::session::v1::{TurnFailed, TurnFailureReason, session_event::Event};

use super::SessionService;
use crate::error::SessionError;
use crate::store::{Effects, Remote, StoreError};
use crate::turn;

impl SessionService {
    /// Ends the turns a previous run left running with `turn_failed{interrupted}`.
    pub async fn recover(&self) -> Result<(), SessionError> {
        for (session_id, parent_id) in self.store.running().await? {
            // After the turn's own start or end (which hold this lock) is written.
            let _turns = self.turns.of(&session_id).lock().await;
            if self.runs_here(&session_id, &parent_id) {
                // Its lease lapsed while the database was away, but this process still runs
                // it (or holds its end until storage takes it): renewing takes the lease back.
                tracing::info!(
                    session_id,
                    parent_id,
                    "an expired lease is this replica's running turn: left to run"
                );
                continue;
            }
            match self.interrupt(&session_id, &parent_id).await {
                Ok(()) => {}
                // Another replica ended it first.
                Err(
                    e @ (StoreError::NotNext { .. }
                    | StoreError::Superseded { .. }
                    | StoreError::Busy { .. }),
                ) => {
                    tracing::info!(session_id, parent_id, reason = %e, "interrupted turn already ended elsewhere");
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Whether this process runs `session_id`'s turn `parent_id`, or holds its end for storage.
    fn runs_here(&self, session_id: &str, parent_id: &str) -> bool {
        let running = self
            .running
            .lock()
            .is_ok_and(|r| r.get(session_id).is_some_and(|t| t.parent_id == parent_id));
        running
            || self.pending.lock().is_ok_and(|p| {
                p.get(session_id)
                    .is_some_and(|end| end.correlation.parent_id == parent_id)
            })
    }

    /// Ends a turn nobody runs any more with `turn_failed{interrupted}`.
    async fn interrupt(&self, session_id: &str, parent_id: &str) -> Result<(), StoreError> {
        self.deps.log.forget(session_id).await;
        let correlation = Correlation {
            session_id: session_id.to_owned(),
            parent_id: parent_id.to_owned(),
            ..Correlation::default()
        };
        turn::history::answer_open_calls(
            &*self.store,
            session_id,
            parent_id,
            "interrupted: the service restarted before the tool finished",
        )
        .await?;
        let interrupted = TurnFailed {
            reason: TurnFailureReason::Interrupted as i32,
            message: "llm-session restarted while the turn ran".into(),
        };
        self.deps
            .log
            .append_with(
                session_id,
                &correlation,
                Event::TurnFailed(interrupted.clone()),
                |_| Effects {
                    running: Some(None),
                    ended: Some(Some(interrupted)),
                    ..Effects::default()
                },
            )
            .await?;
        tracing::warn!(session_id, parent_id, "turn interrupted by a restart");
        Ok(())
    }

    /// Cancels this replica's turns other replicas were asked to cancel, until the store's
    /// notifications end.
    pub async fn follow_remote_cancels(&self) {
        let Some(mut rx) = self.store.remote() else {
            return;
        };
        loop {
            match rx.recv().await {
                Ok(Remote::Cancel {
                    session_id,
                    parent_id,
                    reason,
                }) => {
                    let here = self.running.lock().ok().is_some_and(|r| {
                        r.get(&session_id).is_some_and(|t| t.parent_id == parent_id)
                    });
                    if here && let Err(e) = self.cancel(&session_id, &reason).await {
                        tracing::warn!(session_id, parent_id, error = %e, "cancelling a turn for another replica failed");
                    }
                }
                Ok(Remote::Appended { .. } | Remote::Deleted { .. } | Remote::Resync)
                | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}
