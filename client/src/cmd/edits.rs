//! `ploke edits`: list staged edit proposals with their diffs, approve or deny them (whole or
//! chosen edits).

use ploke_client::checkout::Checkout;
use ploke_client::delivery::Delivered;
use ploke_proto::tools::v1::{
    DecideEditRequest, Decision, EditProposal, ListEditsRequest, ProposalState,
};

use super::{Conn, Target};

/// What to do with proposals.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum EditsCommand {
    /// List proposals, newest first (pending only unless --all).
    List {
        /// Every state, not only pending.
        #[arg(long)]
        all: bool,
        /// Every principal's proposals, not only yours (admins).
        #[arg(long)]
        everyone: bool,
        /// Print each file's diff.
        #[arg(long)]
        diff: bool,
    },
    /// Apply a proposal, or only the listed edits (the others are denied).
    Approve {
        /// Proposal id.
        id: String,
        /// Edit indices, comma-separated (default: all).
        #[arg(long, value_delimiter = ',')]
        edits: Vec<u32>,
    },
    /// Write an approved proposal's files into this checkout (in a shared deployment edits
    /// land in the session; the client that approved writes them, this catches up elsewhere).
    Fetch {
        /// Proposal id.
        id: String,
    },
    /// Deny a proposal, or only the listed edits (the others are applied).
    Deny {
        /// Proposal id.
        id: String,
        /// Edit indices, comma-separated (default: all).
        #[arg(long, value_delimiter = ',')]
        edits: Vec<u32>,
        /// Why, for the model.
        #[arg(long, default_value = "")]
        reason: String,
    },
}

pub(super) fn state_name(s: ProposalState) -> String {
    crate::describe::lower(s.as_str_name(), "PROPOSAL_STATE_")
}

/// Writes a proposal: id, state, edits, and the diffs when asked (coloured when `colour`).
pub(crate) fn print_proposal(
    out: &mut dyn std::io::Write,
    p: &EditProposal,
    diff: bool,
    colour: bool,
) {
    let _ = writeln!(
        out,
        "{}  {}  {}  {} edit(s)",
        p.proposal_id,
        state_name(p.state()),
        p.tool_name,
        p.edits.len()
    );
    if !p.state_reason.is_empty() {
        let _ = writeln!(out, "    {}", p.state_reason);
    }
    for e in &p.edits {
        let _ = writeln!(out, "    [{}] {}", e.index, e.summary);
    }
    if diff {
        for f in &p.files {
            let _ = write!(
                out,
                "{}",
                crate::highlight::diff_ansi(&f.file_path, &f.unified_diff, colour)
            );
        }
    }
}

/// `ploke edits …`.
pub(crate) async fn run(target: &Target, command: EditsCommand) -> anyhow::Result<()> {
    let mut conn = Conn::open_unindexed(target).await?;
    match command {
        EditsCommand::List {
            all,
            everyone,
            diff,
        } => {
            let states = if all {
                Vec::new()
            } else {
                vec![ProposalState::Pending as i32]
            };
            let listed = conn
                .gateway
                .list_edits(ListEditsRequest {
                    session_id: String::new(),
                    states,
                    limit: 0,
                    all_principals: everyone,
                })
                .await
                .map_err(|s| anyhow::anyhow!("edits: {}", s.message()))?
                .into_inner();
            if listed.proposals.is_empty() {
                println!("no {}proposals", if all { "" } else { "pending " });
            }
            for p in &listed.proposals {
                print_proposal(
                    &mut std::io::stdout(),
                    p,
                    diff,
                    crate::highlight::colour(&std::io::stdout()),
                );
            }
            if listed.truncated {
                eprintln!(
                    "(only the newest {} fit in one reply: large proposals carry their files; {})",
                    listed.proposals.len(),
                    if all {
                        "without --all only pending ones are listed"
                    } else {
                        "decide these to see the others"
                    }
                );
            }
        }
        EditsCommand::Approve { id, edits } => {
            decide(&mut conn, id, Decision::Approve, edits, String::new()).await?
        }
        EditsCommand::Deny { id, edits, reason } => {
            decide(&mut conn, id, Decision::Deny, edits, reason).await?
        }
        EditsCommand::Fetch { id } => {
            let checkout = conn.checkout().await?;
            let fetched =
                ploke_client::delivery::fetch_and_write(&mut conn.gateway, &checkout, &id);
            match fetched.await? {
                Some(delivered) => println!("{}", said(&delivered, &checkout)),
                None => println!(
                    "{id} delivers no files (not applied, or applied to the workspace itself)"
                ),
            }
        }
    }
    conn.close().await
}

async fn decide(
    conn: &mut Conn,
    id: String,
    decision: Decision,
    edit_indices: Vec<u32>,
    reason: String,
) -> anyhow::Result<()> {
    // Where an approval's files go is settled first: nothing is approved that could not be
    // written here.
    let checkout = match decision {
        Decision::Approve => Some(conn.checkout().await?),
        _ => None,
    };
    let decided = conn
        .gateway
        .decide_edit(DecideEditRequest {
            proposal_id: id,
            decision: decision as i32,
            edit_indices,
            reason,
        })
        .await
        .map_err(|s| anyhow::anyhow!("{}", s.message()))?
        .into_inner();
    if let Some(p) = &decided.proposal {
        print_proposal(&mut std::io::stdout(), p, false, false);
        if matches!(p.state(), ProposalState::Stale | ProposalState::Failed) {
            anyhow::bail!("nothing was written");
        }
    }
    // Applied to a session's overlay (a shared deployment): written into this checkout.
    if let Some(checkout) = checkout
        && !decided.deliveries.is_empty()
    {
        let proposal = decided.proposal.unwrap_or_default();
        let delivered = ploke_client::delivery::deliver(&checkout, &proposal, decided.deliveries);
        println!("{}", said(&delivered.await?, &checkout));
    }
    Ok(())
}

/// What became of a delivery, with where it was written.
fn said(delivered: &Delivered, checkout: &Checkout) -> String {
    match delivered {
        Delivered::Elsewhere(_) => delivered.to_string(),
        _ => format!("{delivered} (in {})", checkout.root.display()),
    }
}
