//! `ploke ask`: one question, the answer on stdout (streamed on a terminal, whole messages when
//! piped), tool calls summarised on stderr, edits shown as diffs and decided (a prompt on a
//! terminal, `--approve`, else denied); exits non-zero when the turn fails. A broken event
//! stream is resumed from the last seq. Ctrl-C (or SIGTERM, or the terminal closing) cancels
//! the running turn on the server and waits for its end; a second one stops waiting.

use std::collections::VecDeque;
use std::io::{IsTerminal as _, Write as _};

use anyhow::bail;
use ploke_proto::rag::v1::IndexStatusResponse;
use ploke_proto::session::v1::{
    CancelTurnRequest, CreateSessionRequest, DeleteSessionRequest, EditDecided, SendMessageRequest,
    session_event::Event,
};
use ploke_proto::tools::v1::{DecideEditRequest, Decision, EditProposal, ProposalState};
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::{Conn, Gateway, Target, edits, providers};
use ploke_client::gateway::{Followed, SessionEvents};

/// `ploke ask` options.
#[derive(Debug, clap::Args)]
pub(crate) struct AskArgs {
    /// The question.
    pub question: String,
    /// Provider name from ploke.toml (default: the configured or detected one).
    #[arg(long)]
    pub provider: Option<String>,
    /// Model id (default: the provider's).
    #[arg(long)]
    pub model: Option<String>,
    /// Apply proposed edits without asking.
    #[arg(long)]
    pub approve: bool,
}

const RESUMES: u32 = 5;

/// Runs one turn.
pub(crate) async fn ask(target: &Target, args: AskArgs) -> anyhow::Result<()> {
    // Before any session is made for it (the server refuses an empty message too, but only
    // after the session exists).
    if args.question.trim().is_empty() {
        bail!("the question is empty: ploke ask \"what does parse_config return?\"");
    }
    let mut conn = Conn::open_indexing(target, None).await?;
    let result = turn(&mut conn, &args).await;
    conn.close().await?;
    result
}

/// The status line while a shared workspace's first index run reads its files (this
/// checkout's changes are sent against the whole tree, once it is read).
fn first_run_line(status: &IndexStatusResponse) {
    let progress = status
        .progress
        .as_ref()
        .filter(|p| p.files_total > 0)
        .map(|p| format!(": {}/{} files", p.files_done, p.files_total))
        .unwrap_or_default();
    ploke_runtime::telemetry::status_line::draw(&format!(
        "\r  waiting for the server's first index of {}{progress}   ",
        status.workspace_root
    ));
}

async fn turn(conn: &mut Conn, args: &AskArgs) -> anyhow::Result<()> {
    // The provider first: nobody should wait for an index to learn there is no model.
    if conn.in_process() {
        if conn.provider.is_none() && args.provider.is_none() {
            bail!("no model provider is reachable: {}", providers::NONE_HINT);
        }
        super::up::index(
            &mut conn.gateway,
            "",
            (false, super::up::Until::Searchable),
            false,
        )
        .await?;
    }
    let workspace_root = conn.workspace_root().await?;
    let session = conn
        .gateway
        .create_session(CreateSessionRequest {
            workspace_root,
            provider: args.provider.clone().unwrap_or_default(),
            model: args.model.clone().unwrap_or_default(),
            title: args.question.chars().take(60).collect(),
        })
        .await
        .map_err(providers::session_refused)?
        .into_inner();
    // A shared deployment answers from its own tree: this checkout's changes go first.
    let overlay = conn.overlay_checkout().await?;
    if let Some(root) = overlay
        .as_ref()
        .and_then(|c| c.for_workspace(&session.workspace_root))
    {
        let ids = (session.session_id.as_str(), session.workspace_root.as_str());
        let synced = {
            // The waiting line, if one was drawn, ends with the wait.
            let _drawing = ploke_runtime::telemetry::status_line::Drawing;
            ploke_client::overlay::sync_when_parsed(&mut conn.gateway, ids, root, first_run_line)
                .await
        };
        let synced = match synced {
            Ok(synced) => synced,
            Err(e) => {
                // Nothing was asked: the session holds nothing worth keeping.
                discard(&mut conn.gateway, &session.session_id).await;
                return Err(e);
            }
        };
        eprintln!("({synced})");
    }
    // From the turn's start on, a signal must not leave it running on the server (and its
    // provider request billing) for as long as its limits allow: one that comes while the
    // message is sent is taken once the turn is known.
    let mut stop = Interrupts::new()?;
    let sent = conn
        .gateway
        .send_message(SendMessageRequest {
            session_id: session.session_id.clone(),
            content: args.question.clone(),
            client_request_id: uuid::Uuid::now_v7().to_string(),
        })
        .await
        .map_err(|s| anyhow::anyhow!("{}", s.message()))?
        .into_inner();
    let mut events = SessionEvents::new(
        conn.gateway.clone(),
        session.session_id.clone(),
        sent.seq - 1,
    );
    let mut resumes = 0;
    let mut open_line = false;
    // Piped: the text of the attempt in progress, printed whole when its message ends (the
    // message event is bounded, the deltas are not) or when the turn fails.
    let mut piped = String::new();
    let live = std::io::stdout().is_terminal();
    let mut asking = Asking::new(args.approve);
    let mut cancelling = false;
    loop {
        let followed = tokio::select! {
            followed = events.next() => followed,
            () = stop.next() => {
                if open_line {
                    println!();
                    open_line = false;
                }
                if cancelling {
                    print_partial(&piped);
                    bail!(
                        "stopped waiting; the turn of session {} may still be ending",
                        session.session_id
                    );
                }
                cancelling = true;
                eprintln!("(cancelling the turn; Ctrl-C again to stop waiting)");
                conn.gateway
                    .cancel_turn(CancelTurnRequest {
                        session_id: session.session_id.clone(),
                        reason: "cancelled with Ctrl-C in `ploke ask`".to_owned(),
                    })
                    .await
                    .map_err(|s| anyhow::anyhow!("cancelling the turn: {}", s.message()))?;
                continue;
            }
            answer = asking.answer(), if asking.waiting() => {
                if let Some((p, decision)) = asking.answered(answer) {
                    decide_edit(conn, &p, decision, overlay.as_ref()).await?;
                }
                asking.prompt_next();
                continue;
            }
        };
        let event = match followed {
            Followed::Connected => continue,
            Followed::Event(e) => e,
            Followed::Interrupted(why) => {
                resumes += 1;
                if resumes > RESUMES {
                    print_partial(&piped);
                    bail!(
                        "the event stream kept breaking ({why}); the session is {}",
                        session.session_id
                    );
                }
                eprintln!("\n(event stream interrupted: {why}; resuming)");
                continue;
            }
            Followed::Gone(why) => {
                print_partial(&piped);
                bail!("{why}")
            }
        };
        let Some(event) = event.event else { continue };
        match event {
            // Streamed on a terminal; piped, each message whole: a retried stream's partial
            // text is on the screen before the retry's notice, but never in a pipe's answer.
            Event::AssistantDelta(d) if live => {
                print!("{}", d.text);
                let _ = std::io::stdout().flush();
                open_line = !d.text.ends_with('\n');
            }
            Event::AssistantDelta(d) => piped.push_str(&d.text),
            Event::AssistantMessage(m) => {
                let text = if piped.is_empty() {
                    m.text
                } else {
                    std::mem::take(&mut piped)
                };
                if !live && !text.is_empty() {
                    print!("{text}");
                    open_line = !text.ends_with('\n');
                }
                if open_line {
                    println!();
                    open_line = false;
                }
            }
            Event::ToolCallRequested(r) => {
                let args = crate::describe::call_args(r.call.as_ref());
                let short: String = args.chars().take(100).collect();
                eprintln!("→ {} {short}", r.name);
            }
            Event::ToolCallCompleted(c) => eprintln!("  ✓ {} ({} ms)", c.name, c.duration_ms),
            Event::ToolCallFailed(f) => {
                let e = f.error.unwrap_or_default();
                eprintln!("  ✗ {}: {}", f.name, e.message);
            }
            Event::EditProposed(p) => {
                if let Some((p, decision)) = p.proposal.and_then(|p| asking.proposed(p)) {
                    decide_edit(conn, &p, decision, overlay.as_ref()).await?;
                }
            }
            Event::EditDecided(d) => {
                // The policy's decisions are this session's own: their files are this
                // checkout's to write, as if approved here.
                if asking.decided_elsewhere(&d, overlay.is_some())
                    && let Some(checkout) = &overlay
                {
                    let fetched = ploke_client::delivery::fetch_and_write(
                        &mut conn.gateway,
                        checkout,
                        &d.proposal_id,
                    );
                    match fetched.await {
                        Ok(Some(delivered)) => eprintln!("({delivered})"),
                        Ok(None) => {}
                        Err(e) => {
                            eprintln!("({e:#}; `ploke edits fetch {}` tries again)", d.proposal_id)
                        }
                    }
                }
            }
            Event::Notice(n) => {
                // A notice comes before another attempt: what was streamed is not the answer.
                piped.clear();
                if open_line {
                    println!();
                    open_line = false;
                }
                eprintln!("! {}", n.text);
            }
            Event::TurnCompleted(t) => {
                let u = t.usage.unwrap_or_default();
                eprintln!(
                    "({} round(s), {} tokens in, {} out, {:.1} s)",
                    t.rounds,
                    u.input_tokens,
                    u.output_tokens,
                    t.duration_ms as f64 / 1000.0
                );
                return Ok(());
            }
            Event::TurnFailed(f) => {
                print_partial(&piped);
                let reason = crate::describe::turn_failure(f.reason);
                bail!("the turn failed ({reason}): {}", f.message);
            }
            Event::UserMessage(_) | Event::ToolCallProgress(_) | Event::ContextPlan(_) => {}
        }
    }
}

/// What a piped answer holds so far, printed when `ask` ends without the turn's end (the
/// stream gave up, the turn failed, the wait was stopped): the answer up to there, as a
/// terminal would have shown it.
fn print_partial(piped: &str) {
    if !piped.is_empty() {
        println!("{piped}");
    }
}

/// SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal closed), as one stream.
struct Interrupts {
    signals: [Signal; 3],
}

impl Interrupts {
    fn new() -> anyhow::Result<Self> {
        Ok(Self {
            signals: [
                signal(SignalKind::interrupt())?,
                signal(SignalKind::terminate())?,
                signal(SignalKind::hangup())?,
            ],
        })
    }

    /// The next signal.
    async fn next(&mut self) {
        let [int, term, hup] = &mut self.signals;
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
    }
}

/// Deletes the empty session of a question that was never sent (a failure is only logged:
/// the question's own error is the one to report).
async fn discard(gateway: &mut Gateway, session_id: &str) {
    let deleted = gateway
        .delete_session(DeleteSessionRequest {
            session_id: session_id.to_owned(),
        })
        .await;
    if let Err(s) = deleted {
        tracing::warn!(session_id, error = %s.message(), "unsent question's session not deleted");
    }
}

/// What `ask` answers a proposal with: approve (`--approve`), deny (no terminal), or the
/// user's answer to a prompt; one the deployment's auto_approve policy decides is shown only.
/// Prompts wait one at a time while the event stream is followed:
/// a proposal decided elsewhere meanwhile (another client, an admin, its expiry) takes its
/// prompt away instead of leaving a question whose answer would be refused.
struct Asking {
    approve: bool,
    /// Proposals waiting for the user, the first one prompted.
    waiting: VecDeque<EditProposal>,
    /// Proposals the deployment's auto_approve policy decides: shown, never asked about.
    by_policy: std::collections::HashSet<String>,
    /// Lines typed on the terminal, read on a thread of their own from the first prompt on.
    lines: Option<tokio::sync::mpsc::Receiver<String>>,
}

type Answer = (EditProposal, (Decision, String));

impl Asking {
    fn new(approve: bool) -> Self {
        Self {
            approve,
            waiting: VecDeque::new(),
            by_policy: std::collections::HashSet::new(),
            lines: None,
        }
    }

    /// A new proposal: shown, and handed back with its decision unless the user is asked.
    fn proposed(&mut self, p: EditProposal) -> Option<Answer> {
        if p.by_policy {
            show(&p);
            eprintln!(
                "(the deployment's auto_approve policy decides this proposal; nothing to answer)"
            );
            self.by_policy.insert(p.proposal_id);
            return None;
        }
        if self.approve {
            show(&p);
            return Some((p, (Decision::Approve, String::new())));
        }
        if !std::io::stdin().is_terminal() {
            show(&p);
            let reason = "`ploke ask` ran without a terminal and without --approve".to_owned();
            return Some((p, (Decision::Deny, reason)));
        }
        self.waiting.push_back(p);
        if self.waiting.len() == 1 {
            self.prompt();
        }
        None
    }

    fn waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// The next line typed (`None` once the terminal is closed).
    async fn answer(&mut self) -> Option<String> {
        self.lines.as_mut()?.recv().await
    }

    /// The prompted proposal and the decision `line` makes (a closed terminal denies).
    fn answered(&mut self, line: Option<String>) -> Option<Answer> {
        let p = self.waiting.pop_front()?;
        let yes = line
            .as_deref()
            .map(str::trim)
            .is_some_and(|a| a.eq_ignore_ascii_case("y") || a.eq_ignore_ascii_case("yes"));
        let decision = if yes {
            (Decision::Approve, String::new())
        } else {
            (Decision::Deny, "the user declined".to_owned())
        };
        Some((p, decision))
    }

    /// A decision made elsewhere on a proposal still waiting here takes it off the list.
    /// True for one the auto_approve policy applied to this session's overlay: its files are
    /// the caller's to write into the checkout.
    fn decided_elsewhere(&mut self, d: &EditDecided, overlay: bool) -> bool {
        if self.by_policy.remove(&d.proposal_id) {
            let state = edits::state_name(d.state());
            eprintln!(
                "({} is {state}: decided by the auto_approve policy)",
                d.proposal_id
            );
            let applied = d.in_overlay && d.state() == ProposalState::Applied;
            if applied && !overlay {
                eprintln!(
                    "(`ploke edits fetch {}` writes it into your checkout)",
                    d.proposal_id
                );
            }
            return overlay && applied;
        }
        let Some(at) = self
            .waiting
            .iter()
            .position(|p| p.proposal_id == d.proposal_id)
        else {
            return false;
        };
        self.waiting.remove(at);
        let state = edits::state_name(d.state());
        eprintln!("\n({} is {state} now; no longer asking)", d.proposal_id);
        if overlay && d.in_overlay && d.state() == ProposalState::Applied {
            eprintln!(
                "(`ploke edits fetch {}` writes it into your checkout)",
                d.proposal_id
            );
        }
        if at == 0 {
            self.prompt_next();
        }
        false
    }

    /// Asks about the next waiting proposal, if any.
    fn prompt_next(&mut self) {
        if !self.waiting.is_empty() {
            self.prompt();
        }
    }

    /// Shows the first waiting proposal and asks; what was typed before it is not its answer.
    fn prompt(&mut self) {
        let lines = self.lines.get_or_insert_with(read_lines);
        while lines.try_recv().is_ok() {}
        if let Some(p) = self.waiting.front() {
            show(p);
        }
        eprint!("apply this change? [y/N] ");
        let _ = std::io::stderr().flush();
    }
}

fn show(p: &EditProposal) {
    eprintln!();
    let colour = crate::highlight::colour(&std::io::stderr());
    edits::print_proposal(&mut std::io::stderr(), p, true, colour);
}

/// Lines of stdin, read on a thread that ends with the process (a read cannot be cancelled).
fn read_lines() -> tokio::sync::mpsc::Receiver<String> {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Sends the decision; one refused because the proposal is no longer pending (decided
/// elsewhere or expired in the meantime) is reported and the turn goes on.
async fn decide_edit(
    conn: &mut Conn,
    p: &EditProposal,
    (decision, reason): (Decision, String),
    overlay: Option<&ploke_client::checkout::Checkout>,
) -> anyhow::Result<()> {
    let decided = conn
        .gateway
        .decide_edit(DecideEditRequest {
            proposal_id: p.proposal_id.clone(),
            decision: decision as i32,
            edit_indices: Vec::new(),
            reason,
        })
        .await;
    let decided = match decided {
        Ok(d) => d.into_inner(),
        // Decided before this answer arrived: by the deployment's auto_approve policy, by
        // another client, or expired. What it became is the news, not this refusal.
        Err(s) if s.code() == tonic::Code::FailedPrecondition => {
            eprintln!("({})", s.message());
            return Ok(());
        }
        Err(s) => bail!("deciding {}: {}", p.proposal_id, s.message()),
    };
    // Said only once the denial holds (a proposal the auto_approve policy applied meanwhile was
    // not denied).
    if decision == Decision::Deny && !std::io::stdin().is_terminal() {
        eprintln!("(not a terminal: denied; rerun with --approve to apply edits)");
    }
    // Applied to the session's overlay: the files are this checkout's to write.
    if let Some(checkout) = overlay
        && !decided.deliveries.is_empty()
    {
        let proposal = decided.proposal.unwrap_or_else(|| p.clone());
        let delivered = ploke_client::delivery::deliver(checkout, &proposal, decided.deliveries);
        eprintln!("({})", delivered.await?);
    }
    Ok(())
}
