//! `ploke ask`: one question, the answer streamed to stdout, tool calls summarised on stderr,
//! edits shown as diffs and decided (a prompt on a terminal, `--approve`, else denied); exits
//! non-zero when the turn fails. A broken event stream is resumed from the last seq.

use std::io::{IsTerminal as _, Write as _};

use anyhow::bail;
use ploke_proto::session::v1::{
    CreateSessionRequest, DeleteSessionRequest, SendMessageRequest, session_event::Event,
};
use ploke_proto::tools::v1::{DecideEditRequest, Decision};

use super::{Conn, Gateway, Target, edits, providers};
use ploke_client::gateway::{Followed, SessionEvents};

/// `ploke ask` options.
#[derive(Debug, clap::Args)]
pub struct AskArgs {
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
pub async fn ask(target: &Target, args: AskArgs) -> anyhow::Result<()> {
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
        let synced =
            match ploke_client::overlay::sync(&mut conn.gateway, &session.session_id, root).await {
                Ok(synced) => synced,
                Err(e) => {
                    // Nothing was asked: the session holds nothing worth keeping.
                    discard(&mut conn.gateway, &session.session_id).await;
                    return Err(e);
                }
            };
        eprintln!("({synced})");
    }
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
    loop {
        let event = match events.next().await {
            Followed::Connected => continue,
            Followed::Event(e) => e,
            Followed::Interrupted(why) => {
                resumes += 1;
                if resumes > RESUMES {
                    bail!(
                        "the event stream kept breaking ({why}); the session is {}",
                        session.session_id
                    );
                }
                eprintln!("\n(event stream interrupted: {why}; resuming)");
                continue;
            }
            Followed::Gone(why) => bail!("{why}"),
        };
        let Some(event) = event.event else { continue };
        match event {
            Event::AssistantDelta(d) => {
                print!("{}", d.text);
                let _ = std::io::stdout().flush();
                open_line = !d.text.ends_with('\n');
            }
            Event::AssistantMessage(_) => {
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
                if let Some(p) = p.proposal {
                    decide_edit(conn, &p, args.approve, overlay.as_ref()).await?;
                }
            }
            Event::Notice(n) => eprintln!("! {}", n.text),
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
                let reason = crate::describe::turn_failure(f.reason);
                bail!("the turn failed ({reason}): {}", f.message);
            }
            Event::UserMessage(_)
            | Event::ToolCallProgress(_)
            | Event::EditDecided(_)
            | Event::ContextPlan(_) => {}
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

async fn decide_edit(
    conn: &mut Conn,
    p: &ploke_proto::tools::v1::EditProposal,
    approve: bool,
    overlay: Option<&ploke_client::checkout::Checkout>,
) -> anyhow::Result<()> {
    eprintln!();
    let colour = crate::highlight::colour(&std::io::stderr());
    edits::print_proposal(&mut std::io::stderr(), p, true, colour);
    let (decision, reason) = if approve {
        (Decision::Approve, String::new())
    } else if std::io::stdin().is_terminal() {
        eprint!("apply this change? [y/N] ");
        let _ = std::io::stderr().flush();
        let answer = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|_| line)
        })
        .await??;
        if answer.trim().eq_ignore_ascii_case("y") || answer.trim().eq_ignore_ascii_case("yes") {
            (Decision::Approve, String::new())
        } else {
            (Decision::Deny, "the user declined".to_owned())
        }
    } else {
        eprintln!("(not a terminal: denied; rerun with --approve to apply edits)");
        (
            Decision::Deny,
            "`ploke ask` ran without a terminal and without --approve".to_owned(),
        )
    };
    let decided = conn
        .gateway
        .decide_edit(DecideEditRequest {
            proposal_id: p.proposal_id.clone(),
            decision: decision as i32,
            edit_indices: Vec::new(),
            reason,
        })
        .await
        .map_err(|s| anyhow::anyhow!("deciding {}: {}", p.proposal_id, s.message()))?
        .into_inner();
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
