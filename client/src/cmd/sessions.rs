//! `ploke sessions`: list the caller's sessions (an admin's: everyone's), cancel a running turn,
//! delete them.

use ploke_client::sessions::find_session;
use ploke_proto::session::v1::{
    CancelTurnRequest, DeleteSessionRequest, ListSessionsRequest, SessionState,
};

use super::{Conn, Target};

/// What to do with sessions.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum SessionsCommand {
    /// List sessions, newest first.
    List {
        /// Every principal's sessions, not only yours (admins).
        #[arg(long)]
        everyone: bool,
    },
    /// Cancel the turn a session is running (its model request is dropped; the turn ends as
    /// cancelled).
    Cancel {
        /// Session id, or its start as `ploke sessions` shows it.
        #[arg(value_name = "ID")]
        id: String,
    },
    /// Delete sessions with their events and history (not while a turn runs: cancel it first).
    Rm {
        /// Session ids, or the start of each as `ploke sessions` shows it.
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
}

/// Runs `ploke sessions …`.
pub(crate) async fn run(target: &Target, command: SessionsCommand) -> anyhow::Result<()> {
    let mut conn = Conn::open_unindexed(target).await?;
    let result = match command {
        SessionsCommand::List { everyone } => list(&mut conn, everyone).await,
        SessionsCommand::Cancel { id } => cancel(&mut conn, &id).await,
        SessionsCommand::Rm { ids } => remove(&mut conn, &ids).await,
    };
    conn.close().await?;
    result
}

/// Yours, or (admins, `everyone`) every principal's with its owner; every page, newest first,
/// with when each was last used and, when they span more than one, its workspace.
async fn list(conn: &mut Conn, everyone: bool) -> anyhow::Result<()> {
    let mut sessions = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = conn
            .gateway
            .list_sessions(ListSessionsRequest {
                all_principals: everyone,
                limit: 1000,
                page_token,
                ..ListSessionsRequest::default()
            })
            .await
            .map_err(|s| anyhow::anyhow!("sessions: {}", s.message()))?
            .into_inner();
        sessions.extend(page.sessions);
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    if sessions.is_empty() {
        println!("no sessions");
    }
    let workspaces: std::collections::HashSet<&str> =
        sessions.iter().map(|s| s.workspace_root.as_str()).collect();
    for s in &sessions {
        let failure = crate::describe::last_failure(s);
        let running = if s.state() == SessionState::Running {
            "  (running)".to_owned()
        } else if !failure.is_empty() {
            format!("  ({failure})")
        } else {
            String::new()
        };
        let usage = s.usage.unwrap_or_default();
        let owner = if everyone && !s.owner.is_empty() {
            format!("{}  ", s.owner)
        } else {
            String::new()
        };
        let place = if workspaces.len() > 1 {
            format!("  [{}]", s.workspace_root)
        } else {
            String::new()
        };
        println!(
            "{owner}{}  {}/{}  {}  {} events  {} tokens  {}{place}{running}",
            s.session_id,
            s.provider,
            s.model,
            ploke_client::sessions::last_used(s),
            s.last_seq,
            usage.input_tokens + usage.output_tokens,
            s.title
        );
    }
    Ok(())
}

/// Cancels the session's running turn.
async fn cancel(conn: &mut Conn, id: &str) -> anyhow::Result<()> {
    let session = find_session(&mut conn.gateway, id).await?;
    let cancelled = conn
        .gateway
        .cancel_turn(CancelTurnRequest {
            session_id: session.session_id.clone(),
            reason: "cancelled with `ploke sessions cancel`".to_owned(),
        })
        .await
        .map_err(|s| anyhow::anyhow!("session {}: {}", session.session_id, s.message()))?
        .into_inner()
        .cancelled;
    if cancelled {
        println!("cancelled the turn of {}", session.session_id);
    } else {
        println!("{} is not running a turn", session.session_id);
    }
    Ok(())
}

/// Deletes each session named; every id is tried, each failure said on its own line.
async fn remove(conn: &mut Conn, ids: &[String]) -> anyhow::Result<()> {
    let mut failed = 0;
    for id in ids {
        let deleted = async {
            let session = find_session(&mut conn.gateway, id).await?;
            let events = conn
                .gateway
                .delete_session(DeleteSessionRequest {
                    session_id: session.session_id.clone(),
                })
                .await
                .map_err(|s| anyhow::anyhow!("session {}: {}", session.session_id, s.message()))?
                .into_inner()
                .events;
            println!("deleted {}  ({events} events)", session.session_id);
            anyhow::Ok(())
        }
        .await;
        match deleted {
            Err(e) if ids.len() == 1 => return Err(e),
            Err(e) => {
                eprintln!("error: {}", crate::describe::error(&e));
                failed += 1;
            }
            Ok(()) => {}
        }
    }
    match failed {
        0 => Ok(()),
        n => anyhow::bail!("{n} of {} sessions not deleted", ids.len()),
    }
}
