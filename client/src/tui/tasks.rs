//! What the TUI follows in the background: the session's events (resumed after any break),
//! the index's state and progress, the proposals waiting in the workspace (whichever client
//! made them), the services' warnings and the spinner's tick; and the lists `/sessions`,
//! `/model` and `/edits` show.

use std::time::Duration;

use ploke_proto::rag::v1::{IndexPhase, IndexState, IndexStatusRequest, SearchRequest, Strategy};
use ploke_proto::session::v1::{ListModelsRequest, ListModelsResponse, ListSessionsRequest};
use ploke_proto::tools::v1::{ListEditsRequest, ProposalState};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::Input;
use super::state::{Indexing, Picker, PickerKind, PickerRow};
use ploke_client::checkout;
use ploke_client::gateway::{Followed, Gateway, SessionEvents};
use ploke_proto::rag::v1::{ListWorkspacesRequest, Workspace};

/// How often the index and the waiting proposals are asked for.
const POLL: Duration = Duration::from_secs(1);
/// The spinner's pace.
const TICK: Duration = Duration::from_millis(120);

/// Follows the session's events from `after_seq`, reconnecting from the last seq seen.
pub(super) async fn follow(
    gateway: Gateway,
    session_id: String,
    after_seq: u64,
    tx: mpsc::Sender<Input>,
) {
    let mut events = SessionEvents::new(gateway, session_id, after_seq);
    loop {
        let input = match events.next().await {
            Followed::Connected => Input::Connection(String::new()),
            Followed::Event(e) => Input::Event(e),
            Followed::Interrupted(why) => Input::Connection(format!("reconnecting ({why})")),
            Followed::Gone(why) => {
                let _ = tx
                    .send(Input::Connection(format!("not following: {why}")))
                    .await;
                return;
            }
        };
        if tx.send(input).await.is_err() {
            return;
        }
    }
}

/// The background tasks; stopped together.
pub(super) struct Background(Vec<JoinHandle<()>>);

impl Background {
    /// Starts the index and proposal polls, the tick, and the notices' forwarding.
    pub(super) fn start(
        gateway: &Gateway,
        tx: &mpsc::Sender<Input>,
        notices: Option<mpsc::UnboundedReceiver<String>>,
        workspace: tokio::sync::watch::Receiver<String>,
    ) -> Self {
        let mut tasks = vec![
            tokio::spawn(poll_index(gateway.clone(), tx.clone(), workspace)),
            tokio::spawn(poll_pending(gateway.clone(), tx.clone())),
        ];
        let ticks = tx.clone();
        tasks.push(tokio::spawn(async move {
            let mut every = tokio::time::interval(TICK);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                every.tick().await;
                // A full queue (a burst of events) needs no tick on top.
                if let Err(mpsc::error::TrySendError::Closed(_)) = ticks.try_send(Input::Tick) {
                    return;
                }
            }
        }));
        if let Some(mut notices) = notices {
            let tx = tx.clone();
            tasks.push(tokio::spawn(async move {
                while let Some(n) = notices.recv().await {
                    if tx.send(Input::Notice(n)).await.is_err() {
                        return;
                    }
                }
            }));
        }
        Self(tasks)
    }

    /// Stops every task.
    pub(super) fn stop(self) {
        for t in self.0 {
            t.abort();
        }
    }
}

/// The index as the status bar shows it: its state text, and the gauge while a run goes on.
pub(super) fn index_view(
    s: &ploke_proto::rag::v1::IndexStatusResponse,
) -> (String, Option<Indexing>) {
    let state = IndexState::try_from(s.state).unwrap_or(IndexState::Unspecified);
    let name = crate::describe::lower(state.as_str_name(), "INDEX_STATE_");
    let dense = if s.dense_available { "hybrid" } else { "bm25" };
    let text = match state {
        IndexState::Failed => format!("failed ({})", s.message),
        _ => format!("{name}, {} items, {dense}", s.items),
    };
    let progress = s
        .progress
        .as_ref()
        .filter(|_| state == IndexState::Indexing)
        .map(|p| {
            let phase = IndexPhase::try_from(p.phase).unwrap_or(IndexPhase::Unspecified);
            let (done, total) = if p.embed_total > 0 {
                (p.embed_done, p.embed_total)
            } else if p.files_total > 0 {
                (p.files_done, p.files_total)
            } else {
                (p.items_done, p.items_total)
            };
            Indexing {
                phase: crate::describe::lower(phase.as_str_name(), "INDEX_PHASE_"),
                done,
                total,
                items: s.items.max(p.items_done),
                eta_seconds: p.eta.as_ref().map(|d| d.seconds.max(0) as u64),
            }
        });
    (text, progress)
}

async fn poll_index(
    mut gateway: Gateway,
    tx: mpsc::Sender<Input>,
    workspace: tokio::sync::watch::Receiver<String>,
) {
    loop {
        let asked = IndexStatusRequest {
            workspace_root: workspace.borrow().clone(),
        };
        let input = match gateway.index_status(asked).await {
            Ok(s) => {
                let (text, progress) = index_view(&s.into_inner());
                Input::Index(text, progress)
            }
            Err(s) => Input::Index(format!("unknown ({})", s.message()), None),
        };
        if tx.send(input).await.is_err() {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn poll_pending(mut gateway: Gateway, tx: mpsc::Sender<Input>) {
    loop {
        let listed = gateway
            .list_edits(ListEditsRequest {
                states: vec![ProposalState::Pending as i32],
                limit: 100,
                ..Default::default()
            })
            .await;
        if let Ok(l) = listed
            && tx
                .send(Input::Pending(l.into_inner().proposals))
                .await
                .is_err()
        {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The workspaces the gateway serves the caller (`/workspace`).
pub(super) async fn workspaces(gateway: &mut Gateway) -> anyhow::Result<Vec<Workspace>> {
    Ok(gateway
        .list_workspaces(ListWorkspacesRequest {})
        .await
        .map_err(|s| anyhow::anyhow!("workspaces: {}", s.message()))?
        .into_inner()
        .workspaces)
}

/// `/workspace` without a name: one line per workspace, the TUI's marked.
pub(super) fn workspaces_text(workspaces: &[Workspace], current: &str) -> String {
    if workspaces.is_empty() {
        return format!("the gateway lists no workspace; this one is {current}");
    }
    let lines: Vec<String> = workspaces
        .iter()
        .map(|w| {
            let mark = if w.workspace_root == current {
                "*"
            } else {
                " "
            };
            let from = w
                .git
                .as_ref()
                .map(|g| format!(", from {}", checkout::shown(&g.url)))
                .unwrap_or_default();
            format!("{mark} {} ({}{from})", w.name, w.workspace_root)
        })
        .collect();
    format!(
        "workspaces (* this one; /workspace NAME moves to another):\n{}",
        lines.join("\n")
    )
}

/// The root of the workspace `/workspace NAME` names (a name or a root) among `workspaces`.
pub(super) fn workspace_named(workspaces: &[Workspace], name: &str) -> anyhow::Result<String> {
    checkout::choose(workspaces, "", Some(name), &checkout::Clues::default())
        .map(|(root, _)| root)
        .map_err(|e| {
            let message = e.to_string();
            let message = message
                .strip_prefix("--server-workspace ")
                .unwrap_or(&message);
            anyhow::anyhow!("/workspace {message}")
        })
}

/// The `/sessions` picker: this workspace's sessions, newest first, the current one left out.
pub(super) async fn sessions(
    gateway: &mut Gateway,
    workspace_root: &str,
    current: Option<String>,
) -> anyhow::Result<Picker> {
    let listed = gateway
        .list_sessions(ListSessionsRequest {
            workspace_root: workspace_root.to_owned(),
            limit: 200,
            ..Default::default()
        })
        .await
        .map_err(|s| anyhow::anyhow!("sessions: {}", s.message()))?
        .into_inner();
    let sessions = listed
        .sessions
        .into_iter()
        .filter(|s| Some(&s.session_id) != current.as_ref())
        .map(|s| PickerRow {
            label: crate::describe::session_line(&s),
            id: s.session_id,
        })
        .collect();
    Ok(Picker {
        kind: PickerKind::Sessions,
        rows: sessions,
        cursor: 0,
        confirming: false,
    })
}

/// The configured providers and models.
pub(super) async fn models(gateway: &mut Gateway) -> anyhow::Result<ListModelsResponse> {
    Ok(gateway
        .list_models(ListModelsRequest {})
        .await
        .map_err(|s| anyhow::anyhow!("models: {}", s.message()))?
        .into_inner())
}

/// The `/model` picker: every configured model by provider, the cursor on `current`
/// (`PROVIDER/MODEL`).
pub(super) fn model_picker(listed: &ListModelsResponse, current: &str) -> Picker {
    let mut rows = Vec::new();
    for p in &listed.providers {
        let mut ids: Vec<&str> = Vec::new();
        if !p.default_model.is_empty() {
            ids.push(&p.default_model);
        }
        for m in &p.models {
            if !ids.contains(&m.id.as_str()) {
                ids.push(&m.id);
            }
        }
        for id in ids {
            let full = format!("{}/{id}", p.name);
            let mark = if full == current { "●" } else { " " };
            let mut label = format!("{mark} {full}");
            if !p.unusable_reason.is_empty() {
                label.push_str(&format!(" · unusable: {}", p.unusable_reason));
            }
            if id == p.default_model && p.name == listed.default_provider {
                label.push_str(" · default");
            }
            let model = p.models.iter().find(|m| m.id == id);
            if model.and_then(|m| m.supports_tools) == Some(false) {
                label.push_str(" · no tools");
            }
            if let Some(window) = model.and_then(|m| m.context_window) {
                label.push_str(&format!(" · {} context", tokens(window)));
            }
            rows.push(PickerRow { id: full, label });
        }
    }
    // A model named with `/model NAME` that the configuration does not list is still the
    // current one: shown first, marked.
    if !current.is_empty() && !rows.iter().any(|r| r.id == current) {
        rows.insert(
            0,
            PickerRow {
                id: current.to_owned(),
                label: format!("● {current} · not in the configuration"),
            },
        );
    }
    let cursor = rows.iter().position(|r| r.id == current).unwrap_or(0);
    Picker {
        kind: PickerKind::Models,
        rows,
        cursor,
        confirming: false,
    }
}

/// A context window as people say it: 128k, 1M.
fn tokens(n: u32) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{}k", (n + 500) / 1_000),
        _ => format!("{:.1}M", f64::from(n) / 1e6).replace(".0M", "M"),
    }
}

/// `/model ARG` as (provider, model): `PROVIDER/MODEL` when PROVIDER is configured, else a
/// model of the current provider (or of the default one).
pub(super) fn resolve_model(
    listed: &ListModelsResponse,
    arg: &str,
    current_provider: Option<&str>,
) -> Result<(String, String), String> {
    let arg = arg.trim();
    if let Some((provider, model)) = arg.split_once('/')
        && !model.is_empty()
        && listed.providers.iter().any(|p| p.name == provider)
    {
        return Ok((provider.to_owned(), model.to_owned()));
    }
    let provider = current_provider
        .filter(|p| !p.is_empty())
        .or(Some(listed.default_provider.as_str()).filter(|p| !p.is_empty()));
    match provider {
        Some(p) if !arg.is_empty() => Ok((p.to_owned(), arg.to_owned())),
        _ => {
            let names: Vec<&str> = listed.providers.iter().map(|p| p.name.as_str()).collect();
            Err(format!(
                "name the provider: /model PROVIDER/MODEL (configured: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            ))
        }
    }
}

/// `/edits`: the proposals of this workspace waiting for a decision.
pub(super) async fn pending_text(gateway: &mut Gateway, workspace_root: &str) -> String {
    let listed = gateway
        .list_edits(ListEditsRequest {
            states: vec![ProposalState::Pending as i32],
            limit: 100,
            ..Default::default()
        })
        .await;
    let (proposals, truncated) = match listed {
        Ok(l) => {
            let l = l.into_inner();
            (l.proposals, l.truncated)
        }
        Err(s) => return format!("edits: {}", s.message()),
    };
    let lines: Vec<String> = proposals
        .iter()
        .filter(|p| p.workspace_root == workspace_root)
        .map(|p| {
            let files: Vec<&str> = p.files.iter().map(|f| f.file_path.as_str()).collect();
            format!("{}  {}  {}", p.proposal_id, p.tool_name, files.join(", "))
        })
        .collect();
    if lines.is_empty() {
        "no proposals are waiting".to_owned()
    } else {
        format!(
            "waiting for your decision (shown one by one above the conversation):\n{}{}",
            lines.join("\n"),
            if truncated {
                "\n(more are waiting than one reply holds: decide these first)"
            } else {
                ""
            }
        )
    }
}

/// `/search QUERY`: the ten best hits of a HYBRID search of the workspace, as the session
/// sees it when there is one (with the developer's changes it was last sent), in `ploke
/// search`'s lines; the service's error when it refuses.
pub(super) async fn search_text(
    gateway: &mut Gateway,
    (workspace_root, session_id): (&str, Option<&str>),
    query: &str,
) -> String {
    let asked = gateway
        .search(SearchRequest {
            workspace_root: workspace_root.to_owned(),
            query: query.to_owned(),
            strategy: Strategy::Hybrid as i32,
            top_k: 10,
            session_id: session_id.unwrap_or_default().to_owned(),
            ..Default::default()
        })
        .await;
    match asked {
        Ok(found) => {
            let found = found.into_inner();
            let note = crate::describe::search_note(&found, true);
            let lines: Vec<String> = note
                .into_iter()
                .chain(crate::describe::search_hits(&found))
                .collect();
            format!("search: {query}\n{}", lines.join("\n"))
        }
        Err(s) => format!("search: {}", s.message()),
    }
}
