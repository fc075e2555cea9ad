//! The per-session event log: every event is written to the store with the next seq before any
//! subscriber sees it; subscribers replay from the store and then follow live with no gap and
//! no duplicate. A subscriber that falls behind reads the store again; it never slows the turn
//! or other subscribers. Every event is bounded ([`crate::bounds`]) before it is written.
//!
//! With a store shared by replicas, events of a turn another replica runs arrive as
//! [`Remote`] notifications that only wake the session's subscribers: they read what is new
//! from the store by seq, so order and completeness never depend on the notifications. A
//! subscriber also reads the store every [`REMOTE_POLL`] in case notifications were lost.
//!
//! A deleted session's subscribers see their stream end with [`StoreError::Deleted`]: its
//! channel is closed ([`EventLog::close`], or another replica's notification), and a
//! subscriber that finds nothing new on a poll, or that starts just after the deletion, finds
//! the session gone in the store.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use ploke_proto::common::v1::Correlation;
use ploke_proto::session::v1::{AssistantDelta, SessionEvent, session_event};
use tokio::sync::{Mutex, broadcast, mpsc, watch};

use crate::bounds::{EventBounds, bound_event, split_text};
use crate::store::{Effects, Remote, SessionStore, StoreError};
use ploke_runtime::storage_health::StorageFault;

/// How often a following subscriber reads the store when other replicas write to it, in case
/// a notification was lost.
pub const REMOTE_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Live events buffered per session before a slow subscriber falls back to the store. The
/// buffer keeps the last events it carried until they are overwritten, so it is also what an
/// idle session's channel holds until [`EventLog`] lets it go.
const LIVE_BUFFER: usize = 256;
/// Channels kept before idle ones are let go (then twice as many as remain, at least this).
const SWEEP_AT: usize = 256;
/// Events read from the store per query while replaying.
const REPLAY_BATCH: u32 = 500;
/// Events buffered per subscriber stream.
const SUBSCRIBER_BUFFER: usize = 256;

/// What the log keeps of a session while it is in use: no more than a cache (the store has
/// every event), let go when idle ([`Channel::idle`]).
struct Channel {
    tx: broadcast::Sender<SessionEvent>,
    /// The last seq written; `None` = read it from the store (at first, and after a failed
    /// write, whose outcome is not known).
    last_seq: Mutex<Option<u64>>,
    /// Bumped when another replica appended to the session.
    wake: watch::Sender<u64>,
    /// Why the end of the session's last turn is not recorded yet (storage failed): its
    /// subscribers' streams end with it, as they would wait for an event that is held back.
    unrecorded: watch::Sender<Option<StorageFault>>,
}

impl Channel {
    /// Whether nothing needs this channel: nobody follows it, no append or subscription holds
    /// it (`held_by_map`: only the map's reference is left; every other is taken under the
    /// map's lock, which the caller holds), and no turn end is held back. Its last seq is then
    /// read from the store again when the session is used next.
    fn idle(self: &Arc<Self>) -> bool {
        Arc::strong_count(self) == 1
            && self.tx.receiver_count() == 0
            && self.wake.receiver_count() == 0
            && self.unrecorded.borrow().is_none()
    }
}

/// Appends and streams session events.
#[derive(Clone)]
pub struct EventLog {
    store: Arc<dyn SessionStore>,
    channels: Arc<std::sync::Mutex<HashMap<String, Arc<Channel>>>>,
    /// How many channels may be kept before idle ones are let go.
    sweep_at: Arc<std::sync::atomic::AtomicUsize>,
    bounds: EventBounds,
    /// Whether other replicas write to the store.
    shared: bool,
    _dispatch: Option<Arc<AbortOnDrop>>,
}

/// Aborts the task when dropped.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog").finish_non_exhaustive()
    }
}

impl EventLog {
    /// A log over `store` whose events stay within `bounds`.
    pub fn new(store: Arc<dyn SessionStore>, bounds: EventBounds) -> Self {
        let channels: Arc<std::sync::Mutex<HashMap<String, Arc<Channel>>>> = Arc::default();
        let remote = store.remote();
        let shared = remote.is_some();
        let dispatch =
            remote.map(|rx| Arc::new(AbortOnDrop(tokio::spawn(dispatch(rx, channels.clone())))));
        Self {
            store,
            channels,
            sweep_at: Arc::new(std::sync::atomic::AtomicUsize::new(SWEEP_AT)),
            bounds,
            shared,
            _dispatch: dispatch,
        }
    }

    /// Forgets the cached last seq of `session_id`: another replica may have appended since
    /// (the next append reads it from the store).
    /// Nothing to do when no other process writes to the store.
    pub async fn forget(&self, session_id: &str) {
        if !self.shared {
            return;
        }
        *self.channel(session_id).last_seq.lock().await = None;
    }

    /// Ends the streams of the session's subscribers: the session was deleted.
    pub fn close(&self, session_id: &str) {
        self.lock().remove(session_id);
    }

    /// The end of the session's running turn could not be written (`why`): it is held until
    /// storage recovers, and the subscribers waiting for it are told so — their streams end
    /// UNAVAILABLE after what is stored, as do new ones until [`EventLog::recorded`].
    pub fn unrecorded(&self, session_id: &str, why: &StoreError) {
        let fault = StorageFault {
            reason: format!(
                "the turn ended, but its end could not be recorded ({why}); it is recorded when storage recovers"
            ),
        };
        self.channel(session_id)
            .unrecorded
            .send_replace(Some(fault));
    }

    /// The held end of the session's turn was recorded (or dropped): subscribers follow again.
    pub fn recorded(&self, session_id: &str) {
        if let Some(c) = self.lock().get(session_id) {
            c.unrecorded.send_replace(None);
        }
    }

    /// The bounds events are kept within.
    pub fn bounds(&self) -> EventBounds {
        self.bounds
    }

    fn channel(&self, session_id: &str) -> Arc<Channel> {
        use std::sync::atomic::Ordering;
        let mut channels = self.lock();
        if let Some(c) = channels.get(session_id) {
            return c.clone();
        }
        // Every session ever used would otherwise keep a channel (and the last events its
        // buffer carried) until it is deleted.
        if channels.len() >= self.sweep_at.load(Ordering::Relaxed) {
            channels.retain(|_, c| !c.idle());
            self.sweep_at
                .store((channels.len() * 2).max(SWEEP_AT), Ordering::Relaxed);
        }
        channels
            .entry(session_id.to_owned())
            .or_insert_with(|| {
                Arc::new(Channel {
                    tx: broadcast::channel(LIVE_BUFFER).0,
                    last_seq: Mutex::new(None),
                    wake: watch::channel(0).0,
                    unrecorded: watch::channel(None).0,
                })
            })
            .clone()
    }

    /// Sessions whose channel is kept now.
    #[cfg(test)]
    pub(crate) fn channels_kept(&self) -> usize {
        self.lock().len()
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
        let mut wake = channel.wake.subscribe();
        let mut unrecorded = channel.unrecorded.subscribe();
        let shared = self.shared;
        let (out, rx) = mpsc::channel(SUBSCRIBER_BUFFER);
        let store = self.store.clone();
        let channels = self.channels.clone();
        let id = session_id.to_owned();
        tokio::spawn(async move {
            let _subscriber = ploke_runtime::metrics::record::Subscriber::open("llm-session");
            // Deleted just before this subscription took its channel: nothing would close it.
            if !exists(&*store, &id, &out).await {
                channels
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
                return;
            }
            let mut last = after_seq;
            if !replay(&*store, &id, &mut last, &out).await || !follow {
                return;
            }
            // Following would wait for a turn end that storage cannot take now.
            let held = unrecorded.borrow_and_update().clone();
            if let Some(fault) = held {
                let _ = out.send(Err(StoreError::Unavailable(fault))).await;
                return;
            }
            let mut poll = tokio::time::interval(REMOTE_POLL);
            poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let next = tokio::select! {
                    e = live.recv() => e,
                    () = out.closed() => return,
                    held = unrecorded.changed() => {
                        // Its channel was dropped: the session was deleted.
                        if held.is_err() {
                            let _ = out.send(Err(StoreError::Deleted(id.clone()))).await;
                            return;
                        }
                        let fault = unrecorded.borrow_and_update().clone();
                        if let Some(fault) = fault {
                            let _ = out.send(Err(StoreError::Unavailable(fault))).await;
                            return;
                        }
                        continue;
                    }
                    // Another replica appended (or may have): the store has it.
                    woken = wake.changed() => {
                        if woken.is_err() {
                            let _ = out.send(Err(StoreError::Deleted(id.clone()))).await;
                            return;
                        }
                        if !replay(&*store, &id, &mut last, &out).await {
                            return;
                        }
                        continue;
                    }
                    _ = poll.tick(), if shared => {
                        let before = last;
                        if !replay(&*store, &id, &mut last, &out).await {
                            return;
                        }
                        // Nothing new: the session may be gone, its notification lost.
                        if last == before && !exists(&*store, &id, &out).await {
                            return;
                        }
                        continue;
                    }
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
                    // The log closed the session's channel: it was deleted.
                    Err(broadcast::error::RecvError::Closed) => {
                        let _ = out.send(Err(StoreError::Deleted(id.clone()))).await;
                        return;
                    }
                }
            }
        });
        Ok(rx)
    }
}

/// Wakes the subscribers of sessions other replicas appended to (all of them after a
/// [`Remote::Resync`] or when notifications were dropped).
async fn dispatch(
    mut rx: broadcast::Receiver<Remote>,
    channels: Arc<std::sync::Mutex<HashMap<String, Arc<Channel>>>>,
) {
    let wake_all = || {
        let channels = channels.lock().unwrap_or_else(|e| e.into_inner());
        for c in channels.values() {
            c.wake.send_modify(|n| *n += 1);
        }
    };
    loop {
        match rx.recv().await {
            Ok(Remote::Appended { session_id, .. }) => {
                let channel = channels
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&session_id)
                    .cloned();
                if let Some(c) = channel {
                    c.wake.send_modify(|n| *n += 1);
                }
            }
            Ok(Remote::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => wake_all(),
            Ok(Remote::Deleted { session_id }) => {
                channels
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&session_id);
            }
            Ok(Remote::Cancel { .. }) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Whether the session still exists; when not (or the store failed) the subscriber is told why
/// its stream ends.
async fn exists(
    store: &dyn SessionStore,
    session_id: &str,
    out: &mpsc::Sender<Result<SessionEvent, StoreError>>,
) -> bool {
    let why = match store.get_session(session_id).await {
        Ok(Some(_)) => return true,
        Ok(None) => StoreError::Deleted(session_id.to_owned()),
        Err(e) => e,
    };
    let _ = out.send(Err(why)).await;
    false
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteStore;
    use ploke_proto::session::v1::{Notice, Session};

    #[tokio::test]
    async fn idle_sessions_do_not_keep_their_channels() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(
            SqliteStore::open(&dir.path().join("s.sqlite"))
                .await
                .unwrap(),
        );
        let log = EventLog::new(store.clone(), EventBounds::default());
        let notice = || {
            session_event::Event::Notice(Notice {
                text: "n".into(),
                ..Default::default()
            })
        };
        // One session followed throughout; 1,000 others used once each.
        let followed = "followed".to_owned();
        store
            .create_session(&Session {
                session_id: followed.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut live = log.subscribe(&followed, 0, true).await.unwrap();
        for i in 0..1000 {
            let id = format!("s{i}");
            store
                .create_session(&Session {
                    session_id: id.clone(),
                    ..Default::default()
                })
                .await
                .unwrap();
            log.append(&id, &Correlation::default(), notice())
                .await
                .unwrap();
        }
        assert!(
            log.channels_kept() <= SWEEP_AT + 1,
            "{}",
            log.channels_kept()
        );
        // The followed session kept its channel: its subscriber sees what comes next.
        let e = log
            .append(&followed, &Correlation::default(), notice())
            .await
            .unwrap();
        assert_eq!(live.recv().await.unwrap().unwrap(), e);
        // A session let go numbers its next event after what the store has.
        let again = log
            .append("s0", &Correlation::default(), notice())
            .await
            .unwrap();
        assert_eq!(again.seq, 2);
    }
}
