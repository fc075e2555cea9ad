//! The terminal UI (ratatui): state, drawing and the loop that joins keys, the session's event
//! stream (resumed from the last seq after any break), the index's progress, the proposals
//! waiting anywhere in the workspace, the services' warnings, and the gateway calls keys ask
//! for.

pub(crate) mod editor;
pub(crate) mod keys;
pub(crate) mod markdown;
pub(crate) mod state;
mod tasks;
#[cfg(test)]
mod tests;
pub(crate) mod view;

use std::io::Write as _;

use ploke_proto::session::v1::{
    CancelTurnRequest, CreateSessionRequest, DeleteSessionRequest, GetSessionRequest,
    SendMessageRequest, Session, SessionEvent,
};
use ploke_proto::tools::v1::{DecideEditRequest, Decision, EditProposal};
use ratatui::crossterm::event::{self as ct, KeyCode, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use keys::Key;
use ploke_client::checkout::Checkout;
use ploke_client::gateway::Gateway;
use state::{Action, App, Indexing};

/// Longest wait on the way out for deleting the run's empty sessions.
const DISCARD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// What the loop reacts to.
pub(crate) enum Input {
    Key(Key),
    Redraw,
    Tick,
    Event(Box<SessionEvent>),
    Connection(String),
    /// The proposals waiting for a decision, as last listed.
    Pending(Vec<EditProposal>),
    /// The index: its state text, and progress while a run is under way.
    Index(String, Option<Indexing>),
    /// A warning of the services in this process.
    Notice(String),
    /// SIGTERM (or a SIGINT sent from outside: the terminal's Ctrl-C is a key here): leave as
    /// quitting does, the terminal restored and the services drained.
    Stop,
}

/// How the TUI starts.
#[derive(Debug, Default)]
pub(crate) struct Options {
    /// The session to show; `None` when no model provider is configured (search, edits and
    /// sessions still work; sending says how to add one).
    pub session: Option<Session>,
    /// The workspace new sessions are made in and edits are listed of until a session of
    /// another is resumed (empty = the services' default).
    pub workspace_root: String,
    /// A shared deployment: this checkout's changes are sent before every message of a
    /// session over the workspace it stands for, and that workspace's approved edits are
    /// written into it.
    pub checkout: Option<Checkout>,
    /// Warnings of the services in this process (their logs go to a file).
    pub notices: Option<mpsc::UnboundedReceiver<String>>,
    /// What to say when a message cannot be sent for want of a provider.
    pub no_provider: String,
    /// Whether `session` was created for this run (deleted on the way out if nothing was
    /// asked in it).
    pub fresh: bool,
}

fn key_of(event: ct::Event) -> Option<Input> {
    match event {
        ct::Event::Key(k) if k.kind != KeyEventKind::Release => {
            let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
            let alt = k.modifiers.contains(KeyModifiers::ALT);
            let key = match k.code {
                KeyCode::Char('c') if ctrl => Key::CtrlC,
                KeyCode::Char('j') if ctrl => Key::Newline,
                KeyCode::Enter if alt || k.modifiers.contains(KeyModifiers::SHIFT) => Key::Newline,
                KeyCode::Char(c) if !ctrl && !alt => Key::Char(c),
                KeyCode::Enter => Key::Enter,
                KeyCode::Backspace if !ctrl && !alt => Key::Backspace,
                KeyCode::Esc => Key::Esc,
                KeyCode::Up if !ctrl && !alt => Key::Up,
                KeyCode::Down if !ctrl && !alt => Key::Down,
                KeyCode::PageUp => Key::PageUp,
                KeyCode::PageDown => Key::PageDown,
                KeyCode::Tab => Key::Tab,
                _ => Key::Edit(ratatui_textarea::Input::from(k)),
            };
            Some(Input::Key(key))
        }
        ct::Event::Paste(text) => Some(Input::Key(Key::Paste(text))),
        ct::Event::Resize(..) => Some(Input::Redraw),
        _ => None,
    }
}

/// The terminal, with bracketed paste (a pasted text arrives whole, not as keys) and, where
/// the terminal speaks the kitty keyboard protocol, keys told apart (Shift-Enter is not
/// Enter) while the TUI runs; restored on drop, whatever happened.
struct Screen(ratatui::DefaultTerminal, bool);

impl Screen {
    /// Before anything else reads the terminal's input (the protocol query reads its answer).
    fn open() -> Self {
        let terminal = ratatui::init();
        let mut out = std::io::stdout();
        let _ = ratatui::crossterm::execute!(out, ct::EnableBracketedPaste);
        let enhanced = ratatui::crossterm::terminal::supports_keyboard_enhancement()
            .unwrap_or(false)
            && ratatui::crossterm::execute!(
                out,
                ct::PushKeyboardEnhancementFlags(
                    ct::KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES
                )
            )
            .is_ok();
        Self(terminal, enhanced)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let mut out = std::io::stdout();
        if self.1 {
            let _ = ratatui::crossterm::execute!(out, ct::PopKeyboardEnhancementFlags);
        }
        let _ = ratatui::crossterm::execute!(out, ct::DisableBracketedPaste);
        ratatui::restore();
        let _ = std::io::stdout().flush();
    }
}

/// The tasks that feed one session's events; replaced when another session is shown.
struct Follow(Option<JoinHandle<()>>);

impl Follow {
    fn start(&mut self, gateway: &Gateway, session: &str, tx: &mpsc::Sender<Input>) {
        self.stop();
        self.0 = Some(tokio::spawn(tasks::follow(
            gateway.clone(),
            session.to_owned(),
            0,
            tx.clone(),
        )));
    }

    /// Shows `session` from its beginning and follows it.
    fn show(
        &mut self,
        (gateway, tx): (&Gateway, &mpsc::Sender<Input>),
        app: &mut App,
        session: Session,
        checkout: Option<&Checkout>,
    ) -> Session {
        self.start(gateway, &session.session_id, tx);
        show(app, &session, checkout);
        session
    }

    fn stop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The longest the screen goes undrawn while inputs keep arriving.
const FRAME_AT_MOST: std::time::Duration = std::time::Duration::from_millis(50);

/// Runs the TUI on the terminal until the user quits. Every task it started is stopped
/// before it returns (an open event stream would hold a stopping server for its drain).
pub(crate) async fn run(mut gateway: Gateway, options: Options) -> anyhow::Result<()> {
    let Options {
        session,
        workspace_root,
        checkout,
        notices,
        no_provider,
        fresh,
    } = options;
    // Sessions this run created: those still empty at the end go.
    let mut created: Vec<String> = session
        .iter()
        .filter(|_| fresh)
        .map(|s| s.session_id.clone())
        .collect();
    let mut app = App::default();
    let mut session = session;
    // The checkout, for a session over the workspace it stands for.
    let overlay = |s: &Session| {
        checkout
            .as_ref()
            .and_then(|c| c.for_workspace(&s.workspace_root))
    };
    match &session {
        Some(s) => show(&mut app, s, checkout.as_ref()),
        None if workspace_root.is_empty() => {
            app.workspace_root = ploke_client::sessions::default_workspace(&mut gateway).await;
        }
        None => app.workspace_root = workspace_root,
    }
    let (tx, mut rx) = mpsc::channel::<Input>(1024);
    let mut decided_here = std::collections::HashSet::new();
    // Proposals of this session the auto_approve policy decides: this TUI's own, so their
    // files are written into the checkout when applied to the session's overlay.
    let mut by_policy = std::collections::HashSet::new();
    let mut follow = Follow(None);
    if let Some(s) = &session {
        follow.start(&gateway, &s.session_id, &tx);
    }
    // The index shown is the workspace's the TUI is in (it follows a resumed session).
    let (shown_workspace, workspace_rx) = tokio::sync::watch::channel(app.workspace_root.clone());
    let background = tasks::Background::start(&gateway, &tx, notices, workspace_rx);
    let mut screen = Screen::open();
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
    let stop = tx.clone();
    let signalled = ploke_runtime::shutdown::signal();
    tokio::spawn(async move {
        signalled.await;
        let _ = stop.send(Input::Stop).await;
    });
    let result = async {
        let mut stale = true;
        let mut drawn = std::time::Instant::now();
        loop {
            shown_workspace.send_if_modified(|w| {
                let moved = *w != app.workspace_root;
                if moved {
                    w.clone_from(&app.workspace_root);
                }
                moved
            });
            // Drawn once what has arrived is taken in (a frame's cost grows with the
            // conversation: one per streamed piece made a long reply quadratic), and at least
            // every FRAME_AT_MOST while inputs keep coming.
            if stale && (rx.is_empty() || drawn.elapsed() >= FRAME_AT_MOST) {
                let mut max_scroll = 0;
                screen.0.draw(|f| max_scroll = view::draw(f, &app))?;
                app.max_scroll = max_scroll;
                app.scroll = app.scroll.min(max_scroll);
                stale = false;
                drawn = std::time::Instant::now();
            }
            let Some(input) = rx.recv().await else {
                return Ok(());
            };
            // A tick moves only the spinner: nothing to draw when nothing spins.
            stale |= !matches!(input, Input::Tick) || app.running;
            match input {
                Input::Stop => return Ok(()),
                Input::Redraw => {}
                Input::Tick => app.tick = app.tick.wrapping_add(1),
                Input::Connection(c) => app.connection = c,
                Input::Notice(n) => app.notice = Some(n),
                Input::Index(text, progress) => {
                    app.index = text;
                    app.indexing = progress;
                }
                Input::Pending(list) => {
                    let current = session.as_ref().map(|s| s.session_id.as_str());
                    app.pending(list, current, &decided_here);
                }
                Input::Event(e) => {
                    if session
                        .as_ref()
                        .is_none_or(|s| s.session_id != e.session_id)
                    {
                        continue;
                    }
                    let here = session.as_ref().and_then(overlay);
                    // Events up to the session's last when it was opened are its history,
                    // replayed to draw it: their edits were delivered (or not) back then.
                    let live = session.as_ref().is_some_and(|s| e.seq > s.last_seq);
                    let policy = policy_decision(&e, live, &mut by_policy, &mut decided_here);
                    announce_elsewhere(&mut app, &e, here.is_some(), &decided_here);
                    app.apply(&e);
                    if let (Some(id), Some(checkout)) = (policy, here.and(checkout.as_ref())) {
                        let fetched =
                            ploke_client::delivery::fetch_and_write(&mut gateway, checkout, &id);
                        match fetched.await {
                            Ok(Some(delivered)) => app.system(&delivered.to_string()),
                            Ok(None) => {}
                            Err(e) => app.system(&crate::describe::error(&e)),
                        }
                    }
                }
                Input::Key(k) => match app.key(k) {
                    Action::None => {}
                    Action::Quit => return Ok::<(), anyhow::Error>(()),
                    Action::Send(text) => match &session {
                        Some(s) => send(&mut gateway, &mut app, s, overlay(s), text).await,
                        None => app.system(&no_provider),
                    },
                    Action::Cancel => {
                        if let Some(s) = &session {
                            let _ = gateway
                                .cancel_turn(CancelTurnRequest {
                                    session_id: s.session_id.clone(),
                                    reason: "cancelled from the TUI".into(),
                                })
                                .await;
                        }
                    }
                    Action::Approve(id, edits) => {
                        decided_here.insert(id.clone());
                        let target = (&mut gateway, checkout.as_ref());
                        decide(target, &mut app, id, Decision::Approve, edits).await
                    }
                    Action::Deny(id) => {
                        decided_here.insert(id.clone());
                        let target = (&mut gateway, checkout.as_ref());
                        decide(target, &mut app, id, Decision::Deny, Vec::new()).await
                    }
                    Action::NewSession(model) => {
                        let same = session
                            .as_ref()
                            .map(|s| (s.provider.clone(), s.model.clone()));
                        if let Some(s) = create(&mut gateway, &mut app, model.or(same)).await {
                            created.push(s.session_id.clone());
                            session = Some(follow.show((&gateway, &tx), &mut app, s, checkout.as_ref()));
                        }
                    }
                    Action::ListModels => match tasks::models(&mut gateway).await {
                        Ok(listed) => app.picker = Some(tasks::model_picker(&listed, &app.model)),
                        Err(e) => app.system(&crate::describe::error(&e)),
                    },
                    Action::SwitchModel(arg) => {
                        let current = session.as_ref().map(|s| s.provider.as_str());
                        let chosen = tasks::models(&mut gateway).await.and_then(|listed| {
                            tasks::resolve_model(&listed, &arg, current).map_err(anyhow::Error::msg)
                        });
                        match chosen {
                            Ok(model) => {
                                if let Some(s) = create(&mut gateway, &mut app, Some(model)).await {
                                    created.push(s.session_id.clone());
                                    session = Some(follow.show((&gateway, &tx), &mut app, s, checkout.as_ref()));
                                }
                            }
                            Err(e) => app.system(&crate::describe::error(&e)),
                        }
                    }
                    Action::Resume(id) => {
                        match ploke_client::sessions::find_session(&mut gateway, &id).await {
                            Ok(s) => session = Some(follow.show((&gateway, &tx), &mut app, s, checkout.as_ref())),
                            Err(e) => app.system(&crate::describe::error(&e)),
                        }
                    }
                    Action::ListWorkspaces => match tasks::workspaces(&mut gateway).await {
                        Ok(listed) => app.system(&tasks::workspaces_text(&listed, &app.workspace_root)),
                        Err(e) => app.system(&crate::describe::error(&e)),
                    },
                    Action::SwitchWorkspace(name) => {
                        let chosen = tasks::workspaces(&mut gateway)
                            .await
                            .and_then(|listed| tasks::workspace_named(&listed, &name));
                        match chosen {
                            Ok(root) if root == app.workspace_root => {
                                app.system(&format!("already in workspace {root}"));
                            }
                            // Without a session (no provider) there is none to start there.
                            Ok(root) if session.is_none() => {
                                app.system(&format!(
                                    "now in workspace {root}: /search, /edits and the index line follow it"
                                ));
                                app.workspace_root = root;
                            }
                            Ok(root) => {
                                let same = session
                                    .as_ref()
                                    .map(|s| (s.provider.clone(), s.model.clone()));
                                let before = std::mem::replace(&mut app.workspace_root, root);
                                match create(&mut gateway, &mut app, same).await {
                                    Some(s) => {
                                        created.push(s.session_id.clone());
                                        session = Some(follow.show((&gateway, &tx), &mut app, s, checkout.as_ref()));
                                    }
                                    None => app.workspace_root = before,
                                }
                            }
                            Err(e) => app.system(&crate::describe::error(&e)),
                        }
                    }
                    Action::ListSessions => {
                        let current = session.as_ref().map(|s| s.session_id.clone());
                        match tasks::sessions(&mut gateway, &app.workspace_root, current).await {
                            Ok(picker) => app.picker = Some(picker),
                            Err(e) => app.system(&crate::describe::error(&e)),
                        }
                    }
                    Action::DeleteSession(id) => {
                        let deleted = gateway
                            .delete_session(DeleteSessionRequest {
                                session_id: id.clone(),
                            })
                            .await;
                        match deleted {
                            Ok(d) => {
                                app.session_deleted(&id);
                                app.system(&format!(
                                    "deleted session {id} ({} events)",
                                    d.into_inner().events
                                ));
                            }
                            // Closed, so that the reason shows.
                            Err(s) => {
                                app.picker = None;
                                app.system(&format!("session {id} not deleted: {}", s.message()));
                            }
                        }
                    }
                    Action::ListEdits => {
                        let text = tasks::pending_text(&mut gateway, &app.workspace_root).await;
                        app.system(&text);
                    }
                    Action::Search(query) => {
                        // As the session sees its workspace: the developer's changes sent first.
                        if let Some(s) = &session
                            && let Some(root) = overlay(s)
                            && let Err(err) =
                                ploke_client::overlay::sync(&mut gateway, &s.session_id, root).await
                        {
                            app.system(&format!(
                                "your changes were not sent ({}); searching what was sent before", crate::describe::error(&err)
                            ));
                        }
                        let asked = match &session {
                            Some(s) => (s.workspace_root.as_str(), Some(s.session_id.as_str())),
                            None => (app.workspace_root.as_str(), None),
                        };
                        let text = tasks::search_text(&mut gateway, asked, &query).await;
                        app.system(&text);
                    }
                },
            }
        }
    }
    .await;
    drop(screen);
    follow.stop();
    background.stop();
    discard_empty(&mut gateway, &created).await;
    result
}

/// Deletes the sessions this run created in which nothing was asked: listings and
/// `--continue` then find conversations, not empty shells. Bounded: quitting never waits long.
async fn discard_empty(gateway: &mut Gateway, created: &[String]) {
    let work = async {
        for id in created {
            let Ok(s) = gateway
                .get_session(GetSessionRequest {
                    session_id: id.clone(),
                })
                .await
            else {
                continue;
            };
            if s.into_inner().last_seq == 0
                && let Err(s) = gateway
                    .delete_session(DeleteSessionRequest {
                        session_id: id.clone(),
                    })
                    .await
            {
                // Into the log file: the screen is gone by now.
                tracing::info!(session_id = %id, error = %s.message(), "empty session not deleted");
            }
        }
    };
    let _ = tokio::time::timeout(DISCARD_TIMEOUT, work).await;
}

/// Shows `session` from its beginning (its events replay into the emptied conversation); its
/// workspace becomes the TUI's (new sessions, edits listed). Says so when `checkout` stands
/// for another workspace: nothing of it is sent to this session or written from it.
fn show(app: &mut App, session: &Session, checkout: Option<&Checkout>) {
    app.reset_conversation();
    app.session_id = session.session_id.clone();
    app.model = format!("{}/{}", session.provider, session.model);
    app.notice = None;
    app.workspace_root = session.workspace_root.clone();
    if let Some(c) = checkout
        && c.for_workspace(&session.workspace_root).is_none()
    {
        app.system(&format!(
            "your changes are not sent to this session, nor are its approved edits written into \
             your files: {}",
            c.elsewhere(&session.workspace_root)
        ));
    }
}

/// Notes the proposals of `e` the auto_approve policy decides (as decided here: nobody else
/// announces them); the id of one it applied to the session's overlay, whose files are then
/// this checkout's to write. Only `live` proposals (made while this TUI follows the session)
/// are delivered: a replayed one was the checkout's to write when it happened.
fn policy_decision(
    e: &SessionEvent,
    live: bool,
    by_policy: &mut std::collections::HashSet<String>,
    decided_here: &mut std::collections::HashSet<String>,
) -> Option<String> {
    use ploke_proto::session::v1::session_event::Event;
    match &e.event {
        Some(Event::EditProposed(p)) => {
            if let Some(p) = p.proposal.as_ref().filter(|p| p.by_policy) {
                decided_here.insert(p.proposal_id.clone());
                if live {
                    by_policy.insert(p.proposal_id.clone());
                }
            }
            None
        }
        Some(Event::EditDecided(d)) if by_policy.remove(&d.proposal_id) => (d.in_overlay
            && d.state() == ploke_proto::tools::v1::ProposalState::Applied)
            .then(|| d.proposal_id.clone()),
        _ => None,
    }
}

/// A decision made elsewhere (another client, an admin, the auto-approve policy) on an edit
/// applied to the session's overlay: files are written only for decisions made here.
fn announce_elsewhere(
    app: &mut App,
    e: &SessionEvent,
    overlay: bool,
    decided_here: &std::collections::HashSet<String>,
) {
    use ploke_proto::session::v1::session_event::Event;
    if let (true, Some(Event::EditDecided(d))) = (overlay, &e.event)
        && d.in_overlay
        && d.state() == ploke_proto::tools::v1::ProposalState::Applied
        && !decided_here.contains(&d.proposal_id)
    {
        app.system(&format!(
            "{} was applied to this session elsewhere; `ploke edits fetch {}` writes it into your checkout",
            d.proposal_id, d.proposal_id
        ));
    }
}

/// Creates a session with (provider, model), or the service's defaults; says why not.
async fn create(
    gateway: &mut Gateway,
    app: &mut App,
    model: Option<(String, String)>,
) -> Option<Session> {
    let (provider, model) = model.unwrap_or_default();
    let created = gateway
        .create_session(CreateSessionRequest {
            workspace_root: app.workspace_root.clone(),
            provider,
            model,
            title: String::new(),
        })
        .await;
    match created {
        Ok(s) => Some(s.into_inner()),
        Err(s) => {
            app.system(&format!("no new session: {}", s.message()));
            None
        }
    }
}

/// Sends a message (the checkout's changes first, in a shared deployment).
async fn send(
    gateway: &mut Gateway,
    app: &mut App,
    session: &Session,
    overlay: Option<&std::path::Path>,
    text: String,
) {
    if let Some(root) = overlay {
        match ploke_client::overlay::sync(gateway, &session.session_id, root).await {
            Ok(s) if s.uploaded > 0 || s.version <= 1 => app.system(&s.to_string()),
            Ok(_) => {}
            Err(err) => {
                // Not sent: the model would read an outdated tree.
                return app.system(&format!("not sent: {}", crate::describe::error(&err)));
            }
        }
    }
    let sent = gateway
        .send_message(SendMessageRequest {
            session_id: session.session_id.clone(),
            content: text,
            client_request_id: uuid::Uuid::now_v7().to_string(),
        })
        .await;
    if let Err(s) = sent {
        app.system(s.message());
    }
}

/// Decides a proposal; with `checkout` (a shared deployment), an approval's files are
/// written into it when the proposal is over its workspace.
async fn decide(
    (gateway, checkout): (&mut Gateway, Option<&Checkout>),
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
        Err(s) => return app.system(s.message()),
    };
    let Some(checkout) = checkout.filter(|_| !decided.deliveries.is_empty()) else {
        return;
    };
    let proposal = decided.proposal.unwrap_or_default();
    let written = ploke_client::delivery::deliver(checkout, &proposal, decided.deliveries).await;
    match written {
        Ok(delivered) => app.system(&delivered.to_string()),
        Err(e) => app.system(&crate::describe::error(&e)),
    }
}
