//! The terminal UI (ratatui): state, drawing and the loop that joins keys, the session's event
//! stream (resumed from the last seq after any break) and the gateway calls keys ask for.

pub mod state;
#[cfg(test)]
mod tests;
pub mod view;

use std::time::Duration;

use ploke_proto::rag::v1::{IndexState, IndexStatusRequest};
use ploke_proto::session::v1::{
    CancelTurnRequest, SendMessageRequest, SessionEvent, StreamEventsRequest,
};
use ploke_proto::tools::v1::{DecideEditRequest, Decision};
use ratatui::crossterm::event::{self as ct, KeyCode, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc;

use crate::cmd::Gateway;
use state::{Action, App, Key, Speaker};

enum Input {
    Key(Key),
    Redraw,
    Event(Box<SessionEvent>),
    Connection(String),
}

fn key_of(event: ct::Event) -> Option<Input> {
    match event {
        ct::Event::Key(k) if k.kind == KeyEventKind::Press => {
            let key = match k.code {
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => Key::CtrlC,
                KeyCode::Char(c) => Key::Char(c),
                KeyCode::Enter => Key::Enter,
                KeyCode::Backspace => Key::Backspace,
                KeyCode::Esc => Key::Esc,
                KeyCode::Up => Key::Up,
                KeyCode::Down => Key::Down,
                KeyCode::PageUp => Key::PageUp,
                KeyCode::PageDown => Key::PageDown,
                KeyCode::Tab => Key::Tab,
                _ => return None,
            };
            Some(Input::Key(key))
        }
        ct::Event::Resize(..) => Some(Input::Redraw),
        _ => None,
    }
}

/// Follows the session's events from `after_seq`, reconnecting from the last seq seen.
async fn follow(
    mut gateway: Gateway,
    session_id: String,
    mut after_seq: u64,
    tx: mpsc::Sender<Input>,
) {
    loop {
        let opened = gateway
            .stream_events(StreamEventsRequest {
                session_id: session_id.clone(),
                after_seq,
                no_follow: false,
            })
            .await;
        match opened {
            Ok(stream) => {
                if tx.send(Input::Connection(String::new())).await.is_err() {
                    return;
                }
                let mut stream = stream.into_inner();
                loop {
                    match stream.message().await {
                        Ok(Some(e)) => {
                            after_seq = e.seq;
                            if tx.send(Input::Event(Box::new(e))).await.is_err() {
                                return;
                            }
                        }
                        Ok(None) => break,
                        Err(s) => {
                            let _ = tx
                                .send(Input::Connection(format!("reconnecting ({})", s.message())))
                                .await;
                            break;
                        }
                    }
                }
            }
            Err(s) => {
                if tx
                    .send(Input::Connection(format!("reconnecting ({})", s.message())))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn index_text(gateway: &mut Gateway) -> String {
    match gateway.index_status(IndexStatusRequest::default()).await {
        Ok(s) => {
            let s = s.into_inner();
            let state = IndexState::try_from(s.state)
                .map(|st| crate::describe::lower(st.as_str_name(), "INDEX_STATE_"))
                .unwrap_or_default();
            let dense = if s.dense_available { "hybrid" } else { "bm25" };
            format!("{state}, {} items, {dense}", s.items)
        }
        Err(e) => format!("unknown ({})", e.message()),
    }
}

fn system(app: &mut App, text: String) {
    app.entries.push(state::Entry {
        speaker: Speaker::System,
        text,
    });
}

/// Runs the TUI on the terminal for `session_id` until the user quits. With `overlay` (a
/// shared deployment), that checkout's changes are sent before every message and approved
/// edits are written into it.
pub async fn run(
    mut gateway: Gateway,
    session_id: String,
    model: String,
    overlay: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    let mut app = App {
        session_id: session_id.clone(),
        model,
        index: index_text(&mut gateway).await,
        ..App::default()
    };
    let (tx, mut rx) = mpsc::channel::<Input>(1024);
    let mut decided_here = std::collections::HashSet::new();
    let keys = tx.clone();
    std::thread::spawn(move || {
        while let Ok(event) = ct::read() {
            if let Some(input) = key_of(event)
                && keys.blocking_send(input).is_err()
            {
                return;
            }
        }
    });
    tokio::spawn(follow(gateway.clone(), session_id.clone(), 0, tx));
    let mut terminal = ratatui::init();
    let result = async {
        loop {
            terminal.draw(|f| view::draw(f, &app))?;
            let Some(input) = rx.recv().await else {
                return Ok(());
            };
            match input {
                Input::Redraw => {}
                Input::Connection(c) => app.connection = c,
                Input::Event(e) => {
                    use ploke_proto::session::v1::session_event::Event;
                    let ended = matches!(e.event, Some(Event::TurnCompleted(_)));
                    // Files are written only for decisions made here; one made elsewhere (by
                    // another client, an admin, the auto-approve policy) is announced.
                    if let (Some(_), Some(Event::EditDecided(d))) = (&overlay, &e.event)
                        && d.in_overlay
                        && d.state() == ploke_proto::tools::v1::ProposalState::Applied
                        && !decided_here.contains(&d.proposal_id)
                    {
                        system(
                            &mut app,
                            format!(
                                "{} was applied to this session elsewhere; `ploke edits fetch {}` writes it into your checkout",
                                d.proposal_id, d.proposal_id
                            ),
                        );
                    }
                    app.apply(&e);
                    if ended {
                        app.index = index_text(&mut gateway).await;
                    }
                }
                Input::Key(k) => match app.key(k) {
                    Action::None => {}
                    Action::Quit => return Ok::<(), anyhow::Error>(()),
                    Action::Send(text) => {
                        if let Some(root) = &overlay {
                            match ploke_client::overlay::sync(&mut gateway, &session_id, root).await
                            {
                                Ok(s) if s.uploaded > 0 || s.version <= 1 => {
                                    system(&mut app, s.to_string());
                                }
                                Ok(_) => {}
                                Err(err) => {
                                    // Not sent: the model would read an outdated tree.
                                    system(&mut app, format!("not sent: {err:#}"));
                                    continue;
                                }
                            }
                        }
                        let sent = gateway
                            .send_message(SendMessageRequest {
                                session_id: session_id.clone(),
                                content: text,
                                client_request_id: uuid::Uuid::now_v7().to_string(),
                            })
                            .await;
                        if let Err(s) = sent {
                            app.entries.push(state::Entry {
                                speaker: Speaker::System,
                                text: s.message().to_owned(),
                            });
                        }
                    }
                    Action::Cancel => {
                        let _ = gateway
                            .cancel_turn(CancelTurnRequest {
                                session_id: session_id.clone(),
                                reason: "cancelled from the TUI".into(),
                            })
                            .await;
                    }
                    Action::Approve(id, edits) => {
                        decided_here.insert(id.clone());
                        let target = (&mut gateway, overlay.as_deref());
                        decide(target, &mut app, id, Decision::Approve, edits).await
                    }
                    Action::Deny(id) => {
                        decided_here.insert(id.clone());
                        let target = (&mut gateway, overlay.as_deref());
                        decide(target, &mut app, id, Decision::Deny, Vec::new()).await
                    }
                },
            }
        }
    }
    .await;
    ratatui::restore();
    result
}

/// Decides a proposal; with `overlay` (a shared deployment), an approval's files are
/// written into that checkout.
async fn decide(
    (gateway, overlay): (&mut Gateway, Option<&std::path::Path>),
    app: &mut App,
    id: String,
    decision: Decision,
    edit_indices: Vec<u32>,
) {
    let decided = gateway
        .decide_edit(DecideEditRequest {
            proposal_id: id.clone(),
            decision: decision as i32,
            edit_indices,
            reason: if decision == Decision::Deny {
                "denied in the TUI".into()
            } else {
                String::new()
            },
        })
        .await;
    let decided = match decided {
        Ok(d) => d.into_inner(),
        Err(s) => return system(app, s.message().to_owned()),
    };
    let Some(root) = overlay.filter(|_| !decided.deliveries.is_empty()) else {
        return;
    };
    let written = match ploke_client::delivery::state_dir(root) {
        Ok(state) => {
            let root = root.to_owned();
            tokio::task::spawn_blocking(move || {
                ploke_client::delivery::write(&root, &state, &id, &decided.deliveries)
            })
            .await
            .map_err(anyhow::Error::from)
            .and_then(|r| r)
        }
        Err(e) => Err(e),
    };
    match written {
        Ok(delivered) => system(app, delivered.to_string()),
        Err(e) => system(app, format!("{e:#}")),
    }
}
