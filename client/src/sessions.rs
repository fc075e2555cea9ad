//! Finding sessions as a user names them: a whole id or the short prefix a status bar shows,
//! the workspace a gateway serves by default, and one line describing a session.

use anyhow::bail;
use ploke_proto::rag::v1::IndexStatusRequest;
use ploke_proto::session::v1::{GetSessionRequest, ListSessionsRequest, Session};

use crate::gateway::Gateway;

/// The gateway's default workspace root (where a session without one works).
pub async fn default_workspace(gateway: &mut Gateway) -> String {
    gateway
        .index_status(IndexStatusRequest::default())
        .await
        .map(|s| s.into_inner().workspace_root)
        .unwrap_or_default()
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
            .map_err(|s| match s.code() {
                tonic::Code::NotFound => {
                    anyhow::anyhow!("no session {id} (`ploke sessions` lists them)")
                }
                _ => anyhow::anyhow!("session {id}: {}", s.message()),
            });
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

/// How long ago the session's newest event was ("5m ago"; empty when it has no time or a
/// clock is off).
pub fn last_used(s: &Session) -> String {
    s.updated_at
        .as_ref()
        .and_then(|t| {
            let at =
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.seconds.max(0) as u64);
            std::time::SystemTime::now().duration_since(at).ok()
        })
        .map(ago)
        .unwrap_or_default()
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
