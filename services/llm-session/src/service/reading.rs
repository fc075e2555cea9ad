//! Reading sessions: one (the caller's own, or none), a page of them (the caller's, or an
//! admin's everyone's), with their running state.

use ploke_proto::session::v1::{Session, SessionState};
use ploke_runtime::principal;

use super::SessionService;
use crate::error::SessionError;
use crate::store::PageCursor;

impl SessionService {
    pub(super) fn with_state(&self, mut s: Session) -> Session {
        let running = self
            .running
            .lock()
            .map(|r| r.contains_key(&s.session_id))
            .unwrap_or(false);
        // A turn another replica runs is read from the store's lease (state Running).
        s.state = if running || s.state == SessionState::Running as i32 {
            SessionState::Running
        } else {
            SessionState::Idle
        } as i32;
        s
    }

    /// One session.
    pub async fn get(&self, session_id: &str) -> Result<Session, SessionError> {
        let s = self.own_session(session_id).await?;
        Ok(self.with_state(s))
    }

    /// The session as stored, if the current principal may act on it: another principal's
    /// session is answered exactly like one that does not exist, so ids cannot be probed. Its
    /// owner still needs permission for the session's workspace.
    pub(super) async fn own_session(&self, session_id: &str) -> Result<Session, SessionError> {
        let missing = || SessionError::NoSuchSession(session_id.to_owned());
        let s = self
            .store
            .get_session(session_id)
            .await?
            .ok_or_else(missing)?;
        if !principal::may_act_on(&s.owner) {
            return Err(missing());
        }
        principal::check_workspace(std::path::Path::new(&s.workspace_root))?;
        Ok(s)
    }

    /// Sessions newest first, and the next page's token: the caller's own, or every
    /// principal's when an admin asks for `all_principals`; only those on workspaces the
    /// caller may use.
    pub async fn list(
        &self,
        workspace_root: &str,
        all_principals: bool,
        limit: u32,
        page: Option<&PageCursor>,
    ) -> Result<(Vec<Session>, String), SessionError> {
        let caller = principal::current();
        let owner = match (&caller, all_principals) {
            (None, _) => None,
            (Some(_), true) => {
                principal::require_admin("ListSessions with all_principals")?;
                None
            }
            (Some(p), false) => Some(p.listed_owners()),
        };
        let root = if workspace_root.is_empty() {
            String::new()
        } else {
            self.workspaces
                .resolve(workspace_root)?
                .display()
                .to_string()
        };
        let sessions = self
            .store
            .list_sessions(&root, owner.as_deref(), limit + 1, page)
            .await?;
        let more = sessions.len() > limit as usize;
        let page: Vec<Session> = sessions.into_iter().take(limit as usize).collect();
        // The cursor follows the last row read, so sessions left out below never stop paging.
        let last = page.last().cloned();
        let sessions: Vec<Session> = page
            .into_iter()
            .filter(|s| {
                caller
                    .as_ref()
                    .is_none_or(|p| p.may_use(std::path::Path::new(&s.workspace_root)))
            })
            .map(|s| self.with_state(s))
            .collect();
        let next = match (more, last) {
            (true, Some(last)) => PageCursor {
                created_ms: last
                    .created_at
                    .map_or(0, |t| t.seconds * 1000 + i64::from(t.nanos / 1_000_000)),
                session_id: last.session_id.clone(),
            }
            .token(),
            _ => String::new(),
        };
        Ok((sessions, next))
    }
}
