//! `ploke chat`: the terminal UI on a new or resumed session.

use ploke_proto::session::v1::{CreateSessionRequest, GetSessionRequest, Session};

use super::{Conn, Gateway, Target, providers};

/// Creates (or fetches) the session and runs the TUI until the user quits.
pub async fn chat(
    target: &Target,
    session: Option<String>,
    provider: Option<String>,
    model: Option<String>,
) -> anyhow::Result<()> {
    let mut conn = Conn::open(target).await?;
    let result = async {
        let s = open_session(&mut conn.gateway, session, provider, model).await?;
        let overlay = conn.overlay_root(&s);
        crate::tui::run(
            conn.gateway.clone(),
            s.session_id,
            format!("{}/{}", s.provider, s.model),
            overlay,
        )
        .await
    }
    .await;
    conn.close().await?;
    result
}

/// The session to chat in.
pub async fn open_session(
    gateway: &mut Gateway,
    session: Option<String>,
    provider: Option<String>,
    model: Option<String>,
) -> anyhow::Result<Session> {
    Ok(match session {
        Some(id) => gateway
            .get_session(GetSessionRequest { session_id: id })
            .await
            .map_err(|s| anyhow::anyhow!("{}", s.message()))?
            .into_inner(),
        None => gateway
            .create_session(CreateSessionRequest {
                provider: provider.unwrap_or_default(),
                model: model.unwrap_or_default(),
                ..Default::default()
            })
            .await
            .map_err(providers::session_refused)?
            .into_inner(),
    })
}
