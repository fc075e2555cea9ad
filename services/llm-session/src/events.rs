//! The per-session event log: every event is written to the store with the next seq before any
//! subscriber sees it; subscribers replay from the store and then follow live with no gap and
//! no duplicate. A subscriber that falls behind reads the store again; it never slows the turn
//! or other subscribers. Every event is bounded ([`crate::bounds`]) before it is written.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use ploke_proto::common::v1::Correlation;
use ploke_proto::session::v1::{AssistantDelta, SessionEvent, session_event};
use tokio::sync::{Mutex, broadcast, mpsc};

use crate::bounds::{EventBounds, bound_event, split_text};
use crate::store::{Effects, SessionStore, StoreError};

/// Live events buffered per session before a slow subscriber falls back to the store.
const LIVE_BUFFER: usize = 1024;
/// Events read from the store per query while replaying.
const REPLAY_BATCH: u32 = 500;
/// Events buffered per subscriber stream.
const SUBSCRIBER_BUFFER: usize = 256;

struct Channel {
    tx: broadcast::Sender<SessionEvent>,
    /// The last seq written; `None` = read it from the store (at first, and after a failed
    /// write, whose outcome is not known).
    last_seq: Mutex<Option<u64>>,
}

/// Appends and streams session events.
#[derive(Clone)]
pub struct EventLog {
    store: Arc<dyn SessionStore>,
    channels: Arc<std::sync::Mutex<HashMap<String, Arc<Channel>>>>,
    bounds: EventBounds,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog").finish_non_exhaustive()
    }
}

impl EventLog {
    /// A log over `store` whose events stay within `bounds`.
    pub fn new(store: Arc<dyn SessionStore>, bounds: EventBounds) -> Self {
        Self {
            store,
            channels: Arc::default(),
            bounds,
        }
    }

    /// The bounds events are kept within.
    pub fn bounds(&self) -> EventBounds {
        self.bounds
    }

    fn channel(&self, session_id: &str) -> Arc<Channel> {
        self.lock()
            .entry(session_id.to_owned())
            .or_insert_with(|| {
                Arc::new(Channel {
                    tx: broadcast::channel(LIVE_BUFFER).0,
                    last_seq: Mutex::new(None),
                })
            })
            .clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Channel>>> {
        self.channels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `event` as the session's next event, then publishes it.
    pub async fn append(
        &self,
        session_id: &str,
        correlation: &Correlation,
        event: session_event::Event,
    ) -> Result<SessionEvent, StoreError> {
        self.append_with(session_id, correlation, event, |_| Effects::default())
            .await
    }

    /// Streamed assistant text as deltas of at most the delta bound each.
    pub async fn append_text(
        &self,
        session_id: &str,
        correlation: &Correlation,
        text: &str,
    ) -> Result<(), StoreError> {
        for piece in split_text(text, self.bounds.delta) {
            let delta = session_event::Event::AssistantDelta(AssistantDelta {
                text: piece.to_owned(),
            });
            self.append(session_id, correlation, delta).await?;
        }
        Ok(())
    }

    /// Writes `event` as the session's next event together with `effects(seq)` in one
    /// transaction, then publishes it. Nobody sees an event before it is durable.
    pub async fn append_with(
        &self,
        session_id: &str,
        correlation: &Correlation,
        event: session_event::Event,
        effects: impl FnOnce(u64) -> Effects,
    ) -> Result<SessionEvent, StoreError> {
        let channel = self.channel(session_id);
        let mut last = channel.last_seq.lock().await;
        let last_seq = match *last {
            Some(n) => n,
            None => self
                .store
                .get_session(session_id)
                .await?
                .map_or(0, |s| s.last_seq),
        };
        let event = SessionEvent {
            seq: last_seq + 1,
            session_id: session_id.to_owned(),
            correlation: Some(correlation.clone()),
            at: Some(prost_types::Timestamp::from(SystemTime::now())),
            event: Some(event),
        };
        let (event, cut) = bound_event(event, self.bounds.event);
        if cut {
            tracing::warn!(
                session_id,
                seq = event.seq,
                call_id = %correlation.call_id,
                bound = self.bounds.event,
                "event cut to its size bound"
            );
        }
        if let Err(e) = self.store.append_event(&event, &effects(event.seq)).await {
            // A failed commit may still have landed (a file moved away and back): the next
            // append reads the last seq from the store instead of trusting this one.
            *last = None;
            return Err(e);
        }
        *last = Some(event.seq);
        // No live subscriber is not an error: they replay from the store.
        let _ = channel.tx.send(event.clone());
        Ok(event)
    }

    /// Events after `after_seq`, then (when `follow`) live ones. The receiver ends when the
    /// replay is done (no follow) or the store fails; dropping it ends the subscription.
    pub async fn subscribe(
        &self,
        session_id: &str,
        after_seq: u64,
        follow: bool,
    ) -> Result<mpsc::Receiver<Result<SessionEvent, StoreError>>, StoreError> {
        let channel = self.channel(session_id);
        // Subscribe before reading the store so that nothing falls between the two.
        let mut live = channel.tx.subscribe();
        let (out, rx) = mpsc::channel(SUBSCRIBER_BUFFER);
        let store = self.store.clone();
        let id = session_id.to_owned();
        tokio::spawn(async move {
            let _subscriber = ploke_runtime::metrics::record::Subscriber::open("llm-session");
            let mut last = after_seq;
            if !replay(&*store, &id, &mut last, &out).await || !follow {
                return;
            }
            loop {
                let next = tokio::select! {
                    e = live.recv() => e,
                    () = out.closed() => return,
                };
                match next {
                    Ok(e) if e.seq <= last => {}
                    Ok(e) if e.seq == last + 1 => {
                        last = e.seq;
                        if out.send(Ok(e)).await.is_err() {
                            return;
                        }
                    }
                    // A gap (or we lagged): the store has everything.
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        if !replay(&*store, &id, &mut last, &out).await {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(rx)
    }
}

/// Sends stored events after `*last`; false when the subscriber is gone or the store failed.
async fn replay(
    store: &dyn SessionStore,
    session_id: &str,
    last: &mut u64,
    out: &mpsc::Sender<Result<SessionEvent, StoreError>>,
) -> bool {
    loop {
        let batch = match store.events_after(session_id, *last, REPLAY_BATCH).await {
            Ok(b) => b,
            Err(e) => {
                // The subscriber learns why its stream ends (unless it is gone already).
                let _ = out.send(Err(e)).await;
                return false;
            }
        };
        let n = batch.len();
        for e in batch {
            *last = e.seq;
            if out.send(Ok(e)).await.is_err() {
                return false;
            }
        }
        if n < REPLAY_BATCH as usize {
            return true;
        }
    }
}
