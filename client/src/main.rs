//! `ploke`: the terminal client. `ploke up` hosts all four services in this process on loopback
//! (the embedded default); the other commands talk to a gateway, or start the services
//! in-process for the workspace when none serves it.

mod cmd;
mod describe;
mod tui;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use cmd::Target;

/// mimalloc reuses freed memory: candle allocates a fresh tensor per operation, and the system
/// allocator returns large ones to the kernel each time (page faults and zeroing cost ~10 % of
/// embedding throughput; docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// ploke: chat with an LLM about your repository, with exact code context.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run all four services in this process on loopback, for one workspace, and index it.
    Up {
        /// The workspace (default: the current directory). State goes to DIR/.ploke.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Config file (`ploke.toml`) [env: PLOKE_CONFIG].
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Start, print the status and stop (a smoke test of the deployment).
        #[arg(long)]
        check: bool,
        /// Serve without opening the terminal UI (the default when not on a terminal).
        #[arg(long)]
        no_tui: bool,
    },
    /// Chat in the terminal UI (a new session, or --session ID to resume one).
    Chat {
        /// Resume this session.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Provider name (new sessions).
        #[arg(long)]
        provider: Option<String>,
        /// Model id (new sessions).
        #[arg(long)]
        model: Option<String>,
        #[command(flatten)]
        target: Target,
    },
    /// Ask one question; the answer streams to stdout, tool calls to stderr.
    Ask {
        #[command(flatten)]
        args: cmd::ask::AskArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Search the workspace's code index (no model provider needed).
    Search {
        /// What to look for.
        query: String,
        /// Retrieval strategy.
        #[arg(long, value_enum, default_value = "hybrid")]
        strategy: cmd::query::StrategyArg,
        /// Hits to show.
        #[arg(long, default_value_t = 10)]
        top_k: u32,
        #[command(flatten)]
        target: Target,
    },
    /// Index (or re-index with --force) the workspace.
    Index {
        /// Re-read every file.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        target: Target,
    },
    /// List sessions, newest first.
    Sessions {
        /// Every principal's sessions, not only yours (admins).
        #[arg(long)]
        everyone: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Review staged edits: list, approve, deny.
    Edits {
        #[command(subcommand)]
        command: Option<cmd::edits::EditsCommand>,
        #[command(flatten)]
        target: Target,
    },
    /// The workspaces served: list, add (a directory or --git URL), remove.
    Workspaces {
        #[command(subcommand)]
        command: Option<cmd::workspaces::WorkspacesCommand>,
        #[command(flatten)]
        target: Target,
    },
    /// Serve ploke's tools to an MCP client over stdio (the client runs this; docs/MCP.md).
    Mcp {
        /// With --gateway: the served workspace the tools use (its name or root); default: the
        /// gateway's default workspace.
        #[arg(long, value_name = "NAME")]
        server_workspace: Option<String>,
        /// Largest tool result sent to the client, in tokens [default: [gateway]
        /// mcp_max_result_tokens, 25000].
        #[arg(long, value_name = "N")]
        max_result_tokens: Option<u32>,
        #[command(flatten)]
        target: Target,
    },
    /// Show the health of a gateway and the services behind it.
    Status {
        /// Gateway URL [env: PLOKE_GATEWAY].
        #[arg(long, value_name = "URL", env = "PLOKE_GATEWAY", default_value = cmd::DEFAULT_GATEWAY)]
        gateway: String,
    },
}

fn main() -> anyhow::Result<()> {
    ploke_runtime::binary::block_on(main_async())?
}

async fn main_async() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Up {
            workspace,
            config,
            check,
            no_tui,
        } => cmd::up::up(workspace, config, check, no_tui).await,
        Command::Ask { args, target } => cmd::ask::ask(&target, args).await,
        Command::Chat {
            session,
            provider,
            model,
            target,
        } => cmd::chat::chat(&target, session, provider, model).await,
        Command::Search {
            query,
            strategy,
            top_k,
            target,
        } => cmd::query::search(&target, &query, strategy, top_k).await,
        Command::Index { force, target } => cmd::query::index(&target, force).await,
        Command::Sessions { everyone, target } => cmd::query::sessions(&target, everyone).await,
        Command::Edits { command, target } => {
            let command = command.unwrap_or(cmd::edits::EditsCommand::List {
                all: false,
                everyone: false,
                diff: true,
            });
            cmd::edits::run(&target, command).await
        }
        Command::Workspaces { command, target } => {
            let command = command.unwrap_or(cmd::workspaces::WorkspacesCommand::List);
            cmd::workspaces::run(&target, command).await
        }
        Command::Mcp {
            server_workspace,
            max_result_tokens,
            target,
        } => cmd::mcp::mcp(&target, server_workspace, max_result_tokens).await,
        Command::Status { gateway } => {
            let token = std::env::var("PLOKE_TOKEN").ok().filter(|t| !t.is_empty());
            let mut client = cmd::connect(&gateway, token).await?;
            let status = cmd::up::system_status(&mut client).await?;
            cmd::up::print_status(&gateway, &status);
            if status
                .services
                .iter()
                .any(|s| s.state != ploke_proto::gateway::v1::ServingState::Serving as i32)
            {
                anyhow::bail!("some services are not serving");
            }
            Ok(())
        }
    }
}
