//! llm-session's domain: sessions, sending a message (idempotent, one turn at a time),
//! following a session's events and cancelling its turn. Nothing here knows gRPC.
//!
//! A turn starts with one atomic write (the user message event, its history message, the
//! request id, the title, the running mark) and ends with one (the final event, the usage, the
//! running mark cleared). When storage is broken at the end of a turn, the final event is held
//! in memory and written — before anything else of that session — when storage recovers or at
//! the session's next SendMessage; until then nobody is told the turn ended.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ploke_proto::common::v1::{Correlation, TokenUsage};
use ploke_proto::session::v1::{
    SendMessageResponse, Session, SessionEvent, SessionState, UserMessage, session_event::Event,
};
use ploke_runtime::config::{ProviderConfig, SessionConfig};
use ploke_runtime::principal::{self, Principal};
use ploke_runtime::workspaces::Workspaces;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::bounds::EventBounds;
use crate::error::SessionError;
use crate::provider::Provider;
use crate::provider::wire::ChatMessage;
use crate::store::{Effects, SessionStore, StoreError};
use crate::turn::{self, TurnDeps, TurnEnd, TurnSpec};

mod deletion;
mod models;
mod reading;
mod recovery;

struct Running {
    parent_id: String,
    cancel: CancellationToken,
    reason: Arc<std::sync::Mutex<String>>,
    interrupted: Arc<std::sync::atomic::AtomicBool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// The end of a turn that storage could not record yet.
#[derive(Debug, Clone)]
struct PendingEnd {
    correlation: Correlation,
    event: Event,
    usage: TokenUsage,
}

/// What CreateSession asks for.
#[derive(Debug, Clone, Default)]
pub struct NewSession {
    /// Workspace root (empty = default).
    pub workspace_root: String,
    /// Provider name (empty = default).
    pub provider: String,
    /// Model (empty = the provider's default).
    pub model: String,
    /// Title.
    pub title: String,
}

/// The locks that serialise the starts and ends of one session's turns: a session's is one of
/// [`TURN_LOCKS`], by a hash of its id. One lock for the whole replica, held across the store's
/// round trips, made a session whose row another replica held locked stall every
/// `SendMessage` of this replica.
#[derive(Debug)]
struct TurnLocks(Vec<tokio::sync::Mutex<()>>);

/// How many locks [`TurnLocks`] spreads sessions over.
const TURN_LOCKS: usize = 64;

impl Default for TurnLocks {
    fn default() -> Self {
        Self(
            (0..TURN_LOCKS)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
        )
    }
}

impl TurnLocks {
    /// The lock of `session_id`'s turns.
    fn of(&self, session_id: &str) -> &tokio::sync::Mutex<()> {
        use std::hash::{Hash as _, Hasher as _};
        let mut h = std::hash::DefaultHasher::new();
        session_id.hash(&mut h);
        &self.0[(h.finish() % TURN_LOCKS as u64) as usize]
    }
}

/// The llm-session domain service.
#[derive(Clone)]
pub struct SessionService {
    workspaces: Workspaces,
    providers: BTreeMap<String, ProviderConfig>,
    settings: SessionConfig,
    store: Arc<dyn SessionStore>,
    deps: TurnDeps,
    running: Arc<std::sync::Mutex<HashMap<String, Running>>>,
    /// Turn ends waiting for storage, by session.
    pending: Arc<std::sync::Mutex<HashMap<String, PendingEnd>>>,
    /// Serialises each session's turn starts and ends so that "running" and the event log
    /// agree.
    turns: Arc<TurnLocks>,
}

impl std::fmt::Debug for SessionService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionService").finish_non_exhaustive()
    }
}

fn now() -> prost_types::Timestamp {
    prost_types::Timestamp::from(SystemTime::now())
}

fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

impl SessionService {
    /// A service over `store`; turns call tool-executor through `deps.tools`.
    pub fn new(
        workspaces: Workspaces,
        providers: BTreeMap<String, ProviderConfig>,
        settings: SessionConfig,
        store: Arc<dyn SessionStore>,
        deps: TurnDeps,
    ) -> Self {
        Self {
            workspaces,
            providers,
            settings,
            store,
            deps,
            running: Arc::default(),
            pending: Arc::default(),
            turns: Arc::default(),
        }
    }

    /// The bounds events are kept within.
    pub fn bounds(&self) -> EventBounds {
        self.deps.log.bounds()
    }

    fn provider_name(&self, asked: &str) -> Result<String, SessionError> {
        let name = if asked.is_empty() {
            match &self.settings.default_provider {
                Some(n) => n.clone(),
                None if self.providers.len() == 1 => {
                    self.providers.keys().next().cloned().unwrap_or_default()
                }
                None => return Err(SessionError::NoProvider),
            }
        } else {
            asked.to_owned()
        };
        if !self.providers.contains_key(&name) {
            let configured: Vec<&str> = self.providers.keys().map(String::as_str).collect();
            return Err(SessionError::UnknownProvider {
                name,
                configured: if configured.is_empty() {
                    "none".to_owned()
                } else {
                    configured.join(", ")
                },
            });
        }
        Ok(name)
    }

    fn provider(&self, name: &str) -> Result<Provider, SessionError> {
        let config =
            self.providers
                .get(name)
                .cloned()
                .ok_or_else(|| SessionError::UnknownProvider {
                    name: name.to_owned(),
                    configured: String::new(),
                })?;
        let unusable = |e: crate::provider::ProviderError| SessionError::ProviderUnusable {
            name: name.to_owned(),
            reason: e.to_string(),
        };
        let p = Provider::new(
            name,
            config,
            Duration::from_secs(self.settings.provider_idle_timeout_secs),
        )
        .map_err(unusable)?;
        p.check_key().map_err(unusable)?;
        Ok(p)
    }

    /// Starts a session.
    pub async fn create(&self, new: NewSession) -> Result<Session, SessionError> {
        let root = self.workspaces.resolve_current(&new.workspace_root).await?;
        let provider = self.provider_name(&new.provider)?;
        let model = if new.model.is_empty() {
            self.providers
                .get(&provider)
                .and_then(|p| p.default_model.clone())
                .ok_or_else(|| SessionError::NoModel(provider.clone()))?
        } else {
            new.model
        };
        let at = now();
        let session = Session {
            owner: principal::owner_name(),
            session_id: new_id(),
            workspace_root: root.display().to_string(),
            provider,
            model,
            title: new.title,
            state: SessionState::Idle as i32,
            last_seq: 0,
            usage: Some(TokenUsage::default()),
            created_at: Some(at),
            updated_at: Some(at),
            last_failure: None,
        };
        self.store.create_session(&session).await?;
        tracing::info!(session_id = %session.session_id, owner = %session.owner, provider = %session.provider, model = %session.model, "session created");
        Ok(session)
    }

    /// The first answer to `client_request_id` in the session, marked as a duplicate; `None`
    /// for a request not seen (or no id).
    async fn answered(
        &self,
        session_id: &str,
        client_request_id: &str,
    ) -> Result<Option<SendMessageResponse>, SessionError> {
        if client_request_id.is_empty() {
            return Ok(None);
        }
        let first = self
            .store
            .find_request(session_id, client_request_id)
            .await?;
        Ok(first.map(|mut first| {
            first.duplicate = true;
            first
        }))
    }

    /// Records the user's message and starts a turn; the same `client_request_id` again
    /// returns the first answer and starts nothing.
    pub async fn send(
        &self,
        session_id: &str,
        content: &str,
        client_request_id: &str,
    ) -> Result<SendMessageResponse, SessionError> {
        let session = self.own_session(session_id).await?;
        let _turns = self.turns.of(session_id).lock().await;
        if let Some(first) = self.answered(session_id, client_request_id).await? {
            return Ok(first);
        }
        if let Some(parent_id) = self
            .running
            .lock()
            .ok()
            .and_then(|r| r.get(session_id).map(|t| t.parent_id.clone()))
        {
            return Err(SessionError::Busy {
                session_id: session_id.to_owned(),
                parent_id,
            });
        }
        // A turn end that storage could not take yet comes first.
        self.flush_pending_of(session_id).await?;
        let provider = self.provider(&session.provider)?;
        let parent_id = new_id();
        let request_id = new_id();
        let correlation = Correlation {
            session_id: session_id.to_owned(),
            request_id: String::new(),
            parent_id: parent_id.clone(),
            call_id: String::new(),
        };
        let answer = |seq| SendMessageResponse {
            request_id: request_id.clone(),
            parent_id: parent_id.clone(),
            seq,
            duplicate: false,
        };
        let title = session.title.is_empty().then(|| {
            content
                .chars()
                .take(60)
                .collect::<String>()
                .lines()
                .next()
                .unwrap_or("")
                .to_owned()
        });
        // The message, its history entry, the request id, the title and the running mark
        // commit together: a failed write leaves nothing to retry around.
        let message = Event::UserMessage(UserMessage {
            content: content.to_owned(),
            client_request_id: client_request_id.to_owned(),
        });
        let appended = self
            .append_turn_start(session_id, &correlation, message, |seq| Effects {
                messages: vec![ChatMessage::text("user", content)],
                request: (!client_request_id.is_empty())
                    .then(|| (client_request_id.to_owned(), answer(seq))),
                title: title.clone(),
                running: Some(Some(parent_id.clone())),
                usage: None,
                ended: None,
            })
            .await;
        let event = match appended {
            Ok(event) => event,
            // The same request sent to another replica at the same time started the turn
            // there (its message and request id commit together): this is its retry.
            Err(busy @ SessionError::Busy { .. }) => {
                return self
                    .answered(session_id, client_request_id)
                    .await?
                    .ok_or(busy);
            }
            Err(e) => return Err(e),
        };
        let response = answer(event.seq);
        let cancel = CancellationToken::new();
        let reason = Arc::new(std::sync::Mutex::new(String::new()));
        let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spec = TurnSpec {
            session_id: session_id.to_owned(),
            workspace_root: session.workspace_root.clone(),
            provider,
            model: session.model.clone(),
            parent_id,
            first_request_id: request_id,
            user_message: content.to_owned(),
            cancel: cancel.clone(),
            cancel_reason: reason.clone(),
            interrupted: interrupted.clone(),
        };
        let service = self.clone();
        let span = tracing::info_span!("turn", ploke.session_id = %session_id, ploke.parent_id = %spec.parent_id, enduser.id = %session.owner);
        // The entry exists before the task can remove it.
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        // The turn acts for the session's owner (whoever sent the message, e.g. an admin):
        // the proposals it stages and the overlay it reads are the owner's. A read-only sender
        // (the owner: only admins act on others' sessions) gets a read-only turn: its model is
        // offered read-only tools, and tool-executor refuses it the others.
        let acting = (!session.owner.is_empty()).then(|| Principal {
            name: session.owner.clone(),
            role: principal::Role::User,
            workspaces: vec![session.workspace_root.clone()],
            read_only: principal::current().is_some_and(|p| p.read_only),
        });
        let task = tokio::spawn(tracing::Instrument::instrument(
            ploke_runtime::correlation::scope(
                ploke_runtime::correlation::Correlation {
                    session_id: session_id.to_owned(),
                    parent_id: response.parent_id.clone(),
                    ..Default::default()
                },
                principal::scope(acting, async move { service.finish_turn(spec).await }),
            ),
            span,
        ));
        running.insert(
            session_id.to_owned(),
            Running {
                parent_id: response.parent_id.clone(),
                cancel,
                reason,
                interrupted,
                task: Some(task),
            },
        );
        drop(running);
        Ok(response)
    }

    async fn finish_turn(self, spec: TurnSpec) {
        let mut usage = TokenUsage::default();
        let end = turn::run(&self.deps, &spec, &mut usage).await;
        let _turns = self.turns.of(&spec.session_id).lock().await;
        let correlation = Correlation {
            session_id: spec.session_id.clone(),
            request_id: String::new(),
            parent_id: spec.parent_id.clone(),
            call_id: String::new(),
        };
        let event = match end {
            TurnEnd::Completed(c) => Event::TurnCompleted(c),
            TurnEnd::Failed(f) => Event::TurnFailed(f),
        };
        // Not running any more from here on: a cancel that arrives now finds nothing, and the
        // next SendMessage waits for the lock held here, so it starts after the final event.
        if let Ok(mut r) = self.running.lock() {
            r.remove(&spec.session_id);
        }
        let end = PendingEnd {
            correlation,
            event,
            usage,
        };
        if let Err(e) = self.record_end(&spec.session_id, &end).await {
            tracing::error!(
                session_id = %spec.session_id,
                parent_id = %spec.parent_id,
                error = %e,
                "recording the end of a turn failed; it is recorded when storage recovers"
            );
            if let Ok(mut p) = self.pending.lock() {
                p.insert(spec.session_id.clone(), end);
            }
            self.deps.log.unrecorded(&spec.session_id, &e);
        }
    }

    /// Writes a turn's final event, adds its usage and clears the running mark, atomically.
    async fn record_end(&self, session_id: &str, end: &PendingEnd) -> Result<(), StoreError> {
        self.deps
            .log
            .append_with(session_id, &end.correlation, end.event.clone(), |_| {
                Effects {
                    running: Some(None),
                    usage: Some(end.usage),
                    ended: Some(match &end.event {
                        Event::TurnFailed(failed) => Some(failed.clone()),
                        _ => None,
                    }),
                    ..Effects::default()
                }
            })
            .await
            .map(|_| ())
    }

    /// Records the held end of `session_id`'s last turn, if any (the `turns` lock is held).
    async fn flush_pending_of(&self, session_id: &str) -> Result<(), StoreError> {
        let Some(end) = self
            .pending
            .lock()
            .ok()
            .and_then(|mut p| p.remove(session_id))
        else {
            return Ok(());
        };
        match self.record_end(session_id, &end).await {
            Ok(()) => {
                tracing::info!(session_id, parent_id = %end.correlation.parent_id, "recorded a turn end held while storage was broken");
                self.deps.log.recorded(session_id);
                Ok(())
            }
            // Its lease expired meanwhile and another replica ended the turn.
            Err(e @ StoreError::Superseded { .. }) => {
                tracing::warn!(session_id, parent_id = %end.correlation.parent_id, reason = %e, "dropped a held turn end");
                self.deps.log.recorded(session_id);
                Ok(())
            }
            Err(e) => {
                if let Ok(mut p) = self.pending.lock() {
                    p.insert(session_id.to_owned(), end);
                }
                Err(e)
            }
        }
    }

    /// Appends a turn's first event with `effects(seq)`. Another replica may have appended
    /// since this one last did (the seq is read again, three tries), may take the turn first
    /// ([`SessionError::Busy`]), or may have deleted the session ([`SessionError::NoSuchSession`]).
    async fn append_turn_start(
        &self,
        session_id: &str,
        correlation: &Correlation,
        event: Event,
        effects: impl Fn(u64) -> Effects,
    ) -> Result<SessionEvent, SessionError> {
        self.deps.log.forget(session_id).await;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let appended = self
                .deps
                .log
                .append_with(session_id, correlation, event.clone(), &effects)
                .await;
            match appended {
                Ok(event) => return Ok(event),
                Err(StoreError::NotNext { .. }) if attempts < 3 => {}
                // Deleted since it was looked up: gone, not a conflict.
                Err(e @ StoreError::NotNext { .. }) => {
                    return Err(match self.store.get_session(session_id).await {
                        Ok(None) => SessionError::NoSuchSession(session_id.to_owned()),
                        _ => e.into(),
                    });
                }
                Err(StoreError::Busy {
                    session_id,
                    parent_id,
                }) => {
                    return Err(SessionError::Busy {
                        session_id,
                        parent_id,
                    });
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Records every held turn end (storage recovered).
    pub async fn flush_pending(&self) {
        let sessions: Vec<String> = self
            .pending
            .lock()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        for session_id in sessions {
            let _turns = self.turns.of(&session_id).lock().await;
            if let Err(e) = self.flush_pending_of(&session_id).await {
                tracing::warn!(session_id, error = %e, "turn end still not recorded");
                return;
            }
        }
    }

    /// Ends every running turn with `turn_failed{interrupted}` and waits for them to record it.
    pub async fn shutdown(&self) {
        let tasks: Vec<tokio::task::JoinHandle<()>> = match self.running.lock() {
            Ok(mut r) => r
                .values_mut()
                .filter_map(|t| {
                    t.interrupted
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                    t.cancel.cancel();
                    t.task.take()
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }

    /// The session's events after `after_seq`, then live ones when `follow`.
    pub async fn events(
        &self,
        session_id: &str,
        after_seq: u64,
        follow: bool,
    ) -> Result<mpsc::Receiver<Result<SessionEvent, StoreError>>, SessionError> {
        self.get(session_id).await?;
        Ok(self
            .deps
            .log
            .subscribe(session_id, after_seq, follow)
            .await?)
    }

    /// Cancels the running turn: (cancelled, its parent_id).
    pub async fn cancel(
        &self,
        session_id: &str,
        reason: &str,
    ) -> Result<(bool, String), SessionError> {
        self.get(session_id).await?;
        let running = self.running.lock().ok().and_then(|r| {
            r.get(session_id)
                .map(|t| (t.parent_id.clone(), t.cancel.clone(), t.reason.clone()))
        });
        match running {
            // Not here: the replica running it (if any) is asked through the store.
            None => match self.store.cancel_remote(session_id, reason).await? {
                Some(parent_id) => {
                    tracing::info!(session_id, parent_id, "turn cancel sent to its replica");
                    Ok((true, parent_id))
                }
                None => Ok((false, String::new())),
            },
            Some((parent_id, cancel, why)) => {
                if let Ok(mut w) = why.lock() {
                    *w = if reason.is_empty() {
                        "cancelled by the user".to_owned()
                    } else {
                        reason.to_owned()
                    };
                }
                cancel.cancel();
                tracing::info!(session_id, parent_id, "turn cancelled");
                Ok((true, parent_id))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TurnLocks;

    #[test]
    fn a_session_s_turn_lock_leaves_other_sessions_free() {
        let locks = TurnLocks::default();
        let held = locks.of("0193-a").try_lock().unwrap();
        // The same session waits; of 100 others, those on other locks (nearly all) do not.
        assert!(locks.of("0193-a").try_lock().is_err());
        let free = (0..100)
            .filter(|i| locks.of(&format!("0193-{i}")).try_lock().is_ok())
            .count();
        assert!(free >= 90, "{free}");
        drop(held);
    }
}
