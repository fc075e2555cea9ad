//! `ploke chat`: the terminal UI on a new session, a resumed one (`--session ID`, a unique
//! prefix of an id being enough), or the workspace's last one (`--continue`). In-process
//! services index in the background: the TUI opens at once.

use anyhow::Context as _;
use ploke_client::sessions::find_session;
use ploke_proto::session::v1::{CreateSessionRequest, ListSessionsRequest, Session};

use super::{Conn, Gateway, Target, providers};

/// Which session `ploke chat` opens.
#[derive(Debug, Default)]
pub(crate) struct Which {
    /// Resume this session (an id or a unique prefix).
    pub session: Option<String>,
    /// Resume the newest session of the workspace.
    pub last: bool,
    /// Provider name (new sessions).
    pub provider: Option<String>,
    /// Model id (new sessions).
    pub model: Option<String>,
}

/// Creates (or finds) the session and runs the TUI until the user quits.
pub(crate) async fn chat(target: &Target, which: Which) -> anyhow::Result<()> {
    // Below a workspace a `ploke up` serves (the one the connection will use), the TUI logs
    // where that one keeps its state, not into a `.ploke/` of the subdirectory.
    let served = Conn::served(target).await?;
    let workspace = match &served {
        Some((_, dir)) => dir.clone(),
        None => super::up::workspace(target.workspace.clone())?,
    };
    let (_telemetry, notices, _) = super::tui_logging(&workspace, &Default::default())?;
    let mut conn = Conn::open_served(target, None, served).await?;
    let result = async {
        let fresh = which.session.is_none() && !which.last;
        // A resumed session names its own workspace: a checkout that cannot be matched to one
        // does not stop it, it only sends nothing.
        let resuming = which.session.is_some();
        let (workspace_root, matched) = match conn.workspace_root().await {
            Ok(root) => (root, true),
            Err(e) if resuming => {
                eprintln!(
                    "({}; your changes are not sent to the session)",
                    crate::describe::error(&e)
                );
                (String::new(), false)
            }
            Err(e) => return Err(e),
        };
        let session = open_session(&mut conn.gateway, which, &workspace_root).await;
        let session = match session {
            Ok(s) => Some(s),
            // No provider: the TUI still opens (search, edits, sessions) and says how to add one.
            Err(e) if e.downcast_ref::<NoProvider>().is_some() => None,
            Err(e) => return Err(e),
        };
        let options = crate::tui::Options {
            session,
            workspace_root,
            checkout: if matched {
                conn.overlay_checkout().await?
            } else {
                None
            },
            notices: Some(notices),
            no_provider: no_provider_text(),
            fresh,
        };
        crate::tui::run(conn.gateway.clone(), options).await
    }
    .await;
    super::stop_visibly(conn.close()).await?;
    result
}

/// No model provider is configured or reachable.
#[derive(Debug, thiserror::Error)]
#[error("no model provider: {0}")]
pub(crate) struct NoProvider(String);

/// What the TUI says when a message cannot go anywhere.
pub(crate) fn no_provider_text() -> String {
    format!(
        "no model provider, so nothing can be sent: {} (then restart); meanwhile `/search QUERY` \
         shows what the index finds",
        providers::NONE_HINT
    )
}

/// The session to chat in: resumed, the last one, or new (in `workspace_root`; empty = the
/// services' default).
pub(crate) async fn open_session(
    gateway: &mut Gateway,
    which: Which,
    workspace_root: &str,
) -> anyhow::Result<Session> {
    if let Some(id) = which.session {
        return find_session(gateway, &id).await;
    }
    if which.last {
        let root = match workspace_root {
            "" => ploke_client::sessions::default_workspace(gateway).await,
            root => root.to_owned(),
        };
        let newest = gateway
            .list_sessions(ListSessionsRequest {
                workspace_root: root.clone(),
                limit: 1,
                ..Default::default()
            })
            .await
            .map_err(|s| anyhow::anyhow!("sessions: {}", s.message()))?
            .into_inner()
            .sessions
            .into_iter()
            .next();
        return newest.with_context(|| format!("no session to continue in {root}"));
    }
    let created = gateway
        .create_session(CreateSessionRequest {
            workspace_root: workspace_root.to_owned(),
            provider: which.provider.unwrap_or_default(),
            model: which.model.unwrap_or_default(),
            title: String::new(),
        })
        .await;
    match created {
        Ok(s) => Ok(s.into_inner()),
        Err(s) if s.code() == tonic::Code::FailedPrecondition => {
            Err(NoProvider(s.message().to_owned()).into())
        }
        Err(s) => Err(providers::session_refused(s)),
    }
}
