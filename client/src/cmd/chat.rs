//! `ploke chat`: the terminal UI on a new session, a resumed one (`--session ID`, a unique
//! prefix of an id being enough), or the workspace's last one (`--continue`). In-process
//! services index in the background: the TUI opens at once.

use anyhow::{Context as _, bail};
use ploke_proto::session::v1::{
    CreateSessionRequest, GetSessionRequest, ListSessionsRequest, Session,
};

use super::{Conn, Gateway, Target, providers};

/// Which session `ploke chat` opens.
#[derive(Debug, Default)]
pub struct Which {
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
pub async fn chat(target: &Target, which: Which) -> anyhow::Result<()> {
    let workspace = super::up::workspace(target.workspace.clone())?;
    let (_telemetry, notices, _) = super::tui_logging(&workspace, &Default::default())?;
    let mut conn = Conn::open_indexing(target, false).await?;
    let result = async {
        let session = open_session(&mut conn.gateway, which).await;
        let session = match session {
            Ok(s) => Some(s),
            // No provider: the TUI still opens (search, edits, sessions) and says how to add one.
            Err(e) if e.downcast_ref::<NoProvider>().is_some() => None,
            Err(e) => return Err(e),
        };
        let overlay = session.as_ref().and_then(|s| conn.overlay_root(s));
        let options = crate::tui::Options {
            session,
            overlay,
            notices: Some(notices),
            no_provider: no_provider_text(),
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
pub struct NoProvider(String);

/// What the TUI says when a message cannot go anywhere.
pub fn no_provider_text() -> String {
    format!(
        "no model provider, so nothing can be sent: {} (then restart)",
        providers::NONE_HINT
    )
}

/// The session to chat in: resumed, the last one, or new.
pub async fn open_session(gateway: &mut Gateway, which: Which) -> anyhow::Result<Session> {
    if let Some(id) = which.session {
        return find_session(gateway, &id).await;
    }
    if which.last {
        let root = crate::tui::tasks::default_workspace(gateway).await;
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
            provider: which.provider.unwrap_or_default(),
            model: which.model.unwrap_or_default(),
            ..Default::default()
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

/// The session `id` names: a whole id, or a prefix of exactly one of the caller's sessions
/// (the status bar shows the first 13 characters).
pub async fn find_session(gateway: &mut Gateway, id: &str) -> anyhow::Result<Session> {
    let id = id.trim();
    if id.is_empty() {
        bail!("no session id given");
    }
    if uuid::Uuid::parse_str(id).is_ok() {
        return gateway
            .get_session(GetSessionRequest {
                session_id: id.to_owned(),
            })
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| anyhow::anyhow!("session {id}: {}", s.message()));
    }
    let mut matches = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = gateway
            .list_sessions(ListSessionsRequest {
                limit: 1000,
                page_token,
                ..Default::default()
            })
            .await
            .map_err(|s| anyhow::anyhow!("sessions: {}", s.message()))?
            .into_inner();
        matches.extend(
            page.sessions
                .into_iter()
                .filter(|s| s.session_id.starts_with(id)),
        );
        if page.next_page_token.is_empty() || matches.len() > 1 {
            break;
        }
        page_token = page.next_page_token;
    }
    match matches.len() {
        0 => bail!("no session starts with {id} (`ploke sessions` lists them)"),
        1 => Ok(matches.remove(0)),
        _ => bail!(
            "{id} starts more than one session ({}, …); give more of the id",
            matches
                .iter()
                .map(|s| s.session_id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One line about a session: short id, model, when, size, title.
pub fn session_line(s: &Session) -> String {
    let short: String = s.session_id.chars().take(13).collect();
    let usage = s.usage.unwrap_or_default();
    let when = s
        .updated_at
        .as_ref()
        .and_then(|t| {
            let at =
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.seconds.max(0) as u64);
            std::time::SystemTime::now().duration_since(at).ok()
        })
        .map(ago)
        .unwrap_or_default();
    let title = if s.title.is_empty() {
        String::new()
    } else {
        format!("  {}", s.title)
    };
    format!(
        "{short}  {}/{}  {when:>8}  {} events  {} tokens{title}",
        s.provider,
        s.model,
        s.last_seq,
        usage.input_tokens + usage.output_tokens
    )
}

fn ago(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s ago"),
        60..3600 => format!("{}m ago", s / 60),
        3600..86400 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86400),
    }
}
